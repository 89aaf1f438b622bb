"""Node `refine`: the REFINE/ANSWER decision, Self-Probe, and the answer so far.

Reads: attempts, update, evidence_memory, probes, round_hits, retrieved, over_budget, the
counters. Writes: decision, pending_probes, probes, query, over_budget (for the router), trace
(the round's step, with what :func:`mindscape.trace.trace_fields` observes), and the output
fields (answer, confidence, sufficient, evidence, quote, stop_reason), which always hold the
best attempt so far, so the run can end after any round.

Decision, in order:

1. ANSWER when this round's attempt is sufficient with confidence ≥ `confidence_threshold`,
   or when MiA's UPDATE decided ANSWER and the generator answered;
2. STOP when a budget is used up (rounds, LLM calls, tokens; ``over_budget``, as `try_answer`
   left it), or when a refining round left the reader no surer (``no surer``: its certainty,
   where the reader gives one, did not rise): answer with the best attempt;
3. otherwise Self-Probe: at most `max_probes` new probes (entities first, never repeating)
   and, with `query_rewrite`, a rewritten query; the LLM reasoner decides REFINE/ANSWER in
   the same call, but its ANSWER counts only for a sufficient attempt whose quote was found
   in the passages (its ``grounding``), or whose verifier's P(right) is at least 0.5. A round that found nothing and has nothing new to try
   STOPs; so does a round whose Self-Probe call used up a budget.

Budgets: the token budget stops refining as soon as another round like the average one so
far would pass it, so a question stays within `max_tokens` rather than overshooting by a round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langgraph.runtime import Runtime

from mindscape.agents._common import Node, best_attempt, cost, emit, layer_rank
from mindscape.agents.budget import spent_budget
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.llm import Usage
from mindscape.reasoners.base import RefineRequest
from mindscape.run import Run
from mindscape.state import (
    Attempt,
    BudgetName,
    Decision,
    EvidenceItem,
    Grounding,
    QAState,
    TraceStep,
)
from mindscape.trace import quote_pin, trace_fields

NO_ANSWER = "not enough evidence"

QUOTE_FOUND: frozenset[Grounding] = frozenset({"grounded", "quoted", "extractive", "lexical"})
"""The grounding levels of an answer whose quote is in the passages and was checked (an
extractive answer is a passage's own words; a plain open answer's nearest sentence, lexical,
carries its words). A verified answer counts by the verifier's probability
(:data:`VERIFIED_RIGHT`), not by its label; a closed answer's option margin is the reader's
own say-so and never counts."""

VERIFIED_RIGHT = 0.5
"""The verifier's P(right) at which a verified answer counts as found: more likely right than
not."""


@dataclass
class Outcome:
    """How a round ends: the decision, why, the probes and query of the next round, and the
    budget used up as of the node's last call."""

    decision: Decision
    reason: str
    query: str
    probes: list[str] = field(default_factory=list)
    over_budget: BudgetName | None = None


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


def this_rounds_attempt(state: QAState) -> Attempt | None:
    """The attempt of the current round (None when the answer was deferred)."""
    attempts = state.get("attempts") or []
    return attempts[-1] if attempts and attempts[-1]["round"] == state.get("rounds", 0) else None


def no_surer(state: QAState, latest: Attempt | None) -> bool:
    """Whether a refining round left the reader no surer: its attempt, like an earlier one,
    carries the reader's certainty, and its confidence is not above theirs. Each round reads
    evidence ranked below what the earlier ones read, so another would not help either."""
    if latest is None or "certainty" not in latest:
        return False
    earlier = [
        a["confidence"]
        for a in state.get("attempts") or []
        if a["round"] < latest["round"] and "certainty" in a
    ]
    return bool(earlier) and latest["confidence"] <= max(earlier)


def decide(state: QAState, ctx: Context, latest: Attempt | None) -> Outcome | None:
    """The outcome before any Self-Probe call: ANSWER, STOP on a used-up budget or a round
    that left the reader no surer, or None."""
    query = state.get("query") or state["question"]
    over = state.get("over_budget")
    if latest and latest["sufficient"] and latest["confidence"] >= ctx.confidence_threshold:
        return Outcome("ANSWER", "answered", query, over_budget=over)
    if latest and (state.get("update") or {}).get("decision") == "ANSWER":
        return Outcome("ANSWER", "answered", query, over_budget=over)
    if over:
        return Outcome("STOP", over, query, over_budget=over)
    if ctx.certainty and no_surer(state, latest):
        return Outcome("STOP", "no surer", query, over_budget=over)
    return None


def trace_step(state: QAState, latest: Attempt | None, outcome: Outcome, calls: int) -> TraceStep:
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
        decision=outcome.decision,
        reason=outcome.reason,
        probes=outcome.probes,
        llm_calls=calls,
        read=list(latest.get("read") or []) if latest else [],
    )
    if latest and latest.get("passages"):
        step["passages"] = list(latest["passages"])
    if latest and latest.get("ranker"):
        step["ranker"] = latest["ranker"]
    step.update(trace_fields(state, latest))  # type: ignore[typeddict-item]
    return step


