from django.urls import path

from jobs import content_views, views
from pipeline import contentlinks

app_name = "jobs"

urlpatterns = [
    path("jobs/", views.job_list, name="list"),
    path("jobs/<str:jid>/", views.job_detail, name="detail"),
    path(
        "jobs/<str:jid>/history.csv", views.job_history_export, {"fmt": "csv"}, name="history-csv"
    ),
    path(
        "jobs/<str:jid>/history.json",
        views.job_history_export,
        {"fmt": "json"},
        name="history-json",
    ),
    path("jobs/<str:jid>/steps.json", views.job_steps_export, name="steps-json"),
    path(
        f"{contentlinks.URL_PREFIX}/<str:jid>/<path:name>",
        content_views.merritt_content,
        name="merritt-content",
    ),
    path("history/export.csv", views.history_export_all, {"fmt": "csv"}, name="export-csv"),
    path("history/export.json", views.history_export_all, {"fmt": "json"}, name="export-json"),
]
