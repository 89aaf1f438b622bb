"""Mounting the QA graph inside a larger LangGraph agent.

Two ways (STYLE §7.6):

* **Shared keys** — :func:`qa_subgraph` returns the compiled graph (no checkpointer of its
  own); add it as a node of a parent whose state has the `QAInput`/`QAOutput` keys
  (`question`, `doc_id`, ... / `answer`, `evidence`, ...). The child sees the parent's
  context object: a :class:`~mindscape.context.Context` is used, anything else gives the
  defaults (with the store from `MINDSCAPE_STORE` or the injected `Deps`).
* **Wrapper node** — :func:`make_qa_node` for foreign parents: it maps the parent's state to a
  question, runs the graph with an explicit `Context`, and maps the result back (by default
  into one key, ``qa``). Works in sync and async parents; a parent with a `messages` key and
  no `question` asks about its last human message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from langchain_core.runnables import RunnableLambda

from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.graphs.qa import QAGraph, build_qa_graph
from mindscape.state import INPUT_KEYS, QAInput


def qa_subgraph(deps: Deps | None = None, *, name: str = "mindscape") -> QAGraph:
    """The QA graph compiled for use as a node (the parent owns persistence)."""
    return build_qa_graph(deps).compile(name=name)


def default_to_input(state: Any) -> dict[str, Any]:
    """A parent state → QA input: shared key names, else the last human message."""
    data: Mapping[str, Any] = state if isinstance(state, Mapping) else vars(state)
    out = {k: data[k] for k in INPUT_KEYS if data.get(k) is not None}
    if "question" not in out:
        for message in reversed(list(data.get("messages") or [])):
            if getattr(message, "type", None) == "human" or (
                isinstance(message, Mapping) and message.get("role") == "user"
            ):
                out["question"] = str(getattr(message, "text", None) or message.get("content"))
                break
    if "question" not in out:
        raise ValueError("the parent state has no `question` and no human message to ask about")
    return out


def make_qa_node(
    qa: QAGraph | None = None,
    *,
    deps: Deps | None = None,
    context: Context | None = None,
    to_input: Callable[[Any], dict[str, Any]] = default_to_input,
    from_output: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    output_key: str = "qa",
) -> RunnableLambda[Any, dict[str, Any]]:
    """A parent-graph node that asks the QA graph and writes its answer back.

    Args:
        qa: a compiled QA graph (default: :func:`qa_subgraph` over `deps`).
        deps: dependencies for the default graph.
        context: the settings to run with (they override whatever context the parent has).
        to_input: parent state → QA input.
        from_output: QA output → the parent's update (default: ``{output_key: output}``).
        output_key: where the default mapping puts the output.
    """
    graph = qa if qa is not None else qa_subgraph(deps)
    ctx = context or Context()

    def back(out: dict[str, Any]) -> dict[str, Any]:
        return from_output(dict(out)) if from_output else {output_key: dict(out)}

    def ask(state: Any) -> dict[str, Any]:
        return back(graph.invoke(cast(QAInput, to_input(state)), context=ctx))

    async def aask(state: Any) -> dict[str, Any]:
        return back(await graph.ainvoke(cast(QAInput, to_input(state)), context=ctx))

    return RunnableLambda(ask, afunc=aask, name="ask_mindscape")
