from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications: depositors' subscriptions and deliveries"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The mirror calls its listeners with each write of timeline rows; it imports no app.
        from mirror import events

        from .outbox import record

        events.listen(record)
