"""Chat with a book: a thread of messages in, the QA graph as a subgraph, an AI message out.

```
START → ask_book → END          (state: LangGraph's MessagesState)
```

``ask_book`` reads the thread's last human message (its text: chat front ends such as
agent-chat-ui send a list of content blocks, not a string), makes it a question that stands
alone (a follow-up such as "and what did she do next?" is rewritten from the thread's earlier
turns by the LLM when the run has one, else asked with the earlier question beside it), asks
the QA graph (called inside the node, so LangGraph Studio steps into it as a subgraph and a
checkpointer keeps it with the thread), and replies with the answer, the passages the answer
read (short quotes with their place in the book) and one line of rounds, calls and tokens.
The QA run's progress events go on to the chat's own custom stream as they happen, and the
reply's structured parts carry the run's trace (the map the chat page draws under it).
A message it cannot ask about (empty, an image, a store that does not exist) gets a one-line
reply that says what is wrong, never a traceback.

Which book: :class:`ChatContext` (the QA :class:`~mindscape.context.Context` plus
``doc_id``); the store defaults to ``MINDSCAPE_STORE``, else the demo's
(``mindscape demo`` builds it). ``langgraph dev`` serves :data:`graph` as ``chat``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from mindscape.context import DEMO_STORE, Context, env_store
from mindscape.deps import Deps
from mindscape.errors import MindscapeError
from mindscape.graphs.qa import QAGraph, build_qa_graph
from mindscape.llm.usage import Usage
from mindscape.state import QAInput, answer_step
from mindscape.trace import shown_step

REWRITE_TOKENS = 60
"""Most tokens of a rewritten question."""
UNSURE_LINE = (
    "(Unsure: the reader could not confirm this from the book; confidence {confidence:.2f}.)"
)
"""The line under an answer the loop did not accept: the reader is unsure of it."""
UNSURE_ANSWER = "(an answer the reader was unsure of)"
"""What an unsure earlier answer reads as when a follow-up is rewritten."""
QUOTE_CHARS = 220
"""Longest quote of a passage read, in characters."""
FOLLOW_UP = re.compile(
    r"\b(he|she|they|him|her|them|his|hers|their|it|its|this|that|then|next|after|afterwards|"
    r"before|there|also|again)\b",
    re.IGNORECASE,
)
"""Words that make a short question lean on the turns before it."""

REWRITE_PROMPT = """Rewrite a follow-up question about a book so that it can be understood on its
own: put the names from the conversation in place of pronouns (he, she, they, it) and say what
"next" or "then" follows. Reply with the question only.

Example:
Q: Who gave Tom the key?
A: His uncle Ben
Last question: What did he open with it?
Rewritten: What did Tom open with the key his uncle Ben gave him?

Earlier in this conversation:
{history}
Last question: {question}
Rewritten:"""


@dataclass(kw_only=True)
class ChatContext(Context):
    """The QA run's settings and which document of the store the chat is about."""

    doc_id: str | None = field(
        default=None,
        metadata={"description": "The document of the store to ask about (None: all of them)."},
    )


class ChatInputError(ValueError):
    """A message the chat cannot ask about; its text is the reply."""


def message_text(message: AnyMessage) -> str:
    """The text of a message; ChatInputError when it carries something other than text."""
    content = message.content
    if isinstance(content, list):
        kinds = {b.get("type") for b in content if isinstance(b, dict)} - {"text"}
        if kinds:
            raise ChatInputError(
                f"I can read text only, not {', '.join(sorted(str(k) for k in kinds))}: "
                "ask your question in words."
            )
    return message.text.strip()


def turns(messages: list[AnyMessage]) -> list[tuple[str, str]]:
    """The thread's earlier (question, answer) pairs, oldest first. An answer the reply marked
    unsure reads as :data:`UNSURE_ANSWER`, so that a follow-up is not rewritten around it (a
    wrong "The step-mother" once made "What did they do at her wedding?" a question about
    the step-mother)."""
    out: list[tuple[str, str]] = []
    for m, reply in zip(messages, messages[1:], strict=False):
        if isinstance(m, HumanMessage) and isinstance(reply, AIMessage):
            try:
                question = message_text(m)
            except ChatInputError:
                continue
            parts = reply.additional_kwargs.get("mindscape") or {}
            trusted = parts.get("trusted", True) if isinstance(parts, dict) else True
            out.append((question, reply.text.split("\n\n", 1)[0] if trusted else UNSURE_ANSWER))
    return out


