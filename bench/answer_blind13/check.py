"""Gold check for bench/answer_blind13/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind13/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl. The checks are blind11's runner
(bench/answer_blind11/check.py `run`, loaded from its path): blind6's checks, as blind7 to blind12 run them,
with this set's question file, extra groups per multi-hop qid and negative probes.
"""
import importlib.util
import os
import sys

BLIND11 = os.path.join("bench", "answer_blind11", "check.py")
QFILE = "bench/answer_blind13/questions.jsonl"

# expected extra groups per multi-hop qid (all others: exactly public + staff)
EXTRA = {"m02": {"finance"}, "m05": {"finance"}, "m08": {"finance"}, "m09": {"finance"},
         "m01": {"hr"}, "m06": {"hr"}, "m07": {"hr"}, "m13": {"hr"}, "m14": {"hr"}, "m20": {"hr"}}

# negatives: kind and what was grepped (same probe keys as blind6's checker understands)
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["chatbot", "chat bot", "чат-бот", "чатбот", "virtual assistant", "виртуальн",
                             "language model", "языковая модель", "языковой модел"]}),
    "m38": ("a", {"forbid": ["Фёдоров", "Федоров", "Fedorov", "Fyodorov", "Михаил", "Mikhail"]}),
    "m39": ("a", {"forbid": ["ERR_7", "7204"]}),
    # (b) attribute never given for a real entity
    "m40": ("b", {"line_pairs": ("label", ["€", "$", "₽", "EUR", "USD", " cent", "цент", "евро", "руб"]),
                  "line_regex": ("этикет", r"\d[\d ,.]*\s*(€|₽|\$|евро|руб|EUR|USD)"),
                  "forbid": ["per label", "price of a label", "label fee is", "за этикетку", "за одну этикетку",
                             "стоимость этикетки"],
                  "require": ("handbook/company-overview.md", "pay-as-you-go label fees")}),
    "m41": ("b", {"line_regex": ("volume", r"\d+(\.\d+)?\s*%"),
                  "forbid": ["largest carrier", "biggest carrier", "крупнейший перевозчик", "крупнейшего перевозчика",
                             "share of our shipment", "share of shipments", "доля отправлений", "доля перевозчика"],
                  "require": ("services/carrier-connector.md", "Three carriers carry most of the volume")}),
    "m42": ("b", {"line_pairs": ("Webhook Relay", ["KB", "КБ", "MB", "МБ", "байт", "bytes", "размер", "size",
                                                  "payload"]),
                  "line_regex": ("вебхук", r"\d+\s*(KB|КБ|Кб|MB|МБ|Мб|байт)"),
                  "forbid": ["webhook payload", "payload size", "event size", "размер события", "размер тела события",
                             "размер вебхука"],
                  "require": ("teams/integrations.md", "delivers `shipment.*` events to customers' webhook endpoints")}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/performance-review-policy.md", "answer": "up to 5%"}),
    "m44": ("c", {"doc": "finance/budget-fy2026.md", "answer": "+6%"}),
    "m45": ("c", {"doc": "hr/salary-bands-2025.md", "answer": "before bonus"}),
    # (d) false premise / period not covered
    "m46": ("d", {"line_pairs": ("обзор", ["отмен", "прекрат", "больше не провод", "заменил", "discontinu", "stopped",
                                          "replaced"]),
                  "line_regex": ("monthly", r"(discontinu|stopp|cancel|replac|no longer)"),
                  "forbid": ["stopped holding", "no longer hold", "monthly review was discontinued",
                             "monthly incident review was", "больше не проводим", "отменили ежемесячный",
                             "ежемесячный обзор отменён", "ежемесячный обзор отменили"],
                  "require": ("handbook/incident-review-process.md",
                              "В первый вторник месяца Илья Морозов проводит обзор")}),
    "m47": ("d", {"line_regex": ("Сервис уведомлений", r"(август\w*|August|Aug\.?\s)"),
                  "line_pairs": ("август", ["SMS", "уведомлени", "Tellwave"]),
                  "forbid": ["задержал отправку SMS", "задержка SMS", "задержки SMS", "SMS were delayed", "delayed SMS",
                             "SMS delayed", "August 2025 SMS"],
                  "require": ("incidents/2025-08-webhook-backlog.md", "Webhook Relay доставлял события")}),
    "m48": ("d", {"line_pairs": ("ERR_1107", ["raised", "increased", "подняли", "повысили", "увеличили", "raised to"]),
                  "forbid": ["raised to 10%", "increased to 10%", "подняли до 10%", "повысили до 10%",
                             "threshold was raised", "порог подняли"],
                  "require": ("services/payments-gateway.md", "err_1107_rate_page: 0.01")}),
}


def main():
    sys.dont_write_bytecode = True  # leave no __pycache__ beside the checkers
    spec = importlib.util.spec_from_file_location("answer_blind11_check", BLIND11)
    blind11 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blind11)
    return blind11.run(QFILE, EXTRA, NEG)


if __name__ == "__main__":
    sys.exit(main())
