from django.apps import AppConfig


class SteeringConfig(AppConfig):
    name = "steering"
    verbose_name = "Steering: admin actions and audit trail"
