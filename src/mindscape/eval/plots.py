"""The report's PNG plots: metrics per preset, Recall@k curves, quality vs LLM calls.

Plots use matplotlib's Agg canvas, imported only when plotting, and never touch pyplot's
global state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mindscape.eval.aggregate import RANKED_FIELDS, groups_of, primary_metric


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


def _save(fig: Any, path: Path) -> Path:
    """Lay the figure out and write it as a PNG to ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


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
    groups = groups_of(report, dataset)
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
    return _save(fig, path)


def plot_ranked(report: Mapping[str, Any], dataset: str, field_name: str, path: Path) -> Path:
    """Recall@k (or Hit@k) curves for one dataset: one line per preset, CI as a band."""
    fig = _new_figure(1, width_per_panel=5.0)
    ax = fig.axes[0]
    for g in groups_of(report, dataset):
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
    return _save(fig, path)


def plot_quality_vs_calls(report: Mapping[str, Any], path: Path) -> Path:
    """One panel per dataset: mean LLM calls per question vs the primary metric, per preset."""
    datasets = list(report["datasets"])
    fig = _new_figure(max(len(datasets), 1))
    for ax, dataset in zip(fig.axes, datasets, strict=False):
        metric = None
        for g in groups_of(report, dataset):
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
    return _save(fig, path)


def write_plots(report: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Write every plot of the report as PNG into out_dir; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for dataset in report["datasets"]:
        groups = groups_of(report, dataset)
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
