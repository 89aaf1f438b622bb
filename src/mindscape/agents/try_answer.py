"""Node `try_answer`: Try-Answer over the passages, σ and the evidence memory.

Reads: question, task, options, round_hits, retrieved, signature, evidence_memory, fused, update.
Writes: attempts, the counters, and ``over_budget`` as of its call (what `refine` decides
with; :mod:`mindscape.agents.budget`). An LLM answerer reads a focused set (`focus_tokens`,
see :mod:`mindscape.reasoners.focus`) chosen from this round's hits first, leaving out what
earlier attempts read. Without focus, the passages are this round's hits (veridical first);
in a refining round, the question's own round-1 hits first, then the round's new hits in a
window grown by `refine_window`; then the best earlier evidence, packed into `answer_budget`
tokens. σ and the memory are shown when `answer_with_signature` / `answer_with_evidence` are
on. The attempt carries an explicit "not enough evidence" flag, a confidence and its
grounding level (how its answer is tied to the passages); with `certainty` on, the confidence
is at most the reader's own certainty in its words (a plain answer's token probability), so
a small reader that guesses refines rather than answers; a confidence that already is the
reader's probability (the verifier's P(right), a closed answer's option margin) is not capped. With
`answer_policy="on-decision"` (MiA-Agent) the generator only runs once UPDATE decided ANSWER,
in the last round, or when the round found nothing new (the loop is about to stop).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.runtime import Runtime

from mindscape.agents._common import Node, cost, emit, layer_rank
from mindscape.agents.budget import spent_budget
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.llm import Usage
from mindscape.memory.retrieval.ranking import pack_budget
from mindscape.reasoners import grounding
from mindscape.reasoners.base import AnswerRequest
from mindscape.state import Attempt, EvidenceItem, EvidenceNote, Grounding, QAState

READER_OWN: frozenset[Grounding] = frozenset({"verified", "margin"})
"""The levels whose confidence is already a probability read from the reader (the verifier's
P(right), the option margin): the certainty cap leaves them alone."""

GRADED = "llm"
"""The reasoner whose attempts take their confidence from the grounding checks."""

LEVELS: dict[float, Grounding] = {
    grounding.GROUNDED: "grounded",
    grounding.QUOTED: "quoted",
    grounding.UNGROUNDED: "ungrounded",
    grounding.INSUFFICIENT: "insufficient",
}
"""The grounding level behind each confidence the grounding checks give."""


def by_layer(items: Iterable[EvidenceItem]) -> list[EvidenceItem]:
    """The items veridical first (`READING_PRIORITY`), then by score."""
    return sorted(items, key=lambda i: (layer_rank(i["layer"]), -i["score"]))


def round_hits(state: QAState) -> list[EvidenceItem]:
    """This round's hits, by layer, then score."""
    return by_layer(i for g in state.get("round_hits") or [] for i in g["items"])


def select_passages(state: QAState, budget: int) -> list[EvidenceItem]:
    """The passages to answer from, within `budget` tokens, in priority order.

    Round 1 reads its hits (by layer, then score). A refining round reads the question's own
    round-1 hits first, then this round's new hits, then the rest by score: refining adds
    evidence to what the question retrieved and never swaps it out (the prompt window grows,
    `refine_window`). Before, a refining round showed its probes' hits first, and in a small
    window the final answer often lost the very passages that held it.
    """
    current = round_hits(state)
    retrieved = state.get("retrieved") or []
    seen = {i["unit_id"] for i in current}
    first = by_layer(i for i in retrieved if i["round"] == 1 and i["unit_id"] not in seen)
    seen |= {i["unit_id"] for i in first}
    earlier = sorted((i for i in retrieved if i["unit_id"] not in seen), key=lambda i: -i["score"])
    return pack_budget([*first, *current, *earlier], lambda i: int(i["tokens"]), budget)


def focus_candidates(state: QAState, budget: int) -> list[EvidenceItem]:
    """What focused reading chooses from: this round's hits (veridical first, then by score),
    then the rest of the question's evidence by score, within `budget` tokens. Sentences an
    earlier attempt read are left out by the reader, so a refining round reads its probes'
    evidence first."""
    current = round_hits(state)
    seen = {i["unit_id"] for i in current}
    rest = sorted(
        (i for i in state.get("retrieved") or [] if i["unit_id"] not in seen),
        key=lambda i: -i["score"],
    )
    return pack_budget([*current, *rest], lambda i: int(i["tokens"]), budget)


