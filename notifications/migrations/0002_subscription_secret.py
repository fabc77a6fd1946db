"""Each subscription gets its own signing secret (issue 29, finding 8).

Existing subscriptions are given one each here: a random one for those the submission named,
the one derived from the profile's key for the profile's defaults (``notifications.keys``).
Their receivers must be given the new secrets (docs/usage.md, docs/security.md).
"""

from django.db import migrations, models

import notifications.keys


def give_secrets(apps, schema_editor):
    subscription = apps.get_model("notifications", "Subscription")
    profile = apps.get_model("batches", "Profile")
    keys = dict(profile.objects.values_list("name", "notify_secret"))
    for row in subscription.objects.only("pk", "profile", "source").iterator():
        key = keys.get(row.profile) if row.source == "profile" else None
        row.secret = (
            notifications.keys.derived(key, row.pk) if key else notifications.keys.new_secret()
        )
        row.save(update_fields=["secret"])


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0005_profile_notifications"),
        ("notifications", "0001_subscriptions_and_deliveries"),
    ]

    operations = [
        migrations.AddField(
            model_name="subscription",
            name="secret",
            field=models.CharField(default="", editable=False, max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(give_secrets, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="subscription",
            name="secret",
            field=models.CharField(
                default=notifications.keys.new_secret, editable=False, max_length=64
            ),
        ),
    ]
