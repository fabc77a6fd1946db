"""The depositor group: people who may submit batches (batches.rights)."""

from django.db import migrations


def create(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name="depositor")


def remove(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="depositor").delete()


class Migration(migrations.Migration):
    dependencies = [("steering", "0003_pending_items")]
    operations = [migrations.RunPython(create, remove)]
