"""Aggregate per-question results into a report: report.json, report.md and PNG plots.

Input: one record (a dict) per question and preset, for example::

    {"preset": "full", "qid": "nqa-…-q000", "dataset": "narrativeqa_lit", "task": "open_qa",
     "metrics": {"token_f1": 0.5, "rouge_l": 0.4},
     "llm_calls": 3, "tokens_in": 5200, "tokens_out": 80, "latency_s": 4.2,
     "recall_at_k": {"1": 0.0, "5": 1.0, "10": 1.0},     # optional
     "pair_index": 152, "correct": True}                 # optional (NoCha claims)

Records are grouped by (preset, dataset): averaging F1 of one dataset with accuracy of
another would mean nothing. For each group the report gives the mean and a 95% bootstrap
CI of every metric, NoCha pair accuracy (as the metric `pair_accuracy`) when the records
carry `pair_index`, Recall@k / Hit@k curves when present, and the mean and total cost.

`build_report` and `render_markdown` are pure; `write_report` writes the files. Plots use
matplotlib's Agg canvas, imported only when plotting, and never touch pyplot's global state.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mindscape.eval.metrics import bootstrap_ci, pair_outcomes

COST_FIELDS: tuple[str, ...] = ("llm_calls", "tokens_in", "tokens_out", "latency_s")
"""Per-question cost fields, averaged and summed per group."""

RANKED_FIELDS: tuple[str, ...] = ("recall_at_k", "hit_at_k")
"""Optional per-question mappings k -> value, shown as curves over k."""

PAIR_METRIC = "pair_accuracy"
"""Name under which NoCha pair accuracy appears among a group's metrics."""

CORRECT_METRICS: tuple[str, ...] = ("claim_correct", "accuracy")
"""Metrics read as a record's correctness for pair accuracy when `correct` is absent."""

PRIMARY_METRICS: tuple[str, ...] = (
    PAIR_METRIC,
    "accuracy",
    "claim_correct",
    "token_f1",
    "rouge_l",
    "exact_match",
)
"""Preference order for the one 'quality' number of a group (quality-vs-calls plot)."""

FILE_JSON = "report.json"
FILE_MARKDOWN = "report.md"


@dataclass(frozen=True)
class Provenance:
    """Where a report came from; recorded verbatim in report.json and report.md."""

    command: str
    """The command line that produced the results."""
    code_version: str
    """A code version string, e.g. a git commit and a dirty flag."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The settings of the run (model, presets, k, seeds, ...)."""


# --------------------------------------------------------------------------- aggregation


def _finite_values(values: Iterable[Any]) -> list[float]:
    """Values as floats, dropping None and NaN (a metric that does not apply)."""
    out = []
    for value in values:
        if value is None:
            continue
        number = float(value)
        if not math.isnan(number):
            out.append(number)
    return out


def summarize_values(
    values: Iterable[Any], n_resamples: int = 1000, alpha: float = 0.05, seed: int = 0
) -> dict[str, Any]:
    """`{"mean", "low", "high", "n"}` of the finite values, with a bootstrap CI."""
    data = _finite_values(values)
    mean, low, high = bootstrap_ci(data, n_resamples=n_resamples, alpha=alpha, seed=seed)
    return {"mean": mean, "low": low, "high": high, "n": len(data)}


