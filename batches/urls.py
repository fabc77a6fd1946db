from django.urls import path

from batches import manifest_check, views
from door import (
    api,
    approval_api,
    deletions_api,
    failedrows_api,
    manifest_check_api,
    moment_api,
    premis_api,
    review_api,
    status_api,
)

app_name = "batches"

urlpatterns = [
    path("api/v1/batches", api.submit_batch, name="api-submit"),
    path("api/v1/moment", moment_api.moment, name="api-moment"),
    path("api/v1/batches/<str:bid>", status_api.batch_status, name="api-batch"),
    path("api/v1/approvals", approval_api.awaiting, name="api-approvals"),
    path("api/v1/batches/<str:bid>/approval", approval_api.decide, name="api-approval"),
    path(
        "api/v1/batches/by-batch-id/<str:batch_id>",
        status_api.batch_status_by_batch_id,
        name="api-batch-by-batch-id",
    ),
    path(
        "api/v1/batches/<str:bid>/failed-rows",
        failedrows_api.failed_rows,
        name="api-failed-rows",
    ),
    path(
        "api/v1/batches/<str:bid>/corrections",
        failedrows_api.corrections,
        name="api-corrections",
    ),
    path(
        "api/v1/batches/<str:bid>/corrections/confirm",
        failedrows_api.confirm,
        name="api-corrections-confirm",
    ),
    path("api/v1/jobs/<str:jid>", status_api.job_status, name="api-job"),
    path("api/v1/jobs/<str:jid>/review", review_api.job_review, name="api-job-review"),
    path("api/v1/deletions", deletions_api.deletions, name="api-deletions"),
    path("api/v1/deletion-requests", deletions_api.requests_list, name="api-deletion-requests"),
    path(
        "api/v1/deletion-requests/<int:pk>",
        deletions_api.request_detail,
        name="api-deletion-request",
    ),
    path(
        "api/v1/deletion-requests/<int:pk>/<str:verb>",
        deletions_api.decide,
        name="api-deletion-decide",
    ),
    # An object's history as PREMIS XML; a version's first, as the object's ARK (which holds
    # slashes) would otherwise take in its rest.
    path(
        "api/v1/objects/<path:ark>/versions/<int:version>/premis.xml",
        premis_api.api_object_premis,
        name="api-version-premis",
    ),
    path("api/v1/objects/<path:ark>/premis.xml", premis_api.api_object_premis, name="api-premis"),
    path(
        "api/v1/manifests/check", manifest_check_api.check_manifest_api, name="api-check-manifest"
    ),
    path("submit/", views.submit_form, name="submit"),
    path("manifests/check/", manifest_check.check_manifest_page, name="check-manifest"),
    path("batches/", views.batch_list, name="list"),
    path("batches/<str:bid>/", views.batch_detail, name="detail"),
    path(
        "batches/<str:bid>/history.csv",
        views.batch_history_export,
        {"fmt": "csv"},
        name="history-csv",
    ),
    path(
        "batches/<str:bid>/history.json",
        views.batch_history_export,
        {"fmt": "json"},
        name="history-json",
    ),
]
