"""Gold check for bench/answer_blind11/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind11/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl.

The checks themselves are blind6's, run as blind7 runs them: bench/answer_blind10/check.py is loaded from
its file path (importlib, not edited) and its main() run with this set's question file, extra groups per
multi-hop qid and negative probes in place of its globals; its question-language layout (EN) is this set's
too. blind10's main() hands them to blind7's runner, which runs blind6's main() with them. Everything else
(qid order, routes, schema, ACLs, answer and alias placement, hops, negatives' kinds and probes,
cross-lingual listing, the printed counts and "errors: N") is blind6's code unchanged.
"""
import importlib.util
import os
import sys

BLIND10 = os.path.join("bench", "answer_blind10", "check.py")
QFILE = "bench/answer_blind11/questions.jsonl"

# expected extra groups per multi-hop qid (all others: exactly public + staff)
EXTRA = {"m05": {"finance"}, "m10": {"finance"}, "m11": {"finance"}, "m21": {"finance"},
         "m01": {"hr"}, "m08": {"hr"}, "m09": {"hr"}, "m13": {"hr"}, "m18": {"hr"}, "m20": {"hr"}}

# negatives: kind and what was grepped (same probe keys as blind6's checker understands)
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["insurance", "insurer", "underwrit", "страхов"]}),
    "m38": ("a", {"forbid": ["Павлов", "Pavlov", "Андрей", "Andrei", "Andrey"]}),
    "m39": ("a", {"forbid": ["ap-southeast", "Singapore", "Сингапур", "Asia", "Азия", "азиатск"]}),
    # (b) attribute never given for a real entity
    "m40": ("b", {"forbid": ["кв. м", "кв.м", "м²", "м2", "square met", "sq m", "sq. m", "sq ft", "квадратных метр",
                             "площадь"],
                  "require": ("offices/moscow.md", "Волжский бульвар, д. 11, стр. 2")}),
    "m41": ("b", {"line_regex": ("Route Optimizer", r"\d[\d,. ]*\s*(customers|forwarders|users|клиент|экспедитор)"),
                  "forbid": ["customers use the Route Optimizer", "forwarders use the Route Optimizer",
                             "клиентов пользуются", "клиентов используют", "пользуются Оптимизатором"],
                  "require": ("handbook/company-overview.md", "serves about 1,100 forwarders")}),
    "m42": ("b", {"line_regex": ("воркер", r"\d+\s*(воркер|worker)"),
                  "forbid": ["воркеров в пуле", "workers in the pool", "worker pool of", "пул из", "размер пула",
                             "pool size"],
                  "require": ("incidents/2025-08-webhook-backlog.md", "воркеров был один на всех клиентов")}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/performance-review-policy.md", "answer": "two weeks for self-reviews"}),
    "m44": ("c", {"doc": "finance/q2-2025-report.md", "answer": "63.4"}),
    "m45": ("c", {"doc": "finance/budget-fy2026.md", "answer": "+58%"}),
    # (d) false premise / period not covered
    "m46": ("d", {"line_pairs": ("Starter", ["discontinu", "retired", "no longer", "withdrawn", "phased out", "закрыт",
                                            "отмен", "упраздн"]),
                  "forbid": ["discontinued", "Starter was retired", "no longer offer", "отказались от тарифа"],
                  "require": ("handbook/customer-faq.md", "Starter is meant for trying the platform")}),
    "m47": ("d", {"line_pairs": ("Прогноз ETA", ["INC-", "инцидент", "сбой", "разбор"]),
                  "line_regex": ("ETA Predictor", r"(INC-|incident|outage)"),
                  "forbid": ["октябре 2025", "October 2025", "INC-2025-09", "INC-2025-1"],
                  "require": ("teams/routing.md", "**Прогноз ETA** (ETA Predictor, tier-2)")}),
    "m48": ("d", {"line_pairs": ("retry_max_attempts", ["raised to", "increased to", "подняли", "увеличили", "повысили"]),
                  "forbid": ["raised to 12", "increased to 12", "set to 12", "подняли до 12", "увеличили до 12"],
                  "require": ("services/carrier-connector.md", "retry_max_attempts: 5")}),
}


def run(qfile, extra, neg):
    """blind10's runner with a set's question file, extra groups and negative probes in place of its own
    globals (its EN layout kept: blind11 and blind12 have the same English qids)."""
    sys.dont_write_bytecode = True  # leave no __pycache__ beside the checkers
    spec = importlib.util.spec_from_file_location("answer_blind10_check", BLIND10)
    b10 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(b10)
    b10.QFILE, b10.EXTRA, b10.NEG = qfile, extra, neg
    return b10.main()


def main():
    return run(QFILE, EXTRA, NEG)


if __name__ == "__main__":
    sys.exit(main())
