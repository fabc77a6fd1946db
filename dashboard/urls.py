from django.urls import path

from dashboard import moment, views

app_name = "dashboard"

urlpatterns = [
    path("", views.dashboard, name="home"),
    path("collections/", views.collections, name="collections"),
    path("locks/", views.locks, name="locks"),
    path("consistency/", views.consistency, name="consistency"),
    path("workers/", views.workers, name="workers"),
    path("moment/", moment.moment, name="moment"),
]
