"""Node `refine`: the REFINE/ANSWER decision, Self-Probe, and the answer so far.

Reads: attempts, update, evidence_memory, probes, round_hits, retrieved, the counters. Writes:
decision, pending_probes, probes, query, trace, and the output fields (answer, confidence,
sufficient, evidence, stop_reason), which always hold the best attempt so far, so the run can
end after any round.

Decision, in order:

1. ANSWER when this round's attempt is sufficient with confidence ≥ `confidence_threshold`,
   or when MiA's UPDATE decided ANSWER and the generator answered;
2. STOP when a budget is used up (rounds, LLM calls, tokens): answer with the best attempt;
3. otherwise Self-Probe: at most `max_probes` new probes (entities first, never repeating)
   and, with `query_rewrite`, a rewritten query; the LLM reasoner decides REFINE/ANSWER in
   the same call, but its ANSWER counts only for a sufficient attempt whose quote was found
   in the passages. A round that found nothing and has nothing new to try STOPs.

Budgets: the token budget stops refining as soon as another round like the average one so
far would pass it, so a question stays within `max_tokens` rather than overshooting by a round.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from mindscape.agents._common import Node, best_attempt, cost, emit, exhausted, layer_rank
from mindscape.context import Context, ctx_of
from mindscape.deps import Deps
from mindscape.llm import Usage
from mindscape.reasoners.base import RefineRequest
from mindscape.reasoners.grounding import QUOTED
from mindscape.state import Attempt, EvidenceItem, QAState, TraceStep

NO_ANSWER = "not enough evidence"


def final_evidence(state: QAState, attempt: Attempt | None, limit: int) -> list[EvidenceItem]:
    """The attempt's support first, then source chunks by score, then summaries; `limit` items."""
    items = state.get("retrieved") or []
    by_id = {i["unit_id"]: i for i in items}
    support = [by_id[u] for u in (attempt["support"] if attempt else []) if u in by_id]
    taken = {i["unit_id"] for i in support}
    rest = sorted(
        (i for i in items if i["unit_id"] not in taken),
        key=lambda i: (layer_rank(i["layer"]), -i["score"]),
    )
    return [*support, *rest][:limit]


def decide(state: QAState, ctx: Context, latest: Attempt | None) -> tuple[str, str]:
    """The decision before any Self-Probe call: (ANSWER | STOP | PROBE, reason)."""
    if latest and latest["sufficient"] and latest["confidence"] >= ctx.confidence_threshold:
        return "ANSWER", "answered"
    if latest and (state.get("update") or {}).get("decision") == "ANSWER":
        return "ANSWER", "answered"
    reason = exhausted(state, ctx)
    if reason:
        return "STOP", reason
    return "PROBE", ""


def trace_step(
    state: QAState,
    latest: Attempt | None,
    decision: str,
    reason: str,
    probes: list[str],
    calls: int,
) -> TraceStep:
    """One round of the decision trace."""
    hits: dict[str, int] = {}
    for g in state.get("round_hits") or []:
        hits[g["layer"]] = hits.get(g["layer"], 0) + len(g["items"])
    step = TraceStep(
        round=state.get("rounds", 0),
        queries=list(dict.fromkeys(g["probe"] for g in state.get("round_hits") or [])),
        hits=hits,
        signature=[s["unit_id"] for s in state.get("signature") or []],
        answer=latest["answer"] if latest else "",
        sufficient=bool(latest and latest["sufficient"]),
        confidence=float(latest["confidence"]) if latest else 0.0,
        decision=decision,
        reason=reason,
        probes=probes,
        llm_calls=calls,
        read=list(latest.get("read") or []) if latest else [],
    )
    if latest and latest.get("passages"):
        step["passages"] = list(latest["passages"])
    return step


def _quoted(attempt: Attempt | None) -> bool:
    """Whether Self-Probe may end the loop on this attempt: it is sufficient and its quote
    was found in the passages. The model's own say-so never ends the loop alone."""
    return bool(attempt and attempt["sufficient"] and attempt["confidence"] >= QUOTED)


def self_probe(
    deps: Deps, ctx: Context, state: QAState, latest: Attempt | None, usage: Usage
) -> tuple[str, str, list[str], str]:
    """Self-Probe (and the LLM's own decision): (decision, reason, new probes, next query)."""
    attempts = list(state.get("attempts") or [])
    query = state.get("query") or state["question"]
    decision, reason, probes = "REFINE", "refining", []
    rewrite = bool(ctx.query_rewrite) and ctx.signature_update != "llm"
    if ctx.max_probes or rewrite:
        result = deps.reasoner(ctx).refine(
            RefineRequest(
                question=state["question"],
                query=query,
                attempt=latest or best_attempt(attempts),
                notes=list(state.get("evidence_memory") or []),
                previous_probes=list(state.get("probes") or []),
                passages=[i for g in state.get("round_hits") or [] for i in g["items"]],
                max_probes=ctx.max_probes or 0,
                rewrite=rewrite,
            ),
            usage=usage,
        )
        probes = result.probes[: ctx.max_probes or 0]
        reason = result.reason or reason
        if result.decision == "ANSWER" and _quoted(latest):
            decision = "ANSWER"
        if rewrite and result.next_query:
            query = result.next_query
    update = state.get("update") or {}
    if ctx.query_rewrite and update.get("next_query"):
        query = update["next_query"]  # MiA UPDATE's q_{t+1}
    found = any(g["items"] for g in state.get("round_hits") or [])
    if decision == "REFINE" and not probes and query == state.get("query") and not found:
        return "STOP", "exhausted", [], query
    counters: dict[str, Any] = dict(state)
    spent = {k: int(counters.get(k) or 0) + v for k, v in cost(usage).items()}
    over = exhausted({**state, **spent}, ctx)  # type: ignore[typeddict-item]
    if decision == "REFINE" and over:
        return "STOP", over, probes, query
    return decision, reason, probes, query


def make_refine(deps: Deps) -> Node:
    """The `refine` node bound to `deps`."""

    def refine(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
        ctx = ctx_of(runtime)
        attempts = list(state.get("attempts") or [])
        latest = (
            attempts[-1] if attempts and attempts[-1]["round"] == state.get("rounds", 0) else None
        )
        decision, reason = decide(state, ctx, latest)
        usage = Usage()
        probes: list[str] = []
        query = state.get("query") or state["question"]
        if decision == "PROBE":
            decision, reason, probes, query = self_probe(deps, ctx, state, latest, usage)
            if decision == "STOP":
                probes = []
        best = latest if decision == "ANSWER" and latest else best_attempt(attempts)
        deps.usage.merge(usage)
        step = trace_step(
            state, latest, decision, reason, probes, state.get("llm_calls", 0) + usage.calls
        )
        emit(
            runtime,
            "decision",
            round=step["round"],
            decision=decision,
            reason=reason,
            probes=probes,
        )
        return {
            "decision": decision,
            "pending_probes": probes,
            "probes": probes,
            "query": query,
            "trace": [step],
            "answer": best["answer"] if best and best["answer"] else NO_ANSWER,
            "confidence": float(best["confidence"]) if best else 0.0,
            "sufficient": bool(best and best["sufficient"]),
            "evidence": final_evidence(state, best, ctx.evidence_out),
            "stop_reason": {"ANSWER": "answered", "STOP": reason}.get(decision, ""),
            "answer_round": int(best["round"]) if best else 0,
            **cost(usage),
        }

    return refine
