"""Gold check for bench/answer_blind7/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind7/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl.

The checks themselves are blind6's: bench/answer_blind6/check.py is loaded from its file path
(importlib, not edited) and its main() is run with this set's question file, make-up (question
language per qid, extra groups per multi-hop qid) and negative probes put in place of blind6's.
blind6's main() reads these module globals at call time; everything else (qid order, routes,
schema, ACLs, answer and alias placement, hops, negatives' kinds and probes, cross-lingual
listing, the printed counts and "errors: N") is blind6's code unchanged.
"""
import importlib.util
import os
import sys

BLIND6 = os.path.join("bench", "answer_blind6", "check.py")
QFILE = "bench/answer_blind7/questions.jsonl"

# expected question language per qid: the same make-up as blind6 (these qids are English)
EN = {"m01", "m03", "m05", "m07", "m10", "m12", "m13", "m15", "m17", "m19", "m22", "m23",
      "m25", "m26", "m27", "m28", "m29", "m30", "m37", "m39", "m41", "m43", "m45", "m46"}

# expected extra groups per multi-hop qid (all others: exactly public + staff)
EXTRA = {"m06": {"finance"}, "m11": {"finance"}, "m13": {"finance"},
         "m01": {"hr"}, "m14": {"hr"}, "m15": {"hr"},
         "m20": {"hr", "finance"}, "m21": {"hr", "finance"}}

# negatives: kind and what was grepped (same probe keys as blind6's checker understands)
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["Telematic", "Телематик", "телематик"]}),
    "m38": ("a", {"forbid": ["Волков", "Volkov", "Сергей", "Sergey", "Sergei"]}),
    "m39": ("a", {"forbid": ["ERR_3355", "3355"]}),
    # (b) attribute never given for a real entity
    "m40": ("b", {"line_regex": ("@", r"(routing|маршрутизац|route)"),
                  "line_pairs": ("Маршрутизац", ["@", "e-mail", "почт", "email"]),
                  "forbid": ["routing@", "route@", "team-routing@", "routing.team@"]}),
    "m41": ("b", {"line_regex": ("Kubernetes", r"\d"),
                  "forbid": ["Kubernetes 1.", "Kubernetes v", "k8s 1.", "k8s v", "версии Kubernetes",
                             "Kubernetes version", "версия Kubernetes"]}),
    "m42": ("b", {"line_pairs": ("Tellwave", ["€", "₽", "$", "цен", "price", "стоимост", "cost", "fee"]),
                  "forbid": ["per SMS", "за одно SMS", "за SMS", "за одно сообщение", "per message",
                             "за сообщение"]}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/performance-review-policy.md", "answer": "manager's manager"}),
    "m44": ("c", {"doc": "finance/q2-2025-report.md", "answer": "73.5%"}),
    "m45": ("c", {"doc": "finance/vendor-spend-2025.md", "answer": "2026-12-31"}),
    # (d) false premise / period not covered
    "m46": ("d", {"forbid": ["replaced Tellwave", "dropped Tellwave", "instead of Tellwave", "stopped using Tellwave",
                             "отказались от Tellwave", "заменили Tellwave", "вместо Tellwave",
                             "new SMS provider", "новый SMS-провайдер", "новым SMS-провайдером"],
                  "require": ("incidents/2025-06-duplicate-sms.md", "Оценить второго SMS-провайдера")}),
    "m47": ("d", {"line_regex": ("2024", r"(route optimizer|route-optimizer|оптимизатор|решател|solver)"),
                  "line_pairs": ("INC-2024-117", ["Route Optimizer", "Оптимизатор", "route-optimizer"]),
                  "require": ("incidents/2025-02-route-optimizer-oom.md", "12 февраля 2025")}),
    "m48": ("d", {"forbid": ["отказались от канареечн", "отменили канареечн", "без канарейки", "без канареечн",
                             "canary was dropped", "canaries were dropped", "canaries were removed",
                             "no longer use canar", "stopped using canar", "canary deployments were dropped"],
                  "require": ("handbook/engineering-handbook.md",
                              "All tier-1 and tier-2 services deploy through a canary")}),
}


def load_blind6():
    sys.dont_write_bytecode = True  # leave no __pycache__ under bench/answer_blind6/
    spec = importlib.util.spec_from_file_location("answer_blind6_check", BLIND6)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    b6 = load_blind6()
    for name in ("QFILE", "EN", "EXTRA", "NEG", "KIND", "main"):
        if not hasattr(b6, name):
            print("ERROR blind6 checker has no %s; it can no longer be reused as is" % name)
            print("errors: 1")
            return 1
    if sorted(NEG) != ["m%02d" % i for i in range(37, 49)]:
        print("ERROR NEG must cover m37..m48")
        print("errors: 1")
        return 1
    b6.QFILE = QFILE
    b6.EN = EN
    b6.EXTRA = EXTRA
    b6.NEG = NEG
    return b6.main()


if __name__ == "__main__":
    sys.exit(main())
