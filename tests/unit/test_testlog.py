"""The test-run log: a run on a test split appends one line, dated and attributed as it started;
a tree with uncommitted code refuses it unless --allow-dirty; every script that reads test rows
logs; a dev run, none; tests never write the committed log."""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

import pytest

from mindscape.eval import testlog
from mindscape.eval.runner import EvalSettings, run_eval
from tests.fakes import HashingEmbedder

REPO = Path(__file__).resolve().parents[2]
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


@pytest.fixture(autouse=True)
def clean_tree(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    """The checkout as git would show it: commit ``abc1234``, nothing uncommitted (a test
    changes the list's one entry)."""
    state = [("abc1234", [])]
    monkeypatch.setattr(testlog, "tree_state", lambda: state[0])
    return state


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
    assert line["qids"] == ["test-q0", "test-q1"] and "dirty" not in line


def test_the_commit_is_the_one_the_run_started_at(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_tree: list
) -> None:
    """A commit made while a long run answers is not the run's: the line keeps the start's."""
    log = tmp_path / "test-runs.jsonl"
    monkeypatch.setenv(testlog.LOG_ENV, str(log))

    def answer_then_commit(view: dict, preset: str, store: Path) -> dict:
        clean_tree[0] = ("def5678", [])  # someone commits during the run
        return answer(view, preset, store)

    run_eval(settings(bench, tmp_path, "test"), answer_then_commit, embedder=HashingEmbedder())
    (line,) = lines(log)
    assert line["commit"] == "abc1234"


def test_a_tree_with_uncommitted_code_is_refused_unless_allow_dirty(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_tree: list
) -> None:
    log = tmp_path / "test-runs.jsonl"
    monkeypatch.setenv(testlog.LOG_ENV, str(log))
    clean_tree[0] = ("abc1234", ["src/mindscape/run.py"])
    with pytest.raises(testlog.DirtyTreeError, match="--allow-dirty"):
        run_eval(settings(bench, tmp_path, "test"), answer, embedder=HashingEmbedder())
    assert not log.exists() and not (tmp_path / "out-test").exists()  # refused before any work
    run_eval(settings(bench, tmp_path, "dev"), answer, embedder=HashingEmbedder())  # dev: free
    s = settings(bench, tmp_path, "test", allow_dirty=True)
    run_eval(s, answer, embedder=HashingEmbedder())
    (line,) = lines(log)
    assert line["commit"] == "abc1234+dirty" and line["dirty"] == ["src/mindscape/run.py"]
    assert line["allow_dirty"] is True


def test_the_tree_state_watches_src_and_benchmarks_only() -> None:
    """Uncommitted docs or notes do not refuse a run; code that answers or scores does."""
    assert testlog.WATCHED == ("src", "benchmarks")


def test_eval_has_allow_dirty() -> None:
    from mindscape.cli import build_parser

    args = build_parser().parse_args(
        ["eval", "--bench", "b", "--dataset", "x", "--split", "test", "--allow-dirty"]
    )
    assert args.allow_dirty is True


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
    from benchmarks.common import begin_test_run, log_test_run

    log = tmp_path / "test-runs.jsonl"
    monkeypatch.setenv(testlog.LOG_ENV, str(log))
    monkeypatch.setattr(sys, "argv", ["benchmarks/reader/ceiling.py", "--split", "test"])
    args = argparse.Namespace(
        dataset="fairytaleqa", split="dev", sample=60, seed=24, out="docs/results/x"
    )
    begin_test_run(args)
    log_test_run(args, {"ceiling": ("f1", 0.4491, 60)}, llm="local")
    assert not log.exists()
    args.split = "test"
    with pytest.raises(RuntimeError, match="begin_test_run"):  # a run logged at its end only
        log_test_run(args, {"ceiling": ("f1", 0.4491, 60)}, llm="local")
    begin_test_run(args)
    log_test_run(args, {"ceiling": ("f1", 0.4491, 60)}, llm="local")
    (line,) = lines(log)
    assert line["source"] == "benchmarks/reader/ceiling.py" and line["llm"] == "local"
    assert line["figures"] == {"ceiling": {"metric": "f1", "mean": 0.4491, "n": 60}}
    assert line["filters"] == {"sample": 60, "seed": 24} and line["out"] == "docs/results/x"


def test_a_benchmark_script_on_a_dirty_tree_stops_before_reading_test_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_tree: list
) -> None:
    from benchmarks.common import begin_test_run

    monkeypatch.setenv(testlog.LOG_ENV, str(tmp_path / "test-runs.jsonl"))
    clean_tree[0] = ("abc1234", ["benchmarks/common.py"])
    with pytest.raises(SystemExit, match="--allow-dirty"):
        begin_test_run(argparse.Namespace(split="test", allow_dirty=False))
    args = argparse.Namespace(split="dev+test", allow_dirty=True)
    begin_test_run(args)
    assert args.test_run.dirty and args.test_run.allow_dirty