def group_records(
    records: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """Group records by (preset, dataset), keeping first-seen order."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in records:
        key = (str(record["preset"]), str(record.get("dataset", "")))
        groups.setdefault(key, []).append(record)
    return groups


def metric_names(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Sorted names of all metrics that appear in the records' `metrics` dicts."""
    return sorted({name for record in records for name in (record.get("metrics") or {})})


def record_correct(record: Mapping[str, Any]) -> bool:
    """Whether a claim record is correct: `correct`, else a CORRECT_METRICS value of 1."""
    if "correct" in record:
        return bool(record["correct"])
    metrics = record.get("metrics") or {}
    for name in CORRECT_METRICS:
        if metrics.get(name) is not None:
            return float(metrics[name]) >= 1.0
    raise ValueError(
        f"record {record.get('qid')!r} has pair_index but no 'correct' or {list(CORRECT_METRICS)}"
    )


def pair_summary(
    records: Sequence[Mapping[str, Any]],
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, Any] | None:
    """Pair accuracy with a bootstrap CI over pairs; None if no record has a pair_index."""
    paired = [
        {"pair_index": r["pair_index"], "correct": record_correct(r)}
        for r in records
        if r.get("pair_index") is not None
    ]
    if not paired:
        return None
    outcomes = pair_outcomes(paired)
    return summarize_values([float(ok) for ok in outcomes.values()], n_resamples, alpha, seed)


def ranked_summary(
    records: Sequence[Mapping[str, Any]],
    field_name: str,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Summary per k of a ranked field (e.g. recall_at_k), keys as strings sorted by k."""
    by_k: dict[int, list[Any]] = {}
    for record in records:
        for k, value in (record.get(field_name) or {}).items():
            by_k.setdefault(int(k), []).append(value)
    return {str(k): summarize_values(by_k[k], n_resamples, alpha, seed) for k in sorted(by_k)}


def cost_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean, total and count of each cost field (records without the field are skipped)."""
    summary = {}
    for name in COST_FIELDS:
        values = _finite_values(record.get(name) for record in records)
        total = float(sum(values))
        summary[name] = {
            "mean": total / len(values) if values else math.nan,
            "total": total,
            "n": len(values),
        }
    return summary


def summarize_group(
    preset: str,
    dataset: str,
    records: Sequence[Mapping[str, Any]],
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, Any]:
    """All numbers of one (preset, dataset) group."""
    metrics = {
        name: summarize_values(
            [(r.get("metrics") or {}).get(name) for r in records], n_resamples, alpha, seed
        )
        for name in metric_names(records)
    }
    pairs = pair_summary(records, n_resamples, alpha, seed)
    if pairs is not None:
        metrics[PAIR_METRIC] = pairs
    group: dict[str, Any] = {
        "preset": preset,
        "dataset": dataset,
        "tasks": sorted({str(r.get("task")) for r in records if r.get("task")}),
        "n": len(records),
        "metrics": metrics,
        "cost": cost_summary(records),
    }
    for name in RANKED_FIELDS:
        ranked = ranked_summary(records, name, n_resamples, alpha, seed)
        if ranked:
            group[name] = ranked
    return group


def primary_metric(group: Mapping[str, Any]) -> str | None:
    """The group's headline metric: the first of PRIMARY_METRICS present, else the first name."""
    names = list(group.get("metrics", {}))
    for name in PRIMARY_METRICS:
        if name in names:
            return name
    return names[0] if names else None


def build_report(
    records: Iterable[Mapping[str, Any]],
    provenance: Provenance,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, Any]:
    """The full report as a dict (what report.json holds); NaN stays NaN here."""
    records = list(records)
    groups = [
        summarize_group(preset, dataset, group, n_resamples, alpha, seed)
        for (preset, dataset), group in group_records(records).items()
    ]
    return {
        "provenance": asdict(provenance),
        "ci": {
            "method": "percentile bootstrap of the mean",
            "level": 1 - alpha,
            "n_resamples": n_resamples,
            "seed": seed,
        },
        "n_records": len(records),
        "presets": list(dict.fromkeys(g["preset"] for g in groups)),
        "datasets": list(dict.fromkeys(g["dataset"] for g in groups)),
        "groups": groups,
    }


def json_safe(value: Any) -> Any:
    """Replace NaN/inf by None (strict JSON) and stringify what json can't encode."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    return str(value)


# --------------------------------------------------------------------------- markdown


def _fmt(value: Any, digits: int = 3) -> str:
    """A number for a table cell; 'n/a' for missing or NaN."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.{digits}f}"
    return f"{value:,.0f}" if isinstance(value, float) else str(value)


def _fmt_ci(summary: Mapping[str, Any] | None) -> str:
    """'mean [low, high]' for a table cell."""
    if not summary or summary.get("n", 0) == 0:
        return "n/a"
    return f"{summary['mean']:.3f} [{summary['low']:.3f}, {summary['high']:.3f}]"


def _cell(text: Any) -> str:
    """Escape a value for a markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-style markdown table."""
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _groups_of(report: Mapping[str, Any], dataset: str) -> list[Mapping[str, Any]]:
    """The groups of one dataset, in report order."""
    return [g for g in report["groups"] if g["dataset"] == dataset]


def _quality_section(report: Mapping[str, Any]) -> list[str]:
    """One metrics table per dataset: presets as rows, metrics as columns."""
    lines = [
        "## Quality",
        "",
        f"Mean with {report['ci']['level']:.0%} bootstrap CI ({report['ci']['n_resamples']} "
        "resamples). `pair_accuracy` is NoCha pair accuracy; its CI is over pairs.",
        "",
    ]
    for dataset in report["datasets"]:
        groups = _groups_of(report, dataset)
        names = sorted({name for g in groups for name in g["metrics"]})
        rows = [
            [g["preset"], g["n"], *(_fmt_ci(g["metrics"].get(n)) for n in names)] for g in groups
        ]
        lines += [f"### {dataset}", "", markdown_table(["preset", "n", *names], rows), ""]
    return lines


def _ranked_section(report: Mapping[str, Any]) -> list[str]:
    """Recall@k / Hit@k tables, for datasets that have them."""
    lines: list[str] = []
    for name in RANKED_FIELDS:
        for dataset in report["datasets"]:
            groups = [g for g in _groups_of(report, dataset) if name in g]
            if not groups:
                continue
            ks = sorted({int(k) for g in groups for k in g[name]})
            label = name.replace("_at_k", "").capitalize()
            header = ["preset", "n", *(f"{label}@{k}" for k in ks)]
            rows = [
                [
                    g["preset"],
                    max(s["n"] for s in g[name].values()),
                    *(_fmt_ci(g[name].get(str(k))) for k in ks),
                ]
                for g in groups
            ]
            lines += [f"## {label}@k: {dataset}", "", markdown_table(header, rows), ""]
    return lines


def _cost_section(report: Mapping[str, Any]) -> list[str]:
    """One cost table: mean per question and totals."""
    header = [
        "preset",
        "dataset",
        "n",
        "LLM calls / q",
        "tokens in / q",
        "tokens out / q",
        "latency s / q",
        "LLM calls total",
        "tokens total",
    ]
    rows = []
    for g in report["groups"]:
        cost = g["cost"]
        tokens_total = cost["tokens_in"]["total"] + cost["tokens_out"]["total"]
        rows.append(
            [
                g["preset"],
                g["dataset"],
                g["n"],
                *(_fmt(cost[name]["mean"], 2) for name in COST_FIELDS),
                _fmt(cost["llm_calls"]["total"]),
                _fmt(tokens_total),
            ]
        )
    return ["## Cost", "", markdown_table(header, rows), ""]


def _provenance_section(report: Mapping[str, Any]) -> list[str]:
    """Command, code version and settings."""
    prov = report["provenance"]
    settings = json.dumps(json_safe(prov.get("settings", {})), indent=2, sort_keys=True)
    return [
        "## Provenance",
        "",
        f"- code version: `{prov['code_version']}`",
        f"- records: {report['n_records']}",
        "",
        "Command:",
        "",
        "```",
        prov["command"],
        "```",
        "",
        "Settings:",
        "",
        "```json",
        settings,
        "```",
        "",
    ]


def render_markdown(report: Mapping[str, Any], plot_files: Sequence[str | Path] = ()) -> str:
    """report.md: quality, Recall@k and cost tables, plots, provenance."""
    lines = [
        "# Evaluation report",
        "",
        f"Presets: {', '.join(report['presets']) or 'none'}. "
        f"Datasets: {', '.join(report['datasets']) or 'none'}.",
        "",
    ]
    lines += _quality_section(report) + _ranked_section(report) + _cost_section(report)
    if plot_files:
        lines += ["## Plots", ""]
        lines += [f"![{Path(p).stem}]({Path(p).name})" for p in plot_files] + [""]
    lines += _provenance_section(report)
    return "\n".join(lines)


# --------------------------------------------------------------------------- plots


def _slug(name: str) -> str:
    """A file-name-safe version of a dataset name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "all"


def _new_figure(n_panels: int, width_per_panel: float = 4.0, height: float = 3.5) -> Any:
    """A matplotlib Figure on an Agg canvas with `n_panels` side-by-side axes (lazy import)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(width_per_panel * n_panels, 4.0), height))
    FigureCanvasAgg(fig)
    fig.subplots(1, n_panels, squeeze=False)
    return fig