def answer_window(ctx: Context, round_: int) -> int | None:
    """The LLM prompt window of this round's answer: `llm_passage_tokens` in round 1, grown
    by `refine_window` in a refining round (round 1's passages plus the new ones)."""
    base = ctx.resolved().llm_passage_tokens
    if not base or round_ <= 1:
        return None
    return round(base * ctx.refine_window)


def visible_notes(state: QAState, notes: bool) -> list[EvidenceNote]:
    """What the answerer reads of the pool: this round's cues (all notes for MiA); the latest
    fusion cue, ComoRAG's history, goes in separately as `fused`."""
    pool = state.get("evidence_memory") or []
    if notes:
        return list(pool)
    round_ = state.get("rounds", 0)
    return [u for u in pool if u["round"] == round_ and u["layer"] != "fusion"]


def grounding_level(attempt: Attempt) -> Grounding:
    """How the attempt is tied to its passages: an LLM answer's level is the one the grounding
    checks set its confidence from; an extractive answer (the offline reasoner's, or its
    fallback for an unusable model reply) is the passages' own words."""
    if attempt.get("reasoner") == GRADED:
        return LEVELS[attempt["confidence"]]
    return "extractive"


def defers(state: QAState, ctx: Context) -> bool:
    """MiA-Agent's generator waits (`answer_policy="on-decision"`) while UPDATE says REFINE,
    the round found something and no budget is used up (the round is not the last)."""
    decided = (state.get("update") or {}).get("decision")
    found = any(g["items"] for g in state.get("round_hits") or [])
    return (
        ctx.answer_policy == "on-decision"
        and decided == "REFINE"
        and found
        and spent_budget(state, ctx) is None
    )


def answer_request(state: QAState, ctx: Context, focus: int) -> AnswerRequest:
    """What the answerer reads this round (see the module docstring)."""
    return AnswerRequest(
        question=state["question"],
        task=state.get("task") or "open",
        options=list(state.get("options") or []),
        passages=(focus_candidates if focus else select_passages)(state, ctx.answer_budget),
        signature=list(state.get("signature") or []) if ctx.answer_with_signature else [],
        notes=visible_notes(state, ctx.encode == "notes") if ctx.answer_with_evidence else [],
        fused=(state.get("fused") or "") if ctx.answer_with_evidence else "",
        passage_tokens=answer_window(ctx, state.get("rounds", 0)),
        focus_tokens=focus,
        focus_window=ctx.focus_window,
        focus_windows=ctx.focus_windows,
        read_summaries=ctx.read_summaries,
        seen=[t for a in state.get("attempts") or [] for t in a.get("passages") or []],
    )


def make_try_answer(deps: Deps) -> Node:
    """The `try_answer` node bound to `deps`."""

    def try_answer(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
        run = deps.run(runtime)
        ctx = run.ctx
        round_ = state.get("rounds", 0)
        if defers(state, ctx):
            emit(runtime, "answer", round=round_, deferred=True)
            return {"over_budget": None}  # it defers only while every budget lasts
        focus = int(ctx.focus_tokens or 0) if run.llm_answers else 0
        req = answer_request(state, ctx, focus)
        usage = Usage()
        attempt: Attempt = run.reasoner.answer(req, usage=usage)
        attempt["round"] = round_
        attempt.setdefault("read", [p["unit_id"] for p in req.passages])
        if "grounding" not in attempt:
            attempt["grounding"] = grounding_level(attempt)
        if ctx.certainty and "certainty" in attempt and attempt["grounding"] not in READER_OWN:
            attempt["confidence"] = min(attempt["confidence"], attempt["certainty"])
        deps.usage.merge(usage)
        emit(
            runtime,
            "answer",
            round=round_,
            answer=attempt["answer"],
            sufficient=attempt["sufficient"],
            confidence=attempt["confidence"],
        )
        over = spent_budget(state, ctx, usage)
        return {"attempts": [attempt], **cost(usage), "over_budget": over}

    return try_answer
