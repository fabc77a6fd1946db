from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0008_bulk_100k_summary_index")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="removed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
