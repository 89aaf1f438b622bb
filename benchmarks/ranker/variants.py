"""Other evidence rankers against the shipped one, on FairytaleQA dev (model-free; not shipped).

    python benchmarks/ranker/variants.py [--variants trees-own-base lambdarank-own-base ...]

Reads the pools ``ranker/train.py`` (train) and ``ranker/evidence_ranking.py --pools`` (dev) cached,
fits each variant on the train pools and scores it on dev as ``ranker/evidence_ranking.py`` does
(hit@1, the gold sentence in the two windows read, those windows holding the answer; paired
against the fused ranking). A variant is ``MODEL-LABELS-FEATURES``:

* MODEL: ``trees`` (scikit-learn's HistGradientBoostingRegressor, as shipped) or
  ``lambdarank`` (LightGBM's LambdaMART, ``pip install lightgbm``; labels in 5 grades);
* LABELS: ``own`` (as shipped: 1 the answering sentence, 0.5 the rest of the gold section),
  ``window`` (the best label within the ±2-sentence window around the candidate, what the
  reader would read) or ``mix`` (their mean);
* FEATURES: ``base`` (:func:`~mindscape.reasoners.rankers.features`) or ``window`` (plus the
  sum and max of the fused score, the max cosine and BM25 and the mean cosine over the
  window, the two sentences after, and the window's size).

Measured on 2026-12-04 (docs/results.md, "Other rankers tried"): none moves "in 2 windows"
more than 1.4 points past the shipped ranker.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

import numpy as np

from benchmarks.common import limit_threads, paired_points
from benchmarks.evidence.focus_recall import holds_answer
from benchmarks.ranker.evidence_ranking import Captured, measure, summarise
from benchmarks.ranker.train import labels
from mindscape.reasoners import focus
from mindscape.reasoners.rankers import FusedRanker, features

WINDOW = 2


class Scores:
    """A ranker returning scores computed beforehand, by the candidates' list."""

    name = "variant"

    def __init__(self, by_pool: dict[int, Any]) -> None:
        self.by_pool = by_pool

    def scores(self, question: str, cands: Any) -> list[float]:
        return [float(x) for x in self.by_pool[id(cands)]]


def window_of(cap: Captured, i: int) -> list[int]:
    """Table positions of the ±WINDOW sentences around candidate `i`."""
    return focus._grow(cap.pool.table, cap.pool.positions[i], WINDOW, WINDOW)


def table_labels(q: Any, cap: Captured) -> dict[int, float]:
    """Labels by table position: 0.5 inside a gold span, 1.0 when it also holds the answer."""
    spans = [(e["char_start"], e["char_end"]) for e in q.evidence or []]
    out = {}
    for p, s in enumerate(cap.pool.table):
        if s.key[0] == q.doc_id and any(s.key[1] < ge and s.end > gs for gs, ge in spans):
            out[p] = 1.0 if holds_answer(s.text, list(q.answers)) else 0.5
    for i, v in labels(q, cap).items():  # an implicit answer: ranker/train.py's choice
        out[cap.pool.positions[i]] = max(out.get(cap.pool.positions[i], 0.0), v)
    return out


def window_features(cap: Captured, x: np.ndarray) -> np.ndarray:
    """`x` with the window's aggregates appended (columns 1 BM25, 3 cosine, 4 fused)."""
    at = {p: i for i, p in enumerate(cap.pool.positions)}
    rows = []
    for i, pos in enumerate(cap.pool.positions):
        w = [at[p] for p in window_of(cap, i) if p in at]
        after = [at[p] for p in focus._grow(cap.pool.table, pos, 0, WINDOW) if p in at and p != pos]
        rows.append([
            x[w, 4].sum(), x[w, 4].max(), x[w, 3].max(), x[w, 1].max(), x[w, 3].mean(),
            x[after, 1].max() if after else 0.0, x[after, 3].max() if after else 0.0, len(w),
        ])  # fmt: skip
    return np.hstack([x, np.asarray(rows)])


