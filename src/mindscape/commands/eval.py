"""`mindscape eval`: the evaluation harness on the bench."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindscape.commands.common import (
    LLM_CHOICES,
    add_command,
    add_context_option,
    add_local_model_options,
    add_quiet_option,
    context_values,
)
from mindscape.errors import MindscapeError

if TYPE_CHECKING:
    from mindscape.eval.runner import AnswerFn, EvalSettings
    from mindscape.llm import LLMSettings
    from mindscape.run import BackendChoice


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `eval`."""
    p = add_command(sub, "eval", run)
    _add_run_options(p)
    _add_output_options(p)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """What to run: the bench, dataset and split, the presets, the slice and the stores."""
    p.add_argument(
        "--bench", required=True, help="a folder in the bench layout (docs/evaluation.md)"
    )
    p.add_argument(
        "--dataset", required=True, help="a dataset of the bench (e.g. quality_leval, fairytaleqa)"
    )
    p.add_argument("--split", required=True, choices=["dev", "test"], help="the split to run")
    p.add_argument(
        "--preset",
        default="naive,mia-rag,mindscape",
        help="default: %(default)s (a comma-separated list of presets)",
    )
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument(
        "--doc-id",
        dest="doc_ids",
        action="append",
        default=None,
        metavar="ID",
        help="only this document's questions (repeat for several books)",
    )
    p.add_argument(
        "--per-doc",
        type=int,
        default=None,
        help="each document's first K questions only, so --limit spreads over several books "
        "(keep K even for nocha_sample's claim pairs)",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        help="a random sample of N questions, fixed by --seed, kept in file order",
    )
    p.add_argument("--seed", type=int, default=0, help="the --sample seed (default %(default)s)")
    p.add_argument("--out", default=None, help="output directory (default runs/eval/DATASET-SPLIT)")
    p.add_argument(
        "--stores",
        default=".mindscape/bench-stores",
        help="where per-document stores are kept (default %(default)s)",
    )
    p.add_argument("--concurrency", type=int, default=1, help="questions in flight (default 1)")
    p.add_argument(
        "--pooled", action="store_true", help="one store for all documents of the split (series)"
    )
    p.add_argument("--index-only", action="store_true", help="build the stores, answer nothing")
    p.add_argument(
        "--allow-dirty",
        action="store_true",
        help="run a test split from a tree with uncommitted changes under src/ or benchmarks/ "
        "(refused otherwise; the test-run log records it)",
    )
    add_context_option(p, "evidence_ranker")
    add_context_option(p, "read_summaries")
    add_context_option(p, "reader")
    add_context_option(p, "verifier", action=argparse.BooleanOptionalAction)
    add_context_option(p, "chunk_mode")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """What `eval` prints and what answers: `--quiet`, `--json`, `--estimate`, `--llm` and the
    local model's files."""
    add_quiet_option(p)
    p.add_argument(
        "--json", action="store_true", help="print the report's figures as one JSON object"
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print the LLM calls, tokens and seconds the run would take, then stop "
        "(no model is called, nothing is written)",
    )
    p.add_argument(
        "--llm",
        choices=LLM_CHOICES,
        default=None,
        help="what answers: auto (the local model when installed, else extractive), local, an "
        "OpenAI-compatible endpoint (MINDSCAPE_LLM_BASE_URL, MINDSCAPE_LLM_MODEL), or "
        "extractive ($MINDSCAPE_LLM_BACKEND)",
    )
    add_local_model_options(p)


def run(args: argparse.Namespace) -> int:
    """Run presets over a bench split and write report.json / report.md / plots.

    Evaluate presets on a bench dataset. Per-question results are appended to
    OUT/results.jsonl as they finish; a rerun skips what is done.

    Examples:
        mindscape eval --bench bench --dataset quality_leval --split dev --preset naive,mindscape --limit 20
        mindscape eval --bench bench --dataset fairytaleqa --split test --estimate
        mindscape eval --bench bench --dataset nocha_sample --split test --llm extractive --json
    """
    from mindscape.deps import choose_backend
    from mindscape.eval.runner import prepare, run_eval
    from mindscape.llm import LLMSettings

    presets = _presets(args.preset)
    _check_dataset(args.bench, args.dataset)
    llm = LLMSettings.from_env(
        backend=args.llm, local_model=args.local_model, reader_adapter=args.reader_adapter
    )
    choice = choose_backend("auto", llm)  # what answers, by the graph's own rule
    out = Path(args.out or f"runs/eval/{args.dataset}-{args.split}")
    settings = _eval_settings(args, presets, out, llm, choice.settings or llm)
    if args.estimate:
        return _estimate(settings, choice, as_json=args.json)
    if args.index_only:
        prepare(settings)
        return 0
    report = run_eval(settings, graph_answer_fn(settings))
    groups = report.get("groups", report)
    if args.json:
        print(json.dumps({"out": str(out), "groups": groups}, default=str))
        return 0
    print(f"report: {out / 'report.md'}")
    _print_headlines(groups)
    return 0


