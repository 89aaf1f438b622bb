"""mindscape as MCP tools, through real clients: the official `mcp` client against `mindscape
mcp` (stdio) and against `langgraph dev`'s `/mcp` (streamable HTTP), and
`langchain-mcp-adapters` loading the stdio tools into a LangGraph agent that a scripted chat
model drives. Every server answers extractively (the local model's run of the same tools is in
tests/live/test_local_model.py).

The stdio server of this module runs once for its tests (started in a thread's event loop and
reached through an anyio portal); the bad stores and the missing model each get a server of
their own. Its warm runtime folder is this module's, so `ask` looks for a warm process there
(none runs, except in the test that starts one) and never at the user's.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from mindscape.serve.dev import start_langgraph_dev, stop
from tests.conftest import REPO, require_local_model
from tests.integration.conftest import QA_DOC

pytestmark = pytest.mark.integration

Q = "What did the father bring back for Cinderella?"
ONE_LINE_ERRORS = {
    "empty question": ("ask", {"question": "  "}),
    "10,000-character question": ("ask", {"question": "w" * 10_000}),
    "unknown book": ("ask", {"question": Q, "books": ["moby-dick"]}),
    "unknown preset": ("ask", {"question": Q, "preset": "fastest"}),
    "empty question, find_passages": ("find_passages", {"question": ""}),
    "unknown book, find_passages": ("find_passages", {"question": Q, "books": ["nope"]}),
}


def server_params(
    store: Path | str, *extra: str, env: dict[str, str] | None = None, llm: str = "extractive"
) -> Any:
    """`mindscape mcp` on `store`, as a desktop client would start it."""
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mindscape", "mcp", "--store", str(store), "--llm", llm, *extra],
        env={**os.environ, **(env or {})},
        cwd=str(REPO),
    )


@asynccontextmanager
async def stdio_session(params: Any) -> AsyncIterator[Any]:
    """An initialized client session on a `mindscape mcp` process."""
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


class Tools:
    """A client session driven from synchronous tests."""

    def __init__(self, portal: BlockingPortal, session: Any) -> None:
        self.portal, self.session = portal, session

    def list(self) -> Any:
        return self.portal.call(self.session.list_tools).tools

    def call(self, name: str, args: dict[str, Any], progress: list[Any] | None = None) -> Any:
        async def heard(value: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                progress.append((value, message))

        async def call() -> Any:
            return await self.session.call_tool(name, args, progress_callback=heard)

        return self.portal.call(call)


@contextmanager
def tools_on(params: Any) -> Iterator[Tools]:
    """A `mindscape mcp` process and a session on it, for the block."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_session(params)) as session,
    ):
        yield Tools(portal, session)


def text_of(result: Any) -> str:
    """A tool result's text."""
    return "".join(c.text for c in result.content if c.type == "text")


def error_of(result: Any) -> str:
    """A tool error's one line (fails when the result is not an error or not one line)."""
    text = text_of(result)
    assert result.isError, text
    assert "\n" not in text.strip() and len(text) < 400, text
    return text


