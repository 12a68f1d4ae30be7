"""Which answer rules earn their place (issue #39, step 6): each rule of the offline answer writers
neutralised in turn, and the dev answer sets answered again.

A rule here is a module-level regular expression or word list of `answers/` (its word classes from
answers/words/*.toml included, as the modules hold them), the global themes' own excepted (their
sets hold two questions). Neutralised, a regex matches nothing and a word list is empty; every module
holding the same object gets the neutral one, and the answer modules' caches are cleared. The
searches and embeddings are memoised across variants (vector/ and core/ read no answer rule), so a
variant costs only the answer writing. The baseline is answered twice, first and last: any answer
that differs between those two runs would show state leaking between variants, and is reported.

Each set is scored twice, lenient (the gold anywhere in the answer) and by the head (the gold in a
chain's end or the first quoted sentence): a change can move the gold from the head into a supporting
quote, which the lenient score alone does not see. A rule whose neutralisation lowers neither score
of any dev set is a candidate for deletion; the deletion itself is decided on the untouched sets (no
set may drop by more than 0.01 by either score), never on the dev sets alone.

    python -m bench.rule_ablation [--sets multihop,xquad_ru,fixtures,written,xl_dev,unseen_xq_dev,unseen_mh_dev]
        [--only NAME,...] [--together (groups: --only "A,B;C")] [--checks] [--baseline-only] [--dump F] [--json F]

`--checks` switches off, in place of the patterns, the writers' checks written as code (CHECKS).
"""
from __future__ import annotations

import argparse
import copy
import importlib
import json
import pkgutil
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import answers
from bench.answer_eval import GOLDEN_SETS, run, run_golden
from bench.common import SHARED_DATA
from core.database import open_database
from core.settings import Settings
from router.service import QuestionRouter

NEVER = re.compile(r"(?!)")
# The writers' checks that withhold an answer, written as code rather than as a pattern: with --checks each is
# switched off (it finds nothing) as its own variant, to see whether a learned part (the relation judge) now
# withholds what it did
CHECKS = ("answers.unit_scoring.Scorer.unsaid",  # the answer's page holds none of the words the question asks
          "answers.premise.unstated_numbers")  # a number of the question the answer's passage never writes
SKIPPED_PACKAGES = ("answers.themes", "answers.reader", "answers.types")  # own rules; model features; labels
MIN_WORDS = 3  # a collection of fewer strings is a set of labels, not a word list


@dataclass(frozen=True)
class Rule:
    name: str  # module.attribute where it is defined
    kind: str  # regex | words
    size: int  # pattern characters, or words


def answer_modules() -> list:
    found = []
    for info in pkgutil.walk_packages(answers.__path__, "answers."):
        if not info.name.startswith(SKIPPED_PACKAGES):
            found.append(importlib.import_module(info.name))
    return found


def _is_words(value) -> bool:
    return (isinstance(value, (frozenset, set, tuple, list)) and len(value) >= MIN_WORDS
            and all(isinstance(v, str) for v in value))


def find_rules(modules) -> dict[Rule, object]:
    """Each rule object once, named by the module whose source assigns it."""
    rules: dict[Rule, object] = {}
    seen: set[int] = set()
    for module in modules:
        source = Path(module.__file__).read_text(encoding="utf-8")
        for attr, value in sorted(vars(module).items()):
            if id(value) in seen or not re.search(rf"^{re.escape(attr)}\s*[:=]", source, re.M):
                continue
            if isinstance(value, re.Pattern):
                rule = Rule(f"{module.__name__}.{attr}", "regex", len(value.pattern))
            elif _is_words(value):
                rule = Rule(f"{module.__name__}.{attr}", "words", len(value))
            else:
                continue
            seen.add(id(value))
            rules[rule] = value
    return rules


