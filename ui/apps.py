from django.apps import AppConfig


class UiConfig(AppConfig):
    """No models: registered for its templates (the shared table, count and filter form)."""

    name = "ui"