def is_follow_up(question: str) -> bool:
    """Whether a question leans on earlier turns: short, with a pronoun or "next"/"then"."""
    return len(question.split()) <= 12 and bool(FOLLOW_UP.search(question))


def standalone(question: str, history: list[tuple[str, str]], rewrite: Any | None) -> str:
    """`question` made to stand alone: rewritten by `rewrite` (``prompt -> text``, the LLM)
    when given, else with the last earlier question before it. Unchanged when it is not a
    follow-up or the thread has no earlier turn."""
    if not history or not is_follow_up(question):
        return question
    if rewrite is not None:
        lines = "\n".join(f"Q: {q}\nA: {a}" for q, a in history[-3:])
        text = " ".join(
            str(rewrite(REWRITE_PROMPT.format(history=lines, question=question))).split()
        )
        text = text.strip('"')
        said = {words_of(q) for q, _ in history} | {words_of(question)}  # an echo is no rewrite
        if text and len(text) < 4 * len(question) + 200 and words_of(text) not in said:
            return text
    return f"{history[-1][0]} {question}"


def words_of(question: str) -> str:
    """A question's words, lower-cased, without punctuation (to tell an echo)."""
    return " ".join(re.findall(r"\w+", question.lower()))


def reply_parts(out: dict[str, Any], asked: str = "", threshold: float = 0.5) -> dict[str, Any]:
    """What a reply shows, as data: the answer, the passages it read (quoted, with their
    place), the round that answered, its confidence and whether it is trusted (the loop
    accepted it: sufficient, at `threshold` or above), the run's rounds, calls and tokens,
    and the map's data: the trace round by round (each passage read cut to
    :data:`~mindscape.trace.SHOWN_CHARS`), the books touched and the quote.
    The chat page (``ui/``) renders it from the message's ``additional_kwargs["mindscape"]``;
    other front ends read :func:`reply_text`."""
    step: dict[str, Any] = dict(answer_step(out) or {})
    passages = list(step.get("passages") or [])
    places = list(step.get("read") or [])
    if not passages:  # an extractive answer read whole passages: quote those
        by_id = {e["unit_id"]: e for e in out.get("evidence") or []}
        passages = [by_id[u]["text"] for u in places if u in by_id]
    return {
        "question": asked,
        "answer": out.get("answer") or "I could not find an answer in the book.",
        "passages": [
            {"quote": quote(text), "place": place_of(places[n]) if n < len(places) else ""}
            for n, text in enumerate(passages)
        ],
        "answer_round": out.get("answer_round", 1),
        "confidence": round(float(out.get("confidence", 0.0)), 3),
        "trusted": bool(out.get("answer"))
        and bool(out.get("sufficient", True))
        and float(out.get("confidence", 0.0)) >= threshold,
        **{k: out.get(k, 0) for k in ("rounds", "llm_calls", "tokens_in", "tokens_out")},
        # the map's data (mindscape.trace): the page draws the reply's map from these
        "trace": [shown_step(s) for s in out.get("trace") or []],
        "books": list(out.get("books") or []),
        "quote": out.get("quote"),
    }


def reply_text(parts: dict[str, Any]) -> str:
    """The answer, the passages it read (quoted, with their place) and one line of cost."""
    lines = [parts["answer"]]
    if not parts.get("trusted", True):
        lines.append(UNSURE_LINE.format(confidence=parts.get("confidence", 0.0)))
    if parts["passages"]:
        lines.append("")
        lines.append(f"Read (round {parts['answer_round']}):")
        for p in parts["passages"]:
            lines.append(f"> {p['quote']}" + (f" ({p['place']})" if p["place"] else ""))
    lines.append("")
    lines.append(
        f"{parts['rounds']} round(s) · {parts['llm_calls']} LLM call(s) · "
        f"{parts['tokens_in']} tokens in · {parts['tokens_out']} out"
    )
    return "\n".join(lines)


def quote(text: str) -> str:
    """A passage on one line, cut to :data:`QUOTE_CHARS` around its end (where the answer
    tends to be in a focused window)."""
    flat = " ".join(text.split())
    if len(flat) <= QUOTE_CHARS:
        return flat
    tail = flat[-QUOTE_CHARS:]
    return "…" + (tail.split(" ", 1)[1] if " " in tail[:40] else tail)  # from a whole word


def place_of(unit_id: str) -> str:
    """``"doc, chunk 12"`` for ``doc:c12``; the id itself otherwise."""
    doc, _, tag = unit_id.rpartition(":")
    return f"{doc}, chunk {tag[1:]}" if tag[:1] == "c" and tag[1:].isdigit() else unit_id


