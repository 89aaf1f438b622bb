"""Train the learned evidence ranker on FairytaleQA train stories (``make ranker``).

    python benchmarks/ranker/train.py --train ../shared/train --bench ../shared/bench \
        --out src/mindscape/data/ranker [--kind trees|cross-encoder]

1. **Pools**: every train question's first-round focus candidates, from the real graph
   (preset naive, as ``ranker/evidence_ranking.py`` captures them), so the negatives are the
   sentences today's retrieval puts in front of the reader, ranked as the fused ranking
   ranks them (cached in ``--pools``).
2. **Labels**: a candidate in a gold section that holds the answer (at least 60% of a
   reference answer's content words, else the gold sentences sharing most of them) is 1.0,
   another gold-section sentence 0.5, every other candidate 0.
3. **trees** (the shipped ranker, :class:`mindscape.reasoners.rankers.LearnedRanker`):
   scikit-learn's ``HistGradientBoostingRegressor`` on those labels over every candidate's
   :func:`~mindscape.reasoners.rankers.features`; saved as ONNX (its trees as one
   ``ai.onnx.ml`` ``TreeEnsemble`` node with float64 splits, checked against the fitted model's
   own scores before it is written) with a sha256 manifest whose provenance counts the
   questions trained on. Seconds once the pools exist.
   **cross-encoder** (measured against it, not shipped): all-MiniLM-L6-v2 with a new
   one-logit head, trained with sentence-transformers' ``CrossEncoderTrainer`` and binary
   cross-entropy over ``(question, sentence + the next one)`` with, per question, the 2
   best-labelled gold sentences, the 4 best-ranked non-gold ones by the fused ranking (hard
   negatives) and one more drawn with the seed: ~35 min for one epoch on 2 cores.
4. **Figures**: ``ranker/evidence_ranking.py``'s table on FairytaleQA dev, fused against learned
   (``--eval-sample`` questions; the cross-encoder is scored here, ~1.3 s a question).

Only the train folder is trained on; dev chooses; test is reported once, by hand. Fixed seed.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

import numpy as np

from benchmarks.common import bench_questions, limit_threads, log, paired_points
from benchmarks.evidence.focus_recall import holds_answer
from benchmarks.ranker.evidence_ranking import Captured, capture_pools, measure, summarise
from benchmarks.ranker.train_data import DATASET, trained_on
from mindscape.embeddings import minilm_path
from mindscape.models.manifest import write_artefact
from mindscape.reasoners import focus
from mindscape.reasoners.rankers import (
    MODEL_FILE,
    N_FEATURES,
    RANKER_FILES,
    Candidate,
    FusedRanker,
    LearnedRanker,
    TreeEnsemble,
    features,
)
from mindscape.reasoners.text import content_words

POSITIVES, HARD, EASY = 2, 4, 1
"""Cross-encoder rows per question: gold sentences, hard and other negatives."""


def labels(q: Any, cap: Captured) -> dict[int, float]:
    """Soft labels of the gold candidates (others are 0): 1.0 for the answering sentence(s),
    0.5 for the rest of the gold section."""
    if not cap.gold:
        return {}
    answers = list(q.answers)
    best = [i for i in cap.gold if holds_answer(cap.pool.candidates[i].text, answers)]
    if not best:  # an implicit answer: the gold sentences sharing most of its words
        words = set().union(*(content_words(a) for a in answers))
        overlap = {i: len(words & content_words(cap.pool.candidates[i].text)) for i in cap.gold}
        top = max(overlap.values())
        best = [i for i, v in overlap.items() if v == top and v > 0]
    return {i: (1.0 if i in best else 0.5) for i in cap.gold}


def fit_trees(questions: list[Any], caps: list[Captured | None], seed: int) -> tuple[Any, Any]:
    """The regressor over every candidate of every train pool that has a gold candidate, and
    the rows it was fitted on."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    xs, ys = [], []
    for q, cap in zip(questions, caps, strict=True):
        gold = labels(q, cap) if cap is not None else {}
        if not gold or cap is None:
            continue
        xs.append(features(cap.question, cap.pool.candidates))
        ys.append([gold.get(i, 0.0) for i in range(len(cap.pool.candidates))])
    log(f"fitting trees on {sum(len(y) for y in ys)} candidates of {len(ys)} questions")
    model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, random_state=seed)
    x = np.vstack(xs)
    return model.fit(x, np.concatenate(ys)), x


