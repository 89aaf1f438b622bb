"""Two eval runs on the same questions, paired: what one change did to the answers.

    python benchmarks/figures/paired_runs.py runs/ranker/fairytaleqa-dev60-learned/results.jsonl \
        docs/results/local/certainty-dev/fairytaleqa-dev60-naive-and-mindscape-certainty-off.jsonl

Reads two ``results.jsonl`` files written by ``mindscape eval`` (A first, B second) and, for
every preset both answered, prints the headline metric of each (token F1, accuracy, ...),
the paired difference A − B over the questions both hold (95% bootstrap CI, questions better
and worse), and input tokens, LLM calls and seconds per question (p50). The last line is one
JSON object.

    python benchmarks/figures/paired_runs.py --presets mindscape,naive runs/novels/test/*/results.jsonl

pairs two presets of the same runs instead (A the first named; the files are read together).

    python benchmarks/figures/paired_runs.py RUN1/verifier/results.jsonl,RUN2/verifier/results.jsonl \
        RUN1/no-verifier/results.jsonl,RUN2/no-verifier/results.jsonl

pools runs: A and B may each name several files, comma-separated (read together; a question
in two of them counts once, as the later file has it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

import numpy as np

from benchmarks.common import paired_points
from mindscape.eval.runner import load_done

HEADLINES = ("accuracy", "claim_correct", "f1")
"""A record's headline metric: the first of these it has (multiple choice, claims, open QA)."""


def headline(rec: dict[str, Any]) -> float:
    """The record's headline metric."""
    m = rec["metrics"]
    return float(next(m[k] for k in HEADLINES if k in m))


def paired_row(keys: list[Any], a: dict[Any, Any], b: dict[Any, Any]) -> dict[str, Any]:
    """Headline means of A and B over `keys`, A − B paired, and per-question costs (p50)."""
    sa, sb = [headline(a[k]) for k in keys], [headline(b[k]) for k in keys]

    def p50(field: str, digits: int = 0) -> list[float]:
        return [round(float(np.median([r[k].get(field, 0) for k in keys])), digits) for r in (a, b)]

    return {
        "n": len(keys),
        "a": round(float(np.mean(sa)), 4),
        "b": round(float(np.mean(sb)), 4),
        "a_minus_b_points": paired_points(sa, sb),
        "tokens_in_p50": p50("tokens_in"),
        "calls_p50": p50("llm_calls"),
        "seconds_p50": p50("latency_s", 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("files", nargs="+", help="A and B: two results.jsonl (see --presets)")
    ap.add_argument(
        "--presets", default="", metavar="A,B", help="pair these two presets of all the files"
    )
    args = ap.parse_args()
    pairs: list[tuple[str, dict[Any, Any], dict[Any, Any]]] = []
    if args.presets:
        pa, _, pb = args.presets.partition(",")
        done = {k: v for f in args.files for k, v in load_done(Path(f)).items()}
        a = {q: r for (p, q), r in done.items() if p == pa}
        b = {q: r for (p, q), r in done.items() if p == pb}
        pairs.append((f"{pa}-{pb}", a, b))
    else:
        if len(args.files) != 2:
            ap.error("give two results.jsonl files, or --presets A,B with any number")
        a, b = (
            {k: v for f in arg.split(",") for k, v in load_done(Path(f)).items()}
            for arg in args.files
        )
        for preset in sorted({p for p, _ in a} & {p for p, _ in b}):
            pairs.append((preset, {k: v for k, v in a.items() if k[0] == preset}, b))
    summary: dict[str, Any] = {}
    for name, ra, rb in pairs:
        keys = sorted(k for k in ra if k in rb)
        summary[name] = row = paired_row(keys, ra, rb)
        diff = row["a_minus_b_points"]
        print(
            f"{name:10} n={row['n']:3}  A {row['a']:.3f}  B {row['b']:.3f}  A-B "
            f"{diff['mean']:+.1f} [{diff['low']:+.1f}, {diff['high']:+.1f}] points "
            f"({diff['better']} better, {diff['worse']} worse)  tokens p50 "
            f"{row['tokens_in_p50'][0]:.0f}/{row['tokens_in_p50'][1]:.0f}  calls p50 "
            f"{row['calls_p50'][0]:.0f}/{row['calls_p50'][1]:.0f}  s p50 "
            f"{row['seconds_p50'][0]}/{row['seconds_p50'][1]}"
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
