"""Threads that survive a restart: the QA graph's checkpoints in a SQLite file in the store.

``mindscape ask --thread ID`` (and :func:`ask_on_thread` from Python) runs the graph with
LangGraph's SQLite checkpointer (``<store>/threads.sqlite``), writing a checkpoint after every
node. A process killed in the middle of a question leaves its thread at the last finished
node; the next call with the same thread and the same question resumes from there (LangGraph
re-runs only the nodes that had not finished), and a new question starts a new run on the
thread (the graph's first node resets the loop's state). ``mindscape threads`` lists them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "THREADS_FILE",
    "ask_on_thread",
    "checkpointer",
    "list_threads",
]

THREADS_FILE = "threads.sqlite"
"""The checkpoint file inside a store."""


@contextmanager
def checkpointer(store: str | Path) -> Iterator[Any]:
    """LangGraph's ``SqliteSaver`` on the store's thread file (created on first use)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(Path(store) / THREADS_FILE, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def ask_on_thread(app: Any, question: dict[str, Any], thread: str, ctx: Any) -> dict[str, Any]:
    """`question` asked on `thread` of a graph compiled with a checkpointer: resumed from the
    last finished node when the thread's last run of the same question did not finish, else
    a new run; checkpointed after every node. Returns the QA output."""
    config = {"configurable": {"thread_id": thread}}
    state = app.get_state(config)
    unfinished = bool(state.next) and state.values.get("question") == question["question"]
    app.invoke(None if unfinished else question, config, context=ctx, durability="sync")
    return dict(app.get_state(config).values)


def list_threads(store: str | Path) -> list[dict[str, Any]]:
    """Every thread of the store, newest first: its id, whether its last run finished, its
    last question and answer, and when it was last written."""
    if not (Path(store) / THREADS_FILE).is_file():
        return []
    from mindscape.graphs.qa import build_qa_graph

    with checkpointer(store) as saver:
        app = build_qa_graph().compile(checkpointer=saver)  # lazy deps: nothing is loaded
        threads = dict.fromkeys(c.config["configurable"]["thread_id"] for c in saver.list(None))
        rows = []
        for thread in threads:
            state = app.get_state({"configurable": {"thread_id": thread}})
            rows.append({
                "thread": thread,
                "finished": not state.next,
                "question": state.values.get("question", ""),
                "answer": state.values.get("answer", ""),
                "updated": state.created_at or "",
            })  # fmt: skip
    return sorted(rows, key=lambda r: r["updated"], reverse=True)
