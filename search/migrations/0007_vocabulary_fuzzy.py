"""Typo tolerance and "did you mean": fuzzystrmatch and a trigram index over the corpus vocabulary."""

from django.contrib.postgres.operations import CreateExtension
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("search", "0006_lexical_tf_maps")]
    operations = [
        CreateExtension("fuzzystrmatch"),
        migrations.RunSQL(
            "CREATE INDEX search_term_stats_trgm ON search_term_stats USING gin (term gin_trgm_ops);",
            "DROP INDEX IF EXISTS search_term_stats_trgm;",
        ),
    ]
