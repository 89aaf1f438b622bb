"""report.md: the quality, Recall@k and cost tables, the plots' links and the provenance.

:func:`render_markdown` is pure: it reads a report built by
:func:`~mindscape.eval.aggregate.build_report`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mindscape.eval.aggregate import COST_FIELDS, RANKED_FIELDS, groups_of, json_safe


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
        groups = groups_of(report, dataset)
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
            groups = [g for g in groups_of(report, dataset) if name in g]
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


COST_LABELS: dict[str, str] = {
    "llm_calls": "LLM calls / q",
    "llm_fallbacks": "LLM fallbacks / q",
    "tokens_in": "tokens in / q",
    "tokens_out": "tokens out / q",
    "latency_s": "latency s / q",
}
"""The cost table's column of each of COST_FIELDS."""


def _total(summary: Mapping[str, Any]) -> str:
    """A cost field's total for a table cell; 'n/a' when no record has the field."""
    return _fmt(summary["total"]) if summary.get("n") else "n/a"


def _cost_section(report: Mapping[str, Any]) -> list[str]:
    """One cost table: mean per question and totals, LLM fallbacks beside the calls, and a
    line that says how many answers the extractive reasoner gave instead of the model."""
    header = [
        "preset",
        "dataset",
        "n",
        *(COST_LABELS[name] for name in COST_FIELDS),
        "LLM calls total",
        "LLM fallbacks total",
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
                *(_fmt((cost.get(name) or {}).get("mean"), 2) for name in COST_FIELDS),
                _total(cost["llm_calls"]),
                _total(cost.get("llm_fallbacks") or {}),
                _fmt(tokens_total),
            ]
        )
    lines = ["## Cost", "", markdown_table(header, rows), ""]
    fell_back = [
        f"{g['preset']} on {g['dataset']}: {g['cost']['llm_fallbacks']['total']:.0f}"
        for g in report["groups"]
        if (g["cost"].get("llm_fallbacks") or {}).get("total")
    ]
    if fell_back:
        lines += [
            "LLM fallbacks: model replies that stayed unusable after a re-ask, answered by the "
            "extractive reasoner instead, and Mem-Encode blocks a reply left out, which it "
            "filled in (" + "; ".join(fell_back) + ").",
            "",
        ]
    return lines


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
