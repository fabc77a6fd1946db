from django.apps import AppConfig


class AccessUiConfig(AppConfig):
    """Merritt's access queue in the web UI, the API and ``manage.py access``."""

    name = "accessui"
    default_auto_field = "django.db.models.BigAutoField"
