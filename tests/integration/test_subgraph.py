"""The QA graph inside larger agents: shared-key subgraph, wrapper node (sync and async),
and a tool for `langchain.agents.create_agent` driven by a scripted chat model."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.graphs.embed import make_qa_node, qa_subgraph
from mindscape.graphs.tool import make_qa_tool
from tests.fakes import FakeRetriever, ScriptedChatModel
from tests.integration.conftest import QA_DOC

pytestmark = pytest.mark.integration

Q = "Where did Tobin hide the gold?"


def fake_deps() -> Deps:
    r = FakeRetriever()
    return Deps(retriever=r, embedder=r.embedder)


class Parent(TypedDict, total=False):
    """A parent that shares the QA keys and adds its own."""

    question: str
    doc_id: str
    answer: str
    evidence: list[dict]
    rounds: int
    note: str


@dataclass
class ParentCtx:
    """A parent's own context type (not mindscape's Context)."""

    user: str = ""


def test_shared_key_subgraph_in_a_parent_with_its_own_context() -> None:
    builder = StateGraph(Parent, context_schema=ParentCtx)
    builder.add_node("mindscape", qa_subgraph(fake_deps()))
    builder.add_node(
        "after", lambda s: {"note": f"answered in {s['rounds']} round(s): {s['answer']}"}
    )
    builder.add_edge(START, "mindscape")
    builder.add_edge("mindscape", "after")
    builder.add_edge("after", END)
    parent = builder.compile(checkpointer=InMemorySaver())
    out = parent.invoke(
        {"question": Q, "doc_id": "tale"},
        {"configurable": {"thread_id": "p"}},
        context=ParentCtx(user="x"),
    )
    assert out["answer"] == "in the cave beneath the lighthouse"
    assert out["evidence"][0]["chunk_ids"] == ["tale:c5"]
    assert out["note"].startswith(f"answered in {out['rounds']} round") and out["rounds"] >= 1


class Chat(TypedDict):
    messages: Annotated[list, add_messages]
    qa: dict


def foreign_parent(node: Any) -> Any:
    builder = StateGraph(Chat)
    builder.add_node("ask", node)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile()


def test_wrapper_node_for_a_foreign_parent_sync_and_async() -> None:
    node = make_qa_node(deps=fake_deps(), context=Context(preset="naive", backend="extractive"))
    parent = foreign_parent(node)
    out = parent.invoke({"messages": [HumanMessage(Q)]})
    assert out["qa"]["answer"] == "in the cave beneath the lighthouse" and out["qa"]["rounds"] == 1
    out = asyncio.run(parent.ainvoke({"messages": [HumanMessage(Q)]}))
    assert out["qa"]["preset"] == "naive"


def test_wrapper_node_with_mappers(qa_deps: Deps) -> None:
    node = make_qa_node(
        deps=qa_deps,
        context=Context(preset="naive"),
        to_input=lambda s: {"question": s["messages"][-1].content, "doc_id": QA_DOC},
        from_output=lambda out: {
            "messages": [AIMessage(out["answer"])],
            "qa": {"chunks": out["evidence"][0]["chunk_ids"]},
        },
    )
    out = foreign_parent(node).invoke(
        {"messages": [HumanMessage("What did the father bring back for cinderella?")]}
    )
    assert isinstance(out["messages"][-1], AIMessage) and out["qa"]["chunks"][0].startswith(
        f"{QA_DOC}:c"
    )


def test_tool_for_create_agent() -> None:
    from langchain.agents import create_agent

    tool = make_qa_tool(fake_deps(), context=Context(preset="naive", backend="extractive"))
    model = ScriptedChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    {"name": "ask_book", "args": {"question": Q, "doc_id": "tale"}, "id": "call_1"}
                ],
            ),
            lambda prompt: AIMessage("Tobin hid it in the cave."),
        ]
    )
    agent = create_agent(model, tools=[tool])
    out = agent.invoke({"messages": [HumanMessage("Ask the book where the gold is.")]})
    tool_messages = [m for m in out["messages"] if m.type == "tool"]
    result = json.loads(tool_messages[0].content)
    assert result["answer"] == "in the cave beneath the lighthouse" and result["evidence"][0][
        "chunk_ids"
    ] == ["tale:c5"]
    assert out["messages"][-1].content == "Tobin hid it in the cave."
    assert tool.name == "ask_book" and "question" in tool.args
