"""The local-model section of docs/results.md: every preset on every bench set, answered by
the embedded Qwen2.5-Coder-1.5B (llama.cpp, temperature 0, seed 0).

    python benchmarks/figures/local_results.py --bench ../shared/bench [--run] [--jobs quality_leval:test ...]

With `--run`, each job's `mindscape eval ... --llm local` command runs first (results resume
from `runs/local/DATASET-SPLIT/results.jsonl`, so an interrupted run continues where it
stopped); without it, the section is assembled from what those files hold. The section replaces
the "## Local model" part of docs/results.md, up to the hand-written "## MoM document memory"
section after it, which is kept (`figures/make_results.py` keeps both when it regenerates the offline
part). Every table shows,
per preset, the headline metric with its 95% bootstrap CI, LLM calls, input tokens and seconds
per question, and its exact command; the last table pools the paired difference
`mindscape − naive` over every test question both answered. Any OpenAI-compatible endpoint
runs the same comparison: replace `--llm local` with `--llm openai` and set
MINDSCAPE_LLM_BASE_URL and MINDSCAPE_LLM_MODEL.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import doc_parser, run_eval
from mindscape.eval.metrics import bootstrap_ci
from mindscape.eval.report import PRIMARY_METRICS

REPO = Path(__file__).resolve().parents[2]
LOCAL_HEADING = "## Local model"
"""Where the local-model section starts in docs/results.md."""
MOM_HEADING = "## MoM document memory"
"""The hand-written section after it (benchmarks/mom/recall.py's figures), kept as it is."""
PRESETS = "naive,mindscape"
# dataset, split, first N questions, at most K per document (None: no cap): sized for ~1-2
# minutes a question on two cores; NarrativeQA and FairytaleQA spread over five books each
JOBS: list[tuple[str, str, int | None, int | None]] = [
    ("quality_leval", "test", 20, None),
    ("narrativeqa_lit", "test", 20, 4),
    ("fairytaleqa", "test", 20, 4),
    ("sfiction_leval", "test", 20, None),
    ("nocha_sample", "test", 20, None),
]


def command(
    bench: str, dataset: str, split: str, limit: int | None, per_doc: int | None
) -> list[str]:
    cmd = ["mindscape", "eval", "--bench", bench, "--dataset", dataset, "--split", split]
    cmd += ["--llm", "local", "--preset", PRESETS, "--out", f"runs/local/{dataset}-{split}"]
    cmd += ["--quiet"] + (["--limit", str(limit)] if limit else [])
    return cmd + (["--per-doc", str(per_doc)] if per_doc else [])


def records(dataset: str, split: str) -> list[dict]:
    path = REPO / f"runs/local/{dataset}-{split}/results.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def headline(rows: list[dict]) -> str | None:
    names = {k for r in rows for k in r.get("metrics") or {}}
    return next((m for m in PRIMARY_METRICS if m in names), None)


def ci(values: list[float]) -> str:
    if not values:
        return "n/a"
    mean, low, high = bootstrap_ci(values, n_resamples=2000)
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def scope(limit: int | None, per_doc: int | None) -> str:
    """Which questions a job takes, in words."""
    if not limit:
        return "every question"
    return f"first {limit} questions" + (f", at most {per_doc} per book" if per_doc else "")


def table(
    dataset: str, split: str, limit: int | None, per_doc: int | None, bench: str
) -> tuple[str, dict]:
    """One dataset's table, and its per-question scores by preset (qid → score)."""
    rows = records(dataset, split)
    metric = headline(rows)
    scores: dict[str, dict[str, float]] = {}
    lines = [
        f"### {dataset} · {split} ({scope(limit, per_doc)})",
        "",
        f"`{shlex.join(command(bench, dataset, split, limit, per_doc))}`",
        "",
        f"| preset | n | {metric} | LLM calls | input tokens | output tokens | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for preset in PRESETS.split(","):
        mine = [r for r in rows if r["preset"] == preset and metric in (r.get("metrics") or {})]
        if not mine:
            continue
        scores[preset] = {r["qid"]: float(r["metrics"][metric]) for r in mine}
        lines.append(
            f"| {preset} | {len(mine)} | {ci(list(scores[preset].values()))} | "
            f"{mean([r['llm_calls'] for r in mine]):.2f} | {mean([r['tokens_in'] for r in mine]):.0f} | "
            f"{mean([r['tokens_out'] for r in mine]):.0f} | {mean([r['latency_s'] for r in mine]):.0f} |"
        )
    return "\n".join(lines) + "\n", {"metric": metric, "scores": scores}


def paired(parts: dict[str, dict]) -> str:
    """The pooled and per-dataset paired difference mindscape − naive."""
    lines = [
        "### mindscape − naive, paired over the same questions",
        "",
        "| set | metric | n | mindscape − naive [95% CI] | better / worse |",
        "|---|---|---|---|---|",
    ]
    pooled: list[float] = []
    for name, part in parts.items():
        a, b = part["scores"].get("mindscape", {}), part["scores"].get("naive", {})
        diff = [a[q] - b[q] for q in a if q in b]
        if not diff:
            continue
        pooled += diff
        wins = f"{sum(d > 0 for d in diff)} / {sum(d < 0 for d in diff)}"
        lines.append(f"| {name} | {part['metric']} | {len(diff)} | {ci(diff)} | {wins} |")
    if pooled:
        wins = f"{sum(d > 0 for d in pooled)} / {sum(d < 0 for d in pooled)}"
        lines.append(f"| **pooled** | each set's own | {len(pooled)} | {ci(pooled)} | {wins} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = doc_parser(__doc__)
    ap.add_argument("--run", action="store_true", help="run (or resume) the evaluations first")
    ap.add_argument("--jobs", nargs="*", help="dataset:split pairs to run; default all")
    args = ap.parse_args()
    tables, parts = [], {}
    for dataset, split, limit, per_doc in JOBS:
        if args.run and (not args.jobs or f"{dataset}:{split}" in args.jobs):
            cmd = command(args.bench, dataset, split, limit, per_doc)
            run_eval(cmd, REPO)
        text, part = table(dataset, split, limit, per_doc, args.bench)
        if part["scores"]:
            tables.append(text)
            parts[f"{dataset} {split}"] = part
    head = (REPO / "benchmarks" / "figures" / "results_local_header.md").read_text()
    body = head + "\n" + paired(parts) + "\n" + "\n".join(tables)
    results = REPO / "docs" / "results.md"
    old = results.read_text()
    offline = old.split(LOCAL_HEADING)[0].rstrip("\n")
    mom = old[old.index(MOM_HEADING) :] if MOM_HEADING in old else ""
    results.write_text(offline + "\n\n" + body + ("\n" + mom if mom else ""))
    print(body)


if __name__ == "__main__":
    main()