def trees_to_onnx(model: Any) -> bytes:
    """A fitted ``HistGradientBoostingRegressor`` as ONNX: its trees as one ``ai.onnx.ml``
    ``TreeEnsemble`` node (opset 5: splits and leaf values in float64, as scikit-learn keeps
    them; skl2onnx's ``TreeEnsembleRegressor`` keeps them in float32, which sends values
    within a float32 step of a split the other way), summed, plus the baseline. Numerical
    splits only (the ranker has no categorical feature). It reads the fitted trees from the
    regressor's ``_predictors`` (as skl2onnx does), so it runs where the model was fitted,
    with that scikit-learn. Needs the ``onnx`` package (dev)."""
    from onnx import TensorProto, checker, helper, numpy_helper

    splits: list[float] = []
    feature: list[int] = []
    missing_left: list[int] = []
    true_ids: list[int] = []
    true_leaf: list[int] = []
    false_ids: list[int] = []
    false_leaf: list[int] = []
    roots: list[int] = []
    leaves: list[float] = []
    for (predictor,) in model._predictors:  # one tree per iteration (a single target)
        nodes = predictor.nodes
        if nodes["is_categorical"].any():
            raise ValueError("categorical splits are not exported")
        inner = [i for i in range(len(nodes)) if not nodes[i]["is_leaf"]]
        leaf_ids = [i for i in range(len(nodes)) if nodes[i]["is_leaf"]]
        if not inner:
            raise ValueError("a tree that is a single leaf is not exported")
        at = {i: len(splits) + k for k, i in enumerate(inner)}
        leaf_at = {i: len(leaves) + k for k, i in enumerate(leaf_ids)}
        leaves += [float(nodes[i]["value"]) for i in leaf_ids]
        roots.append(at[0])
        for i in inner:
            n = nodes[i]
            splits.append(float(n["num_threshold"]))
            feature.append(int(n["feature_idx"]))
            missing_left.append(int(n["missing_go_to_left"]))
            for child, ids, is_leaf in ((n["left"], true_ids, true_leaf),
                                        (n["right"], false_ids, false_leaf)):  # fmt: skip
                leaf = bool(nodes[child]["is_leaf"])
                ids.append(leaf_at[child] if leaf else at[child])
                is_leaf.append(int(leaf))
    trees = helper.make_node(
        "TreeEnsemble", ["features"], ["trees"], domain="ai.onnx.ml",
        nodes_featureids=feature, nodes_splits=numpy_helper.from_array(np.asarray(splits)),
        nodes_modes=numpy_helper.from_array(np.zeros(len(splits), dtype=np.uint8)),  # x <= split
        nodes_truenodeids=true_ids, nodes_trueleafs=true_leaf,
        nodes_falsenodeids=false_ids, nodes_falseleafs=false_leaf,
        nodes_missing_value_tracks_true=missing_left, tree_roots=roots,
        leaf_targetids=[0] * len(leaves), leaf_weights=numpy_helper.from_array(np.asarray(leaves)),
        n_targets=1, aggregate_function=1, post_transform=0,  # the sum, as it is
    )  # fmt: skip
    base = numpy_helper.from_array(np.asarray(model._baseline_prediction, float).reshape(1, 1))
    base.name = "baseline"
    graph = helper.make_graph(
        [trees, helper.make_node("Add", ["trees", "baseline"], ["score"])],
        "mindscape_learned_ranker",
        [helper.make_tensor_value_info("features", TensorProto.DOUBLE, [None, N_FEATURES])],
        [helper.make_tensor_value_info("score", TensorProto.DOUBLE, [None, 1])],
        initializer=[base],
    )
    onnx_model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)],
        producer_name="mindscape benchmarks/ranker/train.py",
    )
    onnx_model.ir_version = 10  # opset 21's; onnxruntime >= 1.21 runs TreeEnsemble (opset 5)
    checker.check_model(onnx_model, full_check=True)
    return bytes(onnx_model.SerializeToString())


