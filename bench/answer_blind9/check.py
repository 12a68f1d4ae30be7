"""Gold check for bench/answer_blind9/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind9/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl.

The checks themselves are blind6's, run as blind7 runs them (and as blind8 reuses them):
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
QFILE = "bench/answer_blind9/questions.jsonl"

# expected question language per qid: the same layout as blind6, blind7 and blind8 (these qids are English)
EN = {"m01", "m03", "m05", "m07", "m10", "m12", "m13", "m15", "m17", "m19", "m22", "m23",
      "m25", "m26", "m27", "m28", "m29", "m30", "m37", "m39", "m41", "m43", "m45", "m46"}

# expected extra groups per multi-hop qid (all others: exactly public + staff)
EXTRA = {"m05": {"finance"}, "m06": {"finance"}, "m10": {"finance"}, "m11": {"finance"}, "m15": {"finance"},
         "m01": {"hr"}, "m08": {"hr"}, "m09": {"hr"}, "m13": {"hr"}, "m19": {"hr"}, "m20": {"hr"}}

# negatives: kind and what was grepped (same probe keys as blind6's checker understands)
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["Freight Quote", "Quote Service", "quoting", "price quote", "котировк",
                             "расчёт стоимости перевозки"]}),
    "m38": ("a", {"forbid": ["Кузнецов", "Kuznetsov", "Алексей", "Alexei", "Aleksei", "Alexey"]}),
    "m39": ("a", {"forbid": ["ERR_1130", "1130"]}),
    # (b) attribute never given for a real entity
    "m40": ("b", {"doc_forbid": ("offices/yekaterinburg.md", ["работает с", "часы работы", "открыт с", "по будням",
                                                             "8:00", "9:00", "18:00", "19:00", "20:00"]),
                  "line_regex": ("Екатеринбург", r"\d{1,2}:\d{2}"),
                  "forbid": ["офис в Екатеринбурге открыт", "Yekaterinburg office is open", "Yekaterinburg office hours"]}),
    "m41": ("b", {"forbid": ["VAT number", "VAT ID", "VAT-ID", "VAT no", "USt-Id", "HRB ", "Handelsregister",
                             "registration number", "tax number", "tax ID", "ИНН", "ОГРН", "КПП"]}),
    "m42": ("b", {"line_regex": ("памят", r"\d+\s*(ГБ|Гб|GB|GiB|Gi|МБ|Мб|MB|MiB|Mi)\b"),
                  "forbid": ["memory_limit", "memory limit of", "лимит памяти —", "лимит памяти:", "limits:",
                             "memory:"]}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/performance-review-policy.md", "answer": "about 12%"}),
    "m44": ("c", {"doc": "finance/q2-2025-report.md", "answer": "2.8 млн €"}),
    "m45": ("c", {"doc": "finance/budget-fy2026.md", "answer": "18.6"}),
    # (d) false premise / period not covered
    "m46": ("d", {"line_pairs": ("Kevin Marsh", ["team lead", "lead of", "leads the", "руководител", "took over",
                                                 "took charge"]),
                  "forbid": ["Team lead:** Kevin", "led by Kevin Marsh"],
                  "require": ("teams/billing.md", "**Team lead:** Marcus Oyelaran")}),
    "m47": ("d", {"line_regex": ("GeoMesh", r"2024"),
                  "forbid": ["INC-2024-0", "INC-2024-2", "INC-2024-3", "INC-2024-04"],
                  "require": ("incidents/2025-04-geomesh-outage.md", "9 April 2025")}),
    "m48": ("d", {"line_pairs": ("SEPA", ["switched off in", "no longer", "stopped", "перестал", "отключ", "отказал"]),
                  "forbid": ["sepa_enabled: false   # eu", "SEPA was disabled in eu-central", "SEPA is no longer"],
                  "require": ("services/payments-gateway.md", "SEPA is EU only")}),
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
