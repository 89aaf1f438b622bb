"""`mindscape eval` end to end on real data: real index, real graph, killed midway and resumed.

The data is the fixture bench (tests/bench: the bundled story and the bench's three questions
about it, tests/fixture_bench.py), so the kill-and-resume test runs in CI too; the extractive
backend keeps it fast."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_BENCH, REPO, stopped_or_exited

pytestmark = pytest.mark.integration

# `python -c PAUSED eval ...` is `python -m mindscape eval ...` with one seam: an answer that
# starts once results.jsonl holds a record stops the process (SIGSTOP). The test then kills it
# there, mid-run, with the rest of its questions unanswered, however fast they would go.
PAUSED = """
import os, runpy, signal, sys
import mindscape.commands.eval as runner

made = runner.graph_answer_fn

def graph_answer_fn(settings):
    answer, results = made(settings), settings.out / "results.jsonl"
    def paused(view, preset, store):
        if results.exists() and results.read_text().strip():
            os.kill(os.getpid(), signal.SIGSTOP)
        return answer(view, preset, store)
    return paused

runner.graph_answer_fn = graph_answer_fn
sys.argv[0] = "mindscape"
runpy.run_module("mindscape", run_name="__main__")
"""


def eval_cmd(out, stores, bench: Path = FIXTURE_BENCH):
    return [
        sys.executable,
        "-m",
        "mindscape",
        "eval",
        "--bench",
        str(bench),
        "--dataset",
        "comorag_cinderella",
        "--split",
        "dev",
        "--preset",
        "naive,mindscape",
        "--out",
        str(out),
        "--stores",
        str(stores),
        "--llm",
        "extractive",
        "--quiet",
    ]


def metrics_of(out):
    report = json.loads((out / "report.json").read_text())
    return {
        (g["preset"], g["dataset"]): {k: v["mean"] for k, v in g["metrics"].items()}
        for g in report["groups"]
    }


def test_eval_killed_midway_resumes_to_the_same_report(tmp_path):
    stores = tmp_path / "stores"
    full = subprocess.run(
        eval_cmd(tmp_path / "full", stores), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert full.returncode == 0, full.stderr
    results = tmp_path / "full" / "results.jsonl"
    total = len(results.read_text().splitlines())
    assert total == 6  # 3 questions x 2 presets
    assert (tmp_path / "full" / "report.md").read_text().count("|") > 10

    out, log = tmp_path / "killed", tmp_path / "killed.stderr"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", PAUSED, *eval_cmd(out, stores)[3:]],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        status = stopped_or_exited(proc.pid, timeout=300)
        # stopped by the seam, after its first record, before its next answer: not finished
        assert status is not None and os.WIFSTOPPED(status), (
            "the run did not stop after its first record"
            + (
                " (time-out)"
                if status is None
                else f" (ended, exit {os.waitstatus_to_exitcode(status)})"
            ),
            log.read_text(),
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL  # it died of the kill, not of its own accord
    assert not (out / "report.json").exists()
    partial = (out / "results.jsonl").read_text().splitlines()
    assert len(partial) == 1 < total, partial  # killed after one answer of six

    again = subprocess.run(
        eval_cmd(out, stores), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    assert lines[: len(partial)] == partial  # what the killed run wrote is kept, not redone
    keys = [(r["preset"], r["qid"]) for r in map(json.loads, lines)]
    assert len(keys) == total and len(set(keys)) == total  # each answer once
    assert metrics_of(out) == metrics_of(tmp_path / "full")
    report = json.loads((out / "report.json").read_text())
    assert "comorag_cinderella" in report["provenance"]["command"]
    assert report["provenance"]["settings"]["presets"] == ["naive", "mindscape"]


def test_eval_rejects_unknown_preset_and_dataset(tmp_path):
    """Both are refused before any work, with no bench data: a bench of one manifest."""
    bench = tmp_path / "bench"
    bench.mkdir()
    manifest = {"version": "bench-v1", "datasets": {"comorag_cinderella": {"splits": {"dev": {}}}}}
    (bench / "manifest.json").write_text(json.dumps(manifest))
    expected = {
        "--preset": "unknown preset(s): nope",
        "--dataset": "unknown dataset 'nope' (known: comorag_cinderella)",
    }
    for option, message in expected.items():
        cmd = eval_cmd(tmp_path / "o", tmp_path / "s", bench=bench)
        cmd[cmd.index(option) + 1] = "nope"
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr.startswith("mindscape: error:"), done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "s").exists()
