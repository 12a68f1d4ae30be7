"""Evaluation datasets in the `../shared/data` formats.

A dataset folder holds `corpus.jsonl` (read by `vector.ingest.sources`, not here) and `queries.jsonl`
(`qid`, `question`, optional `answer` / `aliases` / `answers` / `qtype`). Labels come in one of two
forms, never both:
- `gold` in each query line: a list of doc ids (grade 1 each), or an object {doc_id: grade};
- `qrels.tsv` beside it: `qid<TAB>doc_id<TAB>grade`, an optional header line. Grade <= 0 rows are
  judged irrelevant: they are kept apart (`judged_irrelevant`), never in `grades`.
A folder with neither (e.g. podcast: open-ended global questions) loads with `labelled=False`.

Malformed input raises `DatasetError` naming the file and line: an evaluation on silently
half-read labels would report wrong numbers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

QUERIES = "queries.jsonl"
CORPUS = "corpus.jsonl"
QRELS = "qrels.tsv"


class DatasetError(ValueError):
    """A dataset file that cannot be read as documented; the message names file and line."""


@dataclass(frozen=True)
class EvalQuery:
    qid: str
    question: str
    grades: dict[str, int]  # relevant documents only (grade >= 1)
    # True for gold-list questions with 2+ gold documents: these need all their evidence, so
    # evidence recall applies. Graded qrels list every judged-relevant passage (up to hundreds),
    # not the evidence one answer needs, so they are never multi-gold.
    multi_gold: bool
    answers: list[str] = field(default_factory=list)
    qtype: str | None = None
    judged_irrelevant: frozenset[str] = frozenset()

    @property
    def relevant(self) -> set[str]:
        return set(self.grades)


@dataclass(frozen=True)
class Dataset:
    name: str
    corpus_path: Path
    queries: list[EvalQuery]
    labelled: bool
    label_source: str | None = None  # "gold", "qrels" or None

    @property
    def scored_queries(self) -> list[EvalQuery]:
        """Questions with at least one relevant document: the only ones retrieval metrics are
        defined for. BEIR subsets hold questions whose judgments are all 0 (or absent)."""
        return [q for q in self.queries if q.grades]

    @property
    def unjudged(self) -> list[str]:
        return [q.qid for q in self.queries if not q.grades]


def _id(value: object) -> str | None:
    """Ids may be JSON strings or integers; both compare as strings (as the corpus loader does)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (str, int)) and str(value).strip():
        return str(value).strip()
    return None


