"""Figures computed from the per-question results committed under docs/results/.

    python benchmarks/figures/committed_figures.py docs/results/novels/test docs/results/novels/test-dense-tie

prints every figure those files give (means with their 95% bootstrap CIs, paired differences
between any two runs over the questions both answered, per book, costs). docs/results.md names
the files a block's figures come from in an HTML comment above it,
``<!-- from: PATH[, PATH] -->``, and `tests/unit/test_figures.py` checks that every figure of
such a block is one of them. `figures/make_results.py --figures` writes the blocks generated outright
(the headline table of docs/results.md and README.md's status lines) from :func:`headline`.

A path is a file or a folder of JSON-lines files. Each file is read by what its rows hold:

* eval records (``mindscape eval``'s results.jsonl, ``reader/ceiling.py``'s ceiling.jsonl):
  one run per (file, preset); a folder's files of one preset whose questions do not overlap
  (one file a book) are also read as one run;
* ranker rows (``ranker/evidence_ranking.py``'s questions.jsonl): one run per ranker;
* novel-miss rows (``evidence/novel_misses.py``'s questions.jsonl): the share of each bucket;
* reading rows (``reader/windows.py``'s readings.jsonl): one run per reading;
* answer rows (``reader/confidence.py``'s answers.jsonl): one run per reading, with the
  AUROC of the ``top2`` answer's confidence and the rule that reads on when it is unsure;
* evidence rows (``evidence/answer_evidence.py --out``): one run per (file, variant), scored by
  whether the gold answer is in what the final answer read (``present_final``).
"""

from __future__ import annotations

import functools
import json
import math
import re
import statistics
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import paired_points
from mindscape.eval.metrics import bootstrap_ci

REPO = Path(__file__).resolve().parents[2]
RESAMPLES = (1000, 2000)
"""The bootstrap sizes the project's scripts use (the report's 1000, the paired helpers' 2000)."""
HEADLINES = ("accuracy", "claim_correct", "f1", "present_final")
"""A record's headline metric: the first of these it has (as figures/paired_runs.py reads it; an
evidence row's is ``present_final``)."""
DAGGER = "†"
LEGEND = "† chosen after reading test rows of this set"


# ---- figures as strings ------------------------------------------------------------------


def norm(figure: str) -> str:
    """A figure as written in a page, compared by its text: the Unicode minus read as ``-``,
    the percent sign dropped (``98.1%`` is ``98.1``), a signed zero unsigned (``−0.0`` is
    ``0.0``). A sign that is written stays: ``+1.2`` is a difference, ``1.2`` a value."""
    text = figure.replace("−", "-").rstrip("%")
    if text[:1] in "+-" and float(text) == 0:
        text = text[1:]
    return text


class Figures(dict[str, float]):
    """The computed values of a source, by key (``results.jsonl:naive.f1``,
    ``results.jsonl:mindscape~results.jsonl:naive.points.lo``): what a ``from:`` mark names,
    one key per figure of its block. A page's figure shows the value at the decimals it is
    written with; a sign written is the value's (:func:`shows`)."""

    def add_value(self, key: str, value: float | None) -> None:
        """Keep `value` under `key` (its spaces as ``_``: a mark's keys are space-separated)."""
        if value is None or not math.isfinite(value):
            return
        self.setdefault(key.replace(" ", "_"), float(value))

    def add_ci(self, key: str, values: Sequence[float], scale: float = 1.0) -> None:
        """The mean of `values` (`key`) and the bounds of its bootstrap CIs: ``key.lo`` and
        ``key.hi`` with the report's 1000 resamples, ``key.lo2000`` and ``key.hi2000`` with the
        paired helpers' 2000."""
        for n in RESAMPLES:
            mean, low, high = bootstrap_ci(values, n_resamples=n)
            tail = "" if n == RESAMPLES[0] else str(n)
            self.add_value(key, scale * mean)
            self.add_value(f"{key}.lo{tail}", scale * low)
            self.add_value(f"{key}.hi{tail}", scale * high)


def decimals_of(figure: str) -> int:
    text = norm(figure).lstrip("+-")
    return len(text.split(".", 1)[1]) if "." in text else 0


def shows(figure: str, value: float) -> bool:
    """Whether a page's `figure` is `value` as written: at the figure's decimals, its sign
    included (``+1.2`` and ``−1.2`` are signed values; ``1.2`` is a value that is not negative
    at that precision). A percent sign is dropped (the key names the percentage)."""
    text = norm(figure).replace(",", "")
    d = decimals_of(text)
    if text[:1] in "+-":
        return norm(f"{value:+.{d}f}") == text
    return norm(f"{value:.{d}f}") == text


# ---- reading the files -------------------------------------------------------------------


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def kind_of(row: Mapping[str, Any]) -> str:
    """What a file's rows are, from its first row."""
    if "preset" in row and "metrics" in row:
        return "eval"
    if "variant" in row and "evidence" in row and "f1" in row:
        return "reader"
    if "variant" in row and "present_final" in row:
        return "evidence"
    if "bucket" in row:
        return "misses"
    if "reading" in row and "score" in row:
        return "readings"
    if isinstance(row.get("top2"), dict) and "logprobs" in row["top2"]:
        return "confidence"
    if any(isinstance(v, dict) and "hit1" in v for v in row.values()):
        return "ranker"
    return "other"


def files_of(source: Path) -> list[Path]:
    return sorted(source.glob("*.jsonl")) if source.is_dir() else [source]


@dataclass
class Run:
    """One run's per-question records: a preset of an eval file, a ranker, a reading."""

    name: str
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    """By question id."""


def headline_of(rec: Mapping[str, Any]) -> float:
    m = rec["metrics"]
    return float(next(m[k] for k in HEADLINES if k in m))


