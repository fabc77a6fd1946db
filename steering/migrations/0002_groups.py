"""The three groups of people who use the queue; what each may do is in steering.catalog."""

from django.db import migrations

GROUPS = ("viewer", "operator", "administrator")


def create(apps, schema_editor):
    group = apps.get_model("auth", "Group")
    for name in GROUPS:
        group.objects.get_or_create(name=name)


def remove(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [("steering", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create, remove)]
