"""Node `signature_update`: σ_{t+1} from the new evidence.

Reads: question, query, signature, round_hits, evidence_memory. Writes: signature, update.
Modes (`Context.signature_update`):

* `none`: σ stays as activated (static RAG, or no signature at all);
* `reselect`: the coverage-aware greedy runs again with the query augmented by the round's
  best evidence (no LLM call);
* `llm`: MiA's UPDATE call chooses σ among the current units and re-selected candidates and
  also returns the decision, the next query and grounded evidence notes (in `update`, a
  :class:`~mindscape.state.SignatureUpdate`).
  On the offline backend it keeps the re-selection and proposes an expanded query.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from mindscape.agents._common import Node, cost, doc_scope, emit, to_sig_item
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.llm import Usage
from mindscape.reasoners.base import UpdateRequest
from mindscape.run import Run
from mindscape.state import (
    EvidenceItem,
    QAState,
    SignatureItem,
    SignatureUpdate,
    UpdateNote,
    as_decision,
)

EXTRA_CHARS = 800
"""Evidence text added to the query for re-selection (the embedder truncates anyway)."""


def evidence_text(items: list[EvidenceItem], limit: int = EXTRA_CHARS) -> str:
    """The round's best evidence, best first, cut to `limit` characters."""
    best = sorted(items, key=lambda i: -i["score"])
    return " ".join(" ".join(i["text"].split()) for i in best)[:limit]


def choose(ids: list[str] | None, pool: list[SignatureItem], k: int) -> list[SignatureItem]:
    """The units named by `ids` (in that order), else the first `k` of the pool."""
    by_id = {s["unit_id"]: s for s in pool}
    picked = [by_id[i] for i in ids or [] if i in by_id]
    return (picked or pool)[:k]


def reselect(run: Run, state: QAState, items: list[EvidenceItem]) -> list[SignatureItem]:
    """The coverage-aware greedy again, with the question augmented by the round's best
    evidence; for MiA's UPDATE, a candidate set H_t twice σ's size to choose from."""
    ctx = run.ctx
    params = run.params
    if ctx.signature_update == "llm":
        params = replace(params, k=2 * ctx.signature_k)
    units = run.retriever.signature(
        state["question"],
        doc_ids=doc_scope(state),
        method="coverage",
        params=params,
        extra_text=evidence_text(items),
    )
    return [to_sig_item(u) for u in units]


def llm_update(
    run: Run,
    state: QAState,
    items: list[EvidenceItem],
    candidates: list[SignatureItem],
    usage: Usage,
) -> tuple[list[SignatureItem], SignatureUpdate]:
    """MiA's UPDATE call: σ chosen among the current units and the new candidates, with the
    decision, the next query and grounded evidence notes."""
    ctx = run.ctx
    current = list(state.get("signature") or [])
    taken = {s["unit_id"] for s in current}
    result = run.reasoner.update(
        UpdateRequest(
            question=state["question"],
            query=state.get("query") or state["question"],
            signature=current,
            candidates=[c for c in candidates if c["unit_id"] not in taken],
            passages=items,
            notes=list(state.get("evidence_memory") or []),
            k=ctx.signature_k,
            rewrite=bool(ctx.query_rewrite),
        ),
        usage=usage,
    )
    update = SignatureUpdate(
        decision=as_decision(result.decision),
        next_query=result.next_query,
        notes=[UpdateNote(cue=note, evidence_ids=list(ids)) for note, ids in result.notes],
        reason=result.reason,
    )
    return choose(result.signature_ids, [*current, *candidates], ctx.signature_k), update


def make_signature_update(deps: Deps) -> Node:
    """The `signature_update` node bound to `deps`."""

    def signature_update(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
        run = deps.run(runtime)
        ctx = run.ctx
        if ctx.signature_update == "none" or ctx.signature == "none":
            return {"update": SignatureUpdate()}
        items = [i for g in state.get("round_hits") or [] for i in g["items"]]
        candidates = reselect(run, state, items)
        usage = Usage()
        if ctx.signature_update == "llm":
            signature, update = llm_update(run, state, items, candidates, usage)
        else:
            signature = candidates[: ctx.signature_k] or list(state.get("signature") or [])
            update = SignatureUpdate(decision=None, next_query=None, notes=[], reason="re-selected")
        deps.usage.merge(usage)
        emit(
            runtime,
            "signature",
            round=state.get("rounds", 0),
            units=[s["unit_id"] for s in signature],
            decision=update["decision"],
        )
        return {"signature": signature, "update": update, **cost(usage)}

    return signature_update
