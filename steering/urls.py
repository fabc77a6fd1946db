from django.urls import path

from steering.actions import bulkedit, correctionviews, editing, views
from steering.maintenance import views as maintenance_views
from steering.runs import views as runviews
from steering.twoperson import views as twoperson

app_name = "steering"

urlpatterns = [
    path("actions/", views.audit, name="audit"),
    path("actions/export.csv", views.export, name="export"),
    path("actions/choose", views.choose, name="choose"),
    path("actions/<int:pk>/", views.result, name="result"),
    path("actions/runs/<int:pk>/", runviews.page, name="run"),
    path("actions/runs/<int:pk>/<str:verb>", runviews.control, name="run-control"),
    path("actions/<str:action_name>/confirm", views.confirm, name="confirm"),
    path("actions/job.edit_resume/selection/", bulkedit.edit_selection, name="edit_jobs"),
    path("actions/job.edit_resume/<str:jid>/", editing.edit_job, name="edit_job"),
    path("actions/<str:action_name>/execute", views.run, name="execute"),
    path("batches/<str:bid>/failed-rows.checkm", correctionviews.download, name="failed-rows"),
    path("batches/<str:bid>/corrections/", correctionviews.upload, name="corrections"),
    path(
        "batches/<str:bid>/corrections/confirm",
        correctionviews.confirm,
        name="corrections-confirm",
    ),
    path("deletion-requests/", twoperson.waiting, name="deletion-requests"),
    path("deletion-requests/<int:pk>/", twoperson.page, name="deletion-request"),
    path("deletion-requests/<int:pk>/<str:verb>", twoperson.decide, name="deletion-decide"),
    path("maintenance/", maintenance_views.page, name="maintenance"),
    path("maintenance/<str:name>/confirm", maintenance_views.confirm, name="maintenance-confirm"),
    path("maintenance/<str:name>/start", maintenance_views.start, name="maintenance-start"),
]
