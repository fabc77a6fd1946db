"""Addresses of the maintenance windows' pages (``steering.windowviews``)."""

from django.urls import path

from steering import windowviews

app_name = "windows"

urlpatterns = [
    path("windows/", windowviews.windows, name="list"),
    path("windows/schedule", windowviews.schedule, name="schedule"),
    path("windows/<int:pk>/cancel", windowviews.cancel, name="cancel"),
]
