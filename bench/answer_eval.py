"""`make eval-answers`: the offline answer baseline an LLM must beat, on the dev split, per route.

multihop  - the gold answer or an alias appears in the answer; single search (local route) vs the
            agentic route, same run;
xquad_ru  - an answer span appears in the answer (local route);
fixtures  - the golden questions of fixtures/questions.jsonl on the `demo` tenant (`make demo`), each
            on its own route and with its own groups: the `answer` substring for local and multihop
            questions, "no answer" for the negatives, and for global questions with `themes` the
            share of the expected themes the answer names;
blind     - `make eval-answers-blind`: the same over bench/answer_blind/questions.jsonl, questions on the
            same corpus written by someone who read only the corpus, never the system's code or answers
            (its README); run once per change that claims to generalise, never tuned to;
blind_xl  - the same over bench/answer_blind_xl/questions.jsonl: questions asked in the other language
            than the only documents that answer them (English on Russian pages and the reverse), with
            same-language controls and negatives, written blind as `blind` was;
blind_xl2 - held out: 40 more such questions and 6 negatives, run only to report a change's result
            (bench/answer_blind_xl2/README.md);
blind_mh  - 24 multi-hop questions (chains of 2-4 documents, two-part questions, comparisons), most
            crossing languages, written blind as `blind` was: the development half of 48;
blind_mh2 - held out: the other 24 (bench/answer_blind_mh/README.md says how they were split).
blind3    - held out: 24 multi-hop, 10 global and 6 negative questions written blind in session 21
            (bench/answer_blind3/README.md), run only to report a change's result, verdicts only.
blind4    - held out: 24 multi-hop, 12 local and 12 negative questions (four kinds, three of them
            answered only in documents the asker cannot read), written blind for issue 39 on
            2026-12-05 (bench/answer_blind4/README.md); verdicts only.
blind5    - held out: the same make-up as blind4, written blind on 2026-12-05 before this session's answer changes
            (bench/answer_blind5/README.md); verdicts only.
blind6    - held out: the same make-up again, written blind on 2026-12-05 (sixth session) before that
            session's changes (bench/answer_blind6/README.md); verdicts only.
blind7    - held out: the same make-up again (every multi-hop chain crosses languages), written blind in
            the seventh session of 2026-12-05, which changed no answer; kept unrun for the next change
            (bench/answer_blind7/README.md); verdicts only.
blind8    - held out: blind7's make-up again, written blind in the second session of 2026-12-06, which
            changed no answer; kept unrun for the next change (bench/answer_blind8/README.md); verdicts only.
blind9    - held out: blind8's make-up again, written blind in the sixth session of 2026-12-06 after that
            session's answer changes and run once on them and on the answers before them
            (bench/answer_blind9/README.md); verdicts only.
blind10   - held out: blind9's make-up again, written blind at the start of the tenth session of 2026-12-06,
            before that session's answer changes (bench/answer_blind10/README.md); verdicts only.
blind11, blind12, blind13 - held out: blind10's make-up again, written blind in the seventeenth (before its
            judge probe), eighteenth (no answer changed) and twentieth (before its judge probe) sessions of
            2026-12-07 (their READMEs); verdicts only.
demo_dev  - a development set in blind9's make-up (24 multi-hop, 12 local, 12 negatives over the demo corpus),
            written in the eighth session of 2026-12-06 by a helper who read only the corpus and the
            earlier sets' questions (bench/answer_demo_dev/README.md): the local and multi-hop questions of
            the held-out blind sets' kind, to study their failures on; looked at freely.
unseen_xq_dev, unseen_xq_test - new Russian questions over xquad_ru's own paragraphs (80 answerable, 20
            that no paragraph answers), written for the project by someone who read only that corpus
            (bench/answer_unseen_xq/README.md), on eval_xquad_ru's tenant: the odd-numbered half is for
            development, the even-numbered half held out;
unseen_mh_dev, unseen_mh_test - the same for 60 new multi-hop questions over multihop's paragraphs
            (bench/answer_unseen_mh/README.md), on eval_multihop's tenant. With the dev sets these
            give a dev-to-unseen gap measured here.
unseen_xlmh_dev, unseen_xlmh_test - 64 multi-hop questions (48 answerable, 16 negatives) over the four xl
            corpora, half of them across languages, written blind (bench/answer_blind_xlmh/README.md):
            multi-hop on corpora other than the demo one, on xl_written's tenant.
written   - bench/reader_data/questions.jsonl: 44 dev questions (12 negatives) on the fixtures corpus,
            written for the learned reader (its README); a dev set, looked at freely.
xl_dev    - bench/answer_xl_dev/questions.jsonl: 40 questions asked in the other language than the only
            document that answers them and 8 same-language controls (its README); a dev set, looked at freely.
xl_written - bench/answer_xl_written: 384 questions asked in the other language than the one document that
            answers them, over four corpora of 12 documents each, all written for the project by helpers who
            read no other file of it (its README), its negatives (questions naming what the corpora hold
            and asking what they never state; right when withheld), and questions in the documents' own
            language, answerable and not (`xl_written_same`); not run by default.
The other dev sets have no short gold answers (anthropic_docs' are paragraphs, podcast's none).

Every answer's confidence is kept, so the no-answer threshold (answers/units.MIN_CONFIDENCE, a
fixed majority rule) is reported leave-one-dataset-out: for each dataset, the share of its right
answers the threshold withholds, next to the threshold the other datasets would pick (the highest
that withholds at most 5% of their right answers).

Uses the tenants `make eval` indexed (eval_multihop, eval_xquad_ru; group `public`). Answers are
offline (extractive) unless --llm is given and ANTHROPIC_API_KEY is set.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

from bench.common import SHARED_DATA
from answers.units import MIN_CONFIDENCE
from core.database import open_database
from core.settings import Settings
from router.service import QuestionRouter
from evaluation.datasets import load_dataset
from evaluation.runner import eval_tenant, index_dataset
from graph import store as graph_store

GROUPS = ["public"]
ROOT = Path(__file__).resolve().parent.parent
# the sets kept as datasets (a corpus and its questions), each asked of its own eval tenant; the project's
# own is indexed here when asked for (a sync: unchanged documents cost nothing)
DATASETS = {"multihop": SHARED_DATA / "multihop", "xquad_ru": SHARED_DATA / "xquad_ru",
            "xl_written": ROOT / "bench" / "answer_xl_written"}


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower().replace("ё", "е")).strip()


SHORT_GOLD = 3  # characters: a gold this short ("no", "11") must stand as a word ("Nantong", "2011" hold none)


def contains_answer(answer: str, golds: list[str]) -> bool:
    got = normalise(answer)
    return any(g and (normalise(g) in got if len(normalise(g)) > SHORT_GOLD
                      else re.search(rf"(?<!\w){re.escape(normalise(g))}(?!\w)", got))
               for g in golds)


# where an offline answer's head ends: a chain's label, or the first citation of a quoted answer
_HEAD_END = re.compile(r"\s(?:Chain|Цепочка):|\[\d+\]")


def answer_head(answer: str) -> str:
    """What a reader takes for the answer itself: a chain's end ("Hannah Vogt; Berlin office"), or the
    first quoted sentence with its citation. A gold found only further on, in a supporting sentence, is
    right by the lenient score and wrong by this one (the multi-hop answers quote every hop)."""
    m = _HEAD_END.search(answer)
    return answer[:m.end() if m and m.group().startswith("[") else m.start()] if m else answer


def _raw_queries(name: str) -> list[dict]:
    with (DATASETS[name] / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run(router: QuestionRouter, name: str, routes: list[str], golds_of, limit: int | None) -> dict:
    queries = _raw_queries(name)[:limit]
    tenant = eval_tenant(load_dataset(DATASETS[name]))
    out: dict = {}
    for route in routes:
        asked = [(q["qid"], q["question"], golds_of(q), route) for q in queries]
        out[route] = _score(router, name, tenant, [(a, GROUPS) for a in asked])
    return out


def dataset_questions(name: str, pattern: str) -> list[dict]:
    """More questions kept beside a dataset's own (`negatives_*.jsonl`, `same_language_*.jsonl`); those whose
    `answers` is empty (or absent) no document of it answers."""
    return [json.loads(line) for path in sorted(DATASETS[name].glob(pattern))
            for line in path.open(encoding="utf-8") if line.strip()]


def run_beside(router: QuestionRouter, name: str, set_name: str, questions: list[dict], limit: int | None) -> dict:
    """Questions kept beside a dataset, on its tenant's local route: an answerable one scored as the golden
    sets' are (lenient and head), a negative right when withheld."""
    tenant = eval_tenant(load_dataset(DATASETS[name]))
    every = []
    for q in questions[:limit]:
        answer = router.ask(tenant, GROUPS, q["question"], route="local")
        golds = q.get("answers") or []
        score = float(_states(answer, golds)) if golds else float(answer.no_answer)
        head = float(_states(answer, golds, head=True)) if golds else None
        every.append({"set": set_name, "qid": q["qid"], "route": "local", "score": score, "head": head,
                      "question": q["question"], "answer": answer.answer, "no_answer": answer.no_answer,
                      "confidence": answer.trace.get("confidence"), "df": _lexeme_df(answer), "negative": not golds,
                      "withheld_right": bool(golds) and _withheld_right(answer, golds)})
    n = len(every) or 1
    accuracy = sum(e["score"] for e in every) / n
    heads = sum(e["score"] if e["head"] is None else e["head"] for e in every) / n
    print(f"{set_name:9} local     answer accuracy {accuracy:.3f} (n={len(every)})", file=sys.stderr, flush=True)
    return {"accuracy": round(accuracy, 3), "head": round(heads, 3), "n": len(every), "every": every}