def eval_runs(source: Path) -> list[Run]:
    """The runs of eval records under `source`: per (file, preset), and per (folder,
    preset) over files whose questions do not overlap."""
    runs: list[Run] = []
    by_preset: dict[str, list[Run]] = {}
    for path in files_of(source):
        rows = rows_of(path)
        if not rows or kind_of(rows[0]) != "eval":
            continue
        for preset in dict.fromkeys(r["preset"] for r in rows):
            run = Run(f"{path.name}:{preset}", {r["qid"]: r for r in rows if r["preset"] == preset})
            runs.append(run)
            by_preset.setdefault(preset, []).append(run)
    for preset, parts in by_preset.items():
        qids = [q for run in parts for q in run.rows]
        if len(parts) > 1 and len(qids) == len(set(qids)):
            pooled = Run(f"{source.name}:{preset}")
            for run in parts:
                pooled.rows.update(run.rows)
            runs.append(pooled)
    return runs


# ---- the figures of each kind ------------------------------------------------------------


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def q(p: float) -> float:
        import numpy as np

        return float(np.percentile(ordered, p))

    return {
        "p50": q(50),
        "p90": q(90),
        "p95": q(95),
        "max": ordered[-1],
        "mean": sum(values) / len(values),
    }


def eval_figures(runs: Sequence[Run], out: Figures) -> None:
    """Per run: each metric's mean and CIs, per book too, Recall@k, calls, tokens and
    seconds; per pair of runs: the paired difference of the headline metric (points and
    raw), per book, and the ratio of the means."""
    for run in runs:
        recs = list(run.rows.values())
        for name in sorted({k for r in recs for k in r.get("metrics") or {}}):
            values = [float(r["metrics"][name]) for r in recs if name in r["metrics"]]
            out.add_ci(f"{run.name}.{name}", values)
            for doc in sorted({str(r.get("doc_id")) for r in recs}):
                mine = [
                    float(r["metrics"][name])
                    for r in recs
                    if str(r.get("doc_id")) == doc and name in r["metrics"]
                ]
                out.add_value(f"{run.name}.{name}@{doc}", statistics.mean(mine) if mine else None)
        out.add_value(f"{run.name}.n", len(recs))
        for k in sorted({k for r in recs for k in r.get("recall_at_k") or {}}):
            out.add_value(
                f"{run.name}.R@{k}",
                statistics.mean(
                    float(r["recall_at_k"][k]) for r in recs if k in (r.get("recall_at_k") or {})
                ),
            )
        calls = [float(r.get("llm_calls", 0)) for r in recs]
        out.add_value(f"{run.name}.llm_calls", statistics.mean(calls))
        out.add_value(f"{run.name}.auroc", confidence_auroc(recs))
        for name in ("tokens_in", "latency_s"):
            values = [float(r[name]) for r in recs if r.get(name) is not None]
            for q, v in percentiles(values).items():
                out.add_value(f"{run.name}.{name}.{q}", v)
        for doc in sorted({str(r.get("doc_id")) for r in recs}):
            seconds = [
                float(r["latency_s"])
                for r in recs
                if str(r.get("doc_id")) == doc and "latency_s" in r
            ]
            for q, v in percentiles(seconds).items():
                out.add_value(f"{run.name}.latency_s.{q}@{doc}", v)
    for a in runs:
        for b in runs:
            if a is not b:
                pair_figures(a, b, out)


def confidence_auroc(recs: Sequence[Mapping[str, Any]]) -> float | None:
    """The AUROC of the runs' answer confidence for a good open answer (F1 >= 0.5); None
    without both kinds of answer or without confidences."""
    from sklearn.metrics import roc_auc_score

    scored = [
        r for r in recs if "f1" in (r.get("metrics") or {}) and r.get("confidence") is not None
    ]
    good = [float(r["metrics"]["f1"]) >= 0.5 for r in scored]
    if not 0 < sum(good) < len(good):
        return None
    return float(roc_auc_score(good, [float(r["confidence"]) for r in scored]))


def pair_figures(a: Run, b: Run, out: Figures) -> None:
    """A − B over the questions both hold. A bootstrap CI depends on the order of the values,
    and the scripts pair in file order or in question-id order: both are taken."""
    in_file = [q for q in a.rows if q in b.rows]
    keys = sorted(in_file)
    if len(keys) < 2:
        return
    try:
        sa = [headline_of(a.rows[q]) for q in keys]
        sb = [headline_of(b.rows[q]) for q in keys]
    except StopIteration:
        return
    pair = f"{a.name}~{b.name}"
    for order, tail in ((keys, ""), (in_file, ".in_file")):
        xa = [headline_of(a.rows[q]) for q in order]
        xb = [headline_of(b.rows[q]) for q in order]
        d = paired_points(xa, xb)
        out.add_value(f"{pair}.points{tail}", d["mean"])
        out.add_value(f"{pair}.points{tail}.lo", d["low"])
        out.add_value(f"{pair}.points{tail}.hi", d["high"])
        out.add_ci(f"{pair}.diff{tail}", [x - y for x, y in zip(xa, xb, strict=True)])
        out.add_value(f"{pair}.better", d["better"])
        out.add_value(f"{pair}.worse", d["worse"])
    out.add_value(f"{pair}.n", len(keys))
    diff = [x - y for x, y in zip(sa, sb, strict=True)]
    for doc in sorted({str(a.rows[q].get("doc_id")) for q in keys}):
        mine = [x for q, x in zip(keys, diff, strict=True) if str(a.rows[q].get("doc_id")) == doc]
        out.add_value(f"{pair}.points@{doc}", 100 * statistics.mean(mine))
    mb = statistics.mean(sb)
    if mb:
        out.add_value(f"{pair}.ratio", statistics.mean(sa) / mb)
    for name in ("tokens_in", "llm_calls"):
        ta = [float(a.rows[q].get(name) or 0) for q in keys]
        tb = [float(b.rows[q].get(name) or 0) for q in keys]
        if statistics.median(tb):
            out.add_value(f"{pair}.{name}.ratio_p50", statistics.median(ta) / statistics.median(tb))
        if statistics.mean(tb):
            out.add_value(f"{pair}.{name}.ratio", statistics.mean(ta) / statistics.mean(tb))


