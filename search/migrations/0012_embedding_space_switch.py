"""A model switch builds the new embedding space beside the active one and flips atomically
(``search.services.reembed``): each space gets a state and progress figures for the admin, at most one
space is active, and each chunk records the hash of its embedding text (its key in the embedding cache).

``embedding_hash`` starts empty: filling it here would rewrite every chunk row inside the migration's
transaction; the next embedding or model switch writes it, batch by batch.
"""

from django.db import migrations, models


def states_from_active(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Existing rows: the active one is ``active``, the others ``retired``. Should an older race have left
    two rows active, the one most chunks are embedded with stays active."""
    EmbeddingSpace = apps.get_model("search", "EmbeddingSpace")
    Chunk = apps.get_model("search", "Chunk")
    active = list(EmbeddingSpace.objects.filter(active=True))
    if len(active) > 1:
        keep = max(active, key=lambda s: (Chunk.objects.filter(embedding_model=s.model).count(), s.pk))
        EmbeddingSpace.objects.filter(active=True).exclude(pk=keep.pk).update(active=False)
    EmbeddingSpace.objects.filter(active=True).update(state="active", finished_at=models.F("created_at"))
    EmbeddingSpace.objects.filter(active=False).update(state="retired")


class Migration(migrations.Migration):
    dependencies = [("search", "0011_chunk_language")]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="embedding_hash",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="embeddingspace",
            name="state",
            field=models.CharField(
                choices=[("active", "active"), ("building", "building"), ("retired", "retired")],
                default="building",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="embeddingspace", name="chunks_done", field=models.PositiveIntegerField(default=0)
        ),
        migrations.AddField(
            model_name="embeddingspace", name="chunks_total", field=models.PositiveIntegerField(default=0)
        ),
        migrations.AddField(
            model_name="embeddingspace", name="started_at", field=models.DateTimeField(blank=True, null=True)
        ),
        migrations.AddField(
            model_name="embeddingspace", name="progress_at", field=models.DateTimeField(blank=True, null=True)
        ),
        migrations.AddField(
            model_name="embeddingspace",
            name="finished_at",
            field=models.DateTimeField(blank=True, help_text="When it became the active space.", null=True),
        ),
        migrations.AddField(
            model_name="embeddingspace",
            name="last_error",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(states_from_active, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="embeddingspace",
            constraint=models.UniqueConstraint(
                condition=models.Q(("active", True)), fields=("active",), name="embedding_space_one_active"
            ),
        ),
    ]
