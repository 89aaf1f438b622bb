"""Seconds of `mindscape ask` from the command line: cold, through the warm process, and the
answer alone, in one run (issue 49's targets as ratios).

For each backend (``--llm``: local, extractive or both) on the demo question and store:

* ``cold_s``: ``mindscape ask ... --no-warm``, a fresh process each time (today's ask);
* ``warm_first_s``: the first ``mindscape ask`` with no warm process running (it starts one);
* ``warm_later_s``: the asks after it (median of ``--repeats``);
* ``answer_s``: the answer alone: one process answers the question twice through ``ask``'s
  own function and the second is timed (what ``mindscape demo`` shows per question).

``same_output`` says whether every cold and warm ask printed the same ``--json`` object;
``differ_cold`` and ``differ_cold_warm`` name the fields that differ among the cold asks, and
among all of them (the local model's replies can vary between fresh servers too).
Ratios: ``warm_later_s / answer_s`` (target <= 1.3), ``warm_first_s - cold_s`` (target <= 1 s),
and for extractive ``warm_later_s`` itself (target <= 1.5 s). Each command is a child process
timed by the wall clock, so the figures include Python's start-up. The load average before and
after is printed: on a busy machine every figure grows.

The warm process runs in a runtime folder of its own (not the user's socket), and the model
servers' registry sits in a scratch ``MINDSCAPE_CACHE``, so no run attaches to a model server
another process started (the GGUF is named through ``MINDSCAPE_LOCAL_MODEL``).

    python benchmarks/speed/warm_ask.py [--llm both] [--repeats 3] [--store .mindscape/demo-store]

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QUESTION = "Who helped Cinderella sort the lentils from the ashes?"
MINDSCAPE = [sys.executable, "-m", "mindscape"]


def timed(cmd: list[str], env: dict[str, str], outputs: list[str] | None = None) -> float:
    """Wall seconds of one command (which must succeed); its stdout goes to `outputs`."""
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr}")
    if "answering in this process" in done.stderr:
        sys.exit(f"the warm process did not answer: {done.stderr.strip()}")
    if outputs is not None:
        outputs.append(done.stdout)
    return seconds


def differences(outputs: list[str]) -> dict[str, list[Any]]:
    """The fields of the ``--json`` outputs that are not the same in all, each with its
    values (evidence and trace shortened to what differs in them: their length or which
    items)."""
    rows = [json.loads(o) for o in outputs]
    out: dict[str, list[Any]] = {}
    for key in rows[0]:
        values = [r.get(key) for r in rows]
        if any(v != values[0] for v in values[1:]):
            short = [v if not isinstance(v, list) else f"{len(v)} items" for v in values]
            if len(set(map(str, short))) == 1:  # same length: which items differ
                short = [[i for i, item in enumerate(v) if item != values[0][i]] for v in values]
            out[key] = short
    return out


def answer_seconds(store: str, llm: str) -> None:
    """(Child mode) print the seconds of a second answer in one process."""
    from mindscape.cli import build_parser
    from mindscape.commands.ask import answer_here

    args = build_parser().parse_args(["ask", QUESTION, "--store", store, "--llm", llm])
    answer_here(args)
    start = time.perf_counter()
    answer_here(args)
    print(json.dumps({"answer_s": time.perf_counter() - start}))


def measure(store: str, llm: str, repeats: int, env: dict[str, str]) -> dict[str, Any]:
    """The four figures of one backend."""
    ask = [*MINDSCAPE, "ask", QUESTION, "--store", store, "--llm", llm, "--json"]
    cold_out: list[str] = []
    warm_out: list[str] = []
    cold = [timed([*ask, "--no-warm"], env, cold_out) for _ in range(repeats)]
    first = timed(ask, env, warm_out)
    later = [timed(ask, env, warm_out) for _ in range(repeats)]
    status = subprocess.run(
        [*MINDSCAPE, "serve", "--status", "--json"], env=env, capture_output=True, text=True
    )
    held = json.loads(status.stdout)
    subprocess.run([*MINDSCAPE, "serve", "--stop", "--quiet"], env=env, check=True)
    child = subprocess.run(
        [sys.executable, __file__, "--answer-seconds", "--store", store, "--llm", llm],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(child.stdout.strip().splitlines()[-1])["answer_s"]
    row = {
        "llm": llm,
        "cold_s": round(statistics.median(cold), 2),
        "warm_first_s": round(first, 2),
        "warm_later_s": round(statistics.median(later), 2),
        "answer_s": round(answer, 2),
        "warm_rss_mb": held.get("rss_mb"),
        "model_servers": len(held.get("model_servers") or []),
        "embedders": held.get("embedders"),
        "same_output": len({*cold_out, *warm_out}) == 1,
        "differ_cold": differences(cold_out),
        "differ_cold_warm": differences(cold_out + warm_out),
    }
    row["later_over_answer"] = round(row["warm_later_s"] / max(row["answer_s"], 1e-9), 2)
    row["first_minus_cold_s"] = round(row["warm_first_s"] - row["cold_s"], 2)
    row["cold_over_later"] = round(row["cold_s"] / max(row["warm_later_s"], 1e-9), 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", default=".mindscape/demo-store")
    ap.add_argument("--llm", choices=["local", "extractive", "both"], default="both")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--answer-seconds", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.answer_seconds:
        answer_seconds(args.store, args.llm)
        return
    if not (Path(args.store) / "cache.sqlite3").is_file():
        sys.exit(f"no store at {args.store}: `mindscape demo --llm extractive` builds it")
    from mindscape.models.local import find_model

    scratch = Path(tempfile.mkdtemp(prefix="mw-bench-"))
    env = {
        **os.environ,
        "MINDSCAPE_RUNTIME_DIR": str(scratch / "run"),
        "MINDSCAPE_CACHE": str(scratch / "cache"),
        "MINDSCAPE_WARM": "1",
        "HF_HUB_OFFLINE": "1",
        "LANGSMITH_TRACING": "false",
    }
    model = find_model()
    if model is not None:
        env["MINDSCAPE_LOCAL_MODEL"] = str(model)
    backends = ["extractive", "local"] if args.llm == "both" else [args.llm]
    if "local" in backends and model is None:
        sys.exit("no local model installed (`make model`); run with --llm extractive")
    load_before = os.getloadavg()
    try:
        rows = [measure(args.store, llm, args.repeats, env) for llm in backends]
    finally:
        subprocess.run([*MINDSCAPE, "serve", "--stop", "--quiet"], env=env)
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()
    cols = [
        "llm", "cold_s", "warm_first_s", "warm_later_s", "answer_s", "later_over_answer",
        "first_minus_cold_s", "cold_over_later", "warm_rss_mb", "model_servers", "embedders",
        "same_output",
    ]  # fmt: skip
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    print(
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        f"({os.cpu_count()} cores); targets: later_over_answer <= 1.3, first_minus_cold_s <= 1, "
        "extractive warm_later_s <= 1.5"
    )
    print(
        json.dumps(
            {
                "question": QUESTION,
                "store": args.store,
                "repeats": args.repeats,
                "load_before": round(load_before[0], 2),
                "load_after": round(load_after[0], 2),
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