def _score(router: QuestionRouter, name: str, tenant: str, asked: list[tuple[tuple, list[str]]]) -> dict:
    hits, heads, latencies, misses, right_confidences, every = 0, 0, [], [], [], []
    for (qid, question, golds, route), groups in asked:
        started = time.perf_counter()
        answer = router.ask(tenant, groups, question, route=route)
        latencies.append((time.perf_counter() - started) * 1000)
        confidence = answer.trace.get("confidence")
        head_right = _states(answer, golds, head=True)
        heads += head_right
        every.append({"set": name, "qid": qid, "route": route, "right": _states(answer, golds),
                      "head_right": head_right, "question": question, "gold": golds[0], "answer": answer.answer,
                      "confidence": confidence, "no_answer": answer.no_answer, "df": _lexeme_df(answer),
                      "withheld_right": _withheld_right(answer, golds)})
        if _states(answer, golds):
            hits += 1
            if confidence is not None:
                right_confidences.append(confidence)
        elif len(misses) < 5:
            misses.append({"qid": qid, "question": question, "gold": golds[0], "answer": answer.answer[:300]})
    n = len(asked)
    print(f"{name:9} {route:9} answer accuracy {hits / n:.3f} (n={n})", file=sys.stderr, flush=True)
    return {"accuracy": round(hits / n, 3), "head": round(heads / n, 3), "n": n, "latency_p50_ms": round(statistics.median(latencies)),
            "latency_p95_ms": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))]), "misses": misses,
            "right_confidences": right_confidences, "every": every}


