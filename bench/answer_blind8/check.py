"""Gold check for bench/answer_blind8/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind8/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl.

The checks themselves are blind6's, run as blind7 runs them: bench/answer_blind7/check.py is loaded
from its file path (importlib, not edited), its globals are replaced by this set's question file,
make-up (question language per qid, extra groups per multi-hop qid) and negative probes, and its
main() loads bench/answer_blind6/check.py and runs blind6's main() with them. Everything else (qid
order, routes, schema, ACLs, answer and alias placement, hops, negatives' kinds and probes,
cross-lingual listing, the printed counts and "errors: N") is blind6's code unchanged.
"""
import importlib.util
import os
import sys

BLIND7 = os.path.join("bench", "answer_blind7", "check.py")
QFILE = "bench/answer_blind8/questions.jsonl"

# expected question language per qid: the same layout as blind6 and blind7 (these qids are English)
EN = {"m01", "m03", "m05", "m07", "m10", "m12", "m13", "m15", "m17", "m19", "m22", "m23",
      "m25", "m26", "m27", "m28", "m29", "m30", "m37", "m39", "m41", "m43", "m45", "m46"}

# expected extra groups per multi-hop qid (all others: exactly public + staff)
EXTRA = {"m06": {"finance"}, "m11": {"finance"}, "m13": {"finance"},
         "m01": {"hr"}, "m14": {"hr"}, "m15": {"hr"}, "m21": {"hr"},
         "m20": {"hr", "finance"}}

# negatives: kind and what was grepped (same probe keys as blind6's checker understands)
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["Dock Scheduler", "dock", "loading slot", "докинг", "погрузочн"]}),
    "m38": ("a", {"forbid": ["Смирнов", "Smirnov", "Елена", "Elena", "Yelena"]}),
    "m39": ("a", {"forbid": ["ERR_5120", "5120"]}),
    # (b) attribute never given for a real entity
    "m40": ("b", {"line_pairs": ("Москв", ["телефон", "тел.", "phone", "+7"]),
                  "forbid": ["+7 ", "+7(", "+7 (", "телефон офиса", "тел.:", "Телефон:", "Phone:"]}),
    "m41": ("b", {"line_pairs": ("ledger", ["sql", "database", "db", "база", "mongo", "redis", "cassandra"]),
                  "forbid": ["PostgreSQL", "Postgres", "MySQL", "MongoDB", "Cassandra", "Redis", "DynamoDB",
                             "database", "база данных", "СУБД"]}),
    "m42": ("b", {"line_regex": ("Python", r"\d"),
                  "forbid": ["Python 3", "Python 2", "python3", "версия Python", "версии Python",
                             "Python version"]}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/performance-review-policy.md", "answer": "about 60%"}),
    "m44": ("c", {"doc": "finance/budget-fy2026.md", "answer": "35.2"}),
    "m45": ("c", {"doc": "finance/vendor-spend-2025.md", "answer": "2027-01-31"}),
    # (d) false premise / period not covered
    "m46": ("d", {"line_pairs": ("Route Optimizer", ["tier-1", "tier 1"]),
                  "line_regex": ("Оптимизатор", r"tier[- ]?1"),
                  "forbid": ["promoted to tier 1", "moved to tier 1", "moved to tier-1", "now tier 1",
                             "переведён в tier-1", "перевели в tier-1", "стал tier-1"],
                  "require": ("services/route-optimizer.md", "Сервис относится к tier-2")}),
    "m47": ("d", {"line_pairs": ("2023", ["Payments Gateway", "Платёжн", "ERR_11", "charge", "списан",
                                          "инцидент", "incident"]),
                  "forbid": ["INC-2023", "INC-2022"],
                  "require": ("incidents/2025-01-payments-config-drift.md", "27 January 2025")}),
    "m48": ("d", {"forbid": ["без ограничения скорости", "отменили лимит", "лимит отменён", "лимит отменен",
                             "sms_rate_limit_per_min: 0", "no SMS rate limit", "removed the SMS limit",
                             "SMS limit was removed"],
                  "require": ("services/notification-service.md", "лимит введён в июне 2025 г.")}),
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
