"""Tests for mindscape.eval.report on synthetic per-question records."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mindscape.eval.report import (
    PAIR_METRIC,
    Bootstrap,
    Provenance,
    build_report,
    json_safe,
    markdown_table,
    primary_metric,
    render_markdown,
    write_report,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _record(
    preset: str,
    qid: str,
    dataset: str,
    task: str,
    metrics: dict[str, float],
    calls: int,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "preset": preset,
        "qid": qid,
        "dataset": dataset,
        "task": task,
        "metrics": metrics,
        "llm_calls": calls,
        "tokens_in": 1000 * calls,
        "tokens_out": 10 * calls,
        "latency_s": 0.5 * calls,
        **extra,
    }


def synthetic_records() -> list[dict[str, Any]]:
    """Two presets on an open-QA set with Recall@k, and on a NoCha-like claim set."""
    records = []
    f1 = {"baseline": [1.0, 0.0, 0.5, 0.5], "full": [1.0, 1.0, 0.5, 0.5]}
    recall = {
        "baseline": [
            {"1": 0.0, "5": 1.0},
            {"1": 0.0, "5": 0.0},
            {"1": 1.0, "5": 1.0},
            {"1": 0.0, "5": 1.0},
        ],
        "full": [{"1": 1.0, "5": 1.0}] * 4,
    }
    for preset, calls in (("baseline", 1), ("full", 4)):
        for i, value in enumerate(f1[preset]):
            records.append(
                _record(
                    preset,
                    f"ftqa-q{i}",
                    "fairytaleqa",
                    "open_qa",
                    {"token_f1": value, "rouge_l": value / 2},
                    calls,
                    recall_at_k=recall[preset][i],
                )
            )
    # claims: pairs 1..3; baseline gets pair 1 right only; full gets pairs 1 and 2 right
    claims = {
        "baseline": [True, True, True, False, False, True],
        "full": [True, True, True, True, False, True],
    }
    for preset, calls in (("baseline", 1), ("full", 4)):
        for i, correct in enumerate(claims[preset]):
            records.append(
                _record(
                    preset,
                    f"nocha-q{i}",
                    "nocha_sample",
                    "claim_verification",
                    {"accuracy": float(correct)},
                    calls,
                    pair_index=1 + i // 2,
                    correct=correct,
                )
            )
    return records


PROVENANCE = Provenance(
    command="mindscape eval --presets baseline,full",
    code_version="abc1234-dirty",
    settings={"model": "toy", "k": [1, 5], "seed": 0},
)


def _group(report: dict[str, Any], preset: str, dataset: str) -> dict[str, Any]:
    matches = [g for g in report["groups"] if g["preset"] == preset and g["dataset"] == dataset]
    assert len(matches) == 1
    return matches[0]


def test_build_report_means_pairs_recall_and_cost() -> None:
    report = build_report(synthetic_records(), PROVENANCE, Bootstrap(n_resamples=200))
    assert report["presets"] == ["baseline", "full"]
    assert report["datasets"] == ["fairytaleqa", "nocha_sample"]
    assert report["n_records"] == 20

    base_ft = _group(report, "baseline", "fairytaleqa")
    assert base_ft["n"] == 4
    assert base_ft["metrics"]["token_f1"]["mean"] == pytest.approx(0.5)
    assert base_ft["metrics"]["rouge_l"]["mean"] == pytest.approx(0.25)
    f1 = base_ft["metrics"]["token_f1"]
    assert 0.0 <= f1["low"] <= f1["mean"] <= f1["high"] <= 1.0 and f1["low"] < f1["high"]
    assert base_ft["recall_at_k"]["1"]["mean"] == pytest.approx(0.25)
    assert base_ft["recall_at_k"]["5"]["mean"] == pytest.approx(0.75)
    assert base_ft["cost"]["llm_calls"] == {"mean": 1.0, "total": 4.0, "n": 4}
    assert base_ft["cost"]["tokens_in"]["total"] == 4000.0
    assert PAIR_METRIC not in base_ft["metrics"]  # no pair_index on open QA

    full_ft = _group(report, "full", "fairytaleqa")
    assert full_ft["metrics"]["token_f1"]["mean"] == pytest.approx(0.75)
    assert full_ft["recall_at_k"]["1"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 4}

    base_nocha = _group(report, "baseline", "nocha_sample")
    assert base_nocha["metrics"]["accuracy"]["mean"] == pytest.approx(4 / 6)
    assert base_nocha["metrics"][PAIR_METRIC]["mean"] == pytest.approx(1 / 3)
    assert base_nocha["metrics"][PAIR_METRIC]["n"] == 3
    full_nocha = _group(report, "full", "nocha_sample")
    assert full_nocha["metrics"][PAIR_METRIC]["mean"] == pytest.approx(2 / 3)
    assert "recall_at_k" not in full_nocha
    assert primary_metric(full_nocha) == PAIR_METRIC
    assert primary_metric(full_ft) == "token_f1"


def test_build_report_is_deterministic_and_skips_missing_values() -> None:
    records = synthetic_records()
    assert build_report(records, PROVENANCE) == build_report(records, PROVENANCE)
    records.append(
        _record(
            "baseline",
            "ftqa-q9",
            "fairytaleqa",
            "open_qa",
            {"token_f1": None, "rouge_l": float("nan")},
            1,
        )
    )
    group = _group(build_report(records, PROVENANCE), "baseline", "fairytaleqa")
    assert group["n"] == 5
    assert group["metrics"]["token_f1"]["n"] == 4
    assert group["metrics"]["token_f1"]["mean"] == pytest.approx(0.5)


def test_pair_accuracy_falls_back_to_accuracy_metric() -> None:
    records = [
        _record(
            "p",
            f"q{i}",
            "nocha_sample",
            "claim_verification",
            {"accuracy": ok},
            1,
            pair_index=i // 2,
        )
        for i, ok in enumerate([1.0, 1.0, 1.0, 0.0])
    ]
    group = build_report(records, PROVENANCE)["groups"][0]
    assert group["metrics"]["pair_accuracy"]["mean"] == pytest.approx(0.5)


def test_json_safe() -> None:
    assert json_safe(
        {"a": math.nan, "b": [1.5, math.inf], 3: np.float64(0.25), "n": np.int64(7), "p": Path("x")}
    ) == {"a": None, "b": [1.5, None], "3": 0.25, "n": 7, "p": "x"}


def test_markdown_table_escapes_pipes() -> None:
    table = markdown_table(["preset", "n"], [["a|b", 3]])
    assert table.splitlines() == ["| preset | n |", "|---|---|", "| a\\|b | 3 |"]


def test_write_report_files(tmp_path: Path) -> None:
    out = tmp_path / "report"
    written = write_report(synthetic_records(), out, PROVENANCE, Bootstrap(n_resamples=200))

    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert written["json"] == out / "report.json"
    assert data["provenance"] == {
        "command": "mindscape eval --presets baseline,full",
        "code_version": "abc1234-dirty",
        "settings": {"model": "toy", "k": [1, 5], "seed": 0},
    }
    assert data["ci"]["level"] == pytest.approx(0.95)
    group = _group(data, "full", "nocha_sample")
    assert group["metrics"]["pair_accuracy"]["mean"] == pytest.approx(2 / 3)
    assert group["cost"]["latency_s"]["mean"] == pytest.approx(2.0)

    markdown = (out / "report.md").read_text(encoding="utf-8")
    lines = markdown.splitlines()
    header = "| preset | n | rouge_l | token_f1 |"
    assert header in lines
    assert lines[lines.index(header) + 1] == "|---|---|---|---|"
    assert any(line.startswith("| baseline | 4 | 0.250 [") for line in lines)
    assert "| preset | n | accuracy | pair_accuracy |" in lines
    assert "| preset | n | Recall@1 | Recall@5 |" in lines
    assert "| full | 4 | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] |" in lines
    assert "abc1234-dirty" in markdown and "mindscape eval --presets baseline,full" in markdown

    names = sorted(p.name for p in written["plots"])
    assert names == [
        "metrics_fairytaleqa.png",
        "metrics_nocha_sample.png",
        "quality_vs_calls.png",
        "recall_at_k_fairytaleqa.png",
    ]
    for path in written["plots"]:
        content = path.read_bytes()
        assert content.startswith(PNG_MAGIC) and len(content) > 1000
        assert f"]({path.name})" in markdown


def test_write_report_without_plots(tmp_path: Path) -> None:
    written = write_report(
        synthetic_records(), tmp_path, PROVENANCE, Bootstrap(n_resamples=50), plots=False
    )
    assert written["plots"] == []
    assert not list(tmp_path.glob("*.png"))
    assert "## Plots" not in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_empty_report(tmp_path: Path) -> None:
    written = write_report([], tmp_path, PROVENANCE)
    data = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert data["groups"] == [] and data["n_records"] == 0
    assert written["plots"] == []
    assert render_markdown(written["report"]).startswith("# Evaluation report")


def test_the_local_section_is_regenerated_and_the_mom_section_after_it_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.figures import local_results

    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks" / "figures").mkdir(parents=True)
    (tmp_path / "benchmarks" / "figures" / "results_local_header.md").write_text(
        "## Local model\n\nnew\n"
    )
    results = tmp_path / "docs" / "results.md"
    results.write_text(
        "# Offline\n\ntables\n\n## Local model\n\nold local\n\n## MoM document memory\n\nmom\n"
    )
    monkeypatch.setattr(local_results, "REPO", tmp_path)
    monkeypatch.setattr(local_results, "JOBS", [])
    monkeypatch.setattr(sys, "argv", ["figures/local_results.py"])
    local_results.main()
    text = results.read_text()
    assert text.startswith("# Offline\n\ntables\n\n## Local model\n\nnew\n")
    assert "old local" not in text
    assert text.endswith("## MoM document memory\n\nmom\n")