READERS = {
    "load_questions",
    "load_documents",
    "bench_questions",
    "sample_answers",
    "split_store",
    "prepare",
}
"""The calls by which a script reads a split's rows."""


def called(node: ast.AST, names: set[str]) -> list[int]:
    """The lines where `node` calls one of `names` by its plain name."""
    return sorted(
        n.lineno
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names
    )


def test_every_script_that_can_read_test_rows_starts_and_logs_its_run() -> None:
    """A benchmark script with a --split option that reads a split's rows starts its run before
    it reads one (begin_test_run, which takes the commit and refuses a dirty tree) and logs it
    (log_test_run). A script that only runs `mindscape eval` is logged by eval itself."""
    missing, checked = [], []
    for path in sorted((REPO / "benchmarks").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        if path.name == "common.py" or "--split" not in text and "sample_parser(" not in text:
            continue
        if not called(tree, READERS):
            continue
        checked.append(path.relative_to(REPO / "benchmarks").as_posix())
        if not called(tree, {"begin_test_run"}) or not called(tree, {"log_test_run"}):
            missing.append(f"{checked[-1]}: no begin_test_run or no log_test_run")
            continue
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and (begin := called(fn, {"begin_test_run"})):
                early = [line for line in called(fn, READERS) if line < begin[0]]
                if early:
                    missing.append(f"{checked[-1]}:{early[0]}: reads rows before begin_test_run")
    assert not missing, missing
    assert {"mom/recall.py", "retrieval/recall.py", "reader/ceiling.py"} <= set(checked)


def line_of(n: int, **kw: object) -> dict:
    return {"dataset": "toy", "split": "test", "filters": {"sample": n}, "source": f"run {n}", **kw}


def test_looks_count_the_earlier_runs_that_scored_the_same_questions(tmp_path: Path) -> None:
    log = [
        line_of(0, filters={"pools": 1}),  # the whole split: every question
        line_of(1, filters={"sample": 60, "seed": 24}),
        line_of(2, qids=["q9"]),  # other questions
        line_of(3, filters={"limit": 150}),  # first 150: which ones, the log cannot tell
        line_of(4, filters={"sample": 60, "seed": 24}, qids=["q1", "q2"]),
        line_of(5, qids=["q2", "q3"]),
        {**line_of(6, qids=["q2"]), "dataset": "other"},
    ]
    assert [str(testlog.looks(i, log, tmp_path)) for i in (0, 1, 2, 4, 5, 6)] == [
        "1st look",
        "2nd look",  # 0
        "at least the 2nd look",  # 0; 1 unknown (q9 may be in its sample)
        "at least the 3rd look",  # 0 and 1 (the same filters); 3 unknown
        "at least the 3rd look",  # 0 and 4 (q2); 1 and 3 unknown
        "1st look",  # another dataset
    ]
    committed = tmp_path / "docs" / "results" / "run"
    committed.mkdir(parents=True)
    (committed / "results.jsonl").write_text('{"qid": "q3", "preset": "naive"}\n')
    log[2] = line_of(2, out="docs/results/run")  # its questions from its committed rows
    assert testlog.looks(5, log, tmp_path).nth == 4
