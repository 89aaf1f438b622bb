"""What building `mom/recall.py`'s LLM memories costs: estimated beforehand (``--estimate``),
and as recorded per story by `mom/build.py`'s `Builder`, in a story's outline figures, their totals,
the printed cost table and the JSON line's cost fields."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.mom.build import DATASET, Builder, index_configs, written_parts

COST_COLUMNS = ("calls", "tokens_in", "tokens_out", "cached", "reads", "seconds", "index_seconds")
"""A story's outline figures, in the cost table's order."""


def outline_figures(record: Mapping[str, Any] | None) -> dict[str, float] | None:
    """The MoM part of one story's index cost: outline calls and tokens (role
    ``index_outline``), the answers taken from the cache, the evaluator's reads and the
    outline stage's seconds; None when the story's cost was not recorded."""
    if not record:
        return None
    row = (record.get("llm") or {}).get("index_outline", {})
    reads = record.get("score_reads") or {}
    return {
        "calls": row.get("calls", 0),
        "tokens_in": row.get("tokens_in", 0),
        "tokens_out": row.get("tokens_out", 0),
        "cached": sum(r.get("cache_hits", 0) for r in (record.get("llm") or {}).values()),
        "reads": sum(reads.values()),
        "seconds": round(float(record.get("outline_seconds", 0.0)), 1),
        "index_seconds": round(float(record.get("seconds", 0.0)), 1),
    }


def story_costs(
    single: Mapping[str, Any] | None, selected: Mapping[str, Any] | None
) -> dict[str, dict[str, float] | None]:
    """One story's outline figures for (c) and (d). When (d) was built on (c)'s cache
    (``shared_cache`` in its record), its greedy path was (c)'s answer, so (c)'s calls, tokens
    and outline seconds are added to (d)'s."""
    c, d = outline_figures(single), outline_figures(selected)
    if selected and selected.get("shared_cache") and c is not None and d is not None:
        d = {
            **d,
            **{key: d[key] + c[key] for key in ("calls", "tokens_in", "tokens_out")},
            "seconds": round(d["seconds"] + c["seconds"], 1),
        }
    return {"single": c, "selected": d}


def cost_totals(rows: Sequence[Mapping[str, Any] | None]) -> dict[str, float] | None:
    """Sums over the stories with a recorded cost, and how many there were."""
    known = [r for r in rows if r]
    if not known:
        return None
    out: dict[str, float] = {"stories": len(known)}
    for key in COST_COLUMNS:
        out[key] = round(sum(float(r[key]) for r in known), 1)
    return out


def print_costs(per_story: Mapping[str, Mapping[str, Any]], shared: bool) -> None:
    """The outline stage's cost per story and in total, for (c) and (d)."""
    print(
        "\nindex cost per story, outline stage (calls/tokens: role index_outline; cached: "
        "answers from the cache; reads: evaluator reads; s: outline stage, index: whole index)"
        + ("\n(d) built with --share-cache: its figures add (c)'s greedy path" if shared else "")
    )
    names = ("calls", "in", "out", "cached", "reads", "s", "index")
    widths = (5, 7, 6, 6, 5, 7, 7)
    head_row = " ".join(f"{n:>{w}s}" for n, w in zip(names, widths, strict=True))
    print(f"{'story':24s} {'mem':8s} {head_row}")

    def line(story: str, mem: str, r: Mapping[str, float] | None) -> str:
        if not r:
            return f"{story:24s} {mem:8s} (not recorded)"
        vals = " ".join(
            f"{r[c]:>{w}.0f}" if c not in ("seconds", "index_seconds") else f"{r[c]:>{w}.1f}"
            for c, w in zip(COST_COLUMNS, widths, strict=True)
        )
        return f"{story:24s} {mem:8s} {vals}"

    for story, row in per_story.items():
        for mem in ("single", "selected"):
            print(line(story if mem == "single" else "", mem, row[mem]))
    for mem in ("single", "selected"):
        tot = cost_totals([row[mem] for row in per_story.values()])
        label = f"total ({tot['stories']:.0f} stories)" if tot else "total"
        print(line(label if mem == "single" else "", mem, tot))


def costs_by_story(builder: Builder, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each story's outline figures for (c) and (d) (`story_costs`), by story id."""
    single, selected = builder.memories["single"].costs, builder.memories["selected"].costs
    return {d: story_costs(single.get(d), selected.get(d)) for d in ids}


def shared_cache(builder: Builder, ids: Sequence[str]) -> bool:
    """Whether (d) was built on (c)'s cache for any of the stories."""
    selected = builder.memories["selected"].costs
    return any((selected.get(d) or {}).get("shared_cache") for d in ids)


def cost_fields(builder: Builder, per_story: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON line's cost fields (per story and in total) and the stores."""
    return {
        "cost_per_story": per_story,
        "cost_total": {
            mem: cost_totals([row[mem] for row in per_story.values()])
            for mem in ("single", "selected")
        },
        "stores": {k: str(m.path) for k, m in builder.memories.items()},
    }


def estimate(args: argparse.Namespace, docs: Sequence[Any]) -> int:
    """The LLM cost of building (c) and (d) for `docs`, from :mod:`mindscape.indexing.estimate`."""
    from mindscape.indexing.estimate import config_cost

    configs = index_configs(args)
    out: dict[str, Any] = {}
    for kind in ("single", "selected"):
        cost, shape = config_cost(((d.doc_id, d.text) for d in docs), configs[kind])
        out[kind] = cost.as_dict()
        out["index"] = shape
    c, d = out["single"], out["selected"]
    keys = ("calls", "tokens_in", "tokens_out", "seconds_local")
    run = d if args.share_cache else {key: c[key] + d[key] for key in keys}
    out["run"] = {key: run[key] for key in keys}
    parts = written_parts(configs["single"])
    out["llm_parts"] = parts
    shape = out["index"]
    print(
        f"{DATASET} / {args.split}: {shape['documents']} stories, {shape['tokens']} tokens, "
        f"{shape['chunks']} chunks, {shape['sections']} outline sections; the LLM writes: "
        f"{', '.join(parts)}"
        + ("" if args.all_llm_parts else " (--all-llm-parts: the summaries too)")
    )
    for kind, label in (
        ("single", "(c) single LLM memory (N=1)"),
        ("selected", f"(d) selected memory (N={args.mom_paths})"),
        ("run", "the run ((d) alone)" if args.share_cache else "the run ((c) + (d))"),
    ):
        r = out[kind]
        print(
            f"{label:34s} {r['calls']:>6} calls {r['tokens_in']:>9} in {r['tokens_out']:>8} out "
            f"~{r['seconds_local'] / 60:.0f} min"
        )
        for part, p in (r.get("parts") or {}).items():
            print(
                f"    {part:<9} {p['calls']:>6} calls {p['tokens_in']:>9} in {p['tokens_out']:>8} out"
            )
    print(
        "(minutes at the local model's speed, MINDSCAPE_PROMPT_TPS/OUTPUT_TPS; mom_score: the "
        "evaluator's reads in process; (a) and (b) need no LLM; parts the LLM does not write "
        "are built offline at no LLM cost)"
    )
    print(json.dumps({"dataset": DATASET, "split": args.split, "estimate": out}))
    return 0
