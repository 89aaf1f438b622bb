"""Node `evidence_fuse`: Mem-Encode the round's evidence, Mem-Fuse the related memory.

Reads: question, round_hits, evidence_memory, update. Writes: evidence_memory (new notes), fused.

* Mem-Encode: one unit `(probe, layer, evidence ids, cue)` per probe and layer that found
  something. `Context.encode`: `per-layer` makes one call per unit (ComoRAG, run in
  parallel); `batched` one call for the whole round; `notes` takes MiA UPDATE's evidence notes;
  `none` keeps no memory (single-shot presets).
* Mem-Fuse: the earlier units most related to the question (the top `fuse_fraction` by the
  similarity of probe + cue to the question) are integrated into one fusion cue: a separate
  call in `per-layer` mode, part of the batched call otherwise.
* `defer_encode`: round 1 encodes nothing (its answer reads the raw passages anyway); round 2
  encodes round 1's evidence together with its own, in the same call.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from mindscape.agents._common import Node, cost, emit
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.llm import Usage
from mindscape.reasoners.base import EncodeGroup, EncodeRequest, EncodeResult
from mindscape.run import Run
from mindscape.state import EvidenceNote, QAState


def related_half(
    question_vec: np.ndarray, units: list[EvidenceNote], unit_vecs: np.ndarray, fraction: float
) -> list[EvidenceNote]:
    """The `fraction` of units most similar to the question (at least one), in pool order."""
    if not units:
        return []
    keep = max(1, math.ceil(fraction * len(units)))
    sims = unit_vecs @ question_vec
    top = sorted(np.argsort(-sims, kind="stable")[:keep].tolist())
    return [units[i] for i in top]


def unencoded_groups(state: QAState, round_: int) -> list[EncodeGroup]:
    """Evidence of earlier rounds that no evidence note covers yet, grouped by (probe, layer)."""
    covered = {i for u in state.get("evidence_memory") or [] for i in u["evidence_ids"]}
    groups: dict[tuple[int, str, str], list[Any]] = {}
    for item in state.get("retrieved") or []:
        if item["round"] < round_ and item["unit_id"] not in covered:
            groups.setdefault((item["round"], item["probe"], item["layer"]), []).append(item)
    return [
        EncodeGroup(probe, layer, items)
        for (_, probe, layer), items in sorted(groups.items(), key=lambda kv: kv[0][0])
    ]


def encode_groups(
    reasoner: Any,
    question: str,
    groups: list[EncodeGroup],
    history: list[EvidenceNote],
    ctx: Context,
    usage: Usage,
) -> tuple[list[str], str | None]:
    """Cues for the groups and the fusion cue: one call per group (+ a fuse call), or one call."""
    if ctx.encode == "per-layer" and len(groups) > 1:

        def one(g: EncodeGroup) -> tuple[EncodeResult, Usage]:
            u = Usage()
            return reasoner.encode(EncodeRequest(question, [g], [], fuse=False), usage=u), u

        with ThreadPoolExecutor(max_workers=max(1, ctx.llm_concurrency)) as pool:
            results = list(pool.map(one, groups))
        for _, u in results:
            usage.merge(u)
        cues = [r.cues[0] if r.cues else "" for r, _ in results]
        return cues, reasoner.fuse(question, history, usage=usage) if history else None
    batched = ctx.encode == "batched"
    fuse = batched and bool(ctx.fuse)
    result = reasoner.encode(
        EncodeRequest(question, groups, history if batched else [], fuse=fuse), usage=usage
    )
    if history and not batched:
        return result.cues, reasoner.fuse(question, history, usage=usage)
    return result.cues, result.fused


def update_notes(state: QAState, round_: int) -> list[EvidenceNote]:
    """MiA: the evidence notes UPDATE wrote this round, as notes of the memory."""
    query = state.get("query") or state["question"]
    return [
        EvidenceNote(
            probe=query,
            layer="notes",
            evidence_ids=list(n["evidence_ids"]),
            cue=n["cue"],
            round=round_,
        )
        for n in (state.get("update") or {}).get("notes") or []
    ]


def round_groups(state: QAState, ctx: Context, round_: int) -> list[EncodeGroup]:
    """What to encode: this round's non-empty (probe, layer) hits, after the earlier rounds'
    evidence no note covers yet when encoding is deferred."""
    groups = [
        EncodeGroup(g["probe"], g["layer"], g["items"])
        for g in state.get("round_hits") or []
        if g["items"]
    ]
    return [*unencoded_groups(state, round_), *groups] if ctx.defer_encode else groups


def fuse_history(run: Run, state: QAState) -> list[EvidenceNote]:
    """Mem-Fuse's input: the earlier notes (fusion cues aside) most related to the question."""
    ctx = run.ctx
    prior = [u for u in state.get("evidence_memory") or [] if u["layer"] != "fusion"]
    if not (ctx.fuse and prior):
        return []
    vectors = run.vectors
    probes = np.vstack([vectors.query(u["probe"]) for u in prior])
    vecs = probes + vectors.pooled([u["cue"] for u in prior])  # ComoRAG embeds probe + cue
    return related_half(vectors.query(state["question"]), prior, vecs, ctx.fuse_fraction)


def encoded_notes(state: QAState, groups: list[EncodeGroup], cues: list[str]) -> list[EvidenceNote]:
    """One note per encoded group, citing the group's units."""
    return [
        EvidenceNote(
            probe=g.probe,
            layer=g.layer,
            evidence_ids=[i["unit_id"] for i in g.items],
            cue=c,
            round=state.get("rounds", 0),
        )
        for g, c in zip(groups, cues, strict=True)
    ]


def make_evidence_fuse(deps: Deps) -> Node:
    """The `evidence_fuse` node bound to `deps`."""

    def evidence_fuse(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
        run = deps.run(runtime)
        ctx = run.ctx
        round_, question = state.get("rounds", 0), state["question"]
        notes = update_notes(state, round_)
        if ctx.encode == "none":
            return {}
        if ctx.encode == "notes" and notes:  # MiA: UPDATE already wrote the evidence notes
            emit(runtime, "encode", round=round_, units=len(notes), mode="notes")
            return {"evidence_memory": notes}
        if ctx.defer_encode and round_ <= 1:
            emit(runtime, "encode", round=round_, units=0, deferred=True)
            return {}
        groups = round_groups(state, ctx, round_)
        history = fuse_history(run, state)
        usage = Usage()
        reasoner = run.offline if ctx.encode == "notes" else run.reasoner
        cues, fused = encode_groups(reasoner, question, groups, history, ctx, usage)
        units = encoded_notes(state, groups, cues)
        if fused:
            ids = sorted({i for u in history for i in u["evidence_ids"]})
            units.append(
                EvidenceNote(
                    probe=question, layer="fusion", evidence_ids=ids, cue=fused, round=round_
                )
            )
        deps.usage.merge(usage)
        emit(runtime, "encode", round=round_, units=len(units), fused=bool(fused), mode=ctx.encode)
        return {"evidence_memory": units, **cost(usage), **({"fused": fused} if fused else {})}

    return evidence_fuse