def _presets(names: str) -> list[str]:
    """The comma-separated presets of `--preset`; an error naming any unknown one."""
    from mindscape.presets import PRESETS

    presets = [p.strip() for p in names.split(",") if p.strip()]
    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        raise MindscapeError(
            f"unknown preset(s): {', '.join(unknown)} (known: {', '.join(PRESETS)})"
        )
    return presets


def _check_dataset(bench: str, dataset: str) -> None:
    """An error, before any work, when the bench has no such dataset."""
    from mindscape.eval.bench import BenchError, dataset_splits

    try:
        dataset_splits(bench, dataset)
    except BenchError as exc:
        raise MindscapeError(str(exc)) from None


def _eval_settings(
    args: argparse.Namespace,
    presets: list[str],
    out: Path,
    llm: LLMSettings,
    resolved: LLMSettings,
) -> EvalSettings:
    """The runner's settings from the options, with the provenance of the run: `llm` are the
    settings the answers use (``auto`` left for the graph's deps to resolve, with its
    notice), `resolved` what they resolve to."""
    from mindscape.eval.runner import EvalSettings

    same = (
        "dataset", "split", "limit", "doc_ids", "per_doc", "sample", "seed", "concurrency",
        "pooled",
    )  # fmt: skip
    return EvalSettings(
        **{name: getattr(args, name) for name in same},  # the options of the same name
        bench=Path(args.bench),
        presets=presets,
        out=out,
        stores=Path(args.stores),
        progress=not args.quiet,
        llm=llm,
        context=context_values(args),
        allow_dirty=args.allow_dirty,
        extra={
            "command": " ".join(["mindscape", *sys.argv[1:]]),
            "code_version": code_version(),
            "llm": {
                "backend": resolved.backend,
                "model": resolved.model_name(),
                "base_url": resolved.base_url,
                **(
                    {"reader_adapter": resolved.reader_adapter}
                    if resolved.backend == "local" and resolved.reader_adapter != "none"
                    else {}
                ),
            },
        },
    )


def _print_headlines(groups: list) -> None:
    """One line per (preset, dataset) group: its size and its headline metric."""
    from mindscape.eval.report import primary_metric

    for g in groups:
        name = primary_metric(g)
        m = (g["metrics"].get(name) or {}) if name else {}
        figure = f"{name} {m['mean']:.3f}" if m.get("mean") is not None else "no figure"
        print(f"  {g['preset']:<10} {g['dataset']}: n {g['n']}, {figure}")


def _estimate(settings: EvalSettings, choice: BackendChoice, *, as_json: bool) -> int:
    """`eval --estimate`: per preset, the least and the most the answers would cost."""
    from mindscape.eval.runner import split_questions
    from mindscape.indexing.estimate import Cost, eval_cost

    qs = split_questions(settings)
    asked = [(q.question, q.options) for q in qs]
    rows: dict[str, dict[str, list[float]]] = {}
    for preset in settings.presets:
        least, most = (
            (Cost(), Cost())
            if choice.reasoner == "extractive"
            else eval_cost(asked, preset, local=choice.local)
        )
        rows[preset] = {
            "calls": [least.calls, most.calls],
            "tokens_in": [least.tokens_in, most.tokens_in],
            "tokens_out": [least.tokens_out, most.tokens_out],
            "minutes_local": [round(least.seconds() / 60, 1), round(most.seconds() / 60, 1)],
        }
    backend = choice.settings.backend if choice.settings else "extractive"
    if as_json:
        out = {"backend": backend, "questions": len(qs), "presets": rows, "range": "least, most"}
        print(json.dumps(out, indent=2))
        return 0
    print(f"{len(qs)} questions, {backend} backend (each figure: one round each … every round)")
    for preset, r in rows.items():
        print(
            f"  {preset:<10} {r['calls'][0]}…{r['calls'][1]} LLM calls, "
            f"{r['tokens_in'][0]}…{r['tokens_in'][1]} input tokens, "
            f"~{r['minutes_local'][0]:.0f}…{r['minutes_local'][1]:.0f} min at the local speed"
        )
    print("(finished questions in --out are skipped by a real run; this counts them all)")
    return 0


def code_version() -> str:
    """`mindscape <version>` plus the git commit when run from a checkout."""
    from mindscape import __version__

    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return f"mindscape {__version__}" + (f" ({sha})" if sha else "")


def graph_answer_fn(settings: EvalSettings) -> AnswerFn:
    """The eval's answers: the compiled QA graph with deps of the run's LLM settings (the graph
    is built on the first answer; stores and retrievers are opened per store directory)."""
    from mindscape.deps import Deps
    from mindscape.graphs.qa import answer_question

    deps = Deps(llm_settings=settings.llm)

    def answer(view: dict[str, Any], preset: str, store: Path) -> dict[str, Any]:
        return answer_question(view, preset=preset, store=str(store), deps=deps, **settings.context)

    return answer
