"""Gold check for bench/answer_demo_dev/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_demo_dev/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl.

The checks themselves are blind6's, run as blind7 runs them (and as blind8 reuses them):
bench/answer_blind7/check.py is loaded from its file path (importlib, not edited), its globals are
replaced by this set's question file, make-up (question language per qid, extra groups per
multi-hop qid) and negative probes, and its main() loads bench/answer_blind6/check.py and runs
blind6's main() with them. Everything else (qid order, routes, schema, ACLs, answer and alias
placement, hops, negatives' kinds and probes, cross-lingual listing, the printed counts and
"errors: N") is blind6's code unchanged.
"""
import importlib.util
import os
import sys

BLIND7 = os.path.join("bench", "answer_blind7", "check.py")
QFILE = "bench/answer_demo_dev/questions.jsonl"

# expected question language per qid: the same layout as blind6, blind7 and blind8 (these qids are English)
EN = {"m01", "m03", "m05", "m07", "m10", "m12", "m13", "m15", "m17", "m19", "m22", "m23",
      "m25", "m26", "m27", "m28", "m29", "m30", "m37", "m39", "m41", "m43", "m45", "m46"}

# expected extra groups per multi-hop qid (all others: exactly public + staff); blind8's layout
EXTRA = {"m06": {"finance"}, "m11": {"finance"}, "m13": {"finance"},
         "m01": {"hr"}, "m14": {"hr"}, "m15": {"hr"}, "m21": {"hr"},
         "m20": {"hr", "finance"}}

# negatives: kind and what was grepped (same probe keys as blind6's checker understands)
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["Claims", "claim", "претензи", "damaged", "lost parcel", "повреждённ",
                             "утерянн"]}),
    "m38": ("a", {"forbid": ["Орлов", "Orlov", "Татьян", "Tatiana", "Tatyana"]}),
    "m39": ("a", {"forbid": ["ERR_4302", "4302"]}),
    # (b) attribute never given for a real entity
    "m40": ("b", {"line_regex": ("кэш", r"\d+\s*(ГБ|GB|МБ|MB|гигабайт|мегабайт)"),
                  "forbid": ["гигабайт", "мегабайт", "gigabyte", "megabyte", "размер кэша", "объём кэша",
                             "cache size", "max_cache"]}),
    "m41": ("b", {"line_pairs": ("Payments Gateway", ["p95", "latency", "задержк", "latency_"]),
                  "line_regex": ("payments-gateway", r"(latency|p95)"),
                  "forbid": ["Payments Gateway p95", "gateway's p95", "gateway latency", "задержка шлюза"]}),
    "m42": ("b", {"line_pairs": ("уведомлен", ["python", "написан", "язык", "golang", "java"]),
                  "forbid": ["Golang", "Kotlin", "Rust", "Node.js", "TypeScript", "Elixir", "Java"]}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/performance-review-policy.md", "answer": "evidence, not adjectives"}),
    "m44": ("c", {"doc": "finance/budget-fy2026.md", "answer": "7.6"}),
    "m45": ("c", {"doc": "finance/budget-fy2026.md", "answer": "12 June 2025"}),
    # (d) false premise / period not covered
    "m46": ("d", {"forbid": ["timeout was raised", "raised the delivery timeout", "timeout was increased",
                             "таймаут доставки увеличен", "увеличили таймаут", "таймаут увеличен",
                             "120 с", "120 seconds", "90 с"],
                  "require": ("incidents/2025-08-webhook-backlog.md", "Таймаут доставки снижен до 10 с")}),
    "m47": ("d", {"line_pairs": ("2024", ["SMS", "уведомлен", "Tellwave", "Notification", "дедуп", "dedup"]),
                  "forbid": ["INC-2024-0", "INC-2024-2", "INC-2024-3", "INC-2024-12", "INC-2024-118"],
                  "require": ("incidents/2025-06-duplicate-sms.md", "3 июня 2025 г.")}),
    "m48": ("d", {"forbid": ["с 7 дней до 24 часов", "from 7 days to 24 hours", "сократили TTL",
                             "сократили время жизни", "TTL сокращ", "reduced the cache TTL",
                             "lowered the cache TTL", "shortened the cache"],
                  "require": ("services/route-optimizer.md", "до апреля 2025 г. было 24 часа")}),
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
