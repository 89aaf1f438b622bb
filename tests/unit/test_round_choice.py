"""benchmarks/figures/round_choice.py: the rules that pick a round from a run's per-round attempts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.figures.round_choice import first_unless_surer, most_confident

ROOT = Path(__file__).resolve().parents[2]


def attempt(round_: int, answer: str, confidence: float | None, f1: float) -> dict:
    return {"round": round_, "answer": answer, "confidence": confidence, "metrics": {"f1": f1}}


def test_first_round_stands_unless_a_later_one_is_clearly_surer():
    rule = first_unless_surer(0.1)
    a1, a2, a3 = attempt(1, "x", 0.05, 1.0), attempt(2, "y", 0.12, 0.0), attempt(3, "z", 0.2, 0.5)
    assert rule([a1, a2]) is a1  # 0.07 surer: not enough
    assert rule([a1, a2, a3]) is a3  # 0.15 surer
    assert rule([attempt(1, "x", None, 0.0), attempt(2, "", 0.9, 0.0)])["round"] == 1  # no answer


def test_the_loop_s_own_choice_is_the_most_confident_then_the_earliest():
    a1, a2 = attempt(1, "x", 0.3, 0.0), attempt(2, "y", 0.3, 1.0)
    assert most_confident([a1, a2]) is a1
    assert most_confident([a1, attempt(2, "y", 0.31, 1.0)])["round"] == 2


def test_the_script_compares_the_rules_with_the_run(tmp_path):
    rows = [
        {
            "preset": "mindscape",
            "qid": f"q{i}",
            "answer": "y",
            "tokens_in": 100,
            "llm_calls": 8,
            "latency_s": 1.0,
            "metrics": {"f1": 0.0},
            "attempts": [attempt(1, "x", 0.05, 1.0), attempt(2, "y", 0.1, 0.0)],
        }
        for i in range(4)
    ]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "figures" / "round_choice.py"), str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["as run"]["mean"] == 0.0
    assert summary["first round"]["mean"] == 1.0
    assert summary["first unless surer by 0.1"]["vs_as_run_points"]["better"] == 4
    assert summary["at most two rounds"]["mean"] == 0.0
    assert summary["best round (oracle)"]["mean"] == 1.0
