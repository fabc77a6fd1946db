from django.urls import path

from . import api, views

app_name = "batches"

urlpatterns = [
    path("api/v1/batches", api.submit_batch, name="api-submit"),
    path("submit/", views.submit_form, name="submit"),
]
