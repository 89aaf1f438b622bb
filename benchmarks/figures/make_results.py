"""Run the offline evaluation on every bench dataset and write docs/results.md.

    python benchmarks/figures/make_results.py --bench ../shared/bench [--jobs quality_leval:test ...]
    python benchmarks/figures/make_results.py --figures

`--figures` runs nothing: it rewrites the blocks generated from the per-question results
committed under docs/results/ (docs/results.md's headline table and README.md's status lines,
between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``; see
figures/committed_figures.py), which a full run also does.

Each table in the generated file comes with the exact `mindscape eval` command that produced
it; rerunning that command reproduces the figures (results are resumable and cached under
runs/eval/). Datasets too large for one run on a 2-core machine are evaluated on their first N
questions (`--limit`), which the table says.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import doc_parser, run_eval
from benchmarks.figures.committed_figures import fill
from benchmarks.figures.local_results import (
    LOCAL_HEADING,  # the section it writes, kept on regeneration
)
from mindscape.eval.metrics import bootstrap_ci

REPO = Path(__file__).resolve().parents[2]
PRESETS = "naive,mia-rag,mindscape"
# dataset, split, question limit (None = all)
JOBS: list[tuple[str, str, int | None]] = [
    ("comorag_cinderella", "dev", None),
    ("quality_leval", "dev", None),
    ("quality_leval", "test", None),
    ("sfiction_leval", "dev", None),
    ("sfiction_leval", "test", None),
    ("nocha_sample", "dev", None),
    ("nocha_sample", "test", None),
    ("fairytaleqa", "dev", 150),
    ("fairytaleqa", "test", 150),
    ("narrativeqa_lit", "dev", 60),
    ("narrativeqa_lit", "test", 60),
]


def command(bench: str, dataset: str, split: str, limit: int | None) -> list[str]:
    cmd = [
        "mindscape",
        "eval",
        "--bench",
        bench,
        "--dataset",
        dataset,
        "--split",
        split,
        "--llm",
        "extractive",
        "--preset",
        PRESETS,
        "--out",
        f"runs/eval/{dataset}-{split}",
        "--quiet",
    ]
    return cmd + (["--limit", str(limit)] if limit else [])


def fmt(m: dict | None) -> str:
    if not m or m.get("mean") is None:
        return "n/a"
    return f"{m['mean']:.3f} [{m['low']:.3f}, {m['high']:.3f}]"


def section(dataset: str, split: str, limit: int | None, cmd: list[str]) -> str:
    out = REPO / f"runs/eval/{dataset}-{split}"
    report = json.loads((out / "report.json").read_text())
    groups = [g for g in report["groups"] if g["dataset"] == dataset]
    names = sorted({k for g in groups for k in g["metrics"]})
    ks = sorted({k for g in groups for k in g.get("recall_at_k") or {}}, key=int)
    cols = names + [f"R@{k}" for k in ks]
    lines = [
        f"### {dataset} · {split}" + (f" (first {limit} questions)" if limit else ""),
        "",
        f"`{shlex.join(cmd)}`",
        "",
        "| preset | n | " + " | ".join(cols) + " | LLM calls | latency s |",
        "|---" * (len(cols) + 4) + "|",
    ]
    for g in groups:
        cost = g.get("cost", {})
        values = [fmt(g["metrics"].get(k)) for k in names] + [
            fmt((g.get("recall_at_k") or {}).get(k)) for k in ks
        ]
        lines.append(
            f"| {g['preset']} | {g['n']} | "
            + " | ".join(values)
            + f" | {cost.get('llm_calls', {}).get('mean', 0):.1f} | {cost.get('latency_s', {}).get('mean', 0):.2f} |"
        )
    if dataset == "narrativeqa_lit":
        lines += [
            "",
            "Subset whose questions LiteraryQA did not modify (`is_question_modified == false`):",
            "",
            "| preset | n | f1 |",
            "|---|---|---|",
        ]
        records = [
            json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()
        ]
        for preset in PRESETS.split(","):
            vals = [
                r["metrics"]["f1"]
                for r in records
                if r["preset"] == preset and r.get("is_question_modified") is False
            ]
            mean, low, high = bootstrap_ci(vals)
            lines.append(
                f"| {preset} | {len(vals)} | {fmt({'mean': mean, 'low': low, 'high': high})} |"
            )
    return "\n".join(lines) + "\n"


def write_generated() -> None:
    """Rewrite the generated blocks of README.md and docs/results.md in place."""
    for page in (REPO / "README.md", REPO / "docs" / "results.md"):
        old = page.read_text(encoding="utf-8")
        new = fill(old)
        if new != old:
            page.write_text(new, encoding="utf-8")
        print(
            f"{page.relative_to(REPO)}: {'rewritten' if new != old else 'unchanged'}",
            file=sys.stderr,
        )


def main() -> None:
    ap = doc_parser(__doc__)
    ap.add_argument("--jobs", nargs="*", help="dataset:split pairs to (re)run; default all")
    ap.add_argument(
        "--no-run", action="store_true", help="only assemble docs/results.md from runs/eval"
    )
    ap.add_argument(
        "--figures",
        action="store_true",
        help="only rewrite the blocks generated from committed per-question results",
    )
    args = ap.parse_args()
    if args.figures:
        write_generated()
        return
    jobs = [j for j in JOBS if not args.jobs or f"{j[0]}:{j[1]}" in args.jobs]
    sections = []
    for dataset, split, limit in JOBS:
        cmd = command(args.bench, dataset, split, limit)
        if (dataset, split, limit) in jobs and not args.no_run:
            run_eval(cmd, REPO)
        if (REPO / f"runs/eval/{dataset}-{split}/report.json").exists():
            sections.append(section(dataset, split, limit, cmd))
    head = (REPO / "benchmarks" / "figures" / "results_header.md").read_text()
    results = REPO / "docs" / "results.md"
    old = results.read_text() if results.exists() else ""
    local = (
        old[old.index(LOCAL_HEADING) :] if LOCAL_HEADING in old else ""
    )  # figures/local_results.py's
    results.write_text(head + "\n" + "\n".join(sections) + ("\n" + local if local else ""))
    print("wrote docs/results.md", file=sys.stderr)
    write_generated()


if __name__ == "__main__":
    main()