def save_trees(model: Any, out: Path, rows: np.ndarray, provenance: str) -> float:
    """The ONNX model and its manifest (format, sha256, provenance, the scikit-learn that
    fitted it), after checking that onnxruntime scores `rows` (the rows it was fitted on) as
    the fitted model does; returns the largest difference."""
    import onnx
    import sklearn

    raw = trees_to_onnx(model)
    gap = float(np.abs(TreeEnsemble(raw).predict(rows) - model.predict(rows)).max())
    if gap > 1e-9:
        raise SystemExit(f"the ONNX trees score {gap:.2g} away from the fitted model: not saved")
    meta = {
        "kind": "HistGradientBoostingRegressor over mindscape.reasoners.rankers.features",
        "format": RANKER_FILES.format,
        "trained_on": provenance,
        "sklearn": sklearn.__version__,
        "onnx": onnx.__version__,
        "onnx_check": {"rows": len(rows), "max_abs_diff": gap},
    }
    write_artefact(out, MODEL_FILE, raw, meta)
    return gap


# --------------------------------------------------------------------------- cross-encoder


def pair_text(c: Candidate) -> str:
    """What the cross-encoder reads beside the question: the sentence and the next one."""
    return " ".join([c.text, *c.after[:1]])


def mine_pairs(questions: list[Any], caps: list[Captured | None], seed: int) -> list[dict]:
    """Cross-encoder rows ``{query, text, label}`` with hard negatives from the fused ranking."""
    rng = random.Random(seed)
    rows: list[dict] = []
    for q, cap in zip(questions, caps, strict=True):
        gold = labels(q, cap) if cap is not None else {}
        if not gold or cap is None:
            continue
        fused = [cap.pool.positions.index(pos) for pos, _ in focus.rank(cap.pool, cap.question)]
        pos = sorted(gold, key=lambda i: -gold[i])[:POSITIVES]
        negatives = [i for i in fused if i not in gold]
        rest = negatives[HARD:]
        picked = negatives[:HARD] + rng.sample(rest, min(EASY, len(rest)))
        rows += [
            {"query": cap.question, "text": pair_text(cap.pool.candidates[i]),
             "label": gold.get(i, 0.0)}
            for i in pos + picked
        ]  # fmt: skip
    rng.shuffle(rows)
    return rows


class CrossEncoderRanker:
    """A trained cross-encoder as a ranker (for the comparison)."""

    name = "cross-encoder"

    def __init__(self, model: Any) -> None:
        self.model = model

    def scores(self, question: str, cands: Sequence[Candidate]) -> list[float]:
        pairs = [(question, pair_text(c)) for c in cands]
        return [float(x) for x in self.model.predict(pairs, batch_size=64)] if pairs else []


def train_cross_encoder(rows: list[dict], out: Path, *, seed: int) -> Any:
    """One epoch of sentence-transformers' CrossEncoderTrainer from the bundled MiniLM."""
    from datasets import Dataset
    from sentence_transformers.cross_encoder import (
        CrossEncoder,
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    model = CrossEncoder(str(minilm_path()), num_labels=1, max_length=96)
    args = CrossEncoderTrainingArguments(
        output_dir=str(out / "checkpoints"), num_train_epochs=1, per_device_train_batch_size=32,
        learning_rate=4e-5, warmup_steps=0.1, seed=seed, data_seed=seed, save_strategy="no",
        logging_steps=100, report_to="none", use_cpu=True,
    )  # fmt: skip
    CrossEncoderTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        loss=BinaryCrossEntropyLoss(model),
    ).train()
    model.save(str(out))
    return model


# --------------------------------------------------------------------------- main