RANKER_FIELDS = ("hit1", "rr", "win", "holds")


def ranker_figures(rows: Sequence[Mapping[str, Any]], out: Figures) -> None:
    """Per ranker: hit@1, MRR, the two windows and *holds* with CIs, ranking time, the share of
    questions with gold among the candidates; the paired difference of each pair, in points."""
    names = [k for k, v in rows[0].items() if isinstance(v, dict) and "hit1" in v]
    for name in names:
        for key in RANKER_FIELDS:
            out.add_ci(f"{name}.{key}", [float(r[name][key]) for r in rows])
        out.add_value(f"{name}.n", len(rows))
        ms = [float(r[name]["ms"]) for r in rows]
        for q, v in percentiles(ms).items():
            out.add_value(f"{name}.ms.{q}", v)
        gold = statistics.mean(float(r[name]["rank"] is not None) for r in rows)
        out.add_value(f"{name}.gold", gold)
        out.add_value(f"{name}.gold%", 100 * gold)
    for a in names:
        for b in names:
            if a != b:
                for key in RANKER_FIELDS:
                    d = paired_points([r[a][key] for r in rows], [r[b][key] for r in rows])
                    out.add_value(f"{a}~{b}.{key}.points", d["mean"])
                    out.add_value(f"{a}~{b}.{key}.points.lo", d["low"])
                    out.add_value(f"{a}~{b}.{key}.points.hi", d["high"])
                    out.add_value(f"{a}~{b}.{key}.better", d["better"])
                    out.add_value(f"{a}~{b}.{key}.worse", d["worse"])


def misses_figures(rows: Sequence[Mapping[str, Any]], out: Figures) -> None:
    """The share of each bucket, and of questions a session summary answers, with CIs."""
    for name in sorted({r["bucket"] for r in rows}):
        out.add_ci(f"bucket:{name}", [float(r["bucket"] == name) for r in rows])
        out.add_value(f"bucket:{name}.n", sum(r["bucket"] == name for r in rows))
    out.add_ci("summary", [float(bool(r.get("summary"))) for r in rows])
    out.add_value("summary.n", sum(bool(r.get("summary")) for r in rows))
    out.add_value("n", len(rows))


def reading_runs(rows: Sequence[Mapping[str, Any]]) -> list[Run]:
    """The runs of reading rows, one a reading, scored as eval records are."""
    return [
        Run(
            name,
            {r["qid"]: {"metrics": {"f1": r["score"]}, **r} for r in rows if r["reading"] == name},
        )
        for name in dict.fromkeys(r["reading"] for r in rows)
    ]


def readings_figures(rows: Sequence[Mapping[str, Any]], out: Figures) -> None:
    """Per reading: the share that holds an answer, and its mean score where it holds one and
    where it does not; then the eval figures of the readings as runs."""
    runs = reading_runs(rows)
    for run in runs:
        holds = statistics.mean(float(r.get("holds", 0)) for r in run.rows.values())
        out.add_value(f"{run.name}.holds", holds)
        for held, tail in ((True, "holds"), (False, "misses")):
            scores = [float(r["score"]) for r in run.rows.values() if bool(r.get("holds")) is held]
            out.add_value(f"{run.name}.score@{tail}", statistics.mean(scores) if scores else None)
    eval_figures(runs, out)


CONFIDENCE_FLOOR = 0.5
"""reader/confidence.py's default ``--floor``: below it the rule reads the next windows too."""


def answer_confidence(reading: Mapping[str, Any]) -> float:
    """An answer's confidence as reader/confidence.py takes it: its tokens' geometric-mean
    probability (0 for an empty answer)."""
    from mindscape.llm.logprobs import mean_probability

    return mean_probability(reading.get("logprobs") or []) or 0.0


def confidence_runs(rows: Sequence[Mapping[str, Any]]) -> list[Run]:
    """``reader/confidence.py``'s answers as runs, one per reading (``top2``, ``next2``),
    scored as reading rows are. A question with no ``next2`` reading (too few windows) counts
    its ``top2`` answer there, as the script does."""
    names = [k for k, v in rows[0].items() if isinstance(v, dict) and "logprobs" in v]
    return [
        Run(
            name,
            {
                r["qid"]: {
                    "qid": r["qid"],
                    "metrics": {"f1": r.get(name, r["top2"])["score"]},
                    "tokens_in": r.get(name, r["top2"]).get("tokens_in"),
                }
                for r in rows
            },
        )
        for name in names
    ]


def confidence_figures(rows: Sequence[Mapping[str, Any]], out: Figures) -> None:
    """What reader/confidence.py reports: each reading's score, their per-question maximum (the
    oracle), the AUROC of the ``top2`` confidence for a good answer (score ≥ 0.5), and the rule
    "below CONFIDENCE_FLOOR, read ``next2`` as well and keep the more confident answer" against
    ``top2`` alone, with the share of questions that ask twice."""
    from sklearn.metrics import roc_auc_score

    eval_figures(confidence_runs(rows), out)
    top2 = [float(r["top2"]["score"]) for r in rows]
    next2 = [float(r.get("next2", r["top2"])["score"]) for r in rows]
    out.add_ci("oracle", [max(a, b) for a, b in zip(top2, next2, strict=True)])
    good = [s >= 0.5 for s in top2]
    if 0 < sum(good) < len(good):
        conf = [answer_confidence(r["top2"]) for r in rows]
        out.add_value("top2.confidence_auroc", float(roc_auc_score(good, conf)))
    picked, asked = [], 0
    for r in rows:
        first, second = r["top2"], r.get("next2")
        if second is None or answer_confidence(first) >= CONFIDENCE_FLOOR:
            picked.append(float(first["score"]))
            continue
        asked += 1
        better = answer_confidence(second) > answer_confidence(first)
        picked.append(float((second if better else first)["score"]))
    out.add_value("rule", statistics.mean(picked))
    out.add_ci("rule~top2.diff", [p - s for p, s in zip(picked, top2, strict=True)])
    out.add_value("rule.asked", asked / len(rows))


