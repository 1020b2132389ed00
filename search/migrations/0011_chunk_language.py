"""Each chunk's language (detected at the build), and a rebuild of every chunk's search columns: the
analysis now folds Arabic letter variants (alef maqsura, ta marbuta) and splits French elisions, so columns
written before would not match queries analysed the new way. ``manage.py up`` (or the next build) rewrites
them; until then searches still work, with the old columns."""

from django.db import migrations, models


def refold_titles(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Titles holding a letter the new folding changes get their folded copy (the live preview's) anew."""
    from search.text.analysis import folded_text

    Revision = apps.get_model("search", "Revision")
    for revision in Revision.objects.filter(title__regex="[\u0649\u0629\u0671]").only("pk", "title"):
        Revision.objects.filter(pk=revision.pk).update(title_folded=folded_text(revision.title)[:500])


class Migration(migrations.Migration):
    dependencies = [("search", "0010_text_pieces")]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="language",
            field=models.CharField(blank=True, default="", max_length=8),
        ),
        migrations.RunSQL(
            "UPDATE search_chunk SET indexed = false WHERE indexed",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunPython(refold_titles, migrations.RunPython.noop),
    ]
