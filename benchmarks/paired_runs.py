"""Two eval runs on the same questions, paired: what one change did to the answers.

    python benchmarks/paired_runs.py runs/ranker/fairytaleqa-dev60-learned/results.jsonl \
        docs/results/local/certainty-dev/fairytaleqa-dev60-naive-and-mindscape-certainty-off.jsonl

Reads two ``results.jsonl`` files written by ``mindscape eval`` (A first, B second) and, for
every preset both answered, prints the headline metric of each (token F1, accuracy, ...),
the paired difference A − B over the questions both hold (95% bootstrap CI, questions better
and worse), and input tokens and seconds per question (p50). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from common import paired_points

from mindscape.eval.runner import load_done

HEADLINES = ("accuracy", "claim_correct", "f1")
"""A record's headline metric: the first of these it has (multiple choice, claims, open QA)."""


def headline(rec: dict[str, Any]) -> float:
    """The record's headline metric."""
    m = rec["metrics"]
    return float(next(m[k] for k in HEADLINES if k in m))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("a", help="results.jsonl of the changed run")
    ap.add_argument("b", help="results.jsonl of the baseline run")
    args = ap.parse_args()
    a, b = load_done(Path(args.a)), load_done(Path(args.b))
    summary: dict[str, Any] = {}
    for preset in sorted({p for p, _ in a} & {p for p, _ in b}):
        keys = sorted(k for k in a if k[0] == preset and k in b)
        sa, sb = [headline(a[k]) for k in keys], [headline(b[k]) for k in keys]
        diff = paired_points(sa, sb)
        row = {
            "n": len(keys),
            "a": round(float(np.mean(sa)), 4),
            "b": round(float(np.mean(sb)), 4),
            "a_minus_b_points": diff,
            "tokens_in_p50": [
                float(np.median([r[k].get("tokens_in", 0) for k in keys])) for r in (a, b)
            ],  # fmt: skip
            "seconds_p50": [
                round(float(np.median([r[k].get("latency_s", 0) for k in keys])), 1) for r in (a, b)
            ],  # fmt: skip
        }
        summary[preset] = row
        print(
            f"{preset:10} n={row['n']:3}  A {row['a']:.3f}  B {row['b']:.3f}  A-B "
            f"{diff['mean']:+.1f} [{diff['low']:+.1f}, {diff['high']:+.1f}] points "
            f"({diff['better']} better, {diff['worse']} worse)  tokens p50 "
            f"{row['tokens_in_p50'][0]:.0f}/{row['tokens_in_p50'][1]:.0f}  s p50 "
            f"{row['seconds_p50'][0]}/{row['seconds_p50'][1]}"
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