def reader_runs(rows: list[dict[str, Any]]) -> list[Run]:
    """``reader/bench.py``'s readings as eval-like runs, one per (variant, evidence): token
    F1 and its samples' consensus as metrics, the answer's input tokens and seconds."""
    runs: dict[str, Run] = {}
    for r in rows:
        name = f"{r['variant']}/{r['evidence']}"
        runs.setdefault(name, Run(name)).rows[r["qid"]] = {
            "qid": r["qid"],
            "metrics": {"f1": r["f1"], "consensus_f1": r.get("consensus_f1", r["f1"])},
            "tokens_in": r["tokens_in"],
            "latency_s": r["seconds"],
        }
    return list(runs.values())


def evidence_runs(source: Path) -> list[Run]:
    """``evidence/answer_evidence.py``'s rows under `source` as eval-like runs, one per (file,
    variant): whether the gold answer is in what the final answer read (the headline), in
    round 1's read and in the last round's read, as metrics (0 or 1), with the input tokens."""
    runs: list[Run] = []
    for path in files_of(source):
        rows = rows_of(path)
        if not rows or kind_of(rows[0]) != "evidence":
            continue
        for variant in dict.fromkeys(r["variant"] for r in rows):
            run = Run(f"{path.name}:{variant}")
            for r in rows:
                if r["variant"] == variant:
                    run.rows[r["qid"]] = {
                        "qid": r["qid"],
                        "doc_id": r.get("doc_id"),
                        "metrics": {
                            k: float(r[k])
                            for k in ("present_final", "present_first", "present_last")
                            if k in r
                        },
                        "rounds": r.get("rounds"),
                        "tokens_in": r.get("tokens_in"),
                    }
            runs.append(run)
    return runs


def runs_of(source: Path) -> list[Run]:
    """Every run under `source` that pairs with another: eval runs, readings, the reader
    benchmark's readings and evidence/answer_evidence.py's variants."""
    runs = eval_runs(source) + evidence_runs(source)
    for file in files_of(source):
        rows = rows_of(file)
        kind = kind_of(rows[0]) if rows else "other"
        if kind == "readings":
            runs += reading_runs(rows)
        elif kind == "reader":
            runs += reader_runs(rows)
        elif kind == "confidence":
            runs += confidence_runs(rows)
    return runs


@functools.cache
def _figures(source: str) -> dict[str, float]:
    path = REPO / source
    if not path.exists():
        raise FileNotFoundError(f"{source}: no such file or folder under {REPO}")
    out = Figures()
    if path.suffix == ".json":  # a manifest: its numbers, by their path
        json_figures(json.loads(path.read_text(encoding="utf-8")), "", out)
        return dict(out)
    eval_figures(eval_runs(path), out)
    eval_figures(evidence_runs(path), out)
    for file in files_of(path):
        rows = rows_of(file)
        kind = kind_of(rows[0]) if rows else "other"
        mine = Figures()
        if kind == "ranker":
            ranker_figures(rows, mine)
        elif kind == "misses":
            misses_figures(rows, mine)
        elif kind == "readings":
            readings_figures(rows, mine)
        elif kind == "reader":
            eval_figures(reader_runs(rows), mine)
        elif kind == "confidence":
            confidence_figures(rows, mine)
        prefix = f"{file.name}:" if path.is_dir() else ""
        for key, value in mine.items():
            out.add_value(prefix + key, value)
    return dict(out)


def json_figures(data: Any, key: str, out: Figures) -> None:
    """Every number of a JSON document (a model's manifest), keyed by its path
    (``dev.holds.mean``, ``labels.0``)."""
    if isinstance(data, bool):
        return
    if isinstance(data, int | float):
        out.add_value(key, float(data))
    elif isinstance(data, dict):
        for k, v in data.items():
            json_figures(v, f"{key}.{k}" if key else str(k), out)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            json_figures(v, f"{key}.{i}" if key else str(i), out)


def figures(sources: Iterable[str]) -> dict[str, float]:
    """Every value the committed files at `sources` give, by key (paths from the repository
    root). With several sources each key starts with its source's place (``[2]``), and the
    paired differences between runs of different sources are there too
    (``[1]results.jsonl:mindscape~[2]results.jsonl:mindscape.points``)."""
    sources = [s.strip().rstrip("/") for s in sources if s.strip()]
    if len(sources) == 1:
        return dict(_figures(sources[0]))
    out: dict[str, float] = {}
    for i, s in enumerate(sources, 1):
        out.update({f"[{i}]{k}": v for k, v in _figures(s).items()})
    runs = []
    for i, s in enumerate(sources, 1):
        for run in runs_of(REPO / s):
            runs.append(Run(f"[{i}]{run.name}", run.rows))
    across = Figures()
    for a in runs:
        for b in runs:
            if a is not b and a.name[:3] != b.name[:3]:
                pair_figures(a, b, across)
    out.update(across)
    return out


def is_difference(key: str) -> bool:
    """Whether a key names a difference between two runs (``A~B.points``): the only values a
    signed figure (``+1.2``, ``−0.4``) may show."""
    return "~" in key


