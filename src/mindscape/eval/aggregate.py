"""Aggregation of per-question results: the numbers of every (preset, dataset) group.

Input: one record (a dict) per question and preset, for example::

    {"preset": "full", "qid": "nqa-…-q000", "dataset": "narrativeqa_lit", "task": "open_qa",
     "metrics": {"token_f1": 0.5, "rouge_l": 0.4},
     "llm_calls": 3, "tokens_in": 5200, "tokens_out": 80, "latency_s": 4.2,
     "llm_fallbacks": 0,                                  # the extractive reasoner stood in
     "recall_at_k": {"1": 0.0, "5": 1.0, "10": 1.0},     # optional
     "pair_index": 152, "correct": True}                 # optional (NoCha claims)

Records are grouped by (preset, dataset): averaging F1 of one dataset with accuracy of
another would mean nothing. For each group the report gives the mean and a 95% bootstrap
CI of every metric, NoCha pair accuracy (as the metric `pair_accuracy`) when the records
carry `pair_index`, Recall@k / Hit@k curves when present, and the mean and total cost.

Everything here is pure; :mod:`mindscape.eval.report` renders and writes the report.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mindscape.eval.metrics import bootstrap_ci, pair_outcomes

COST_FIELDS: tuple[str, ...] = (
    "llm_calls",
    "llm_fallbacks",
    "tokens_in",
    "tokens_out",
    "latency_s",
)
"""Per-question cost fields, averaged and summed per group. ``llm_fallbacks`` counts the model
replies that stayed unusable after a re-ask, for which the extractive reasoner answered
instead, and the Mem-Encode blocks a reply left out, which it filled in: a run with many
measures that reasoner more than the model."""

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
    "f1",
    "rouge_l",
    "exact_match",
)
"""Preference order for the one 'quality' number of a group (quality-vs-calls plot, eval's
printed lines, the test-run log); ``f1`` is token F1 as the eval runner names it."""


@dataclass(frozen=True)
class Provenance:
    """Where a report came from; recorded verbatim in report.json and report.md."""

    command: str
    """The command line that produced the results."""
    code_version: str
    """A code version string, e.g. a git commit and a dirty flag."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The settings of the run (model, presets, k, seeds, ...)."""


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


@dataclass(frozen=True)
class Bootstrap:
    """The report's confidence intervals: a seeded percentile bootstrap of the mean."""

    n_resamples: int = 1000
    alpha: float = 0.05
    """1 - the CI's level (0.05: a 95% CI)."""
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        """How the CIs were made, as report.json records it."""
        return {
            "method": "percentile bootstrap of the mean",
            "level": 1 - self.alpha,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
        }


CI = Bootstrap()
"""The report's default CIs."""


def summarize_values(values: Iterable[Any], ci: Bootstrap = CI) -> dict[str, Any]:
    """`{"mean", "low", "high", "n"}` of the finite values, with a bootstrap CI."""
    data = _finite_values(values)
    mean, low, high = bootstrap_ci(data, n_resamples=ci.n_resamples, alpha=ci.alpha, seed=ci.seed)
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


def pair_summary(records: Sequence[Mapping[str, Any]], ci: Bootstrap = CI) -> dict[str, Any] | None:
    """Pair accuracy with a bootstrap CI over pairs; None if no record has a pair_index."""
    paired = [
        {"pair_index": r["pair_index"], "correct": record_correct(r)}
        for r in records
        if r.get("pair_index") is not None
    ]
    if not paired:
        return None
    outcomes = pair_outcomes(paired)
    return summarize_values([float(ok) for ok in outcomes.values()], ci)


def ranked_summary(
    records: Sequence[Mapping[str, Any]], field_name: str, ci: Bootstrap = CI
) -> dict[str, dict[str, Any]]:
    """Summary per k of a ranked field (e.g. recall_at_k), keys as strings sorted by k."""
    by_k: dict[int, list[Any]] = {}
    for record in records:
        for k, value in (record.get(field_name) or {}).items():
            by_k.setdefault(int(k), []).append(value)
    return {str(k): summarize_values(by_k[k], ci) for k in sorted(by_k)}


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
    preset: str, dataset: str, records: Sequence[Mapping[str, Any]], ci: Bootstrap = CI
) -> dict[str, Any]:
    """All numbers of one (preset, dataset) group."""
    metrics = {
        name: summarize_values([(r.get("metrics") or {}).get(name) for r in records], ci)
        for name in metric_names(records)
    }
    pairs = pair_summary(records, ci)
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
        ranked = ranked_summary(records, name, ci)
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
    records: Iterable[Mapping[str, Any]], provenance: Provenance, ci: Bootstrap = CI
) -> dict[str, Any]:
    """The full report as a dict (what report.json holds); NaN stays NaN here."""
    records = list(records)
    groups = [
        summarize_group(preset, dataset, group, ci)
        for (preset, dataset), group in group_records(records).items()
    ]
    return {
        "provenance": asdict(provenance),
        "ci": ci.as_dict(),
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


def groups_of(report: Mapping[str, Any], dataset: str) -> list[Mapping[str, Any]]:
    """The groups of one dataset, in report order."""
    return [g for g in report["groups"] if g["dataset"] == dataset]
