"""`mindscape eval` end to end on real data: real index, real graph, killed midway and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import BENCH, REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (BENCH / "comorag_cinderella").exists(), reason="bench data not present"
    ),
]


def eval_cmd(out, stores):
    return [
        sys.executable,
        "-m",
        "mindscape",
        "eval",
        "--bench",
        str(BENCH),
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
    assert len(results.read_text().splitlines()) == 6  # 3 questions x 2 presets
    assert (tmp_path / "full" / "report.md").read_text().count("|") > 10

    out = tmp_path / "killed"
    proc = subprocess.Popen(
        eval_cmd(out, stores),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if (out / "results.jsonl").exists() and (out / "results.jsonl").read_text().count(
            "\n"
        ) >= 1:
            break
        time.sleep(0.02)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = (out / "results.jsonl").read_text().count("\n")
    assert 1 <= partial <= 6
    again = subprocess.run(
        eval_cmd(out, stores), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    assert metrics_of(out) == metrics_of(tmp_path / "full")
    report = json.loads((out / "report.json").read_text())
    assert "comorag_cinderella" in report["provenance"]["command"]
    assert report["provenance"]["settings"]["presets"] == ["naive", "mindscape"]


def test_eval_rejects_unknown_preset_and_dataset(tmp_path):
    for extra in (["--preset", "nope"], ["--dataset", "nope"]):
        cmd = eval_cmd(tmp_path / "o", tmp_path / "s")
        i = cmd.index(extra[0])
        cmd[i + 1] = extra[1]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr.startswith("mindscape: error:")
        assert "Traceback" not in done.stderr
