"""The administrator group reads the deletion requests in the Django admin (as 0008 gave it
the admin pages of the models then), where approve and reject lead to the request's page."""

from django.contrib.auth.management import create_permissions
from django.db import migrations


def grant(apps, schema_editor):
    config = apps.get_app_config("steering")
    config.models_module = True
    create_permissions(config, apps=apps, verbosity=0)
    config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="administrator")
    group.permissions.add(
        *Permission.objects.filter(
            content_type__app_label="steering", content_type__model="deletionrequest"
        )
    )


class Migration(migrations.Migration):
    dependencies = [("steering", "0010_twoperson_deletion_requests")]
    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