def _replace(original, replacement) -> list[tuple[object, object]]:
    """Every module of the project holding `original` gets `replacement`, as an attribute or as a value of a
    module-level dict (`FORMS = {"email": EMAIL}`: code that reaches the rule only through the dict would
    otherwise keep it, and the rule would look dead); the places it was held, as (module or dict, attribute
    or key) (an empty frozenset or tuple is one shared object, so restoring goes by place, not by identity)."""
    places: list[tuple[object, object]] = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("answers", "router", "core", "graph", "vector")):
            continue
        for attr, value in list(vars(module).items()):
            if value is original:
                setattr(module, attr, replacement)
                places.append((module, attr))
            elif isinstance(value, dict):
                for key, held in list(value.items()):
                    if held is original:
                        value[key] = replacement
                        places.append((value, key))
            elif isinstance(value, type) and value.__module__ == name:  # a check written as a method
                for key, held in list(vars(value).items()):
                    if held is original:
                        setattr(value, key, replacement)
                        places.append((value, key))
    return places


def check_rules() -> dict[Rule, object]:
    """CHECKS as rules of their own kind, each the function or method that finds what withholds an answer."""
    return {Rule(name, "check", 0): _resolve(name) for name in CHECKS}


def _resolve(name: str):
    """The object a dotted name defines: the longest prefix that imports as a module, then attributes (a
    method as its class defines it, not bound)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for part in parts[cut:]:
            value = vars(value)[part] if isinstance(value, type) else getattr(value, part)
        return value
    raise ModuleNotFoundError(name)


def _finds_nothing(*args, **kwargs) -> tuple:
    return ()


def _neutral(rule: Rule, value):
    """A regex that matches nothing, an empty word list, a check that finds nothing."""
    if rule.kind == "regex":
        return NEVER
    return _finds_nothing if rule.kind == "check" else type(value)()


def _restore(places: list[tuple[object, object]], original) -> None:
    for holder, key in places:
        if isinstance(holder, dict):
            holder[key] = original
        else:
            setattr(holder, key, original)


def neutralise(variant) -> list[tuple[object, list]]:
    """Each (rule, value) of `variant` replaced by its neutral form wherever the code holds it: what `restore`
    takes back."""
    return [(value, _replace(value, _neutral(rule, value))) for rule, value in variant]


def restore(neutralised: list[tuple[object, list]]) -> None:
    for value, places in neutralised:
        _restore(places, value)


def _clear_caches(modules) -> None:
    for module in modules:
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def _memoised(obj, method: str) -> None:
    inner = getattr(obj, method)
    cache: dict = {}

    def call(*args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        if key not in cache:
            cache[key] = inner(*args, **kwargs)
        return copy.deepcopy(cache[key])

    setattr(obj, method, call)


def answer_sets(router: QuestionRouter, sets: set[str]) -> dict[tuple[str, str, str], tuple[str, float, float]]:
    """(set, route, qid) -> (answer, score, head score) for every question asked: the lenient score (the
    gold anywhere in the answer) and the head's (the gold in a chain's end or the first quoted sentence;
    a negative's and a global question's head score is its score)."""
    out: dict = {}
    results = {}
    if "multihop" in sets:
        results["multihop"] = run(router, "multihop", ["local", "multihop"],
                                  lambda q: [q["answer"], *q.get("aliases", [])], None)
    if "xquad_ru" in sets:
        results["xquad_ru"] = run(router, "xquad_ru", ["local"], lambda q: q["answers"], None)
    for name in GOLDEN_SETS:
        if name in sets:
            results[name] = run_golden(router, name, "demo", ("local", "multihop"))
    for by_route in results.values():
        for r in by_route.values():
            for e in r["every"]:
                score = float(e["right"]) if "right" in e else float(e["score"])
                head = float(e["head_right"]) if "head_right" in e else (score if e["head"] is None else e["head"])
                out[(e["set"], e["route"], e["qid"])] = (e["answer"], score, head)
    return out


def compare(base: dict, variant: dict) -> dict:
    """Answers that changed, and each set's lenient and head scores moved (means over its questions;
    unmoved sets left out). A deletion must lower neither: a gold moved from the head into a supporting
    quote scores the same by the lenient score alone."""
    changed = sorted(key for key in base if base[key][0] != variant.get(key, ("", 0.0, 0.0))[0])
    moved: dict[str, list[float]] = {}
    moved_head: dict[str, list[float]] = {}
    for key, (_, score, head) in base.items():
        now = variant.get(key, ("", 0.0, 0.0))
        moved.setdefault(f"{key[0]}/{key[1]}", []).append(now[1] - score)
        moved_head.setdefault(f"{key[0]}/{key[1]}", []).append(now[2] - head)
    return {"answers_changed": len(changed),
            "delta": {name: round(sum(d) / len(d), 4) for name, d in sorted(moved.items()) if any(d)},
            "delta_head": {name: round(sum(d) / len(d), 4) for name, d in sorted(moved_head.items()) if any(d)},
            "changed": ["/".join(key) for key in changed[:20]]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="multihop,xquad_ru,fixtures,written,xl_dev,unseen_xq_dev,unseen_mh_dev")
    parser.add_argument("--only", default="", help="comma-separated rule names (module.attribute) to neutralise; "
                        "with --together, groups separated by ';', each one variant")
    parser.add_argument("--together", action="store_true",
                        help="neutralise the --only rules all at once, as one variant (a deletion's check)")
    parser.add_argument("--checks", action="store_true", help=f"switch off each of {', '.join(CHECKS)} instead")
    parser.add_argument("--baseline-only", action="store_true", help="answer the sets once, neutralising nothing")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write every answer with its two scores, the baseline's and each variant's, here (to "
                             "compare a tree as committed with the tree before: --baseline-only on each)")
    parser.add_argument("--json", type=Path, default=None, help="write every rule's result here")
    args = parser.parse_args()
    sets = set(args.sets.split(","))
    if not SHARED_DATA.exists():
        sets -= {"multihop", "xquad_ru"}
    modules = answer_modules()
    rules = check_rules() if args.checks else find_rules(modules)
    groups = [set(group.split(",")) for group in args.only.split(";")] if args.only else []
    if groups:
        rules = {r: v for r, v in rules.items() if any(r.name in g for g in groups)}
    print(f"{len(rules)} rules: {sum(r.kind == 'regex' for r in rules)} regexes, "
          f"{sum(r.kind == 'words' for r in rules)} word lists, {sum(r.kind == 'check' for r in rules)} checks",
          file=sys.stderr)
    settings = Settings()
    db = open_database(settings)
    report: dict = {"rules": {}}
    dumped: dict = {}
    try:
        with QuestionRouter(db, settings, use_llm=False) as router:
            _memoised(router.searcher, "search")
            for method in ("embed_query", "embed_documents"):
                _memoised(router.embedder, method)
            started = time.perf_counter()
            base = answer_sets(router, sets)
            print(f"baseline: {len(base)} answers in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            dumped["baseline"] = {"/".join(k): list(v) for k, v in base.items()}
            if args.baseline_only:
                variants = []
            elif args.together:
                variants = [[(r, v) for r, v in rules.items() if r.name in g] for g in groups]
            else:
                variants = [[item] for item in rules.items()]
            for variant in variants:
                name = " + ".join(rule.name for rule, _ in variant)
                places = neutralise(variant)
                _clear_caches(modules)
                try:
                    answered = answer_sets(router, sets)
                    dumped[name] = {"/".join(k): list(v) for k, v in answered.items()}
                    result = compare(base, answered)
                except Exception as exc:  # a rule some code cannot do without: essential by construction
                    result = {"error": f"{type(exc).__name__}: {exc}"[:200]}
                finally:
                    restore(places)
                    _clear_caches(modules)
                rule = variant[0][0]
                result.update(kind=rule.kind, size=rule.size, held_by=sum(len(held) for _, held in places))
                report["rules"][name] = result
                print(f"{name[:60]:60} {json.dumps(result, ensure_ascii=False)[:300]}", file=sys.stderr, flush=True)
            again = answer_sets(router, sets) if variants else base
            report["baseline_drift"] = compare(base, again)
    finally:
        db.close()
    if args.dump:
        args.dump.write_text(json.dumps(dumped, ensure_ascii=False, indent=1), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    unused = [name for name, r in report["rules"].items() if r.get("answers_changed") == 0]
    print(f"baseline drift: {report['baseline_drift']['answers_changed']} answers; "
          f"{len(unused)} of {len(report['rules'])} rules change no answer: {', '.join(unused)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
