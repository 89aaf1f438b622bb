"""Small pure helpers shared by the nodes: conversions, costs, progress, scope."""

from __future__ import annotations

from typing import Any, Protocol

from langgraph.runtime import Runtime

from mindscape.context import Context
from mindscape.llm import Usage
from mindscape.memory.types import Hit, SignatureUnit
from mindscape.state import Attempt, EvidenceItem, QAState, SignatureItem

READING_PRIORITY: tuple[str, ...] = ("veridical", "semantic", "episodic", "outline")
"""The order in which the answerer reads the layers' hits: source text first, then the
summaries nearest to it (a priority, not the layer list: that is ``memory.types.LAYERS``)."""


class Node(Protocol):
    """A QA graph node: the state and the run's runtime in, a state update out."""

    def __call__(self, state: QAState, runtime: Runtime[Context]) -> dict[str, Any]: ...


def emit(runtime: Any, event: str, **data: Any) -> None:
    """A custom progress event (``stream_mode="custom"``); a no-op without a runtime."""
    writer = getattr(runtime, "stream_writer", None)
    if writer is not None:
        writer({"event": event, **data})


def cost(usage: Usage) -> dict[str, int]:
    """The counter update for the calls recorded in `usage` (with, when there are any, the
    prompt tokens read from llama.cpp's cache and the LLM fallbacks: model answers that were
    unusable after a re-ask, for which the role's extractive fallback ran, and the parts of
    usable answers that the extractive reasoner filled in)."""
    out = {"llm_calls": usage.calls, "tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out}
    extra = {
        "tokens_cached": usage.total("tokens_cached"),
        "llm_fallbacks": usage.total("unusable") + usage.total("filled"),
    }
    return {**out, **{k: v for k, v in extra.items() if v}}


def doc_scope(state: QAState) -> set[str] | None:
    """The documents to search: the series, the document, or everything (None)."""
    if state.get("doc_ids"):
        return set(state["doc_ids"] or [])
    if state.get("doc_id"):
        return {state["doc_id"]}  # type: ignore[arg-type]
    return None


def to_item(hit: Hit, *, round_: int, probe: str) -> EvidenceItem:
    """A retriever hit as plain state data."""
    return EvidenceItem(
        unit_id=hit.unit_id,
        layer=hit.layer,
        doc_id=hit.doc_id,
        chunk_ids=list(hit.chunk_ids),
        text=hit.text,
        score=round(float(hit.score), 6),
        score_query=round(float(hit.score_query), 6),
        score_signature=round(float(hit.score_signature), 6),
        tokens=int(hit.tokens),
        round=round_,
        probe=probe,
    )


def to_sig_item(unit: SignatureUnit) -> SignatureItem:
    """A signature unit as plain state data."""
    return SignatureItem(
        unit_id=unit.unit_id,
        text=unit.text,
        chunk_ids=list(unit.chunk_ids),
        gains={k: round(float(v), 6) for k, v in unit.gains.items()},
        rank=unit.rank,
    )


def to_sig_unit(item: SignatureItem) -> SignatureUnit:
    """Plain state data back to the retriever's signature unit."""
    return SignatureUnit(
        unit_id=item["unit_id"],
        text=item["text"],
        chunk_ids=list(item["chunk_ids"]),
        gains=dict(item.get("gains", {})),
        rank=int(item.get("rank", 0)),
    )


def best_attempt(attempts: list[Attempt]) -> Attempt | None:
    """The attempt to answer with: sufficient first, then confidence, then the earliest (each
    round reads evidence ranked below what the earlier ones read, so on a tie the earlier
    reading is the better one; the reader's capped confidences tie often)."""
    if not attempts:
        return None
    return max(
        attempts, key=lambda a: (a["sufficient"], bool(a["answer"]), a["confidence"], -a["round"])
    )


def layer_rank(layer: str) -> int:
    """Position of a layer in the display order."""
    return READING_PRIORITY.index(layer) if layer in READING_PRIORITY else len(READING_PRIORITY)
