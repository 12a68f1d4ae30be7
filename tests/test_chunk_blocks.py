"""Markdown structure read once: ingest stores each chunk's reading blocks (chunks.blocks), search hands
them to the answer side, and the answer's units are cut along them instead of parsing the text again."""
from __future__ import annotations

import pytest

from answers.types import Passage
from answers.units import units
from core.text.markdown import ReadingBlock, reading_blocks
from tests.conftest import ingest_corpus
from vector.search.hybrid import HybridSearcher

TABLE_AND_LIST = """Intro paragraph that explains the limits.

| code | meaning |
|------|---------|
| 429 | too many requests |

- first item of the list
- second item of the list

```
# not a heading, and never read as a sentence
```
"""


def _spans(text: str) -> list[tuple[str, str]]:
    return [(text[b.start:b.end], text[b.header[0]:b.header[1]]) for b in reading_blocks(text)]


@pytest.mark.unit
def test_reading_blocks_are_paragraphs_items_and_rows_with_their_header():
    assert _spans(TABLE_AND_LIST) == [
        ("Intro paragraph that explains the limits.", ""),
        ("| 429 | too many requests |", "| code | meaning |"),
        ("- first item of the list", ""),
        ("- second item of the list", ""),
    ]


@pytest.mark.unit
@pytest.mark.parametrize("text", ["", "\n\n", "```\nunclosed fence\n# h", "|", "| - |", "#", "\ufdfa" * 30,
                                  "a\r\nb\r\n\r\nc", "\x00\u202e\u200b"])
def test_reading_blocks_of_hostile_text_are_spans_inside_it(text):
    for b in reading_blocks(text):
        assert 0 <= b.start < b.end <= len(text) and 0 <= b.header[0] <= b.header[1] <= len(text)
        assert ReadingBlock.from_json(b.to_json()) == b


@pytest.mark.unit
def test_units_are_cut_along_the_stored_blocks_not_a_new_parse():
    text = "Alpha beta gamma delta. Epsilon zeta eta theta."
    parsed = Passage(id=1, doc_id="d", title="t", heading="", text=text)
    assert [u.text for u in units([parsed])] == ["Alpha beta gamma delta.", "Epsilon zeta eta theta."]
    # as stored: only the second sentence is a block (the first was, say, a heading ingest read)
    stored = Passage(id=1, doc_id="d", title="t", heading="", text=text, blocks=(ReadingBlock(24, len(text)),))
    assert [u.text for u in units([stored])] == ["Epsilon zeta eta theta."]


@pytest.mark.database
@pytest.mark.slow
def test_ingest_stores_the_blocks_and_search_hands_them_on(db, settings, local_embedder, tmp_path, tenant):
    ingest_corpus(db, settings, local_embedder, tmp_path, {
        "limits.md": "---\nacl: [staff]\n---\n# Limits\n\n" + TABLE_AND_LIST}, tenant)
    with db.connection() as conn:
        rows = conn.execute("SELECT content, blocks FROM chunks WHERE tenant_id = %s", (tenant,)).fetchall()
    assert rows and all(stored == [b.to_json() for b in reading_blocks(content)] for content, stored in rows)
    with HybridSearcher(db, local_embedder) as searcher:
        hit = searcher.search(tenant, ["staff"], "What does code 429 mean?", k=1).hits[0]
    assert hit.blocks == reading_blocks(hit.text) and hit.blocks
    assert Passage.of_chunk(hit).blocks == hit.blocks
