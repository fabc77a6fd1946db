from django.db import migrations, models

from ui.signatures import cause_of

CHUNK = 2000


def fill(apps, schema_editor):
    """Each mirrored job's cause, as the mirror now writes it with every status write."""
    job = apps.get_model("jobs", "Job")
    rows = job.objects.order_by().values_list("id", "message").iterator(chunk_size=CHUNK)
    changed = []
    for pk, message in rows:
        changed.append(job(id=pk, signature=cause_of(message)))
        if len(changed) == CHUNK:
            job.objects.bulk_update(changed, ["signature"])
            changed = []
    job.objects.bulk_update(changed, ["signature"])


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0004_batchevent"),
        ("jobs", "0002_jobevent_exact"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="signature",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["status", "signature"], name="jobs_job_status_6a2aac_idx"),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
