"""Node `init_signature`: validate the input, reset the loop, activate the signature σ0.

Reads: question, doc_id / doc_ids, task, options. Writes: task, query, signature, preset, the
books the question touched (the trace's strips, :func:`mindscape.trace.book_strips`), the
backend that answers (and why ``auto`` fell back to extractive, when it did) and a fresh slate
for every accumulating field (a thread can carry several questions).
σ0 is MiA's coverage-aware greedy selection or the First-K variant (`Context.signature`).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from mindscape.agents._common import Node, doc_scope, emit, to_sig_item
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.errors import StoreError
from mindscape.state import COUNTERS, QAState, SignatureItem, SignatureUpdate, canonical_task
from mindscape.trace import book_strips


def check_input(state: QAState, known_docs: set[str] | None) -> str:
    """The canonical task; ValueError / StoreError for an input that cannot be answered."""
    if not (state.get("question") or "").strip():
        raise ValueError("the question is empty")
    task = canonical_task(state.get("task"), state.get("options"))
    if task == "multiple-choice" and len(state.get("options") or []) < 2:
        raise ValueError("a multiple-choice question needs at least two options")
    docs = doc_scope(state)
    if docs and known_docs is not None:
        unknown = sorted(docs - known_docs)
        if unknown:
            have = ", ".join(sorted(known_docs)) or "none"
            raise StoreError(f"unknown document {', '.join(unknown)} (the store has: {have})")
    return task


def make_init_signature(deps: Deps) -> Node:
    """The `init_signature` node bound to `deps`."""

    def init_signature(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
        run = deps.run(runtime)
        ctx = run.ctx
        task = check_input(state, run.documents)
        question = state["question"].strip()
        signature = []
        if ctx.signature != "none":
            units = run.retriever.signature(
                question,
                doc_ids=doc_scope(state),
                method=str(ctx.signature),
                params=run.params,
            )
            signature = [to_sig_item(u) for u in units]
        books = book_strips(run.retriever, question, doc_scope(state), run.params)
        emit(
            runtime,
            "signature",
            round=0,
            units=[s["unit_id"] for s in signature],
            method=ctx.signature,
            books=books,
        )
        return {
            **fresh_state(question, task, ctx.preset, signature, run.token_budget),
            "books": books,
            "backend": run.backend,
            "backend_notice": run.choice.notice,
        }

    return init_signature


def fresh_state(
    question: str,
    task: str,
    preset: str,
    signature: list[SignatureItem],
    token_budget: int | None,
) -> dict[str, Any]:
    """The state a new question starts from: its counters at 0, its lists emptied (a thread's
    earlier question leaves nothing behind), the initial signature and the token budget."""
    reset: dict[str, Any] = {name: Overwrite(0) for name in COUNTERS}
    reset.update(
        {
            name: Overwrite([])
            for name in ("probes", "retrieved", "evidence_memory", "attempts", "trace")
        }
    )
    return {
        **reset,
        "question": question,
        "task": task,
        "preset": preset,
        "query": question,
        "signature": signature,
        "pending_probes": [],
        "round_hits": [],
        "fused": "",
        "update": SignatureUpdate(),
        "decision": None,
        "over_budget": None,
        "answer": "",
        "confidence": 0.0,
        "sufficient": False,
        "evidence": [],
        "stop_reason": "",
        "quote": None,
        "token_budget": token_budget,
    }
