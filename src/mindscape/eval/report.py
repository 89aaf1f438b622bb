"""Aggregate per-question results into a report: report.json, report.md and PNG plots.

Input: one record (a dict) per question and preset (see :mod:`mindscape.eval.aggregate` for
its fields). Records are grouped by (preset, dataset); for each group the report gives the
mean and a 95% bootstrap CI of every metric, NoCha pair accuracy (as the metric
`pair_accuracy`) when the records carry `pair_index`, Recall@k / Hit@k curves when present,
and the mean and total cost.

The work is split by concern: :mod:`~mindscape.eval.aggregate` (the numbers, `build_report`),
:mod:`~mindscape.eval.markdown` (`render_markdown`, the tables) and
:mod:`~mindscape.eval.plots` (the PNGs). `build_report` and `render_markdown` are pure;
`write_report` writes the files. Every public name stays importable from this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mindscape.eval.aggregate import (
    CI,
    CORRECT_METRICS,
    COST_FIELDS,
    PAIR_METRIC,
    PRIMARY_METRICS,
    RANKED_FIELDS,
    Bootstrap,
    Provenance,
    build_report,
    cost_summary,
    group_records,
    json_safe,
    metric_names,
    pair_summary,
    primary_metric,
    ranked_summary,
    record_correct,
    summarize_group,
    summarize_values,
)
from mindscape.eval.markdown import markdown_table, render_markdown
from mindscape.eval.plots import plot_metrics, plot_quality_vs_calls, plot_ranked, write_plots

__all__ = [
    "CI",
    "CORRECT_METRICS",
    "COST_FIELDS",
    "FILE_JSON",
    "FILE_MARKDOWN",
    "PAIR_METRIC",
    "PRIMARY_METRICS",
    "RANKED_FIELDS",
    "Bootstrap",
    "Provenance",
    "build_report",
    "cost_summary",
    "group_records",
    "json_safe",
    "markdown_table",
    "metric_names",
    "pair_summary",
    "plot_metrics",
    "plot_quality_vs_calls",
    "plot_ranked",
    "primary_metric",
    "ranked_summary",
    "record_correct",
    "render_markdown",
    "summarize_group",
    "summarize_values",
    "write_plots",
    "write_report",
]

FILE_JSON = "report.json"
FILE_MARKDOWN = "report.md"


def write_report(
    records: Iterable[Mapping[str, Any]],
    out_dir: str | Path,
    provenance: Provenance,
    ci: Bootstrap = CI,
    plots: bool = True,
) -> dict[str, Any]:
    """Build the report and write report.json, report.md and (if `plots`) PNGs to out_dir.

    Returns `{"json": Path, "markdown": Path, "plots": [Path, ...], "report": dict}`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(records, provenance, ci)
    plot_paths = write_plots(report, out) if plots else []
    json_path = out / FILE_JSON
    json_path.write_text(json.dumps(json_safe(report), indent=2) + "\n", encoding="utf-8")
    md_path = out / FILE_MARKDOWN
    md_path.write_text(render_markdown(report, plot_paths), encoding="utf-8")
    return {"json": json_path, "markdown": md_path, "plots": plot_paths, "report": report}
