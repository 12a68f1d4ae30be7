"""Chunking: sentence splitting, Markdown sections and packing (pure functions, no database)."""
from __future__ import annotations

import random

import pytest

from vector.ingest.chunking import ChunkDraft, chunk_markdown
from core.text.markdown import Block, Section, split_sections
from core.sentences import split_sentences

# --- sentences ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Это, т.е. пример, верен. Второе предложение.",
            ["Это, т.е. пример, верен.", "Второе предложение."],
        ),
        (
            "Офис открылся в 2015 г. Москва тогда росла. См. рис. 5 и стр. 10.",
            ["Офис открылся в 2015 г. Москва тогда росла.", "См. рис. 5 и стр. 10."],
        ),
        (
            "Адрес: ул. Ленина, д. 5, напр. вход со двора. Сотрудники, в т.ч. Иванов, и др. коллеги.",
            ["Адрес: ул. Ленина, д. 5, напр. вход со двора.", "Сотрудники, в т.ч. Иванов, и др. коллеги."],
        ),
        ("А. С. Пушкин родился в Москве. Так т. е. было.", ["А. С. Пушкин родился в Москве.", "Так т. е. было."]),
        (
            "Use a tool, e.g. Python. Ask Dr. Smith, i.e. Prof. Jones. Mr. Smith vs. Mrs. Smith.",
            ["Use a tool, e.g. Python.", "Ask Dr. Smith, i.e. Prof. Jones.", "Mr. Smith vs. Mrs. Smith."],
        ),
        (
            "J. R. R. Tolkien lived in the U.S. Army era. Acme Inc. Ltd. moved to St. Louis.",
            ["J. R. R. Tolkien lived in the U.S. Army era.", "Acme Inc. Ltd. moved to St. Louis."],
        ),
        (
            "Version v1.2 fixed it. Pi is 3.14 here. Release 1.2.3 grew 10.5% in Q3. Done.",
            ["Version v1.2 fixed it.", "Pi is 3.14 here.", "Release 1.2.3 grew 10.5% in Q3.", "Done."],
        ),
        (
            "Open example.com and edit config.yaml. See Fig. 3 and No. 5, approx. 7 items. No. It failed.",
            ["Open example.com and edit config.yaml.", "See Fig. 3 and No. 5, approx. 7 items.", "No.", "It failed."],
        ),
        ("Wait... What? Yes! Hmm… Потом. So... then.", ["Wait...", "What?", "Yes!", "Hmm…", "Потом.", "So... then."]),
        ("Он сказал: «Стоп.» Затем ушёл. (См. ниже.) Конец.", ["Он сказал: «Стоп.»", "Затем ушёл.", "(См. ниже.)", "Конец."]),
        # Enumeration-closing abbreviations also close the sentence before a capital letter.
        (
            "Яблоки, груши и т.д. Далее текст. Apples, pears, etc. The end.",
            ["Яблоки, груши и т.д.", "Далее текст.", "Apples, pears, etc.", "The end."],
        ),
        # Lowercase after a period is never a new sentence.
        ("Итого 5 шт. и т.д. и т.п. всё.", ["Итого 5 шт. и т.д. и т.п. всё."]),
    ],
)
def test_sentence_splitter_respects_abbreviations_numbers_and_initials(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_lines_list_items_and_blank_lines_separate_sentences() -> None:
    text = "Steps:\n1. Install it.\n2. Run it\n- item one\n- item two\n\nNew paragraph\n\nAnother one"
    assert split_sentences(text) == [
        "Steps:",
        "1. Install it.",
        "2. Run it",
        "- item one",
        "- item two",
        "New paragraph",
        "Another one",
    ]


def test_soft_wrapped_lines_keep_the_sentence_whole_and_exact() -> None:
    text = "The request is\n  retried `5` times. Then it\n10 more times, e.g.\nlater.\nHard break  \nnext line"
    assert split_sentences(text) == [
        "The request is\n  retried `5` times.",
        "Then it\n10 more times, e.g.\nlater.",
        "Hard break",
        "next line",
    ]


def test_sentences_are_exact_slices_of_the_input() -> None:
    text = "  Первое  предложение.   Second\tone!  \n\n  Третье?  "
    sentences = split_sentences(text)
    assert sentences == ["Первое  предложение.", "Second\tone!", "Третье?"]
    assert all(s in text for s in sentences)


# --- markdown sections -------------------------------------------------------------------------


def test_sections_have_nested_heading_paths_and_skip_empty_headings() -> None:
    text = (
        "Intro before any heading.\n\n"
        "# A\n## B\n### C\nDeep text.\n\n"
        "## D ##\nD text.\n\n"
        "# E\n\n### F\nF text.\n"
    )
    assert [(s.heading_path, [b.text for b in s.blocks]) for s in split_sections(text)] == [
        ((), ["Intro before any heading."]),
        (("A", "B", "C"), ["Deep text."]),
        (("A", "D"), ["D text."]),
        (("E", "F"), ["F text."]),
    ]


def test_setext_headings_and_thematic_breaks() -> None:
    text = "Title\n=====\n\nBody.\n\nSub\n---\nSub body.\n\n* * *\n\nAfter."
    assert split_sections(text) == [
        Section(("Title",), (Block("prose", "Body."),)),
        Section(("Title", "Sub"), (Block("prose", "Sub body."), Block("prose", "After."))),
    ]


def test_fences_are_atomic_and_hide_headings() -> None:
    fence = "   ~~~python title=x\n# not a heading\n\n## still code\n   ~~~"
    backticks = "````md\n```\n# inner\n```\n````"
    text = f"# Real\nText.\n{fence}\n\n{backticks}\nAfter."
    (section,) = split_sections(text)
    assert section.heading_path == ("Real",)
    assert section.blocks == (
        Block("prose", "Text."),
        Block("code", fence),
        Block("code", backticks),
        Block("prose", "After."),
    )


def test_inline_triple_backticks_do_not_open_a_fence() -> None:
    text = "# H\n```inline``` code here.\n# Real heading\nBody."
    assert split_sections(text) == [
        Section(("H",), (Block("prose", "```inline``` code here."),)),
        Section(("Real heading",), (Block("prose", "Body."),)),
    ]


def test_unclosed_fence_runs_to_the_end() -> None:
    text = "# H\n```\n# not a heading\ncode"
    assert split_sections(text) == [Section(("H",), (Block("code", "```\n# not a heading\ncode"),))]


def test_tables_are_atomic_blocks() -> None:
    piped = "| a | b |\n|---|:-:|\n| 1 | 2 |"
    bare = "x | y\n--|--\n3 | 4"
    text = f"Before:\n{piped}\nAfter.\n\n{bare}"
    (section,) = split_sections(text)
    assert section.blocks == (
        Block("prose", "Before:"),
        Block("table", piped),
        Block("prose", "After."),
        Block("table", bare),
    )


# --- chunking ----------------------------------------------------------------------------------


def _sentence(i: int, lang: str = "en") -> str:
    if lang == "ru":
        return f"Предложение номер {i:03d} описывает лимит, т.е. правило для г. Москва."
    return f"Sentence number {i:03d} describes a limit, e.g. the rule Dr. Smith set."


def test_long_code_fence_with_hash_lines_stays_in_one_chunk() -> None:
    code = "```bash\n" + "\n".join(f"# not a heading {i}\necho step {i}" for i in range(30)) + "\n```"
    assert len(code) > 300
    text = f"# Setup\n\nRun this. It is long.\n\n{code}\n\nThen restart."
    chunks = chunk_markdown(text, max_chars=300)
    holding = [c for c in chunks if "# not a heading" in c.content]
    assert len(holding) == 1
    assert holding[0].content == code
    assert {c.heading for c in chunks} == {"Setup"}
    assert [c.content for c in chunks] == ["Run this. It is long.", code, "Then restart."]


def test_table_fitting_a_chunk_is_packed_whole() -> None:
    table = "| code | meaning |\n|---|---|\n" + "\n".join(f"| E{i} | error number {i} |" for i in range(6))
    text = "Intro sentence here. " * 4 + f"\n\n{table}\n\nOutro sentence."
    chunks = chunk_markdown(text, max_chars=200, overlap=0)
    assert len(table) <= 200
    assert sum(table in c.content for c in chunks) == 1
    for row in table.splitlines():  # no row leaks into a second chunk
        assert sum(row in c.content for c in chunks) == 1


def test_oversized_table_is_one_intact_chunk_and_never_overlap() -> None:
    table = "| k | v |\n|---|---|\n" + "\n".join(f"| key{i} | value {i} |" for i in range(40))
    text = f"First sentence.\n\n{table}\n\nLast sentence."
    chunks = chunk_markdown(text, max_chars=100, overlap=0.5)
    assert [c.content for c in chunks] == ["First sentence.", table, "Last sentence."]


def test_heading_paths_are_joined_and_text_before_first_heading_has_none() -> None:
    text = "Preface text.\n\n# A\n## B\n### C\nDeep.\n## D\nShallow.\n"
    chunks = chunk_markdown(text)
    assert [(c.chunk_no, c.heading, c.content) for c in chunks] == [
        (0, "", "Preface text."),
        (1, "A > B > C", "Deep."),
        (2, "A > D", "Shallow."),
    ]


def test_long_sentence_is_split_at_word_boundaries() -> None:
    words = [f"word{i:02d}" + "x" * (i % 5) for i in range(80)]
    giant = "W" * 130  # longer than a chunk: hard cut by code points
    text = " ".join(words[:40]) + f" {giant} " + " ".join(words[40:])
    chunks = chunk_markdown(text, max_chars=60, overlap=0.2)
    assert len(chunks) > 5
    assert all(len(c.content) <= 60 for c in chunks)
    # pieces of one sentence are not whole sentences, so nothing repeats as overlap
    tokens = " ".join(c.content for c in chunks).split()
    assert tokens[:40] == words[:40]
    assert "".join(t for t in tokens if t.startswith("W")) == giant
    assert tokens[-40:] == words[40:]


def _chunk_sentences(chunk: ChunkDraft) -> list[str]:
    return split_sentences(chunk.content)


def test_overlap_is_whole_sentences_within_budget_and_never_alone() -> None:
    sentences = [_sentence(i) for i in range(40)]
    assert len(set(map(len, sentences))) == 1  # 70 code points each
    text = " ".join(sentences)
    max_chars, overlap = 400, 0.4
    chunks = chunk_markdown(text, max_chars=max_chars, overlap=overlap)
    parsed = [_chunk_sentences(c) for c in chunks]
    overlaps = []
    for previous, current in zip(parsed, parsed[1:]):
        assert set(current) <= set(sentences)  # every chunk is made of whole input sentences
        shared = [s for s in current if s in previous]
        assert current[: len(shared)] == shared  # overlap sits at the start ...
        assert previous[len(previous) - len(shared) :] == shared  # ... and is the previous tail
        assert len(" ".join(shared)) <= overlap * max_chars
        assert len(current) > len(shared)  # not only overlap
        overlaps.append(len(shared))
    assert overlaps and all(n == 2 for n in overlaps)  # 2 x 70 + 1 <= 160, 3 x 70 + 2 > 160
    assert all(len(c.content) <= max_chars for c in chunks)


def test_zero_overlap_repeats_nothing() -> None:
    sentences = [_sentence(i, "ru") for i in range(30)]
    chunks = chunk_markdown(" ".join(sentences), max_chars=300, overlap=0)
    assert [s for c in chunks for s in _chunk_sentences(c)] == sentences


def test_overlap_does_not_cross_sections() -> None:
    text = "# One\n" + " ".join(_sentence(i) for i in range(10)) + "\n# Two\n" + _sentence(99)
    chunks = chunk_markdown(text, max_chars=200, overlap=0.5)
    assert chunks[-1].heading == "Two"
    assert chunks[-1].content == _sentence(99)


def test_overlap_keeps_room_for_the_next_sentence() -> None:
    short, long_ = "Short one.", "L" * 95 + "."
    chunks = chunk_markdown(f"{short} {long_} {long_}", max_chars=100, overlap=0.5)
    assert [c.content for c in chunks] == [short, long_, long_]


def test_small_table_is_never_carried_as_overlap() -> None:
    table = "| a |\n|---|\n| 1 |"
    first, second = "A" * 39 + ".", "B" * 59 + "."
    chunks = chunk_markdown(f"{first}\n\n{table}\n\n{second}", max_chars=100, overlap=0.5)
    assert [c.content for c in chunks] == [f"{first}\n\n{table}", second]


def test_paragraph_and_line_breaks_are_preserved() -> None:
    text = "First para one. First para two.\n\n- item one\n- item two\n\nLast para."
    (chunk,) = chunk_markdown(text)
    assert chunk.content == text


def _generated_markdown(seed: int) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    counter = 0
    for section in range(rng.randint(2, 5)):
        parts.append("#" * rng.randint(1, 3) + f" Раздел {seed}.{section}")
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.15:
                parts.append("```\n# comment\n" + "x = 1\n" * rng.randint(1, 60) + "```")
            elif kind < 0.25:
                parts.append("\n".join(f"- пункт {counter + k} списка" for k in range(rng.randint(1, 4))))
                counter += 4
            else:
                lang = rng.choice(["ru", "en"])
                parts.append(" ".join(_sentence(counter + k, lang) for k in range(rng.randint(1, 8))))
                counter += 8
        parts.append("")
    return "\n\n".join(parts)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("max_chars", "overlap"), [(120, 0.15), (250, 0.3), (1000, 0.15)])