def quote_found(attempt: Attempt | None) -> bool:
    """Whether Self-Probe may end the loop on this attempt: it is sufficient and its quote
    was found in the passages, or, verified, the verifier's P(right) (its confidence) is at
    least :data:`VERIFIED_RIGHT`. The model's own say-so never ends the loop alone."""
    if not (attempt and attempt["sufficient"]):
        return False
    if attempt.get("grounding") == "verified":
        return attempt["confidence"] >= VERIFIED_RIGHT
    return attempt.get("grounding") in QUOTE_FOUND


def probe_request(
    state: QAState, ctx: Context, latest: Attempt | None, rewrite: bool
) -> RefineRequest:
    """What Self-Probe reads: the round's attempt (else the best so far), the memory, the
    probes asked so far and this round's passages."""
    return RefineRequest(
        question=state["question"],
        query=state.get("query") or state["question"],
        attempt=latest or best_attempt(list(state.get("attempts") or [])),
        notes=list(state.get("evidence_memory") or []),
        previous_probes=list(state.get("probes") or []),
        passages=[i for g in state.get("round_hits") or [] for i in g["items"]],
        max_probes=ctx.max_probes or 0,
        rewrite=rewrite,
    )


def self_probe(run: Run, state: QAState, latest: Attempt | None, usage: Usage) -> Outcome:
    """Self-Probe (and the LLM's own decision): REFINE with new probes and the next query,
    ANSWER, or STOP when there is nothing new to try or its call used up a budget."""
    ctx = run.ctx
    out = Outcome("REFINE", "refining", state.get("query") or state["question"])
    rewrite = bool(ctx.query_rewrite) and ctx.signature_update != "llm"
    if ctx.max_probes or rewrite:
        result = run.reasoner.refine(probe_request(state, ctx, latest, rewrite), usage=usage)
        out.probes = result.probes[: ctx.max_probes or 0]
        out.reason = result.reason or out.reason
        if result.decision == "ANSWER" and quote_found(latest):
            out.decision = "ANSWER"
        if rewrite and result.next_query:
            out.query = result.next_query
    next_query = (state.get("update") or {}).get("next_query")
    if ctx.query_rewrite and next_query:
        out.query = next_query  # MiA UPDATE's q_{t+1}
    out.over_budget = spent_budget(state, ctx, usage)
    found = any(g["items"] for g in state.get("round_hits") or [])
    if out.decision == "REFINE" and not (out.probes or found) and out.query == state.get("query"):
        out.decision, out.reason = "STOP", "exhausted"  # nothing new to try
    elif out.decision == "REFINE" and out.over_budget:
        out.decision, out.reason = "STOP", out.over_budget
    if out.decision == "STOP":
        out.probes = []
    return out


def answer_fields(state: QAState, ctx: Context, best: Attempt | None) -> dict[str, Any]:
    """The output fields for the best attempt so far (the run may end after any round)."""
    return {
        "answer": best["answer"] if best and best["answer"] else NO_ANSWER,
        "confidence": float(best["confidence"]) if best else 0.0,
        "sufficient": bool(best and best["sufficient"]),
        "evidence": final_evidence(state, best, ctx.evidence_out),
        "answer_round": int(best["round"]) if best else 0,
    }


def make_refine(deps: Deps) -> Node:
    """The `refine` node bound to `deps`."""

    def refine(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
        run = deps.run(runtime)
        ctx = run.ctx
        latest = this_rounds_attempt(state)
        usage = Usage()
        outcome = decide(state, ctx, latest) or self_probe(run, state, latest, usage)
        if outcome.decision == "ANSWER" and latest:
            best: Attempt | None = latest
        else:
            best = best_attempt(list(state.get("attempts") or []))
        deps.usage.merge(usage)
        step = trace_step(state, latest, outcome, state.get("llm_calls", 0) + usage.calls)
        quote = quote_pin(state, best, state.get("books") or [])
        emit(
            runtime,
            "decision",
            round=step["round"],
            decision=outcome.decision,
            reason=outcome.reason,
            probes=outcome.probes,
            step=step,
            quote=quote,
        )
        stop_reason = {"ANSWER": "answered", "STOP": outcome.reason}.get(outcome.decision, "")
        return {
            "decision": outcome.decision,
            "pending_probes": outcome.probes,
            "probes": outcome.probes,
            "query": outcome.query,
            "over_budget": outcome.over_budget,
            "trace": [step],
            **answer_fields(state, ctx, best),
            "quote": quote,
            "stop_reason": stop_reason,
            **cost(usage),
        }

    return refine
