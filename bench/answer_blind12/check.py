"""Gold check for bench/answer_blind12/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind12/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl. The checks are blind11's runner
(bench/answer_blind11/check.py `run`, loaded from its path): blind6's checks, as blind7 to blind11 run them,
with this set's question file, extra groups per multi-hop qid and negative probes.
"""
import importlib.util
import os
import sys

BLIND11 = os.path.join("bench", "answer_blind11", "check.py")
QFILE = "bench/answer_blind12/questions.jsonl"

# expected extra groups per multi-hop qid (all others: exactly public + staff)
EXTRA = {"m02": {"finance"}, "m05": {"finance"}, "m08": {"finance"}, "m09": {"finance"},
         "m01": {"hr"}, "m06": {"hr"}, "m07": {"hr"}, "m13": {"hr"}, "m14": {"hr"}, "m20": {"hr"}}

# negatives: kind and what was grepped (same probe keys as blind6's checker understands)
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["warehouse", "склад", "WMS", "stock management", "управление запасами"]}),
    "m38": ("a", {"forbid": ["Петров", "Petrov", "Виктор", "Viktor", "Victor"]}),
    "m39": ("a", {"forbid": ["ERR_6", "6101"]}),
    # (b) attribute never given for a real entity
    "m40": ("b", {"doc_forbid": ("offices/berlin.md", ["floor", "этаж", "Etage", "storey", "Stock "]),
                  "line_pairs": ("Uferhallen", ["floor", "этаж", "Etage", "storey"]),
                  "forbid": ["Berlin office is on the", "floor of the Berlin", "берлинский офис находится на",
                             "этаже в Берлине"],
                  "require": ("offices/berlin.md", "Uferhallen-Steg 9, 10179 Berlin")}),
    "m41": ("b", {"doc_forbid": ("offices/austin.md", ["Reception", "open to", "opening hours", "open from",
                                                        "08:", "09:", "a.m.", "p.m.", "Monday"]),
                  "forbid": ["Austin office is open", "Austin office opens", "office in Austin is open",
                             "офис в Остине работает", "офис в Остине открыт"],
                  "require": ("offices/austin.md", "4120 Cedar Bend Parkway, Suite 300")}),
    "m42": ("b", {"line_regex": ("задач", r"\d[\d ]*\s*(задач\w*|маршрут\w*)\s*(в сутки|в день|в час|в минуту)"),
                  "forbid": ["задач в сутки", "задач в день", "маршрутов в сутки", "маршрутов в день", "jobs per day",
                             "jobs a day", "plans per day", "routes per day"],
                  "require": ("services/route-optimizer.md", "одна задача может содержать до 25 машин")}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/salary-bands-2025.md", "answer": "level change"}),
    "m44": ("c", {"doc": "finance/budget-fy2026.md", "answer": "+11%"}),
    "m45": ("c", {"doc": "finance/vendor-spend-2025.md", "answer": "Stratus Cloud"}),
    # (d) false premise / period not covered
    "m46": ("d", {"line_pairs": ("Beacon", ["replac", "switch", "migrat", "instead of", "замен", "переш", "отказ",
                                           "вместо"]),
                  "forbid": ["replaced Beacon", "instead of Beacon", "switched from Beacon", "moved away from Beacon",
                             "заменили Beacon", "вместо Beacon", "отказались от Beacon"],
                  "require": ("policies/on-call-berlin.md", "recorded in Beacon (our paging tool)")}),
    "m47": ("d", {"line_regex": ("Shipments API", r"(июл\w*|July|Jul\.?)\s+2025"),
                  "forbid": ["июле 2025", "июль 2025", "July 2025", "Jul 2025"],
                  "require": ("incidents/2025-04-geomesh-outage.md", "address validation in the Shipments API")}),
    "m48": ("d", {"line_pairs": ("token bucket", ["removed", "disabled", "dropped", "switched off", "turned off",
                                                 "отключ", "убрал"]),
                  "forbid": ["removed the token bucket", "token bucket was removed", "token bucket was disabled",
                             "отключили token bucket", "убрали token bucket", "отказались от token bucket"],
                  "require": ("services/carrier-connector.md",
                              "limits its own traffic to every carrier with a token bucket")}),
}


def main():
    sys.dont_write_bytecode = True  # leave no __pycache__ beside the checkers
    spec = importlib.util.spec_from_file_location("answer_blind11_check", BLIND11)
    blind11 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blind11)
    return blind11.run(QFILE, EXTRA, NEG)


if __name__ == "__main__":
    sys.exit(main())
