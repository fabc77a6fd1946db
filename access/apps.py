from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    verbose_name = "Access queue"
    default_auto_field = "django.db.models.BigAutoField"
