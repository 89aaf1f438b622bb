"""The QA graph as a tool for `langchain.agents.create_agent` (or any tool-calling agent).

    from langchain.agents import create_agent
    agent = create_agent(model, tools=[make_qa_tool(context=Context(store="..."))])

The tool runs the whole graph per call and returns a compact JSON string: the answer, its
confidence, whether the evidence sufficed, and the evidence (chunk ids and a short excerpt)
so the calling model can cite it.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.graphs.embed import qa_subgraph
from mindscape.state import QAInput

DESCRIPTION = (
    "Answer a question about a book in the mindscape store by reading it with a retrieval "
    "agent. Give the question; optionally the document id, the task (open, multiple-choice, "
    "claim) and multiple-choice options. Returns the answer, a confidence and the evidence."
)
EXCERPT_CHARS = 300


class AskBookArgs(BaseModel):
    """Arguments of the tool."""

    question: str = Field(description="The question about the book (or the claim to verify).")
    doc_id: str | None = Field(default=None, description="Document id; omit to search every book.")
    task: str | None = Field(default=None, description="open | multiple-choice | claim.")
    options: list[str] | None = Field(
        default=None, description="Multiple-choice options, in order."
    )


def tool_result(out: dict[str, Any]) -> str:
    """The tool's reply for a QA output."""
    return json.dumps(
        {
            "answer": out.get("answer", ""),
            "confidence": round(float(out.get("confidence", 0.0)), 3),
            "sufficient": bool(out.get("sufficient", False)),
            "rounds": out.get("rounds", 0),
            "evidence": [
                {
                    "chunk_ids": e["chunk_ids"][:5],
                    "excerpt": " ".join(e["text"].split())[:EXCERPT_CHARS],
                }
                for e in out.get("evidence") or []
            ],
        },
        ensure_ascii=False,
    )


def tool_input(args: dict[str, Any]) -> QAInput:
    """The QA input for the tool's arguments (validated by :class:`AskBookArgs`)."""
    return QAInput(
        question=args["question"],
        doc_id=args.get("doc_id"),
        task=args.get("task"),
        options=args.get("options"),
    )


def make_qa_tool(
    deps: Deps | None = None,
    *,
    context: Context | None = None,
    name: str = "ask_book",
    description: str = DESCRIPTION,
) -> BaseTool:
    """A structured tool that runs the QA graph with `context` for each call."""
    graph = qa_subgraph(deps)
    ctx = context or Context()

    def ask_book(**args: Any) -> str:
        return tool_result(graph.invoke(tool_input(args), context=ctx))

    async def aask_book(**args: Any) -> str:
        return tool_result(await graph.ainvoke(tool_input(args), context=ctx))

    return StructuredTool.from_function(
        func=ask_book,
        coroutine=aask_book,
        name=name,
        description=description,
        args_schema=AskBookArgs,
    )
