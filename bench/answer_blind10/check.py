"""Gold check for bench/answer_blind10/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind10/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl.

The checks themselves are blind6's, run as blind7 runs them (and as blind8 and blind9 reuse them):
bench/answer_blind7/check.py is loaded from its file path (importlib, not edited), its globals are
replaced by this set's question file, make-up (question language per qid, extra groups per multi-hop
qid) and negative probes, and its main() loads bench/answer_blind6/check.py and runs blind6's main()
with them. Everything else (qid order, routes, schema, ACLs, answer and alias placement, hops,
negatives' kinds and probes, cross-lingual listing, the printed counts and "errors: N") is blind6's
code unchanged.
"""
import importlib.util
import os
import sys

BLIND7 = os.path.join("bench", "answer_blind7", "check.py")
QFILE = "bench/answer_blind10/questions.jsonl"

# expected question language per qid: the same layout as blind6 .. blind9 (these qids are English)
EN = {"m01", "m03", "m05", "m07", "m10", "m12", "m13", "m15", "m17", "m19", "m22", "m23",
      "m25", "m26", "m27", "m28", "m29", "m30", "m37", "m39", "m41", "m43", "m45", "m46"}

# expected extra groups per multi-hop qid (all others: exactly public + staff)
EXTRA = {"m05": {"finance"}, "m10": {"finance"}, "m11": {"finance"}, "m15": {"finance"},
         "m01": {"hr"}, "m08": {"hr"}, "m09": {"hr"}, "m13": {"hr"}, "m20": {"hr"}, "m23": {"hr"}}

# negatives: kind and what was grepped (same probe keys as blind6's checker understands)
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["emission", "CO2", "CO₂", "carbon", "footprint", "выброс", "углерод"]}),
    "m38": ("a", {"forbid": ["Новиков", "Novikov", "Игорь", "Igor"]}),
    "m39": ("a", {"forbid": ["Alpine", "Haulage", "Альпийск", "Альпайн"]}),
    # (b) attribute never given for a real entity
    "m40": ("b", {"line_pairs": ("Прогноз ETA", ["ошибк", "точност", "accuracy", "error", "MAE", "%"]),
                  "line_regex": ("ETA Predictor", r"\d+\s*(мин|min|%)"),
                  "forbid": ["ошибка прогноза", "точность прогноза", "средняя ошибка", "mean absolute error",
                             "prediction error", "ETA error", "ETA accuracy"]}),
    "m41": ("b", {"line_pairs": ("Berlin", ["site lead", "руководитель площадки", "office lead", "head of the office"]),
                  "forbid": ["Berlin site lead", "site lead in Berlin", "site lead of the Berlin", "site lead of Berlin",
                             "руководитель берлинской площадки", "площадки в Берлине"],
                  "require": ("offices/austin.md", "The site lead is Tamsin Hale")}),
    "m42": ("b", {"line_regex": ("Kubernetes", r"\d+\s*(узл|нод|node|сервер|server|машин|machine|VM)"),
                  "forbid": ["nodes", "узлов", "узла", "worker node", "серверов в кластере"]}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/performance-review-policy.md", "answer": "one week for calibration"}),
    "m44": ("c", {"doc": "finance/q2-2025-report.md", "answer": "56%"}),
    "m45": ("c", {"doc": "finance/budget-fy2026.md", "answer": "+200%"}),
    # (d) false premise / period not covered
    "m46": ("d", {"line_pairs": ("contract test", ["stopped", "dropped", "no longer", "paused", "discontinued", "cancel"]),
                  "forbid": ["stopped running contract tests", "no longer run contract tests", "contract tests were dropped",
                             "contract tests were stopped", "перестали гонять контрактные", "отказались от контрактных"],
                  "require": ("teams/integrations.md", "the team also runs a weekly contract test")}),
    "m47": ("d", {"line_regex": ("Carrier Connector", r"(март\w*|March|Mar\.?)\s+2025"),
                  "doc_forbid": ("services/carrier-connector.md", ["March 2025", "марте 2025", "Mar 2025"]),
                  "require": ("incidents/2024-11-nordpost-rate-limit.md", "18 November 2024")}),
    "m48": ("d", {"line_pairs": ("5 млн", ["повыс", "подня", "увелич", "raised"]),
                  "forbid": ["порог подняли", "подняли порог", "повысили порог", "порог повышен", "порог увеличен",
                             "raised the threshold", "threshold was raised"],
                  "require": ("incidents/2025-08-webhook-backlog.md",
                              "Порог алерта на длину очереди — 200 000 событий")}),
}


def main():
    """blind7's runner (bench/answer_blind7/check.py: the guards that blind6's checker still has what it
    replaces, then blind6's main()) with this set's globals in place of blind7's."""
    sys.dont_write_bytecode = True  # leave no __pycache__ beside either checker
    spec = importlib.util.spec_from_file_location("answer_blind7_check", BLIND7)
    b7 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(b7)
    b7.QFILE, b7.EN, b7.EXTRA, b7.NEG = QFILE, EN, EXTRA, NEG
    return b7.main()


if __name__ == "__main__":
    sys.exit(main())