def test_every_sentence_and_block_is_covered_in_order(seed: int, max_chars: int, overlap: float) -> None:
    text = _generated_markdown(seed)
    chunks = chunk_markdown(text, max_chars=max_chars, overlap=overlap)
    assert [c.chunk_no for c in chunks] == list(range(len(chunks)))
    for section in split_sections(text):
        heading = " > ".join(section.heading_path)
        contents = [c.content for c in chunks if c.heading == heading]
        joined = "\n".join(contents)
        position = 0
        for block in section.blocks:
            pieces = [block.text] if block.kind != "prose" else split_sentences(block.text)
            for piece in pieces:
                assert any(piece in content for content in contents), piece
                position = joined.index(piece, position)  # in document order
    for chunk in chunks:
        oversized_atomic = chunk.content.startswith("```")
        assert len(chunk.content) <= max_chars or oversized_atomic


def test_chunking_is_deterministic() -> None:
    text = _generated_markdown(42)
    assert chunk_markdown(text, max_chars=200) == chunk_markdown(text, max_chars=200)


@pytest.mark.parametrize("text", ["", "   \n\t\n  ", "# Only a heading\n\n## And another\n"])
def test_empty_input_gives_no_chunks(text: str) -> None:
    assert chunk_markdown(text) == []


@pytest.mark.parametrize("text", ["", "   \n\t\n  "])
def test_whitespace_gives_no_sentences_or_sections(text: str) -> None:
    assert split_sentences(text) == []
    assert split_sections(text) == []


@pytest.mark.parametrize(("max_chars", "overlap"), [(0, 0.1), (100, -0.1), (100, 1.0)])
def test_invalid_parameters_are_rejected(max_chars: int, overlap: float) -> None:
    with pytest.raises(ValueError):
        chunk_markdown("Text.", max_chars=max_chars, overlap=overlap)
