"""Addresses of the maintenance windows' pages (``steering.windows.views``)."""

from django.urls import path

from steering.windows import views as windowviews

app_name = "windows"

urlpatterns = [
    path("windows/", windowviews.windows, name="list"),
    path("windows/schedule", windowviews.schedule, name="schedule"),
    path("windows/<int:pk>/cancel", windowviews.cancel, name="cancel"),
]
