"""The text index of the list search (mirror.textindex): FTS5 trigram table and triggers on
SQLite, a pg_trgm GIN index on PostgreSQL."""

from django.db import migrations

from mirror import textindex


def forward(apps, schema_editor):
    textindex.create(schema_editor, textindex.OBJECTS)


def backward(apps, schema_editor):
    textindex.drop(schema_editor, textindex.OBJECTS)


class Migration(migrations.Migration):
    dependencies = [("inventory", "0003_identifier_search_keys")]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
