"""Which round should the loop answer with? Rules measured on one eval run's records.

    python benchmarks/figures/round_choice.py docs/results/reader/loop-fairytaleqa-dev120/verifier/results.jsonl

Reads a ``results.jsonl`` written by ``mindscape eval`` whose records hold every round's
attempt with its own score (``attempts``: answer, confidence, metrics), and compares, for one
preset (default ``mindscape``), the answer each rule would have given from the same rounds:

- ``as run``: the answer the loop gave (the most confident round; the earliest on a tie);
- ``first round``: always round 1, as if the loop never refined;
- ``at most two rounds``: the loop's own choice among rounds 1 and 2, as if it stopped after
  round 2 (a round costs the reader's call and its three samples);
- ``first unless surer``: round 1 unless a later round's confidence exceeds it by at least
  ``--margin`` (0.1), then the most confident of those; when every round is unsure the
  ranking of small confidences is mostly noise, and round 1 read the best-ranked evidence;
- ``best round (oracle)``: the round with the best score, an upper bound no rule can reach.

Each rule's mean (95% bootstrap CI) and its paired difference with ``as run`` (points, CI,
questions better and worse). A rule that stops earlier would also have cost less; the
records do not hold each round's tokens, so costs are given for the run as it went. The last
line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

import numpy as np

from benchmarks.common import paired_points
from benchmarks.figures.paired_runs import headline
from mindscape.eval.metrics import bootstrap_ci
from mindscape.eval.runner import load_done

Rule = Callable[[list[dict[str, Any]]], dict[str, Any]]


def conf(attempt: dict[str, Any]) -> float:
    return float(attempt.get("confidence") or 0.0)


def most_confident(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The loop's own choice among answered rounds: highest confidence, earliest on a tie."""
    answered = [a for a in attempts if a.get("answer")] or attempts
    return max(answered, key=lambda a: (conf(a), -int(a["round"])))


def first_unless_surer(margin: float) -> Rule:
    def rule(attempts: list[dict[str, Any]]) -> dict[str, Any]:
        first = attempts[0]
        surer = [a for a in attempts[1:] if a.get("answer") and conf(a) >= conf(first) + margin]
        return most_confident(surer) if surer else first

    return rule


def rules(margin: float) -> dict[str, Rule]:
    return {
        "first round": lambda attempts: attempts[0],
        "at most two rounds": lambda attempts: most_confident(attempts[:2]),
        f"first unless surer by {margin:g}": first_unless_surer(margin),
        "best round (oracle)": lambda attempts: max(attempts, key=headline),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("results", nargs="+", help="results.jsonl files (read together)")
    ap.add_argument("--preset", default="mindscape")
    ap.add_argument("--margin", type=float, default=0.1)
    args = ap.parse_args()
    done = {k: v for f in args.results for k, v in load_done(Path(f)).items()}
    recs = [r for (p, _), r in sorted(done.items()) if p == args.preset and r.get("attempts")]
    if not recs:
        raise SystemExit(f"no {args.preset} records with per-round attempts in {args.results}")
    as_run = [headline(r) for r in recs]
    refined = sum(len(r["attempts"]) > 1 for r in recs)
    print(
        f"{len(recs)} questions ({args.preset}); {refined} refined; "
        f"input tokens p50 {np.median([r['tokens_in'] for r in recs]):.0f}, "
        f"LLM calls p50 {np.median([r['llm_calls'] for r in recs]):.0f}, "
        f"seconds p50 {np.median([r['latency_s'] for r in recs]):.1f} (the run as it went)"
    )
    summary: dict[str, Any] = {"n": len(recs), "refined": refined}
    mean, lo, hi = bootstrap_ci(as_run)
    print(f"{'as run':<28} {mean:.3f} [{lo:.3f}, {hi:.3f}]")
    summary["as run"] = {"mean": round(mean, 4), "ci": [round(lo, 4), round(hi, 4)]}
    for name, rule in rules(args.margin).items():
        picked = [rule(r["attempts"]) for r in recs]
        vals = [headline(a) for a in picked]
        mean, lo, hi = bootstrap_ci(vals)
        diff = paired_points(vals, as_run)
        later = sum(int(a["round"]) > 1 for a in picked)
        print(
            f"{name:<28} {mean:.3f} [{lo:.3f}, {hi:.3f}]  vs as run {diff['mean']:+.1f} "
            f"[{diff['low']:+.1f}, {diff['high']:+.1f}] points "
            f"({diff['better']} better, {diff['worse']} worse); a later round for {later}"
        )
        summary[name] = {
            "mean": round(mean, 4),
            "ci": [round(lo, 4), round(hi, 4)],
            "vs_as_run_points": diff,
            "later_round": later,
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
