"""The test-run log: one JSON line for every run that scored questions of a test split.

Tune on dev, report test once: a figure read off test rows and then improved on the same rows
is no longer a test figure. So every `mindscape eval --split test`, and every benchmark script
run on a test split, appends a line to ``docs/results/test-runs.jsonl`` (committed with the
results): when, at which commit, on which questions, with which presets and backend, the
headline figure of each preset, and where the per-question results went. Reading the log
before quoting a test figure tells how many times that test set was used, and for what.

The log is written only from a git checkout (a package installed elsewhere has no log), and
never while pytest runs, unless ``MINDSCAPE_TEST_RUN_LOG`` names a file: tests point it at a
temporary one; ``MINDSCAPE_TEST_RUN_LOG=off`` writes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOG_ENV = "MINDSCAPE_TEST_RUN_LOG"
"""A path for the log instead of the committed one; ``off`` (or empty) writes none."""
LOG_NAME = Path("docs") / "results" / "test-runs.jsonl"
"""The committed log, from the repository root."""
_OFF = ("", "off", "0", "no", "none")


def checkout_root() -> Path | None:
    """The repository root when this module runs from a git checkout, else None."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / ".git").exists() and (root / "docs" / "results").is_dir() else None


def log_path() -> Path | None:
    """Where test runs are logged now: ``$MINDSCAPE_TEST_RUN_LOG``, else the checkout's
    committed log (not under pytest), else nowhere (None)."""
    value = os.environ.get(LOG_ENV)
    if value is not None:
        return None if value.strip().lower() in _OFF else Path(value)
    if "PYTEST_CURRENT_TEST" in os.environ:  # a test that forgot to name its own log
        return None
    root = checkout_root()
    return root / LOG_NAME if root is not None else None


def git_commit() -> str:
    """The checkout's short commit, with ``+dirty`` when tracked files differ from it ("" when
    git cannot say)."""
    root = checkout_root() or Path.cwd()

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
        )
        return done.stdout.strip()

    try:
        sha = git("rev-parse", "--short", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return ""
    return sha + ("+dirty" if dirty else "")


def figure(metric: str | None, mean: float | None, n: int) -> dict[str, Any]:
    """One headline figure as the log keeps it."""
    value = None if mean is None or mean != mean else round(float(mean), 4)  # NaN: none
    return {"metric": metric, "mean": value, "n": int(n)}


def log_line(
    *,
    source: str,
    dataset: str,
    split: str,
    filters: Mapping[str, Any],
    presets: Sequence[str],
    llm: str | Mapping[str, Any] | None,
    figures: Mapping[str, Mapping[str, Any]] | None,
    out: str | Path | None,
    command: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The log's line for one run. `filters` are the question filters (sample, seed, limit,
    per_doc, doc_ids: the unset ones are dropped); `figures` maps each preset (or reader) to
    :func:`figure`; `settings` are options that change the answers (chunk_mode, ...)."""
    now = datetime.now(UTC)
    line: dict[str, Any] = {
        "date": now.strftime("%Y-%m-%d"),
        "time_utc": now.strftime("%H:%M:%S"),
        "commit": git_commit(),
        "source": source,
        "dataset": dataset,
        "split": split,
        "filters": {k: v for k, v in filters.items() if v not in (None, [], "")},
        "presets": list(presets),
        "llm": llm,
        "figures": dict(figures) if figures is not None else None,
        "out": str(out) if out is not None else None,
        "command": command if command is not None else " ".join(sys.argv),
    }
    if settings:
        line["settings"] = dict(settings)
    return line


def append_test_run(line: Mapping[str, Any], path: Path | None = None) -> Path | None:
    """Append `line` to the log (`path`, else :func:`log_path`); returns the file written, or
    None when nothing is logged."""
    target = path if path is not None else log_path()
    if target is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    return target


def read_test_runs(path: Path | None = None) -> list[dict[str, Any]]:
    """Every line of the log (the committed one by default), in order."""
    target = path if path is not None else (checkout_root() or Path.cwd()) / LOG_NAME
    if not target.exists():
        return []
    return [json.loads(x) for x in target.read_text(encoding="utf-8").splitlines() if x.strip()]