def candidates(figure: str, values: Mapping[str, float]) -> list[str]:
    """The keys whose value `figure` shows (:func:`shows`): for a signed figure, differences
    only; for an unsigned one, also ``-KEY``, a negated difference (a difference told by its
    size: "2.1 points lower")."""
    signed = norm(figure)[:1] in "+-"
    found = [k for k, v in values.items() if shows(figure, v) and (is_difference(k) or not signed)]
    if not signed:
        found += [
            f"-{k}" for k, v in values.items() if is_difference(k) and v < 0 and shows(figure, -v)
        ]
    return found


def value_of(key: str, values: Mapping[str, float]) -> float | None:
    if key.startswith("-") and key[1:] in values:
        return -values[key[1:]]
    return values.get(key)


# ---- the marks in a page -----------------------------------------------------------------

MARK = re.compile(r"^<!--\s*(from|recorded|settings|generated|end generated):\s*(.*?)\s*-->\s*$")
"""A source mark: ``from: PATHS``, ``recorded: DATE; COMMAND; WHY``, ``settings: WHAT`` (the
numbers are a method's parameters, not measurements), ``generated: NAME`` ... ``end
generated: NAME``."""
HEADING = re.compile(r"^(#{1,6})\s")
FIGURE = re.compile(r"(?<![\w.\-])[-+−]?\d+\.\d+(?![\w.]?\d|[A-Za-z_])%?")
"""A decimal number with its sign and percent sign, if any: 0.408, +1.2, −3.4, 98.1%; not a
version (2.13.0, Apache-2.0), a name (Qwen2.5, 1.5B) or a number inside a word."""
INTEGER = re.compile(
    r"(?<![\w.,\-−+@/:#×$])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?![\w.%@$]|,\d|:\d|[-–]\d)"
)
"""A whole number in a table cell (533, 1,028, 9 / 6): a figure too, except in a row's first
cell (its label) and the header; not part of a date, a time, a name or a decimal."""
CODE = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
REQUIREMENT = re.compile(r"(?:≥|>=|≤|<=)\s*$")
"""What comes right before a threshold (``F1 ≥ 0.25``, ``Python ≥ 3.11``): not a figure."""
VERSION = re.compile(r"\bversions?\s*$", re.IGNORECASE)
"""What comes right before a two-part version (``Ray version 2.60``, ``below version 5.24``):
not a figure. A version of three parts (``2.13.0``) is not one by its form."""


@dataclass
class Block:
    """The lines a mark covers."""

    kind: str
    """from, recorded, settings, generated, or none (no mark)."""
    value: str
    line: int
    """1-based line of the mark (0: none)."""
    figures: list[tuple[int, str]] = field(default_factory=list)
    """(1-based line, figure) of every figure in it."""


def page_figures(line: str, *, table: bool = False) -> list[str]:
    """The figures of one line of prose: code spans, link targets, requirements (``≥ 3.11``)
    and versions (``version 2.60``) left out. In a table row (`table`), the whole numbers of
    every cell but the first are figures too, in their place among the decimals."""
    text = LINK_TARGET.sub("]", CODE.sub(lambda m: " " * len(m.group(0)), line))
    found = [
        (m.start(), m.group(0))
        for m in FIGURE.finditer(text)
        if not REQUIREMENT.search(before := text[: m.start()]) and not VERSION.search(before)
    ]
    if table and text.lstrip().startswith("|"):
        first = text.index("|", text.index("|") + 1)  # the end of the label cell
        blank = FIGURE.sub(lambda m: " " * len(m.group(0)), text)
        found += [
            (m.start(), m.group(0))
            for m in INTEGER.finditer(blank)
            if m.start() > first and not REQUIREMENT.search(blank[: m.start()])
        ]
    return [f for _, f in sorted(found)]


def blocks(lines: Sequence[str]) -> list[Block]:
    """A page cut at its marks. A mark right under a heading covers that heading's section,
    subsections included; any other ``from``, ``recorded`` or ``settings`` mark covers the
    text up to the next heading. Either ends at the next mark; ``generated`` ends at its ``end generated``
    line. Fenced blocks and HTML comments hold no figures."""
    out = [Block("none", "", 0)]
    level = 0  # the level of the heading above
    scope = 0  # where the current mark ends: a heading of this level or higher (0: any)
    under_heading = False
    inside = False
    for i, line in enumerate(lines, 1):
        if line.startswith("```"):
            inside = not inside
            continue
        if inside:
            continue
        if out[-1].kind == "generated":
            if (m := MARK.match(line)) and m.group(1) == "end generated":
                out.append(Block("none", "", i))
            continue
        if heading := HEADING.match(line):
            level = len(heading.group(1))
            if out[-1].kind != "none" and (scope == 0 or level <= scope):
                out.append(Block("none", "", i))
            under_heading = True
            continue
        if m := MARK.match(line):
            out.append(Block(m.group(1), m.group(2), i))
            scope = level if under_heading else 0
            under_heading = False
            continue
        if not line.strip():
            continue
        under_heading = False
        if line.lstrip().startswith("<!--"):
            continue
        header = i < len(lines) and lines[i].lstrip().startswith("|-")  # the next line rules
        rule = line.lstrip().startswith("|-")
        table = out[-1].kind == "from" and not header and not rule
        out[-1].figures += [(i, f) for f in page_figures(line, table=table)]
    return out


WHY_WORDS = 3
"""The fewest words of a recorded mark's reason ("its rows were not kept", not "n/a")."""


def recorded_parts(value: str) -> list[str]:
    """A recorded mark's date, command and reason (``DATE; COMMAND; WHY``)."""
    return [p.strip() for p in value.split(";", 2)]