def train_pools(args: argparse.Namespace) -> tuple[list[Any], list[Captured | None]]:
    """The train questions and their captured focus pools (cached in ``args.pools``)."""
    pools = Path(args.pools)
    if pools.is_file():
        with pools.open("rb") as f:
            questions, caps = pickle.load(f)
        log(f"{len(questions)} train questions' focus pools from {pools}")
        check_pools(questions, Path(args.train), pools)
        return questions, caps
    ns = argparse.Namespace(bench=args.train, dataset=DATASET, split="train", stores=args.stores)
    questions, settings = bench_questions(ns)
    questions = [q for q in questions if q.task == "open_qa"]
    log(f"{len(questions)} train questions; capturing their focus pools")
    caps = capture_pools(questions, settings, "naive")
    pools.parent.mkdir(parents=True, exist_ok=True)
    with pools.open("wb") as f:
        pickle.dump((questions, caps), f)
    return questions, caps


def train_qids(train: Path) -> set[str]:
    """The ids of the open questions the train folder holds (what the pools are made of)."""
    from mindscape.eval.bench import load_questions

    return {q.qid for q in load_questions(train, DATASET, "train") if q.task == "open_qa"}


def check_pools(questions: list[Any], train: Path, pools: Path) -> None:
    """Stop when cached pools were captured from other questions than ``--train`` holds, so
    that the manifest's provenance, counted from the questions, is the train folder's."""
    if {q.qid for q in questions} != train_qids(train):
        raise SystemExit(
            f"{pools} holds the pools of other questions than {train} holds: delete it, or "
            "pass the --train it was made from"
        )


def dev_figures(args: argparse.Namespace, ranker: Any) -> None:
    """The fused and the new ranker on FairytaleQA dev (``--eval-sample`` questions, seed 7)."""
    ns = argparse.Namespace(
        bench=args.bench, dataset="fairytaleqa", split="dev", stores=args.stores
    )
    questions, settings = bench_questions(ns, sample=args.eval_sample or None, seed=7)
    questions = [q for q in questions if q.task == "open_qa"]
    caps = capture_pools(questions, settings, "naive")
    rows = {r.name: [measure(q, c, r) for q, c in zip(questions, caps, strict=True)]
            for r in (FusedRanker(), ranker)}  # fmt: skip
    print(f"FairytaleQA dev, {len(questions)} questions")
    for name, r in rows.items():
        s = summarise(name, r)
        print(f"{name:14}", "  ".join(f"{k} {s[k]['mean']:.3f} [{s[k]['low']:.3f}, {s[k]['high']:.3f}]"
                                      for k in ("hit1", "rr", "win", "holds")), f"ms/q {s['ms_p50']}")  # fmt: skip
    diff = {k: paired_points([r[k] for r in rows[ranker.name]], [r[k] for r in rows["fused"]])
            for k in ("hit1", "rr", "win", "holds")}  # fmt: skip
    print(f"{ranker.name} - fused (points):", json.dumps(diff))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--train", default="../shared/train")
    ap.add_argument("--bench", default="../shared/bench", help="for the dev figures")
    ap.add_argument("--stores", default=".mindscape/bench-stores")
    ap.add_argument("--out", default="src/mindscape/data/ranker")
    ap.add_argument("--kind", choices=["trees", "cross-encoder"], default="trees")
    ap.add_argument("--pools", default=".mindscape/ranker-train-pools.pkl",
                    help="the train questions' captured focus pools (reused when present)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-sample", type=int, default=0, help="dev questions to score (0: all)")
    ap.add_argument("--no-eval", action="store_true", help="skip the dev figures")
    args = ap.parse_args()
    limit_threads(args.threads)
    questions, caps = train_pools(args)
    t0 = time.perf_counter()
    out = Path(args.out)
    ranker: Any
    if args.kind == "trees":
        model, fitted = fit_trees(questions, caps, args.seed)
        provenance = trained_on(Path(args.train), [q.doc_id for q in questions])
        gap = save_trees(model, out, fitted, provenance)
        log(f"ONNX trees within {gap:.1g} of the fitted model on its {len(fitted)} rows")
        ranker = LearnedRanker.load(out)  # the figures are the shipped file's
    else:
        rows = mine_pairs(questions, caps, args.seed)
        log(f"{len(rows)} cross-encoder rows")
        ranker = CrossEncoderRanker(train_cross_encoder(rows, out, seed=args.seed))
    log(f"trained in {(time.perf_counter() - t0) / 60:.1f} min; saved to {out}")
    if not args.no_eval:
        dev_figures(args, ranker)


if __name__ == "__main__":
    main()