def _text_list(value: object, key: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise DatasetError(f"{where}: {key!r} must be a string or a list of strings")


def _gold(value: object, where: str) -> dict[str, int]:
    grades: dict[str, int] = {}
    if isinstance(value, list):
        for item in value:
            doc_id = _id(item)
            if doc_id is None:
                raise DatasetError(f"{where}: 'gold' holds {item!r}, which is not a document id")
            grades[doc_id] = 1
    elif isinstance(value, dict):
        for key, grade in value.items():
            if _id(key) is None or isinstance(grade, bool) or not isinstance(grade, int):
                raise DatasetError(f"{where}: 'gold' entry {key!r}: {grade!r} is not doc_id: integer grade")
            if grade > 0:
                grades[_id(key)] = grade
    else:
        raise DatasetError(f"{where}: 'gold' must be a list of document ids or an object of grades")
    if not grades:
        raise DatasetError(f"{where}: 'gold' names no relevant document")
    return grades


def _read_lines(path: Path) -> list[str]:
    try:
        # utf-8-sig: a BOM written by an editor is not part of the first id.
        return path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 (byte {exc.start})") from None


def _read_queries(path: Path) -> list[tuple[int, dict]]:
    rows, seen = [], {}
    for lineno, line in enumerate(_read_lines(path), start=1):
        where = f"{path}:{lineno}"
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: line is not a JSON object")
        qid = _id(record.get("qid"))
        if qid is None:
            raise DatasetError(f"{where}: missing 'qid'")
        if qid in seen:
            raise DatasetError(f"{where}: duplicate qid {qid!r} (first at line {seen[qid]})")
        seen[qid] = lineno
        question = record.get("question")
        if not isinstance(question, str) or not question.strip():
            raise DatasetError(f"{where}: 'question' of {qid!r} is missing or empty")
        record["qid"] = qid
        rows.append((lineno, record))
    return rows


def _read_qrels(path: Path, known_qids: set[str]) -> dict[str, dict[str, int]]:
    judged: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(_read_lines(path), start=1):
        where = f"{path}:{lineno}"
        if not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) != 3:
            raise DatasetError(f"{where}: expected 3 tab-separated fields (qid, doc_id, grade), got {len(fields)}")
        qid, doc_id, grade_text = (f.strip() for f in fields)
        try:
            grade = int(grade_text)
        except ValueError:
            if lineno == 1:  # a header line such as "qid doc_id grade" / "query-id corpus-id score"
                continue
            raise DatasetError(f"{where}: grade {grade_text!r} is not an integer") from None
        if not qid or not doc_id:
            raise DatasetError(f"{where}: empty qid or doc_id")
        if qid not in known_qids:
            raise DatasetError(f"{where}: qid {qid!r} is not in {QUERIES}")
        previous = judged.setdefault(qid, {}).get(doc_id)
        if previous is not None and previous != grade:
            raise DatasetError(
                f"{where}: {qid!r}/{doc_id!r} graded {grade}, but {previous} at line {first_line[(qid, doc_id)]}"
            )
        first_line.setdefault((qid, doc_id), lineno)
        judged[qid][doc_id] = grade
    return judged


def load_dataset(directory: Path | str) -> Dataset:
    directory = Path(directory)
    queries_path, corpus_path, qrels_path = directory / QUERIES, directory / CORPUS, directory / QRELS
    for required in (queries_path, corpus_path):
        if not required.is_file():
            raise DatasetError(f"{directory}: no {required.name}")
    rows = _read_queries(queries_path)
    with_gold = [lineno for lineno, r in rows if "gold" in r]

    judged: dict[str, dict[str, int]] = {}
    if qrels_path.is_file():
        if with_gold:
            raise DatasetError(f"{queries_path}:{with_gold[0]}: 'gold' in queries and a {QRELS} beside them; use one")
        judged = _read_qrels(qrels_path, {r["qid"] for _, r in rows})
        label_source = "qrels"
    elif with_gold:
        if len(with_gold) != len(rows):
            lineno = next(n for n, r in rows if "gold" not in r)
            raise DatasetError(f"{queries_path}:{lineno}: no 'gold', while other questions have it")
        label_source = "gold"
    else:
        label_source = None

    queries = []
    for lineno, record in rows:
        where = f"{queries_path}:{lineno}"
        if label_source == "gold":
            grades = _gold(record["gold"], where)
            irrelevant: frozenset[str] = frozenset()
            multi_gold = len(grades) > 1
        else:
            marks = judged.get(record["qid"], {})
            grades = {d: g for d, g in marks.items() if g > 0}
            irrelevant = frozenset(d for d, g in marks.items() if g <= 0)
            multi_gold = False
        answers: list[str] = []
        for key in ("answer", "aliases", "answers"):
            for text in _text_list(record.get(key), key, where):
                if text not in answers:
                    answers.append(text)
        qtype = record.get("qtype")
        if qtype is not None and not isinstance(qtype, str):
            raise DatasetError(f"{where}: 'qtype' must be a string")
        queries.append(EvalQuery(record["qid"], record["question"], grades, multi_gold, answers, qtype, irrelevant))
    return Dataset(directory.name, corpus_path, queries, label_source is not None, label_source)


def find_datasets(root: Path | str) -> list[Path]:
    """Dataset folders under `root` (those holding a queries file), sorted by name."""
    root = Path(root)
    return sorted(p for p in root.iterdir() if (p / QUERIES).is_file()) if root.is_dir() else []
