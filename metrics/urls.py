from django.urls import path

from metrics import views

app_name = "metrics"

urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
]
