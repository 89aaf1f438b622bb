"""Train the answer verifier on the local model's own answers to FairytaleQA train questions.

    python benchmarks/reader/train_verifier.py --readings runs/verifier/train/readings.jsonl \
        --dev docs/results/reader/fairytaleqa-dev60/readings.jsonl \
        --out src/mindscape/data/verifier

The readings come from ``reader/bench.py`` run on ``../shared/train`` with ``--evidence
gold,other`` (the model reading a gold section, or another section of the same story), the
shipped reader variant and ``--samples``: ``make verifier`` runs both steps (the readings are
resumable; about 16 s a question on 2 cores). A logistic regression over
:func:`mindscape.reasoners.verifier.features` (standardised; C chosen by 5-fold
cross-validation grouped by story on train only) predicts "token F1 >= 0.5". It prints the
grouped cross-validated AUROC on train and, for each ``--dev`` file, the AUROC on those dev
readings beside the reader's mean token probability, then writes ``model.json`` and
``manifest.json`` (sha256, row counts, figures).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from mindscape.eval.runner import read_records
from mindscape.llm.logprobs import mean_probability
from mindscape.models.manifest import bytes_sha256, write_manifest
from mindscape.reasoners.verifier import MODEL_FILE, Reading, Verifier, features

GOOD = 0.5
CS = (0.01, 0.1, 1.0, 10.0)


def reading(r: dict[str, Any]) -> Reading:
    return Reading(
        question=r["question"],
        answer=r["answer"],
        passage=r["passage"],
        logprobs=tuple(r["logprobs"]),
        samples=tuple(r.get("sampled") or ()),
    )


def matrix(rows: list[dict[str, Any]], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[features(reading(r))[n] for n in names] for r in rows], dtype=float)
    y = np.array([r["f1"] >= GOOD for r in rows], dtype=int)
    return x, y


def auroc(y: np.ndarray, p: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p)) if 0 < y.sum() < len(y) else float("nan")


def grouped_cv(x: np.ndarray, y: np.ndarray, groups: list[str], c: float) -> float:
    """Pooled out-of-fold AUROC, 5 folds grouped by story."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out = np.zeros(len(y))
    for tr, te in GroupKFold(n_splits=5).split(x, y, groups):
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=1000))
        model.fit(x[tr], y[tr])
        out[te] = model.predict_proba(x[te])[:, 1]
    return auroc(y, out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readings", required=True, help="train readings (reader/bench.py)")
    ap.add_argument("--dev", nargs="*", default=[], help="dev readings to report AUROC on")
    ap.add_argument("--out", default="src/mindscape/data/verifier")
    ap.add_argument(
        "--variant",
        default="plain",
        help="the reader variant whose answers it learns (the default reader's)",
    )
    args = ap.parse_args()

    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rows = [r for r in read_records(Path(args.readings)) if r.get("variant") == args.variant]
    if not rows:
        raise SystemExit(f"no {args.variant} readings in {args.readings}")
    names = list(features(reading(rows[0])))
    x, y = matrix(rows, names)
    groups = [r["qid"].rsplit("-q", 1)[0] for r in rows]
    cv = {c: grouped_cv(x, y, groups, c) for c in CS}
    best = max(CS, key=lambda c: cv[c])
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(C=best, max_iter=1000).fit(scaler.transform(x), y)
    samples = max(len(r.get("sampled") or ()) for r in rows)
    verifier = Verifier(
        names=tuple(names),
        mean=tuple(float(v) for v in scaler.mean_),
        scale=tuple(float(v) for v in scaler.scale_),
        coef=tuple(float(v) for v in model.coef_[0]),
        intercept=float(model.intercept_[0]),
        samples=samples,
    )
    stories = len(set(groups))
    print(f"train: {len(rows)} readings of {stories} stories, {y.mean():.3f} good")
    print("grouped 5-fold CV AUROC by C: " + ", ".join(f"{c}: {cv[c]:.3f}" for c in CS))
    figures: dict[str, Any] = {"train_cv_auroc": cv[best], "C": best}
    variants = {r.get("variant") for r in rows}
    for path in args.dev:  # the dev readings of the reader it was trained on
        dev = [r for r in read_records(Path(path)) if r.get("variant") in variants]
        _, dy = matrix(dev, names)
        p = np.array([verifier.probability(reading(r)) for r in dev])
        cert = np.array([mean_probability(r["logprobs"]) or 0.0 for r in dev])
        figures[path] = {"n": len(dev), "auroc": auroc(dy, p), "certainty_auroc": auroc(dy, cert)}
        print(
            f"dev {path}: {len(dev)} readings, AUROC {figures[path]['auroc']:.3f} "
            f"(token probability {figures[path]['certainty_auroc']:.3f})"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    raw = (json.dumps(verifier.to_json(), indent=1) + "\n").encode()
    (out / MODEL_FILE).write_bytes(raw)
    manifest = {
        "sha256": bytes_sha256(raw),
        "train_readings": len(rows),
        "train_stories": stories,
        "train_questions": len({r["qid"] for r in rows}),
        "figures": figures,
    }
    write_manifest(out, manifest)
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
