"""The text index of the list search (mirror.textindex): FTS5 trigram table and triggers on
SQLite, a pg_trgm GIN index on PostgreSQL."""

from django.db import migrations

from mirror import textindex


def forward(apps, schema_editor):
    textindex.create(schema_editor, textindex.JOBS)


def backward(apps, schema_editor):
    textindex.drop(schema_editor, textindex.JOBS)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0005_jobsteps")]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
