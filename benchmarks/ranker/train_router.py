"""Train the layer router on FairytaleQA train questions (``make router``).

    python benchmarks/ranker/train_router.py --train ../shared/train --bench ../shared/bench \
        --out src/mindscape/data/router

FairytaleQA's annotators marked every question ``local`` (one passage answers it) or
``summary`` (it needs several parts of the story). Two small classifiers learn that label from
the question's words, both scikit-learn logistic regression with balanced class weights:

* ``tfidf``: TF-IDF over words and word bigrams (sublinear, min_df 2);
* ``minilm``: the question's all-MiniLM-L6-v2 embedding.

Each is scored on FairytaleQA **dev** (ROC AUC, average precision, the share routed and the
recall of ``summary`` at the 0.5 decision) with 95% bootstrap CIs; the better AUC is saved
(only ``tfidf`` can be saved: it is one pipeline over raw text) as plain JSON (vocabulary, idf,
coefficients; :meth:`mindscape.reasoners.layer_router.LayerRouter.to_json`), checked against
the fitted pipeline's probabilities before it is written, with a sha256 manifest whose
provenance counts what ``--train`` holds. The share of narrativeqa_lit dev questions it would
route is printed too (no labels there). Seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

import numpy as np
import sklearn
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.pipeline import make_pipeline

from benchmarks.ranker.train_data import DATASET, trained_on
from mindscape.models.manifest import write_artefact
from mindscape.reasoners.layer_router import MODEL_FILE, ROUTER_FILES, THRESHOLD, LayerRouter

SEED = 0
C = 1.0
"""Logistic regression's inverse regularisation: scikit-learn's default, not swept."""


def load(path: Path, split: str | None = None) -> list[dict[str, Any]]:
    """The rows of a questions.jsonl (of one split, if given)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [q for q in rows if split is None or q["split"] == split]


def label(q: dict[str, Any]) -> int:
    """1 for a question FairytaleQA's annotators marked ``summary``, else 0."""
    return int((q.get("meta") or {}).get("local_or_summary") == "summary")


def scores(y: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    """AUC and AP with 95% bootstrap CIs, and the routed share and recall at the threshold."""
    out: dict[str, Any] = {}
    for name, fn in (("auc", roc_auc_score), ("ap", average_precision_score)):
        boots = []
        for _ in range(1000):
            i = rng.integers(0, len(y), len(y))
            if y[i].min() != y[i].max():
                boots.append(fn(y[i], p[i]))
        out[name] = [round(float(fn(y, p)), 3), *np.round(np.percentile(boots, [2.5, 97.5]), 3)]
    out["routed"] = round(float((p >= THRESHOLD).mean()), 3)
    out["recall"] = round(float((p[y == 1] >= THRESHOLD).mean()), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", default="../shared/train")
    ap.add_argument("--bench", default="../shared/bench")
    ap.add_argument("--out", default="src/mindscape/data/router")
    args = ap.parse_args()
    train = load(Path(args.train) / DATASET / "questions.jsonl")
    dev = load(Path(args.bench) / DATASET / "questions.jsonl", "dev")
    novels = load(Path(args.bench) / "narrativeqa_lit" / "questions.jsonl", "dev")
    y_train = np.array([label(q) for q in train])
    y_dev = np.array([label(q) for q in dev])
    text = {name: [q["question"] for q in rows] for name, rows in
            (("train", train), ("dev", dev), ("novels", novels))}  # fmt: skip
    print(f"train {len(train)} questions ({y_train.sum()} summary), dev {len(dev)} "
          f"({y_dev.sum()} summary)")  # fmt: skip

    tfidf = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
        LogisticRegression(C=C, class_weight="balanced", max_iter=2000, random_state=SEED),
    ).fit(text["train"], y_train)
    from mindscape.embeddings import load_embedder

    embed = load_embedder().embed_documents
    vecs = {k: np.asarray(embed(v)) for k, v in text.items()}
    minilm = LogisticRegression(C=C, class_weight="balanced", max_iter=2000, random_state=SEED)
    minilm.fit(vecs["train"], y_train)
    prob = {
        "tfidf": (tfidf.predict_proba(text["dev"])[:, 1], tfidf.predict_proba(text["novels"])),
        "minilm": (minilm.predict_proba(vecs["dev"])[:, 1], minilm.predict_proba(vecs["novels"])),
    }
    figures = {}
    for name, (p_dev, p_novels) in prob.items():
        figures[name] = scores(y_dev, p_dev, np.random.default_rng(SEED))
        figures[name]["novels_dev_routed"] = round(float((p_novels[:, 1] >= THRESHOLD).mean()), 3)
        print(f"{name:7} FairytaleQA dev: {figures[name]}")
    best = max(figures, key=lambda k: figures[k]["auc"][0])
    print(f"chosen on dev AUC: {best}")
    if best != "tfidf":
        raise SystemExit("the MiniLM classifier won on dev: save it by hand (not wired up)")
    save(tfidf, Path(args.out), text["train"] + text["dev"] + text["novels"], {
        "trained_on": trained_on(Path(args.train), [str(q["doc_id"]) for q in train]),
        "label": "meta.local_or_summary == 'summary'",
        "dev": figures,
    })  # fmt: skip


def save(pipeline: Any, out: Path, questions: list[str], meta: dict[str, Any]) -> float:
    """The router as JSON and its manifest (format, sha256, the scikit-learn that fitted it,
    `meta`), after checking that the JSON, loaded as mindscape loads it, gives the fitted
    pipeline's probabilities on `questions`; returns the largest difference."""
    raw = (json.dumps(LayerRouter.to_json(pipeline), indent=0) + "\n").encode()
    router = LayerRouter.from_json(json.loads(raw))
    want = pipeline.predict_proba(questions)[:, 1]
    gap = float(np.abs(np.array([router.summary_share(q) for q in questions]) - want).max())
    if gap > 1e-9:
        raise SystemExit(f"the JSON router is {gap:.2g} away from the fitted pipeline: not saved")
    manifest = {
        "kind": "scikit-learn Pipeline(TfidfVectorizer(1-2 grams), LogisticRegression(balanced))",
        "format": ROUTER_FILES.format,
        **meta,
        "sklearn": sklearn.__version__,
        "json_check": {"questions": len(questions), "max_abs_diff": gap},
    }
    write_artefact(out, MODEL_FILE, raw, manifest)
    print(f"saved {out / MODEL_FILE} ({len(raw)} bytes; within {gap:.1g} of the pipeline)")
    return gap


if __name__ == "__main__":
    main()