def _lexeme_df(answer) -> dict | None:
    """The readable documents' frequency of each question lexeme, as the BM25 leg traced it (for reading
    misses and negatives in --dump)."""
    return answer.trace.get("search", {}).get("bm25", {}).get("df")


GOLDEN_SETS = {"fixtures": ROOT / "fixtures" / "questions.jsonl",
               "blind": ROOT / "bench" / "answer_blind" / "questions.jsonl",
               "blind_xl": ROOT / "bench" / "answer_blind_xl" / "questions.jsonl",
               "blind_xl2": ROOT / "bench" / "answer_blind_xl2" / "questions.jsonl",
               "blind_mh": ROOT / "bench" / "answer_blind_mh" / "questions.jsonl",
               "blind_mh2": ROOT / "bench" / "answer_blind_mh2" / "questions.jsonl",
               "blind3": ROOT / "bench" / "answer_blind3" / "questions.jsonl",
               "blind4": ROOT / "bench" / "answer_blind4" / "questions.jsonl",
               "blind5": ROOT / "bench" / "answer_blind5" / "questions.jsonl",
               "blind6": ROOT / "bench" / "answer_blind6" / "questions.jsonl",
               "blind7": ROOT / "bench" / "answer_blind7" / "questions.jsonl",
               "blind8": ROOT / "bench" / "answer_blind8" / "questions.jsonl",
               "blind9": ROOT / "bench" / "answer_blind9" / "questions.jsonl",
               "blind10": ROOT / "bench" / "answer_blind10" / "questions.jsonl",
               "blind11": ROOT / "bench" / "answer_blind11" / "questions.jsonl",
               "blind12": ROOT / "bench" / "answer_blind12" / "questions.jsonl",
               "blind13": ROOT / "bench" / "answer_blind13" / "questions.jsonl",
               "demo_dev": ROOT / "bench" / "answer_demo_dev" / "questions.jsonl",
               "written": ROOT / "bench" / "reader_data" / "questions.jsonl",
               "xl_dev": ROOT / "bench" / "answer_xl_dev" / "questions.jsonl"}