def rows_of(qs: list[Any], caps: list[Any], train: bool) -> list[dict[str, Any] | None]:
    """Per question: both feature sets and (train) both label sets."""
    out: list[dict[str, Any] | None] = []
    for q, cap in zip(qs, caps, strict=True):
        if cap is None or not cap.pool.candidates:
            out.append(None)
            continue
        x = features(cap.question, cap.pool.candidates)
        row: dict[str, Any] = {"base": x, "window": window_features(cap, x), "cap": cap}
        if train:
            own = labels(q, cap)
            tab = table_labels(q, cap)
            row["own"] = np.asarray([own.get(i, 0.0) for i in range(len(x))])
            row["window_y"] = np.asarray(
                [
                    max((tab.get(p, 0.0) for p in window_of(cap, i)), default=0.0)
                    for i in range(len(x))
                ]  # fmt: skip
            )
        out.append(row)
    return out


def fit(kind: str, lab: str, feat: str, train: list[dict[str, Any]], seed: int) -> Any:
    """One variant's model on the train rows with a gold candidate."""
    rows = [r for r in train if r["own"].max() > 0]

    def y(r: dict[str, Any]) -> np.ndarray:
        return {"own": r["own"], "window": r["window_y"], "mix": (r["own"] + r["window_y"]) / 2}[
            lab
        ]

    x, target = np.vstack([r[feat] for r in rows]), np.concatenate([y(r) for r in rows])
    if kind == "trees":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(
            max_iter=300, learning_rate=0.05, random_state=seed
        ).fit(x, target)
    import lightgbm as lgb

    model = lgb.LGBMRanker(
        objective="lambdarank", n_estimators=300, learning_rate=0.05,
        lambdarank_truncation_level=10, random_state=seed, verbose=-1, n_jobs=2,
    )  # fmt: skip
    return model.fit(x, np.rint(target * 4).astype(int), group=[len(r["own"]) for r in rows])


def report(name: str, rows: list[dict[str, Any]], base: list[dict[str, Any]]) -> None:
    s = summarise(name, rows)
    d = {k: paired_points([r[k] for r in rows], [r[k] for r in base]) for k in ("win", "holds")}
    print(f"{name:34} hit@1 {s['hit1']['mean']:.3f}  in 2 windows {s['win']['mean']:.3f} "
          f"({d['win']['mean']:+.1f} [{d['win']['low']:+.1f}, {d['win']['high']:+.1f}])  "
          f"holds {s['holds']['mean']:.3f} ({d['holds']['mean']:+.1f})", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--train-pools", default=".mindscape/ranker-train-pools.pkl")
    ap.add_argument("--dev-pools", default=".mindscape/pools-fairytaleqa-dev.pkl")
    ap.add_argument("--variants", nargs="*", default=[
        "trees-own-base", "trees-window-base", "trees-window-window", "trees-mix-window",
        "lambdarank-own-base", "lambdarank-mix-window",
    ])  # fmt: skip
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    limit_threads(2)
    with open(args.train_pools, "rb") as f:
        tq, tc = pickle.load(f)  # noqa: S301 - our own cache
    with open(args.dev_pools, "rb") as f:
        dq, dc = pickle.load(f)  # noqa: S301
    train, dev = rows_of(tq, tc, True), rows_of(dq, dc, False)
    base = [measure(q, c, FusedRanker()) for q, c in zip(dq, dc, strict=True)]
    report("fused", base, base)
    for v in args.variants:
        kind, lab, feat = v.split("-")
        t0 = time.perf_counter()
        model = fit(kind, lab, feat, [r for r in train if r is not None], args.seed)
        ranker = Scores({id(r["cap"].pool.candidates): model.predict(r[feat]) for r in dev if r})
        rows = [measure(q, c, ranker) for q, c in zip(dq, dc, strict=True)]
        report(f"{v} ({time.perf_counter() - t0:.0f} s)", rows, base)


if __name__ == "__main__":  # through the module, so the cached pools' classes resolve
    import sys

    from benchmarks.ranker import evidence_ranking

    sys.modules["__main__"].Captured = evidence_ranking.Captured  # type: ignore[attr-defined]
    from benchmarks.ranker import variants

    variants.main()
