"""The text index of the list search (mirror.textindex): FTS5 trigram table and triggers on
SQLite, a pg_trgm GIN index on PostgreSQL."""

from django.db import migrations

from mirror import textindex


def forward(apps, schema_editor):
    textindex.create(schema_editor, textindex.BATCHES)


def backward(apps, schema_editor):
    textindex.drop(schema_editor, textindex.BATCHES)


class Migration(migrations.Migration):
    dependencies = [("batches", "0010_batch_plural")]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