def chat_store(ctx: Context) -> str:
    """The store the chat reads: the context's, else ``MINDSCAPE_STORE``, else the demo's."""
    return ctx.store or env_store() or DEMO_STORE


def make_ask_book(deps: Deps, qa: QAGraph) -> Any:
    """The node: the last human message asked of the book, answered as an AI message."""

    def ask_book(state: MessagesState, runtime: Runtime[ChatContext]) -> dict[str, Any]:
        ctx = runtime.context if isinstance(runtime.context, Context) else ChatContext()
        try:
            parts = _answer(state["messages"], ctx, runtime)
            return {
                "messages": [
                    AIMessage(content=reply_text(parts), additional_kwargs={"mindscape": parts})
                ]
            }
        except (ChatInputError, MindscapeError, ValueError) as exc:
            return {"messages": [AIMessage(content=" ".join(str(exc).split()))]}

    def _answer(messages: list[AnyMessage], ctx: Context, runtime: Any) -> dict[str, Any]:
        if not messages or not isinstance(messages[-1], HumanMessage):
            raise ChatInputError("Send a question about the book as a message.")
        question = message_text(messages[-1])
        if not question:
            raise ChatInputError("The message was empty: ask a question about the book.")
        run = with_store(ctx)
        usage = Usage()
        asked = standalone(question, turns(messages[:-1]), _rewriter(deps, run, usage))
        doc_id = getattr(ctx, "doc_id", None)
        payload = cast(QAInput, {"question": asked, **({"doc_id": doc_id} if doc_id else {})})
        out = ask_streaming(qa, payload, run, runtime)
        for key in ("llm_calls", "tokens_in", "tokens_out"):  # the rewrite counts too
            out[key] = out.get(key, 0) + getattr(usage, key.removeprefix("llm_"))
        return reply_parts(out, asked, run.confidence_threshold)

    return ask_book


def ask_streaming(qa: QAGraph, payload: QAInput, ctx: Context, runtime: Any) -> dict[str, Any]:
    """The QA graph's output for `payload`, its progress events passed on to the chat's own
    stream as they happen (``stream_mode="custom"``: the page shows the step the run is in
    and fills the map round by round from them)."""
    writer = getattr(runtime, "stream_writer", None)
    out: dict[str, Any] = {}
    for mode, chunk in qa.stream(payload, context=ctx, stream_mode=["custom", "values"]):
        if mode == "values":
            out = dict(cast(dict[str, Any], chunk))
        elif writer is not None:
            event = cast(dict[str, Any], chunk)
            writer({**event, "step": shown_step(event["step"])} if "step" in event else event)
    return out


def with_store(ctx: Context) -> Context:
    """`ctx` with its store resolved, checked to exist (a one-line error naming the fix)."""
    from dataclasses import replace

    from mindscape.errors import StoreError

    path = chat_store(ctx)
    if not os.path.isdir(path):
        raise StoreError(
            f"There is no book at {path}: run `mindscape demo` for the bundled story, or "
            "`mindscape index BOOK --store DIR` and set the assistant's store to DIR."
        )
    return replace(ctx, store=path)


def _rewriter(deps: Deps, ctx: Context, usage: Usage) -> Any | None:
    """``prompt -> text`` with the run's LLM, counted in `usage` and the deps' ledger (None
    when the run answers extractively)."""
    if not deps.run(ctx).llm_answers:  # the run the QA graph then reads (same context)
        return None
    from mindscape.llm import LLM
    from mindscape.tokens import default_counter

    llm = LLM(
        deps.get_chat(),
        settings=deps.llm_settings,
        usage=usage,
        count_tokens=default_counter().count,
    )

    def rewrite(prompt: str) -> str:
        text = llm.complete(prompt, role="rewrite", max_tokens=REWRITE_TOKENS)
        deps.usage.merge(usage)
        return text

    return rewrite


def build_chat_graph(deps: Deps | None = None) -> StateGraph[MessagesState, ChatContext]:
    """The uncompiled chat graph over the QA graph (both with `deps`, default lazy)."""
    deps = deps if deps is not None else Deps.default()
    qa = build_qa_graph(deps).compile(name="mindscape")
    builder = StateGraph(MessagesState, context_schema=ChatContext)
    builder.add_node("ask_book", make_ask_book(deps, qa))
    builder.add_edge(START, "ask_book")
    builder.add_edge("ask_book", END)
    return builder


graph = build_chat_graph().compile(name="chat")
"""The compiled chat graph LangGraph Server loads (``chat`` in langgraph.json)."""
