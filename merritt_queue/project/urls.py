from django.contrib import admin
from django.urls import include, path

from . import help_views, views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("help/roles", help_views.roles, name="help_roles"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("batches.urls")),
    path("", include("jobs.urls")),
    path("", include("inventory.urls")),
    path("", include("dashboard.urls")),
    path("", include("steering.urls")),
    path("", include("notifications.urls")),
    path("", include("steering.windows.urls")),
    path("", include("metrics.urls")),
    path("", include("accessui.urls")),
]
