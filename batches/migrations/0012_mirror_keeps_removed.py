from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("batches", "0011_search_index_text")]

    operations = [
        migrations.AddField(
            model_name="batch",
            name="removed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
