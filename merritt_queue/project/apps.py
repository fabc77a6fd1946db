from django.apps import AppConfig


class MerrittQueueConfig(AppConfig):
    name = "merritt_queue.project"
    label = "merritt_queue"
    verbose_name = "Merritt queue"

    def ready(self) -> None:
        from . import checks

        checks.register()