def _error_bars(summaries: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[list[float]]]:
    """Means and asymmetric error-bar lengths [[below...], [above...]] (0 where missing)."""
    means, below, above = [], [], []
    for s in summaries:
        mean = s["mean"] if s["n"] else math.nan
        means.append(mean)
        below.append(max(mean - s["low"], 0.0) if s["n"] else 0.0)
        above.append(max(s["high"] - mean, 0.0) if s["n"] else 0.0)
    return means, [below, above]


def plot_metrics(report: Mapping[str, Any], dataset: str, path: Path) -> Path:
    """Bar chart per metric for one dataset: presets on x, mean with CI error bars."""
    groups = _groups_of(report, dataset)
    names = sorted({name for g in groups for name in g["metrics"]})
    fig = _new_figure(max(len(names), 1))
    for ax, name in zip(fig.axes, names, strict=False):
        present = [g for g in groups if name in g["metrics"]]
        means, errors = _error_bars([g["metrics"][name] for g in present])
        ax.bar(range(len(present)), means, yerr=errors, capsize=4, color="tab:blue")
        ax.set_xticks(range(len(present)), [g["preset"] for g in present], rotation=30, ha="right")
        ax.set_title(name)
        ax.set_ylim(bottom=0)
    fig.suptitle(f"{dataset}: metric by preset (95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def plot_ranked(report: Mapping[str, Any], dataset: str, field_name: str, path: Path) -> Path:
    """Recall@k (or Hit@k) curves for one dataset: one line per preset, CI as a band."""
    fig = _new_figure(1, width_per_panel=5.0)
    ax = fig.axes[0]
    for g in _groups_of(report, dataset):
        if field_name not in g:
            continue
        ks = sorted(int(k) for k in g[field_name])
        summaries = [g[field_name][str(k)] for k in ks]
        ax.plot(ks, [s["mean"] for s in summaries], marker="o", label=g["preset"])
        ax.fill_between(
            ks, [s["low"] for s in summaries], [s["high"] for s in summaries], alpha=0.2
        )
    label = field_name.replace("_at_k", "").capitalize()
    ax.set_xlabel("k")
    ax.set_ylabel(f"{label}@k")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{dataset}: {label}@k")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def plot_quality_vs_calls(report: Mapping[str, Any], path: Path) -> Path:
    """One panel per dataset: mean LLM calls per question vs the primary metric, per preset."""
    datasets = list(report["datasets"])
    fig = _new_figure(max(len(datasets), 1))
    for ax, dataset in zip(fig.axes, datasets, strict=False):
        metric = None
        for g in _groups_of(report, dataset):
            metric = primary_metric(g)
            if metric is None:
                continue
            summary = g["metrics"][metric]
            x = g["cost"]["llm_calls"]["mean"]
            means, errors = _error_bars([summary])
            ax.errorbar([x], means, yerr=errors, fmt="o", capsize=4)
            ax.annotate(
                g["preset"],
                (x, means[0]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize="small",
            )
        ax.set_xlabel("LLM calls per question (mean)")
        ax.set_ylabel(metric or "quality")
        ax.set_title(dataset)
    fig.suptitle("Quality vs LLM calls")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def write_plots(report: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Write every plot of the report as PNG into out_dir; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for dataset in report["datasets"]:
        groups = _groups_of(report, dataset)
        if any(g["metrics"] for g in groups):
            paths.append(plot_metrics(report, dataset, out / f"metrics_{_slug(dataset)}.png"))
        for name in RANKED_FIELDS:
            if any(name in g for g in groups):
                paths.append(
                    plot_ranked(report, dataset, name, out / f"{name}_{_slug(dataset)}.png")
                )
    if report["groups"]:
        paths.append(plot_quality_vs_calls(report, out / "quality_vs_calls.png"))
    return paths


# --------------------------------------------------------------------------- entry point


def write_report(
    records: Iterable[Mapping[str, Any]],
    out_dir: str | Path,
    provenance: Provenance,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    plots: bool = True,
) -> dict[str, Any]:
    """Build the report and write report.json, report.md and (if `plots`) PNGs to out_dir.

    Returns `{"json": Path, "markdown": Path, "plots": [Path, ...], "report": dict}`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(records, provenance, n_resamples, alpha, seed)
    plot_paths = write_plots(report, out) if plots else []
    json_path = out / FILE_JSON
    json_path.write_text(json.dumps(json_safe(report), indent=2) + "\n", encoding="utf-8")
    md_path = out / FILE_MARKDOWN
    md_path.write_text(render_markdown(report, plot_paths), encoding="utf-8")
    return {"json": json_path, "markdown": md_path, "plots": plot_paths, "report": report}