def problems(page: Path) -> list[str]:
    """Every figure of `page` that a mark does not account for, and every malformed mark."""
    lines = page.read_text(encoding="utf-8").splitlines()
    name = page.relative_to(REPO) if page.is_relative_to(REPO) else page
    out = []
    cut = blocks(lines)
    for n, block in enumerate(cut):
        where = f"{name}:{block.line}"
        if block.kind == "recorded":
            parts = recorded_parts(block.value)
            if len(parts) < 3 or not re.match(r"\d{4}-\d{2}-\d{2}", parts[0]) or not all(parts):
                out.append(f"{where}: a recorded mark needs 'DATE; COMMAND; WHY'")
            elif len(parts[2].split()) < WHY_WORDS:
                out.append(
                    f"{where}: a recorded mark's WHY says in words why no committed rows give "
                    f"its figures (at least {WHY_WORDS} words): {parts[2]!r}"
                )
        elif block.kind == "from":
            paths, _, keys = block.value.partition(";")
            try:
                values = figures(paths.split(","))
            except FileNotFoundError as exc:
                out.append(f"{where}: {exc}")
                continue
            end = cut[n + 1].line if n + 1 < len(cut) else len(lines) + 1
            out += unsaid_looks(where, paths.split(","), lines[block.line : end - 1])
            named = keys.split()
            if len(named) != len(block.figures):
                out.append(
                    f"{where}: the mark names {len(named)} keys for {len(block.figures)} "
                    "figures ('from: PATHS; KEY ...', one key a figure, in order)"
                )
                continue
            for (i, f), key in zip(block.figures, named, strict=True):
                value = value_of(key, values)
                if value is None:
                    out.append(f"{name}:{i}: {f}: {key} is not a value of {paths.strip()}")
                elif not shows(f, value):
                    out.append(f"{name}:{i}: {f} is not {key} ({value:g})")
                elif norm(f)[:1] in "+-" and not is_difference(key):
                    out.append(f"{name}:{i}: {f} is signed, {key} is not a difference")
        elif block.kind == "none":
            out += [
                f"{name}:{i}: {f} has no source (from, recorded or generated)"
                for i, f in block.figures
            ]
    return out


TEST_PATH = re.compile(r"(?:^|[/_-])test(?:[/_-]|\d|$)")
"""A results path of a test split (``novels/test``, ``fairytaleqa-test-sample60``)."""


def test_looks(path: str) -> str | None:
    """What a page must say beside the figures of a ``from`` source that is a test split's
    results: the look its runs were at these test questions ("at least the 10th look"; "the
    2nd to 5th look" for a folder several logged runs wrote), counted from the test-run log
    (:func:`mindscape.eval.testlog.looks`), or "before the test-run log" for one that no
    logged run wrote. None for a source that is not a test split's."""
    from mindscape.eval.testlog import Looks, looks

    path = path.strip()
    lines = log_lines()
    found = [
        looks(i, lines, REPO)
        for i, line in enumerate(lines)
        if line.get("split") == "test" and line.get("figures") and same_path(line.get("out"), path)
    ]
    if not found:
        return "before the test-run log" if TEST_PATH.search(path) else None
    unknown = max(x.unknown for x in found)
    first, last = min(x.nth for x in found), max(x.nth for x in found)
    if first == last:
        return str(Looks(last, unknown))
    lead = "at least the " if unknown else "the "
    return lead + f"{str(Looks(first)).removesuffix(' look')} to {Looks(last)}"


def unsaid_looks(where: str, paths: Sequence[str], text: Sequence[str]) -> list[str]:
    """A problem for each test source of a ``from`` mark whose look (:func:`test_looks`) the
    text the mark covers does not say."""
    said = " ".join(" ".join(text).split())
    out = []
    for path in paths:
        look = test_looks(path)
        if look is not None and look not in said:
            out.append(
                f"{where}: {path.strip()} holds test-split runs: say beside their figures how "
                f"many runs had scored these test questions: '{look}'"
            )
    return out


# ---- the headline ------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A preset's per-question results for the headline: a results file or folder."""

    path: str
    preset: str


@dataclass(frozen=True)
class Row:
    """One dataset's line of the headline: its label, metric, and where each reader's results
    are (today's default once a rerun exists, else the older runs)."""

    label: str
    short: str
    dataset: str
    metric: str
    naive: Source
    mindscape: Source
    ceiling: Source | None = None
    current: bool = False
    """Whether `mindscape` ran with today's default settings."""
    before: str = ""
    """When it did not: the change of the default it ran before."""


FTQA_V2 = "docs/results/local/fairytaleqa-test-sample60-v2"
FTQA_120 = "docs/results/local/fairytaleqa-test-sample120"
QUALITY_V2 = "docs/results/local/quality_leval-test-sample40-v2"


def one_run(folder: str) -> tuple[Source, Source]:
    """`naive` and `mindscape` from one run's ``results.jsonl`` (both presets in one eval)."""
    return Source(f"{folder}/results.jsonl", "naive"), Source(
        f"{folder}/results.jsonl", "mindscape"
    )


def headline_rows() -> list[Row]:
    """The headline's datasets, from the runs of today's default settings. The answer
    verifier, the local model's default for part of 2026-12-06, is off again, so the runs made
    before it are today's default (its own FairytaleQA run, ``-v3``, is in results.md)."""
    return [
        Row(
            "FairytaleQA test, 60 random questions (seed 24)",
            "FairytaleQA test (60 random questions)",
            "fairytaleqa",
            "F1",
            *one_run(FTQA_V2),
            Source(f"{FTQA_V2}/ceiling.jsonl", "ceiling"),
            current=True,
        ),
        Row(
            "FairytaleQA test, 120 random questions (seed 24; 57 of the 60 above)",
            "FairytaleQA test (120 random questions)",
            "fairytaleqa",
            "F1",
            *one_run(FTQA_120),
            None,
            current=True,
        ),
        Row(
            "NarrativeQA test, 60 questions of 5 books",
            "Novels (NarrativeQA test, 60 questions of 5 books)",
            "narrativeqa_lit",
            "F1",
            Source("docs/results/novels/test", "naive"),
            Source("docs/results/novels/test-dense-tie", "mindscape"),
            None,
            current=True,
        ),
        Row(
            "QuALITY test, 40 random questions (seed 24)",
            "QuALITY test (40 questions, multiple choice)",
            "quality_leval",
            "accuracy",
            *one_run(QUALITY_V2),
            None,
            current=True,
        ),
    ]


