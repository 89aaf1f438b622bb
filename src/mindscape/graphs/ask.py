"""Answer one question: the typed entry point that ``mindscape ask``, the warm process and
the MCP tool share (the eval's answers go through :func:`~mindscape.graphs.qa.answer_question`,
whose compiled graph it keeps per `Deps`).

:func:`ask` compiles the QA graph over `deps`, runs it on `question` with the run's
:class:`~mindscape.context.Context` and returns its :class:`~mindscape.state.QAOutput`. On a
`thread`, the run is kept in the store's thread file (:mod:`mindscape.graphs.threads`), so a
run stopped mid-question resumes from its last finished node; `on_event`, when given, hears
each progress event of the run as it happens.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.graphs.qa import build_qa_graph
from mindscape.graphs.threads import ask_on_thread, checkpointer
from mindscape.state import QAInput, QAOutput

__all__ = ["OnEvent", "ask"]

OnEvent = Callable[[dict[str, Any]], None]
"""What hears a run's progress events (the ``custom`` stream: one dict per event)."""


def ask(
    question: QAInput,
    ctx: Context,
    deps: Deps,
    *,
    thread: str | None = None,
    on_event: OnEvent | None = None,
) -> QAOutput:
    """The QA graph's output for `question`, run with `ctx` over `deps` in this process.

    `thread` keeps the run in the thread file of the store ``ctx.store`` (ValueError with
    `on_event`: a thread's run is not streamed). `on_event` hears each progress event.
    """
    if thread is not None:
        if on_event is not None:
            raise ValueError("a run on a thread is not streamed: give thread or on_event")
        if not ctx.store:
            raise ValueError("a run on a thread needs the store's path (Context.store)")
        with checkpointer(ctx.store) as saver:
            app = build_qa_graph(deps).compile(checkpointer=saver)
            return cast(QAOutput, ask_on_thread(app, dict(question), thread, ctx))
    app = build_qa_graph(deps).compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": f"ask-{uuid.uuid4().hex[:8]}"}}
    if on_event is None:
        return cast(QAOutput, dict(app.invoke(question, config, context=ctx, durability="exit")))
    for _mode, chunk in app.stream(
        question, config, context=ctx, stream_mode=["custom"], durability="exit"
    ):
        on_event(cast(dict[str, Any], chunk))
    return cast(QAOutput, dict(app.get_state(config).values))