# Questions written for the project over two dev corpora (their READMEs say by whom and how), asked of
# those corpora's own tenants: new questions of the kinds the dev sets hold, a proxy for the unseen
# questions of the same sources. Each is split before any answer was read: the odd-numbered questions
# are a development half, the even-numbered ones are held out (verdicts only).
XL_WRITTEN_TENANT = f"eval_{DATASETS['xl_written'].name}"  # evaluation/runner.eval_tenant's; indexed on demand
UNSEEN_SETS = {"unseen_xq": (ROOT / "bench" / "answer_unseen_xq" / "questions.jsonl", "eval_xquad_ru"),
               "unseen_mh": (ROOT / "bench" / "answer_unseen_mh" / "questions.jsonl", "eval_multihop"),
               "unseen_xlmh": (ROOT / "bench" / "answer_blind_xlmh" / "questions.jsonl", XL_WRITTEN_TENANT)}
GOLDEN_SETS.update({f"{name}_{half}": path for name, (path, _) in UNSEEN_SETS.items() for half in ("dev", "test")})
SET_TENANTS = {f"{name}_{half}": tenant for name, (_, tenant) in UNSEEN_SETS.items() for half in ("dev", "test")}


def tenants_without_graph(db, tenants: list[str]) -> list[str]:
    """The tenants (of those the multi-hop or global route will ask) that hold no graph: their rows would be
    measured without the graph leg (the multihop dataset's multi-hop row: 0.56 instead of 0.60), not refused."""
    with db.connection() as conn:
        return [t for t in dict.fromkeys(tenants) if not graph_store.community_counts(conn, t)]


def golden_questions(name: str) -> list[dict]:
    """A golden set's questions; an unseen set's half by its qids' parity (odd: dev, even: test)."""
    questions = [json.loads(line) for line in GOLDEN_SETS[name].open(encoding="utf-8") if line.strip()]
    if name in SET_TENANTS:
        odd = name.endswith("_dev")
        questions = [q for q in questions if (int(re.sub(r"\D", "", q["qid"])) % 2 == 1) == odd]
    return questions


