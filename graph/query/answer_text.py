"""The words a corpus-wide answer says around its themes, in the question's language: a Russian
question gets a Russian header, as its themes' summaries are Russian when the corpus says them so.
Kept together so the set reads and translates as one."""
from __future__ import annotations

from core.text.language import detect_language

_TEXTS = {
    "no_level": {
        "english": "No graph is available for your access groups, so this corpus-wide question cannot be answered. "
                   "Ask an operator to build one for your level (`crossroads graph build`).",
        "russian": "Для ваших групп доступа нет графа, поэтому на этот вопрос по всему корпусу ответить нельзя. "
                   "Попросите администратора построить граф для вашего уровня (`crossroads graph build`).",
    },
    "no_answer": {
        "english": "No community report in the corpus addresses this question.",
        "russian": "Ни один отчёт о сообществах корпуса не касается этого вопроса.",
    },
    "scope_header": {
        "english": "Offline answer (extractive, no LLM): the themes that recur across the documents this question "
                   "is about, each named by its key phrases.",
        "russian": "Офлайн-ответ (извлечён из текста, без LLM): темы, которые повторяются в документах, "
                   "о которых вопрос; каждая названа своими ключевыми фразами.",
    },
    "community_header": {
        "english": "Offline answer (extractive, no LLM): the themes of the corpus's community reports, "
                   "each named by its distinctive key phrases.",
        "russian": "Офлайн-ответ (извлечён из текста, без LLM): темы отчётов о сообществах корпуса; "
                   "каждая названа своими отличительными ключевыми фразами.",
    },
    "outline_label": {
        "english": "sections these documents share",
        "russian": "разделы, общие для этих документов",
    },
    "outline_count": {"english": "{n} of {total}", "russian": "{n} из {total}"},
    "points_header": {
        "english": "Offline answer (extractive, no LLM): the most relevant points across the corpus's community "
                   "reports.",
        "russian": "Офлайн-ответ (извлечён из текста, без LLM): самое относящееся к вопросу из отчётов о "
                   "сообществах корпуса.",
    },
}


def say(what: str, question: str) -> str:
    """The text `what` in the question's language (English for any language but Russian)."""
    texts = _TEXTS[what]
    return texts.get(detect_language(question), texts["english"])