def records(source: Source) -> dict[str, dict[str, Any]]:
    path = REPO / source.path
    out: dict[str, dict[str, Any]] = {}
    for file in files_of(path):
        out.update({r["qid"]: r for r in rows_of(file) if r.get("preset") == source.preset})
    return out


def same_path(a: str | None, b: str) -> bool:
    if not a:
        return False
    pa = Path(a) if Path(a).is_absolute() else REPO / a
    pb = REPO / b
    return (
        pa.resolve() in (pb.resolve(), pb.parent.resolve())
        if pb.suffix
        else pa.resolve() == pb.resolve()
    )


def log_lines() -> list[dict[str, Any]]:
    path = REPO / "docs" / "results" / "test-runs.jsonl"
    return rows_of(path) if path.exists() else []


def run_line(source: Source, dataset: str) -> tuple[int, dict[str, Any]] | None:
    """The test-run log's line of the run that wrote `source` (its output folder or file)."""
    for i, line in enumerate(log_lines()):
        figures = line.get("figures") or {}
        if (
            line.get("dataset") == dataset
            and source.preset in figures
            and same_path(line.get("out"), source.path)
        ):
            return i, line
    return None


def after_reading(source: Source, dataset: str) -> bool:
    """Whether the log holds a reading of this test set's rows before the run (its figure
    was chosen after reading test rows of this set); for a run the log does not hold, any
    reading of the set's rows for its preset."""
    found = run_line(source, dataset)
    i = found[0] if found is not None else len(log_lines())
    return any(
        line.get("read_test_rows")
        and line.get("dataset") == dataset
        and source.preset in (line.get("presets") or [source.preset])
        for line in log_lines()[:i]
    )


def run_date(source: Source, dataset: str) -> str:
    """The run's date: from the test-run log, else the commit that added its file."""
    found = run_line(source, dataset)
    if found is not None:
        return str(found[1]["date"])
    path = REPO / source.path
    target = files_of(path)[0] if path.exists() else path
    done = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%ad", "--date=short", "--", str(target)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    dates = done.stdout.split()
    return dates[-1] if dates else "not committed"


def signed(v: float) -> str:
    text = f"{v:+.1f}".replace("-", "−")
    return "0.0" if text in ("+0.0", "−0.0") else text


@dataclass
class Figure:
    """One dataset's headline figures."""

    row: Row
    naive: float
    mindscape: float
    diff: dict[str, float]
    tokens: tuple[float, float]
    seconds: tuple[float, float]
    dates: tuple[str, str]
    marked: bool
    ceiling: tuple[float, float, float] | None = None
    """The gold-evidence reader's mean, input tokens p50 and seconds p50."""
    ceiling_date: str = ""
    commands: tuple[str, ...] = ()
    """The commands of its runs, from the test-run log."""
    looks: tuple[str, str, str] = ("", "", "")
    """How many runs had scored the same test questions when `naive`, `mindscape` and the
    ceiling ran, this one included ("at least the 3rd look"), from the test-run log and the
    committed rows (:func:`mindscape.eval.testlog.looks`); "not logged" without a line."""


def look(source: Source | None, dataset: str) -> str:
    """The look a headline figure's run was at its test questions (:class:`Figure`.looks)."""
    from mindscape.eval.testlog import looks

    if source is None:
        return ""
    found = run_line(source, dataset)
    return str(looks(found[0], log_lines(), REPO)) if found is not None else "not logged"


def p50(recs: Mapping[str, Mapping[str, Any]], keys: Sequence[str], name: str) -> float:
    """The median of a record field over `keys`."""
    return float(statistics.median(float(recs[q].get(name) or 0) for q in keys))


def headline() -> list[Figure]:
    """The headline's figures, from the committed files :func:`headline_rows` names."""
    out = []
    for row in headline_rows():
        a, b = records(row.mindscape), records(row.naive)
        keys = sorted(q for q in a if q in b)
        sa = [headline_of(a[q]) for q in keys]
        sb = [headline_of(b[q]) for q in keys]

        ceiling = None
        ceiling_date = ""
        if row.ceiling is not None and (REPO / row.ceiling.path).exists():
            c = records(row.ceiling)
            ck = [q for q in keys if q in c]
            ceiling = (
                statistics.mean(headline_of(c[q]) for q in ck),
                float(statistics.median(float(c[q].get("tokens_in") or 0) for q in ck)),
                float(statistics.median(float(c[q].get("latency_s") or 0) for q in ck)),
            )
            ceiling_date = run_date(row.ceiling, row.dataset)
        sources = [row.naive, row.mindscape] + ([row.ceiling] if ceiling is not None else [])
        commands = [run_line(src, row.dataset) for src in sources]
        out.append(
            Figure(
                row=row,
                naive=statistics.mean(sb),
                mindscape=statistics.mean(sa),
                diff=paired_points(sa, sb),
                tokens=(p50(b, keys, "tokens_in"), p50(a, keys, "tokens_in")),
                seconds=(p50(b, keys, "latency_s"), p50(a, keys, "latency_s")),
                dates=(run_date(row.naive, row.dataset), run_date(row.mindscape, row.dataset)),
                marked=after_reading(row.mindscape, row.dataset),
                ceiling=ceiling,
                ceiling_date=ceiling_date,
                commands=tuple(
                    dict.fromkeys(c[1]["command"] for c in commands if c and c[1].get("command"))
                ),
                looks=(
                    look(row.naive, row.dataset),
                    look(row.mindscape, row.dataset),
                    look(row.ceiling if ceiling is not None else None, row.dataset),
                ),
            )
        )
    return out


