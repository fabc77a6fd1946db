from django.urls import path

from accessui import api, views

app_name = "accessui"

urlpatterns = [
    path("access/", views.access_list, name="list"),
    path("access/<str:queue>/<str:qid>/", views.access_detail, name="detail"),
    path("api/v1/access", api.list_requests, name="api-list"),
    path("api/v1/access/cleanup", api.cleanup, name="api-cleanup"),
    path("api/v1/access/queues/<str:queue>/<str:verb>", api.queue_action, name="api-queue"),
    path("api/v1/access/<str:queue>/<str:qid>", api.request_detail, name="api-detail"),
    path("api/v1/access/<str:queue>/<str:qid>/<str:verb>", api.request_action, name="api-act"),
]
