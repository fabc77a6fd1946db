"""The administrator group opens the Django admin: its members become staff, and the group
is given the admin pages they use (steering.staff), as the Roles page says."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

ADMIN_APPS = ("steering", "batches", "jobs", "inventory", "notifications")
USER_PERMISSIONS = ("view_user", "add_user", "change_user", "view_group")


def grant(apps, schema_editor):
    # Permissions are made after migrations; on a fresh database make them now.
    for config in apps.get_app_configs():
        config.models_module = True
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    User = apps.get_model("auth", "User")
    group, _ = Group.objects.get_or_create(name="administrator")
    ours = Permission.objects.filter(content_type__app_label__in=ADMIN_APPS)
    users = Permission.objects.filter(
        content_type__app_label="auth", codename__in=USER_PERMISSIONS
    )
    group.permissions.add(*ours, *users)
    User.objects.filter(groups=group).update(is_staff=True)


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    group = Group.objects.filter(name="administrator").first()
    if group is not None:
        group.permissions.clear()


class Migration(migrations.Migration):
    dependencies = [
        ("steering", "0007_maintenance_window"),
        ("batches", "0009_profile_owner_ark"),
        ("jobs", "0004_jobevent_status_at_bid_index"),
        ("inventory", "0002_versions_record_changes"),
        ("notifications", "0002_subscription_secret"),
    ]
    operations = [migrations.RunPython(grant, revoke)]