def _dates(dates: tuple[str, str]) -> str:
    return dates[0] if dates[0] == dates[1] else f"{dates[0]} / {dates[1]}"


def _files(row: Row) -> str:
    paths = dict.fromkeys(s.path for s in (row.naive, row.mindscape))
    return ", ".join(f"`{p}`" for p in paths)


def looks_text(f: Figure) -> str:
    """The look of a row's runs at its test questions: one, or `naive`'s and `mindscape`'s
    ("at least the 2nd / 5th look")."""
    naive, mine = f.looks[0], f.looks[1]
    if naive == mine:
        return naive
    if naive.endswith(" look") and mine.endswith(" look"):
        lead = "at least the " if "at least" in naive + mine else "the "
        bare = [x.removeprefix("at least the ").removesuffix(" look") for x in (naive, mine)]
        return f"{lead}{bare[0]} / {bare[1]} look (`naive` / `mindscape`)"
    return f"{naive} / {mine} (`naive` / `mindscape`)"


def headline_table(figs: Sequence[Figure]) -> str:
    """The headline table of docs/results.md."""
    lines = [
        "| data | `naive` | `mindscape` | mindscape − naive (points, paired) | input tokens p50 | "
        "seconds p50 | `mindscape` settings | date | look at these test questions | "
        "per-question results |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in figs:
        mark = DAGGER if f.marked else ""
        d = f.diff
        settings = "today's default" if f.row.current else f.row.before
        lines.append(
            f"| {f.row.label}, {f.row.metric} | {f.naive:.3f} | {f.mindscape:.3f}{mark} | "
            f"{signed(d['mean'])}{mark} [{signed(d['low'])}, {signed(d['high'])}] "
            f"({d['better']} better, {d['worse']} worse) | {f.tokens[0]:.0f} / {f.tokens[1]:.0f} | "
            f"{f.seconds[0]:.1f} / {f.seconds[1]:.1f} | {settings} | {_dates(f.dates)} | "
            f"{looks_text(f)} | {_files(f.row)} |"
        )
        if f.ceiling is not None and f.row.ceiling is not None:
            c = f.ceiling
            lines.append(
                f"| the same questions, the reader given the gold evidence, {f.row.metric} | {c[0]:.3f} "
                f"| | | {c[1]:.0f} | {c[2]:.1f} | | {f.ceiling_date} | {f.looks[2]} "
                f"| `{f.row.ceiling.path}` |"
            )
    lines.append("")
    stale = [f for f in figs if not f.row.current]
    for before in dict.fromkeys(f.row.before for f in stale):
        names = [f.row.short.split(" (")[0] for f in stale if f.row.before == before]
        lines += [
            f"{' and '.join(names)}: measured {before}, not yet rerun with today's default.",
            "",
        ]
    lines += [
        "A look is a run that scored the same test questions: the nth look had n − 1 runs "
        "before it on some of its questions (counted from the test-run log and the committed "
        'rows; "at least" where the log cannot tell whether an earlier run\'s questions '
        "overlap).",
        "",
    ]
    lines.append("The runs, as the test-run log records them:")
    lines.append("")
    for f in figs:
        for c in f.commands:
            lines.append(f"- {f.row.short.split(' (')[0]}: `{c}`")
    if any(f.marked for f in figs):
        lines += ["", LEGEND + " ([below](#figures-chosen-after-reading-test-rows))."]
    return "\n".join(lines)


def status_lines(figs: Sequence[Figure]) -> str:
    """README.md's status lines: one per dataset, its figures and whether they are today's
    default's."""
    out = []
    for f in figs:
        mark = DAGGER if f.marked else ""
        when = "today's default" if f.row.current else f"measured {f.row.before}"
        gold = ""
        if f.ceiling is not None:
            gold = f", {f.ceiling[0]:.3f} for the same model reading the gold evidence"
        d = f.diff
        line = (
            f"- {f.row.short}, {when}: {f.row.metric} {f.naive:.3f} for `naive`, "
            f"{f.mindscape:.3f}{mark} for `mindscape`{gold}; paired "
            f"{signed(d['mean'])}{mark} [{signed(d['low'])}, {signed(d['high'])}] points; "
            f"{looks_text(f)}."
        )
        out.append(textwrap.fill(line, width=96, subsequent_indent="  ", break_on_hyphens=False))
    if any(f.marked for f in figs):
        out.append(f"- {LEGEND}.")
    return "\n".join(out)


GENERATED = {"headline": headline_table, "status": status_lines}
"""The blocks the generator writes, by name."""


def fill(text: str, figs: Sequence[Figure] | None = None) -> str:
    """`text` with every generated block (``<!-- generated: NAME ... -->`` up to
    ``<!-- end generated: NAME -->``) rewritten from the committed files."""
    figs = headline() if figs is None else figs
    pattern = re.compile(
        r"(<!--\s*generated:\s*(\w+)[^\n]*-->\n)(.*?)(<!--\s*end generated:\s*\2\s*-->)", re.S
    )

    def replace(m: re.Match[str]) -> str:
        body = GENERATED[m.group(2)](figs)
        lines = m.group(3).splitlines()
        keep = [x for x in lines if x.startswith("<!-- readme-test:")]  # the docs test's marker
        return m.group(1) + "".join(k + "\n" for k in keep) + body + "\n" + m.group(4)

    return pattern.sub(replace, text)


def main() -> None:
    sources = sys.argv[1:]
    if not sources:
        sys.exit(__doc__)
    for key, value in figures(sources).items():
        print(f"{key}\t{value:g}")


if __name__ == "__main__":
    main()
