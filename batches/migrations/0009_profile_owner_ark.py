import re

import batches.models
from django.db import migrations, models

ARK = re.compile(r"^ark:/\d{5,}/[0-9A-Za-z][0-9A-Za-z._-]*$")


def owner_ark_from_owner(apps, schema_editor):
    """A profile whose owner is already an ARK (as Merritt's profiles write it) keeps it as
    its owner's ARK; any other is left blank, for an administrator to set (a system check
    warns, and local ids are refused until then)."""
    Profile = apps.get_model("batches", "Profile")
    for profile in Profile.objects.all():
        owner = profile.owner.strip()
        if ARK.match(owner):
            profile.owner_ark = owner
            profile.save(update_fields=["owner_ark"])


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0008_profile_store_record"),
    ]

    operations = [
        migrations.AlterField(
            model_name="profile",
            name="owner",
            field=models.CharField(
                blank=True, help_text="Who owns the collection, as people name them.", max_length=255
            ),
        ),
        migrations.AddField(
            model_name="profile",
            name="owner_ark",
            field=models.CharField(
                blank=True,
                help_text=(
                    "The owner's ARK, as in Merritt's profile (owner: ark:/13030/...). Merritt's "
                    "ingest names a local id's lock after it, so both ingests must use the same "
                    "one; without it, submissions with local ids are refused."
                ),
                max_length=255,
                validators=[batches.models.owner_ark_validator],
                verbose_name="owner's ARK",
            ),
        ),
        migrations.RunPython(owner_ark_from_owner, migrations.RunPython.noop),
    ]
