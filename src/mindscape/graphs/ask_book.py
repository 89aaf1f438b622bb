"""Ask a book, answered compactly: the QA graph behind a result a calling model can read.

```
START → ask → END          (input: question, books, preset; output: the compact result)
```

``langgraph dev`` serves :data:`graph` as ``ask_book`` (langgraph.json, where its description
is), and its ``/mcp`` endpoint makes each assistant an MCP tool whose result is the graph's
output: this one's is :func:`~mindscape.graphs.tool_result.compact_result` (the answer, whether it
is trusted, its confidence, up to three quotes with their places, rounds and seconds), where
the ``mindscape`` graph's is the QA graph's whole state (unchanged, for callers that want
it). Progress events go on to the run's custom stream as they happen.

A question it cannot ask (empty, too long, an unknown book or preset, a store that is
missing or damaged, a model that is not installed) comes back as ``{"error": one line}``:
the LangGraph server would report a raised error by its class name only.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, cast

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.errors import MindscapeError
from mindscape.graphs.chat import ask_streaming, with_store
from mindscape.graphs.qa import QAGraph, build_qa_graph
from mindscape.graphs.tool_result import (
    AskBookInput,
    Quote,
    checked_preset,
    checked_question,
    compact_result,
    one_line,
    qa_input,
)


class AskBookResult(TypedDict, total=False):
    """The graph's output: a :class:`~mindscape.graphs.tool_result.CompactResult`, or, alone,
    ``error``."""

    answer: str
    trusted: bool
    confidence: float
    quotes: list[Quote]
    rounds: int
    seconds: float
    error: str
    """Why the question could not be asked (one line)."""


class AskBookState(AskBookInput, AskBookResult):
    """The graph's state: the input and the result."""


# --------------------------------------------------------------------------- the graph


def make_ask(deps: Deps, qa: QAGraph) -> Any:
    """The node: the question asked of the books, answered as :class:`AskBookResult`."""

    def ask(state: AskBookState, runtime: Runtime[Context]) -> AskBookResult:
        ctx = runtime.context if isinstance(runtime.context, Context) else Context()
        started = time.perf_counter()
        try:
            question = checked_question(state.get("question"))
            preset = checked_preset(state.get("preset"))
            run = with_store(replace(ctx, preset=preset) if preset else ctx)
            out = ask_streaming(qa, qa_input(question, state.get("books")), run, runtime)
        except (MindscapeError, ValueError) as exc:
            return AskBookResult(error=one_line(exc))
        threshold = run.resolved().confidence_threshold
        result = compact_result(out, seconds=time.perf_counter() - started, threshold=threshold)
        return cast(AskBookResult, result)

    return ask


def build_ask_book_graph(
    deps: Deps | None = None,
) -> StateGraph[AskBookState, Context, AskBookInput, AskBookResult]:
    """The uncompiled graph over the QA graph (both with `deps`, default lazy)."""
    deps = deps if deps is not None else Deps.default()
    qa = build_qa_graph(deps).compile(name="mindscape")
    builder = StateGraph(
        AskBookState, context_schema=Context, input_schema=AskBookInput, output_schema=AskBookResult
    )
    builder.add_node("ask", make_ask(deps, qa))
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder


graph = build_ask_book_graph().compile(name="ask_book")
"""The compiled graph LangGraph Server loads (``ask_book`` in langgraph.json)."""
