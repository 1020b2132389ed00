from hypothesis import given, settings
from hypothesis import strategies as st

from search.text.chunking import chunk_markdown


def test_headings_become_toc_path_and_offsets_point_into_body():
    # given
    body = "Intro line.\n\n# Guide\n\nFirst part.\n\n## Pricing\n\nPrice text here.\n\n# Other\n\nMore."
    # when
    chunks = chunk_markdown(body, max_chars=200, overlap=20)
    # then
    assert [c.toc_path for c in chunks] == ["", "Guide", "Guide > Pricing", "Other"]
    for chunk in chunks:
        assert body[chunk.char_start : chunk.char_end] == chunk.text


def test_long_sections_are_bounded_and_overlap():
    body = "# Long\n\n" + " ".join(f"Sentence {i} is here." for i in range(300))
    chunks = chunk_markdown(body, max_chars=300, overlap=60)
    assert len(chunks) > 5
    assert all(len(c.text) <= 300 for c in chunks)
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.char_start < before.char_end, "consecutive chunks overlap"
        assert after.char_start > before.char_start


def test_headings_inside_code_fences_are_text():
    body = "# Real\n\n```\n# not a heading\n```\n"
    assert {c.toc_path for c in chunk_markdown(body)} == {"Real"}


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab #\n.é")), max_size=2000))
def test_any_text_chunks_with_exact_offsets(body):
    for chunk in chunk_markdown(body, max_chars=120, overlap=30):
        assert body[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.text.strip()
        assert len(chunk.text) <= 120