def run_golden(router: QuestionRouter, name: str, tenant: str = "demo", routes=("local", "multihop", "global")) -> dict:
    """A golden set's questions (GOLDEN_SETS), each on its route with its groups; global ones scored by
    expected themes. `tenant` holds the fixtures corpus; an unseen set is asked of its own (SET_TENANTS)."""
    questions = golden_questions(name)
    tenant = SET_TENANTS.get(name, tenant)
    out: dict = {}
    for route in routes:
        right, heads, total, misses, every = 0.0, 0.0, 0, [], []
        for q in (q for q in questions if q["route"] == route):
            answer = router.ask(tenant, q["groups"], q["question"], route=route)
            head = None
            if "answer" in q:
                golds = [q["answer"], *q.get("aliases", [])]
                ok = float(_states(answer, golds))
                head = float(_states(answer, golds, head=True))
            elif "themes" in q:
                ok = theme_share(answer.answer, q["themes"])
            elif not q["expected_docs"]:
                ok = float(answer.no_answer)
            else:
                continue
            right, heads, total = right + ok, heads + (ok if head is None else head), total + 1
            every.append({"set": name, "qid": q["qid"], "route": route, "score": ok, "head": head,
                          "question": q["question"], "answer": answer.answer, "no_answer": answer.no_answer,
                          "confidence": answer.trace.get("confidence"), "df": _lexeme_df(answer),
                          "negative": not q.get("expected_docs") and "answer" not in q and "themes" not in q,
                          "withheld_right": _withheld_right(answer, [q["answer"], *q.get("aliases", [])])
                          if "answer" in q else False})
            if ok < 1 and len(misses) < 5:
                misses.append({"qid": q["qid"], "question": q["question"], "score": round(ok, 2),
                               "answer": answer.answer[:300]})
        if not total:  # a set without questions of this route (the cross-language sets are all local)
            continue
        out[route] = {"accuracy": round(right / total, 3), "head": round(heads / total, 3), "n": total,
                      "misses": misses, "every": every}
        print(f"{name:9} {route:9} answer accuracy {out[route]['accuracy']} (n={total})", file=sys.stderr, flush=True)
    return out


def _states(answer, golds: list[str], head: bool = False) -> bool:
    """Whether the answer states a gold (`head`: in what a reader takes for the answer itself). A no-answer
    states nothing, whatever the titles of the closest passages it lists happen to hold."""
    return not answer.no_answer and contains_answer(answer_head(answer.answer) if head else answer.answer, golds)


def _withheld_right(answer, golds: list[str]) -> bool:
    """The answer was withheld (below the no-answer threshold) though what it would have said holds the gold."""
    return bool(answer.no_answer and answer.trace.get("withheld") and contains_answer(answer.trace["withheld"], golds))


def abstention_report(every: list[dict]) -> dict:
    """Per set: right answers withheld (what the answer would have said held the gold, but it stood
    below the threshold) of the right ones, and negatives withheld."""
    out: dict = {}
    for e in every:
        if e["route"] == "global":  # themes named, no single right answer
            continue
        r = out.setdefault(e["set"], {"right": 0, "right_withheld": 0, "negatives": 0, "negatives_withheld": 0})
        shown_right = e.get("right", e.get("score") == 1.0 and not e.get("negative")) and not e["no_answer"]
        if e.get("negative"):
            r["negatives"] += 1
            r["negatives_withheld"] += bool(e["no_answer"])
        elif shown_right or e["withheld_right"]:
            r["right"] += 1
            r["right_withheld"] += bool(e["withheld_right"])
    return out


def theme_share(answer: str, themes: list[dict]) -> float:
    """The share of expected themes the answer names (any of each theme's words)."""
    text = normalise(answer)
    return sum(any(normalise(w) in text for w in t["any_of"]) for t in themes) / len(themes)


