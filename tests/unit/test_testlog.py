"""The test-run log: a run on a test split appends one line; a dev run, none; tests never write
the committed log."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from mindscape.eval import testlog
from mindscape.eval.runner import EvalSettings, run_eval
from tests.fakes import HashingEmbedder

STORY = "Ann found a red key in the garden. " * 3 + "Later she opened the old chest with it. " * 3


@pytest.fixture()
def bench(tmp_path: Path) -> Path:
    """One story and its question on each split."""
    root = tmp_path / "bench"
    (root / "toy").mkdir(parents=True)
    docs, questions = [], []
    for split in ("dev", "test"):
        docs.append({"doc_id": f"toy-{split}", "split": split, "title": split, "text": STORY})
        for n in range(2):
            questions.append(
                {
                    "qid": f"{split}-q{n}",
                    "split": split,
                    "doc_id": f"toy-{split}",
                    "task": "open_qa",
                    "question": "What did Ann find?",
                    "answers": ["a red key"],
                }
            )
    (root / "toy" / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "toy" / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    manifest = {"datasets": {"toy": {"splits": {"dev": {}, "test": {}}}}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def answer(view: dict, preset: str, store: Path) -> dict:
    return {"answer": "a red key" if preset == "p1" else "a chest", "evidence": [], "llm_calls": 1}


def settings(bench: Path, tmp_path: Path, split: str, **kw: object) -> EvalSettings:
    return EvalSettings(
        bench=bench,
        dataset="toy",
        split=split,
        presets=["p1", "p2"],
        out=tmp_path / f"out-{split}",
        stores=tmp_path / "stores",
        progress=False,
        extra={"command": "mindscape eval ...", "llm": {"backend": "extractive", "model": None}},
        **kw,  # type: ignore[arg-type]
    )


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_test_run_appends_one_line_with_its_figures(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "test-runs.jsonl"
    monkeypatch.setenv(testlog.LOG_ENV, str(log))
    s = settings(bench, tmp_path, "test", sample=2, seed=24, context={"chunk_mode": "dense"})
    run_eval(s, answer, embedder=HashingEmbedder())
    (line,) = lines(log)
    assert line["date"] and line["commit"] is not None and line["source"] == "mindscape eval"
    assert (line["dataset"], line["split"], line["presets"]) == ("toy", "test", ["p1", "p2"])
    assert line["filters"] == {"sample": 2, "seed": 24}
    assert line["llm"]["backend"] == "extractive" and line["settings"] == {"chunk_mode": "dense"}
    assert line["figures"] == {
        "p1": {"metric": "f1", "mean": 1.0, "n": 2},
        "p2": {"metric": "f1", "mean": 0.0, "n": 2},
    }
    assert line["out"] == str(tmp_path / "out-test") and line["command"] == "mindscape eval ..."


def test_a_dev_run_logs_nothing(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "test-runs.jsonl"
    monkeypatch.setenv(testlog.LOG_ENV, str(log))
    run_eval(settings(bench, tmp_path, "dev"), answer, embedder=HashingEmbedder())
    assert not log.exists()


def test_tests_never_write_the_committed_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(testlog.LOG_ENV, raising=False)
    assert testlog.log_path() is None  # under pytest, without a log of its own
    monkeypatch.setenv(testlog.LOG_ENV, "off")
    assert testlog.log_path() is None and testlog.append_test_run({"x": 1}) is None


def test_a_benchmark_script_on_test_logs_its_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from common import log_test_run

    log = tmp_path / "test-runs.jsonl"
    monkeypatch.setenv(testlog.LOG_ENV, str(log))
    monkeypatch.setattr(sys, "argv", ["benchmarks/reader_ceiling.py", "--split", "test"])
    args = argparse.Namespace(
        dataset="fairytaleqa", split="dev", sample=60, seed=24, out="docs/results/x"
    )
    log_test_run(args, {"ceiling": ("f1", 0.4491, 60)}, llm="local")
    assert not log.exists()
    args.split = "test"
    log_test_run(args, {"ceiling": ("f1", 0.4491, 60)}, llm="local")
    (line,) = lines(log)
    assert line["source"] == "benchmarks/reader_ceiling.py" and line["llm"] == "local"
    assert line["figures"] == {"ceiling": {"metric": "f1", "mean": 0.4491, "n": 60}}
    assert line["filters"] == {"sample": 60, "seed": 24} and line["out"] == "docs/results/x"