def digest(store: Path) -> dict[str, str]:
    """Each file of the store with a hash of its bytes."""
    return {
        str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(store.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def runtime() -> Iterator[Path]:
    """This module's warm runtime folder (short: a socket path has at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="mw-")) / "run"
    yield folder
    shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def tools(qa_store: Path, runtime: Path) -> Iterator[Tools]:
    """`mindscape mcp` on the story's store, warm asks on (in this module's folder)."""
    env = {"MINDSCAPE_WARM": "1", "MINDSCAPE_RUNTIME_DIR": str(runtime)}
    with tools_on(server_params(qa_store, env=env)) as session:
        yield session


# ---- stdio: the official client against `mindscape mcp`


def test_stdio_lists_three_tools_a_model_can_act_on(tools: Tools) -> None:
    listed = {t.name: t for t in tools.list()}
    assert set(listed) == {"list_books", "find_passages", "ask"}
    for tool in listed.values():
        assert len(tool.description or "") > 150, tool.name
        assert tool.annotations is not None and tool.annotations.readOnlyHint
    assert set(listed["ask"].inputSchema["properties"]) == {"question", "books", "preset"}
    assert listed["ask"].inputSchema["required"] == ["question"]
    assert {"answer", "trusted", "quotes"} <= set(listed["ask"].outputSchema["properties"])
    assert set(listed["find_passages"].inputSchema["properties"]) == {"question", "books", "k"}


def test_list_books_names_the_books_with_their_sizes(tools: Tools) -> None:
    result = tools.call("list_books", {})
    assert not result.isError, text_of(result)
    (book,) = result.structuredContent["books"]
    assert book["id"] == QA_DOC and book["tokens"] > 3000 and book["chunks"] > 30


def test_find_passages_returns_passages_and_their_places(tools: Tools) -> None:
    result = tools.call("find_passages", {"question": Q, "books": [QA_DOC], "k": 3})
    assert not result.isError, text_of(result)
    passages = result.structuredContent["passages"]
    assert len(passages) == 3
    assert all(p["place"].startswith(f"{QA_DOC}, chunk ") and p["text"] for p in passages)
    assert any("bring" in p["text"] for p in passages), passages


def test_ask_answers_compactly_with_quotes_places_and_progress(tools: Tools) -> None:
    heard: list[Any] = []
    result = tools.call("ask", {"question": Q}, progress=heard)
    text = text_of(result)
    assert not result.isError, text
    out = json.loads(text)
    assert len(text) < 2000, len(text)  # the whole tool result a calling model reads
    assert out["answer"] and isinstance(out["trusted"], bool) and 0 <= out["confidence"] <= 1
    assert 1 <= len(out["quotes"]) <= 3
    assert all(q["place"].startswith(f"{QA_DOC}, chunk") for q in out["quotes"]), out["quotes"]
    assert out["rounds"] >= 1 and out["seconds"] > 0
    steps = [message for _, message in heard]
    assert "reading round 1" in steps and "answering" in steps, steps
    assert [v for v, _ in heard] == sorted(v for v, _ in heard)  # progress only grows


def test_ask_takes_books_and_a_preset(tools: Tools) -> None:
    result = tools.call("ask", {"question": Q, "books": [QA_DOC], "preset": "naive"})
    out = json.loads(text_of(result))
    assert out["rounds"] == 1 and out["quotes"], out


@pytest.mark.parametrize("case", sorted(ONE_LINE_ERRORS))
def test_bad_input_is_a_one_line_tool_error_and_the_server_goes_on(tools: Tools, case: str) -> None:
    name, args = ONE_LINE_ERRORS[case]
    message = error_of(tools.call(name, args))
    expected = {
        "empty question": "empty",
        "10,000-character question": "10,000 characters",
        "unknown book": "moby-dick",
        "unknown preset": "fastest",
        "empty question, find_passages": "empty",
        "unknown book, find_passages": "nope",
    }[case]
    assert expected in message, message
    assert not tools.call("list_books", {}).isError  # still serving


def test_the_store_is_only_read(tools: Tools, qa_store: Path) -> None:
    before = digest(qa_store)
    tools.call("list_books", {})
    tools.call("find_passages", {"question": Q})
    tools.call("ask", {"question": Q, "preset": "naive"})
    assert digest(qa_store) == before


def test_ask_goes_through_the_warm_process_when_one_runs(
    tools: Tools, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm process (here in this test's process, with a fake question) answers `ask`;
    its progress lines reach the client as progress notifications."""
    from mindscape.serve.warm import common
    from mindscape.serve.warm.server import WarmServer

    asked: list[argparse.Namespace] = []

    def answer(args: argparse.Namespace) -> dict[str, Any]:
        asked.append(args)
        for event in ({"event": "retrieve", "round": 1}, {"event": "decision", "round": 1,
                      "decision": "ANSWER"}):  # fmt: skip
            sys.stdout.write(json.dumps({"progress": event}) + "\n")
        return {"answer": "a hazel twig", "confidence": 0.9, "sufficient": True, "rounds": 1}

    monkeypatch.setenv(common.ENV_RUNTIME_DIR, str(runtime))
    warm = WarmServer(idle_minutes=5, answer=answer, preload=False)
    thread = threading.Thread(target=warm.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not (runtime / common.SOCKET).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        heard: list[Any] = []
        result = tools.call("ask", {"question": Q, "books": [QA_DOC]}, progress=heard)
    finally:
        warm.stop("test over")
        thread.join(10)
    out = json.loads(text_of(result))
    assert out["answer"] == "a hazel twig" and out["trusted"], out
    assert asked and asked[0].question == Q and asked[0].doc == [QA_DOC]
    assert [m for _, m in heard] == ["reading round 1", "answering"]


def test_a_missing_store_is_a_one_line_error_on_every_call(tmp_path: Path) -> None:
    with tools_on(server_params(tmp_path / "no-store")) as tools:
        for name, args in (("list_books", {}), ("find_passages", {"question": Q}),
                           ("ask", {"question": Q})):  # fmt: skip
            assert "no store at" in error_of(tools.call(name, args))
        assert len(tools.list()) == 3  # still serving


def test_a_damaged_store_is_a_one_line_error(qa_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(qa_store, store)
    shutil.rmtree(store / "chroma")
    with tools_on(server_params(store)) as tools:
        assert "damaged" in error_of(tools.call("list_books", {}))
        assert "damaged" in error_of(tools.call("ask", {"question": Q}))
        assert len(tools.list()) == 3


def test_a_model_that_is_not_installed_is_a_one_line_error(qa_store: Path, tmp_path: Path) -> None:
    params = server_params(qa_store, "--local-model", str(tmp_path / "no.gguf"), llm="local")
    with tools_on(params) as tools:
        message = error_of(tools.call("ask", {"question": Q}))
        assert "model" in message, message
        found = tools.call("find_passages", {"question": Q})  # retrieval needs no model
        assert not found.isError and found.structuredContent["passages"]


@pytest.mark.local_model
def test_ask_with_the_local_model(qa_store: Path) -> None:
    """The same tool with the installed local model reading (minutes on two busy cores)."""
    require_local_model()
    with tools_on(server_params(qa_store, "--no-warm", llm="local")) as tools:
        heard: list[Any] = []
        result = tools.call("ask", {"question": Q}, progress=heard)
    text = text_of(result)
    assert not result.isError, text
    out = json.loads(text)
    assert len(text) < 2000 and out["answer"] and out["quotes"], out
    assert all(q["place"].startswith(f"{QA_DOC}, chunk") for q in out["quotes"]), out
    assert "reading round 1" in [m for _, m in heard]


# ---- langchain-mcp-adapters: the stdio tools in a LangGraph agent


def test_a_langgraph_agent_calls_ask_and_answers_from_its_result(qa_store: Path) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    from tests.fakes import ScriptedChatModel

    params = server_params(qa_store)
    client = MultiServerMCPClient(
        {
            "books": {
                "transport": "stdio",
                "command": params.command,
                "args": params.args,
                "env": params.env,
                "cwd": params.cwd,
            }
        }  # fmt: skip
    )
    model = ScriptedChatModel()

    def from_result(_prompt: str) -> AIMessage:
        result = json.loads(
            next(m for m in reversed(model.calls[-1]) if isinstance(m, ToolMessage)).text
        )
        return AIMessage(f"{result['answer']} (from {result['quotes'][0]['place']})")

    model.queue(
        AIMessage("", tool_calls=[{"name": "ask", "args": {"question": Q}, "id": "call_1"}]),
        from_result,
    )

    async def run() -> dict[str, Any]:
        async with client.session("books") as session:
            tools = await load_mcp_tools(session)
            assert {t.name for t in tools} == {"list_books", "find_passages", "ask"}
            agent = create_agent(model, tools=tools)
            return await agent.ainvoke({"messages": [HumanMessage("Ask the book: " + Q)]})

    out = anyio.run(run)
    reply = out["messages"][-1]
    assert isinstance(reply, AIMessage) and f"(from {QA_DOC}, chunk" in reply.text, reply
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]


# ---- streamable HTTP: the official client against `langgraph dev`'s /mcp


def test_langgraph_dev_serves_the_graphs_as_mcp_tools(qa_store: Path, tmp_path: Path) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    config = json.loads((REPO / "langgraph.json").read_text())["graphs"]
    env = {"MINDSCAPE_STORE": str(qa_store), "MINDSCAPE_LLM_BACKEND": "extractive"}
    proc, url = start_langgraph_dev(REPO, tmp_path / "server.log", env)

    async def run() -> dict[str, Any]:
        async with (
            streamable_http_client(f"{url}/mcp") as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = {t.name: t for t in (await session.list_tools()).tools}
            calls = {
                "ask_book": await session.call_tool("ask_book", {"question": Q}),
                "bad": await session.call_tool("ask_book", {"question": "", "books": ["x"]}),
                "unknown book": await session.call_tool(
                    "ask_book", {"question": Q, "books": ["moby-dick"]}
                ),
                "mindscape": await session.call_tool(
                    "mindscape", {"question": Q, "doc_id": QA_DOC}
                ),
                "chat": await session.call_tool("chat", {"messages": Q}),
            }
            return {"listed": listed, **calls}

    try:
        got = anyio.run(run)
    finally:
        stop(proc)
    listed = got["listed"]
    assert {"mindscape", "ask_book", "chat"} <= set(listed)
    for name in ("mindscape", "ask_book", "chat"):
        assert listed[name].description == config[name]["description"]
    text = text_of(got["ask_book"])
    assert len(text) < 2000, len(text)
    out = ast.literal_eval(text)  # the server sends the graph's output as a Python repr
    assert out["answer"] and out["quotes"][0]["place"].startswith(f"{QA_DOC}, chunk"), out
    assert set(out) == {"answer", "trusted", "confidence", "quotes", "rounds", "seconds"}
    assert ast.literal_eval(text_of(got["bad"])) == {
        "error": "The question is empty: ask something about the book."
    }
    assert "moby-dick" in ast.literal_eval(text_of(got["unknown book"]))["error"]
    full = ast.literal_eval(text_of(got["mindscape"]))  # the whole state, for who asks for it
    assert full["evidence"] and full["trace"] and full["answer"]
    assert "Read (round" in text_of(got["chat"])
