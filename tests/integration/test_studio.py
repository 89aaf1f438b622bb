"""LangGraph Studio: `langgraph dev` serves the exported graph; one question through the SDK.

The server runs from the repo root (graph paths in langgraph.json are relative to it; its
`.langgraph_api/` state is git-ignored) and finds the store through `MINDSCAPE_STORE`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindscape.serve.dev import start_langgraph_dev, stop
from tests.conftest import REPO
from tests.integration.conftest import QA_DOC

pytestmark = pytest.mark.integration


def test_langgraph_json_exports_the_graphs_without_checkpointer() -> None:
    config = json.loads((REPO / "langgraph.json").read_text())
    for key in ("mindscape", "ask_book", "chat"):
        entry = config["graphs"][key]
        path, _, name = entry["path"].partition(":")
        assert (REPO / path).is_file() and name == "graph"
        assert len(entry["description"]) > 200, key  # what an MCP client's model reads
    from mindscape.graphs import ask_book, chat, qa

    assert qa.graph.checkpointer is None and qa.graph.context_schema is not None
    assert chat.graph.checkpointer is None and chat.graph.context_schema is chat.ChatContext
    assert ask_book.graph.checkpointer is None and ask_book.graph.name == "ask_book"


def test_studio_runs_a_question(qa_store: Path, tmp_path: Path) -> None:
    env = {"MINDSCAPE_STORE": str(qa_store), "MINDSCAPE_LLM_BACKEND": "extractive"}
    proc, url = start_langgraph_dev(REPO, tmp_path / "server.log", env)
    try:
        from langgraph_sdk import get_sync_client

        client = get_sync_client(url=url)
        assistants = client.assistants.search(graph_id="mindscape")
        assert assistants
        out = client.runs.wait(
            None,
            "mindscape",
            input={"question": "What did the father bring back for cinderella?", "doc_id": QA_DOC},
            context={"preset": "naive"},
        )
        assert isinstance(out, dict) and out["answer"], out
        assert out["rounds"] == 1 and out["evidence"][0]["chunk_ids"][0].startswith(f"{QA_DOC}:c")
        # the chat graph, as a chat front end drives it: a thread, text blocks, a follow-up
        thread = client.threads.create()["thread_id"]
        blocks = [{"type": "text", "text": "What did the father bring back for Cinderella?"}]
        first = client.runs.wait(
            thread, "chat", input={"messages": [{"role": "user", "content": blocks}]},
            context={"preset": "naive"},
        )  # fmt: skip
        reply = first["messages"][-1]
        assert reply["type"] == "ai" and "Read (round 1):" in reply["content"], reply
        follow = {"messages": [{"role": "user", "content": "And what did she do with it?"}]}
        second = client.runs.wait(thread, "chat", input=follow, context={"preset": "naive"})
        assert [m["type"] for m in second["messages"]] == ["human", "ai", "human", "ai"]
    finally:
        stop(proc)
