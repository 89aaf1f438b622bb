"""The QA graph: `(query, signature, evidence memory)` carried round by round.

```
START → init_signature → tri_layer_retrieve → signature_update → evidence_fuse
      → try_answer → refine ─┬→ END          (ANSWER, or a budget ran out: best attempt)
                             └→ tri_layer_retrieve   (REFINE: probes / rewritten query)
```

Three ways to run it:

* script: ``app = build_qa_graph(deps).compile(checkpointer=InMemorySaver())`` then
  ``app.invoke({"question": q, "doc_id": d}, {"configurable": {"thread_id": t}},
  context=Context(store=...), durability="exit")`` (or ``stream`` with
  ``stream_mode=["updates", "custom"]`` for progress events);
* LangGraph Studio: ``langgraph dev`` serves the module-level :data:`graph` (no checkpointer:
  the server brings its own); the store comes from ``Context.store`` or ``MINDSCAPE_STORE``;
* inside a larger agent: see :mod:`mindscape.graphs.embed` (subgraph node, wrapper node) and
  :mod:`mindscape.graphs.tool` (a tool for ``langchain.agents.create_agent``).

Importing this module loads no model and opens no store: :class:`~mindscape.deps.Deps`
builds everything on first use.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from mindscape.agents import (
    make_evidence_fuse,
    make_init_signature,
    make_refine,
    make_signature_update,
    make_tri_layer_retrieve,
    make_try_answer,
    route_after_refine,
)
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.state import INPUT_KEYS, QAInput, QAOutput, QAState

NODES: tuple[str, ...] = (
    "init_signature",
    "tri_layer_retrieve",
    "signature_update",
    "evidence_fuse",
    "try_answer",
    "refine",
)


QAGraph = CompiledStateGraph[QAState, Context, QAInput, QAOutput]
"""The compiled QA graph's type."""


def build_qa_graph(deps: Deps | None = None) -> StateGraph[QAState, Context, QAInput, QAOutput]:
    """The uncompiled QA graph with `deps` bound into its nodes (default: lazy `Deps()`)."""
    deps = deps if deps is not None else Deps.default()
    builder = StateGraph(
        QAState, context_schema=Context, input_schema=QAInput, output_schema=QAOutput
    )
    builder.add_node("init_signature", make_init_signature(deps))
    builder.add_node("tri_layer_retrieve", make_tri_layer_retrieve(deps))
    builder.add_node("signature_update", make_signature_update(deps))
    builder.add_node("evidence_fuse", make_evidence_fuse(deps))
    builder.add_node("try_answer", make_try_answer(deps))
    builder.add_node("refine", make_refine(deps))
    builder.add_edge(START, "init_signature")
    builder.add_edge("init_signature", "tri_layer_retrieve")
    builder.add_edge("tri_layer_retrieve", "signature_update")
    builder.add_edge("signature_update", "evidence_fuse")
    builder.add_edge("evidence_fuse", "try_answer")
    builder.add_edge("try_answer", "refine")
    builder.add_conditional_edges("refine", route_after_refine, ["tri_layer_retrieve", END])
    return builder


graph = build_qa_graph().compile(name="mindscape")
"""The compiled graph LangGraph Studio / Server loads (see langgraph.json)."""

_APPS: dict[int, tuple[Deps, QAGraph]] = {}
_DEFAULT_DEPS: list[Deps] = []
_LOCK = threading.Lock()


def answer_question(
    question: dict[str, Any] | str,
    *,
    preset: str = "mindscape",
    store: str | None = None,
    deps: Deps | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Answer one question with a compiled graph (cached per `deps`); returns the QA output.

    `question` is a `QAInput`-shaped dict (extra keys such as `qid` are ignored) or the
    question text. `settings` are further `Context` fields. The process-wide default `Deps`
    is shared by every call without `deps`, so models and stores load once.
    """
    with _LOCK:
        if deps is None:
            if not _DEFAULT_DEPS:
                _DEFAULT_DEPS.append(Deps.default())
            deps = _DEFAULT_DEPS[0]
        if id(deps) not in _APPS:
            _APPS[id(deps)] = (deps, build_qa_graph(deps).compile(name="mindscape"))
        app = _APPS[id(deps)][1]
    data = {"question": question} if isinstance(question, str) else question
    payload = cast(QAInput, {k: data[k] for k in INPUT_KEYS if data.get(k) is not None})
    ctx = Context.from_preset(preset, store=store, **settings)
    return dict(app.invoke(payload, context=ctx))