def threshold_report(results: dict, current: float, keep: float = 0.95) -> dict:
    """Leave-one-dataset-out: per dataset, the share of right answers `current` withholds, and the
    threshold the other datasets pick (the highest withholding at most 1 - keep of their right answers)."""
    right = {name: [c for r in by_route.values() for c in r.get("right_confidences", [])]
             for name, by_route in results.items()}
    out = {}
    for name, confs in right.items():
        others = sorted(c for other, cs in right.items() if other != name for c in cs)
        picked = others[int((1 - keep) * len(others))] if others else None
        out[name] = {"withheld_at_current": round(sum(c < current for c in confs) / len(confs), 3) if confs else None,
                     "threshold_from_others": round(picked, 3) if picked is not None else None,
                     "withheld_at_others": (round(sum(c < picked for c in confs) / len(confs), 3)
                                            if confs and picked is not None else None)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="first N questions per dataset")
    parser.add_argument("--llm", action="store_true", help="answer with the LLM (ANTHROPIC_API_KEY)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sets", default="multihop,xquad_ru,fixtures,written,xl_dev,unseen_xq_dev,unseen_mh_dev,unseen_xlmh_dev",
                        help="comma-separated: which of multihop, xquad_ru, xl_written and " + ", ".join(GOLDEN_SETS)
                        + " to run")
    parser.add_argument("--routes", default="local,multihop,global",
                        help="comma-separated: only these routes (a change to one route's answer needs only its own)")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write every question's answer and verdict to this JSON file (for reading misses)")
    parser.add_argument("--fixtures-tenant", default="demo",
                        help="tenant holding the fixtures corpus and its graph (`make demo`); '' skips them")
    args = parser.parse_args()
    sets = set(args.sets.split(","))
    routes = [r for r in ("local", "multihop", "global") if r in args.routes.split(",")]
    # the xl corpora ship in bench/, the other unseen sets' corpora are the shared dev data
    on_xl = {name for name, tenant in SET_TENANTS.items() if tenant == XL_WRITTEN_TENANT}
    needs_shared = {"multihop", "xquad_ru", *SET_TENANTS} - on_xl
    if not SHARED_DATA.exists() and sets & needs_shared:
        print(f"{SHARED_DATA} is absent: multihop, xquad_ru and the unseen sets are skipped", file=sys.stderr)
        sets -= needs_shared
    settings = Settings()
    db = open_database(settings)
    graph_routes = {"multihop", "global"} & set(routes)
    asked = ([eval_tenant(load_dataset(DATASETS["multihop"]))] if "multihop" in sets and "multihop" in routes else [])
    asked += [SET_TENANTS.get(name, args.fixtures_tenant) for name in GOLDEN_SETS
              if name in sets and args.fixtures_tenant and graph_routes]
    if missing := tenants_without_graph(db, asked):
        print(f"warning: no graph in {', '.join(missing)}: the multi-hop and global rows are measured without the "
              f"graph leg; build it first (`crossroads graph build --tenant {missing[0]}`)", file=sys.stderr)
    try:
        with QuestionRouter(db, settings, use_llm=None if args.llm else False) as router:
            results = {}
            if "multihop" in sets:
                results["multihop"] = run(router, "multihop", [r for r in ("local", "multihop") if r in routes],
                                          lambda q: [q["answer"], *q.get("aliases", [])], args.limit)
            if "xquad_ru" in sets and "local" in routes:
                results["xquad_ru"] = run(router, "xquad_ru", ["local"], lambda q: q["answers"], args.limit)
            if ("xl_written" in sets and "local" in routes) or sets & on_xl:
                index_dataset(db, router.embedder, settings, load_dataset(DATASETS["xl_written"]))
            if "xl_written" in sets and "local" in routes:
                results["xl_written"] = run(router, "xl_written", ["local"], lambda q: q["answers"], args.limit)
                for set_name, pattern in (("xl_written_negatives", "negatives_*.jsonl"),
                                          ("xl_written_same", "same_language_*.jsonl")):
                    if beside := dataset_questions("xl_written", pattern):
                        results[set_name] = {"local": run_beside(router, "xl_written", set_name, beside, args.limit)}
            golden = {name: run_golden(router, name, args.fixtures_tenant, routes) for name in GOLDEN_SETS
                      if args.fixtures_tenant and name in sets}
    finally:
        db.close()
    thresholds = threshold_report(results, MIN_CONFIDENCE)
    every = [e for by_route in [*results.values(), *golden.values()] for r in by_route.values()
             for e in r.pop("every", [])]
    abstention = abstention_report(every)
    if args.dump:
        args.dump.write_text(json.dumps(every, ensure_ascii=False, indent=1), encoding="utf-8")
    for by_route in results.values():
        for r in by_route.values():
            r.pop("right_confidences", None)
    if args.json:
        print(json.dumps({**results, **golden, "threshold": thresholds, "withheld": abstention}, ensure_ascii=False,
                         indent=1))
    else:
        for name, by_route in [*results.items(), *golden.items()]:
            for route, r in by_route.items():
                print(f"| {name} | {route} | {r['accuracy']} | {r['head']} | {r['n']} | {r.get('latency_p50_ms', '')} | "
                      f"{r.get('latency_p95_ms', '')} |")
        print(f"no-answer threshold {MIN_CONFIDENCE}, leave-one-dataset-out: {json.dumps(thresholds)}")
        print(f"withheld (right answers of those right before the threshold; negatives): {json.dumps(abstention)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
