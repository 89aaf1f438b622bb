"""The test-run log: one JSON line for every run that scored questions of a test split.

Tune on dev, report test once: a figure read off test rows and then improved on the same rows
is no longer a test figure. So every `mindscape eval --split test`, and every benchmark script
run on a test split, appends a line to ``docs/results/test-runs.jsonl`` (committed with the
results): when, at which commit, on which questions, with which presets and backend, the
headline figure of each preset, and where the per-question results went. Reading the log
before quoting a test figure tells how many times that test set was used, and for what.

A run is started (:func:`start_test_run`) before it reads a test row: the commit and whether
the tree had uncommitted changes under ``src/`` or ``benchmarks/`` are taken then, not when the
run ends (a long run would otherwise log the commit made during it). A run from such a tree is
refused, unless ``--allow-dirty``, which its line records. The line also keeps the ids of the
questions it scored, so :func:`looks` can tell how many earlier runs scored the same ones.

The log is written only from a git checkout (a package installed elsewhere has no log), and
never while pytest runs, unless ``MINDSCAPE_TEST_RUN_LOG`` names a file: tests point it at a
temporary one; ``MINDSCAPE_TEST_RUN_LOG=off`` writes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mindscape.errors import MindscapeError

LOG_ENV = "MINDSCAPE_TEST_RUN_LOG"
"""A path for the log instead of the committed one; ``off`` (or empty) writes none."""
LOG_NAME = Path("docs") / "results" / "test-runs.jsonl"
"""The committed log, from the repository root."""
_OFF = ("", "off", "0", "no", "none")
WATCHED = ("src", "benchmarks")
"""The folders whose uncommitted changes refuse a test run: the code that answers and scores."""


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


def _git(*args: str) -> str:
    root = checkout_root() or Path.cwd()
    done = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
    )
    return done.stdout.strip()


def tree_state() -> tuple[str, list[str]]:
    """The checkout's short commit and its uncommitted changes under :data:`WATCHED` (paths,
    untracked files included); ``("", [])`` when git cannot say."""
    try:
        sha = _git("rev-parse", "--short", "HEAD")
        changed = _git("status", "--porcelain", "--", *WATCHED).splitlines()
    except (OSError, subprocess.SubprocessError):
        return "", []
    return sha, [x[3:] for x in changed if x.strip()]


def git_commit() -> str:
    """The checkout's short commit, with ``+dirty`` when code under :data:`WATCHED` differs
    from it ("" when git cannot say)."""
    sha, changed = tree_state()
    return sha + ("+dirty" if sha and changed else "")


class DirtyTreeError(MindscapeError):
    """A test run from a tree with uncommitted changes to the code, without ``--allow-dirty``."""


@dataclass(frozen=True)
class TestRun:
    """A test run as it started: when, at which commit, from which tree."""

    __test__ = False  # not a pytest class

    started: datetime
    commit: str
    changed: tuple[str, ...] = ()
    """Uncommitted changes under :data:`WATCHED` when it started."""
    allow_dirty: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dirty(self) -> bool:
        return bool(self.changed)


def start_test_run(*, allow_dirty: bool = False) -> TestRun:
    """Start a test run: take the commit and the tree's state now, before any test row is read.
    Raises :class:`DirtyTreeError` when code under ``src/`` or ``benchmarks/`` has uncommitted
    changes, unless `allow_dirty` (the log line then says so). Nothing is checked when no log
    is written (:func:`log_path` is None: an installed package, or a test without a log)."""
    now = datetime.now(UTC)
    if log_path() is None:
        return TestRun(now, "", allow_dirty=allow_dirty)
    sha, changed = tree_state()
    if changed and not allow_dirty:
        shown = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        raise DirtyTreeError(
            f"a test run from a tree with uncommitted changes ({shown}): its figures could not "
            "be traced to a commit; commit first, or pass --allow-dirty (the log records it)"
        )
    return TestRun(now, sha, tuple(changed), allow_dirty)


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
    run: TestRun,
    command: str | None = None,
    settings: Mapping[str, Any] | None = None,
    qids: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The log's line for one run, dated and attributed as `run` started
    (:func:`start_test_run`). `filters` are the question filters (sample, seed, limit,
    per_doc, doc_ids: the unset ones are dropped); `figures` maps each preset (or reader) to
    :func:`figure`; `settings` are options that change the answers (chunk_mode, ...); `qids`
    the questions it scored (kept sorted, for :func:`looks`)."""
    line: dict[str, Any] = {
        "date": run.started.strftime("%Y-%m-%d"),
        "time_utc": run.started.strftime("%H:%M:%S"),
        "commit": run.commit + ("+dirty" if run.dirty else ""),
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
    if run.dirty:
        line["dirty"] = list(run.changed)
    if run.allow_dirty:
        line["allow_dirty"] = True
    if settings:
        line["settings"] = dict(settings)
    if qids is not None:
        line["qids"] = sorted(set(qids))
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


QUESTION_FILTERS = ("sample", "seed", "limit", "per_doc", "doc_ids", "stories")
"""The filters that choose a run's questions; any other (pools, pool_size, pooled) does not."""


def questions_of(
    line: Mapping[str, Any], root: Path | None = None
) -> tuple[frozenset[str] | None, str]:
    """The test questions a logged run scored, as ``(ids, filters)``: the ids are its
    ``qids``, else the ``qid`` of the rows committed at its ``out`` (a file or folder under
    ``docs/results``), else None; the filters are the ones that chose its questions, as a text
    (``"all"`` when none did: the whole split), naming the same questions as an equal text."""
    chosen = {k: v for k, v in (line.get("filters") or {}).items() if k in QUESTION_FILTERS}
    filters = "all" if not chosen else json.dumps(chosen, sort_keys=True)
    if line.get("qids"):
        return frozenset(line["qids"]), filters
    base = root or checkout_root() or Path.cwd()
    out = str(line.get("out") or "")
    if out.startswith("docs/results/"):
        path = base / out
        files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        qids = {
            str(json.loads(x)["qid"])
            for f in files
            if f.is_file()
            for x in f.read_text(encoding="utf-8").splitlines()
            if x.strip() and '"qid"' in x
        }
        if qids:
            return frozenset(qids), filters
    return None, filters


def overlap(
    a: tuple[frozenset[str] | None, str], b: tuple[frozenset[str] | None, str]
) -> bool | None:
    """Whether two runs' questions (:func:`questions_of`) share one: by their ids where both
    have them, else by their filters (the whole split, or the same filters); None when the log
    cannot tell."""
    if "all" in (a[1], b[1]):
        return True
    if a[0] is not None and b[0] is not None:
        return bool(a[0] & b[0])
    return True if a[1] == b[1] else None


@dataclass(frozen=True)
class Looks:
    """How many times a logged run's test questions had been scored, by it included."""

    nth: int
    """1 + the earlier runs that scored at least one of its questions."""
    unknown: int = 0
    """Earlier runs on the same dataset whose questions the log cannot tell apart."""

    def __str__(self) -> str:
        n = self.nth
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return ("at least the " if self.unknown else "") + f"{n}{suffix} look"


def looks(index: int, lines: Sequence[Mapping[str, Any]], root: Path | None = None) -> Looks:
    """The looks of the run logged at ``lines[index]``: the earlier lines of the same dataset
    and split (scored or read) whose questions overlap its own."""
    me = lines[index]
    mine = questions_of(me, root)
    seen = unknown = 0
    for line in lines[:index]:
        if (line.get("dataset"), line.get("split")) != (me.get("dataset"), me.get("split")):
            continue
        shared = overlap(questions_of(line, root), mine)
        seen += shared is True
        unknown += shared is None
    return Looks(seen + 1, unknown)
