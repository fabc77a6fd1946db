from django.apps import AppConfig


class SteeringConfig(AppConfig):
    name = "steering"
    verbose_name = "Steering: admin actions and audit trail"

    def ready(self) -> None:
        # Installed after django.contrib.admin, whose ready() has registered every admin.
        from django.contrib import admin

        from steering.readonly import guard_admin_site

        guard_admin_site(admin.site)

        from steering import staff

        staff.connect()
