"""The chat graph (graphs/chat.py): messages in, the QA graph's answer with what it read out;
follow-ups made to stand alone; bad input answered in one line."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from mindscape.deps import Deps
from mindscape.graphs.chat import ChatContext, build_chat_graph, is_follow_up, standalone
from tests.fakes import FakeRetriever

Q = "Where did Tobin hide the gold?"


def chat_app(r: FakeRetriever | None = None) -> object:
    r = r or FakeRetriever()
    return build_chat_graph(Deps(retriever=r, embedder=r.embedder)).compile(
        checkpointer=InMemorySaver()
    )


def ask(app: object, content: object, tmp_path: Path, thread: str = "t", **ctx: object) -> str:
    out = app.invoke(  # type: ignore[attr-defined]
        {"messages": [HumanMessage(content=content)]},
        {"configurable": {"thread_id": thread}},
        context=ChatContext(
            preset="naive", backend="extractive", store=str(ctx.pop("store", tmp_path)), **ctx
        ),
    )
    last = out["messages"][-1]
    assert isinstance(last, AIMessage)
    return last.text


def test_a_question_gets_the_answer_what_it_read_and_its_cost(tmp_path: Path) -> None:
    text = ask(chat_app(), Q, tmp_path)
    head, rest = text.split("\n\n", 1)
    answer, unsure = head.splitlines()
    assert answer == "in the cave beneath the lighthouse"
    assert unsure.startswith("(Unsure:")  # one round, below the threshold: not accepted
    assert "Read (round 1):" in rest and "> " in rest and "(tale, chunk 5)" in rest
    assert rest.splitlines()[-1].startswith("1 round(s) · 0 LLM call(s)")


def test_the_reply_carries_its_parts_as_data_for_the_chat_page(tmp_path: Path) -> None:
    app = chat_app()
    ask(app, Q, tmp_path)
    last = app.get_state({"configurable": {"thread_id": "t"}}).values["messages"][-1]
    parts = last.additional_kwargs["mindscape"]
    assert parts["answer"] == "in the cave beneath the lighthouse" and parts["question"] == Q
    assert "tale, chunk 5" in [p["place"] for p in parts["passages"]]
    assert all(p["quote"] in last.text for p in parts["passages"])
    assert (parts["rounds"], parts["llm_calls"], parts["answer_round"]) == (1, 0, 1)


def test_the_reply_carries_the_runs_trace_and_the_chat_streams_its_steps(tmp_path: Path) -> None:
    app = chat_app()
    events = [
        e
        for _, e in app.stream(  # type: ignore[attr-defined]
            {"messages": [HumanMessage(content=Q)]},
            {"configurable": {"thread_id": "live"}},
            context=ChatContext(preset="naive", backend="extractive", store=str(tmp_path)),
            stream_mode=["custom"],
        )
    ]
    assert [e["event"] for e in events][:2] == ["signature", "retrieve"]
    decision = next(e for e in events if e["event"] == "decision")
    assert decision["step"]["round"] == 1 and decision["step"]["read_passages"]
    last = app.get_state({"configurable": {"thread_id": "live"}}).values["messages"][-1]
    parts = last.additional_kwargs["mindscape"]
    assert parts["trace"] == [decision["step"]]
    assert parts["books"] == [] and "quote" in parts  # the fake retriever has no strip


def test_a_chat_ui_message_of_text_blocks_is_read_as_its_text(tmp_path: Path) -> None:
    blocks = [{"type": "text", "text": Q}]
    assert ask(chat_app(), blocks, tmp_path).startswith("in the cave beneath the lighthouse")


def test_bad_input_gets_one_line_that_says_what_is_wrong(tmp_path: Path) -> None:
    app = chat_app()
    assert ask(app, "   ", tmp_path, thread="a") == (
        "The message was empty: ask a question about the book."
    )
    image = [{"type": "image", "url": "http://127.0.0.1/x.png"}, {"type": "text", "text": Q}]
    reply = ask(app, image, tmp_path, thread="b")
    assert "\n" not in reply and reply.startswith("I can read text only, not image")
    reply = ask(app, Q, tmp_path, thread="c", store=tmp_path / "nowhere")
    assert "\n" not in reply and "There is no book at" in reply and "mindscape demo" in reply


def test_a_follow_up_is_asked_with_the_thread_before_it(tmp_path: Path) -> None:
    history = [("Who hid the gold?", "Tobin")]
    assert not is_follow_up("Where did Tobin hide the gold?")
    assert is_follow_up("And what did he do next?")
    # without an LLM: the earlier question goes with it, for retrieval
    assert standalone("And what did he do next?", history, None) == (
        "Who hid the gold? And what did he do next?"
    )
    # with one: its rewrite, from a prompt that holds the earlier turn
    prompts: list[str] = []

    def rewrite(prompt: str) -> str:
        prompts.append(prompt)
        return '"What did Tobin do after he hid the gold?"'

    got = standalone("And what did he do next?", history, rewrite)
    assert got == "What did Tobin do after he hid the gold?"
    assert "Q: Who hid the gold?\nA: Tobin" in prompts[0]
    assert standalone("Where is the lighthouse?", history, rewrite) == "Where is the lighthouse?"
    # a rewrite that echoes a question already asked is no rewrite: the earlier question goes along
    for echo in ("Who hid the gold?", "and what did he do next"):
        assert standalone("And what did he do next?", history, lambda _, e=echo: e) == (
            "Who hid the gold? And what did he do next?"
        )
    # in a thread: the second turn sees the first
    r = FakeRetriever()
    app = chat_app(r)
    ask(app, Q, tmp_path, thread="f")
    r.calls.clear()
    second = app.invoke(  # type: ignore[attr-defined]
        {"messages": [HumanMessage("And why did he hide it there?")]},
        {"configurable": {"thread_id": "f"}},
        context=ChatContext(preset="naive", backend="extractive", store=str(tmp_path)),
    )
    assert len(second["messages"]) == 4 and isinstance(second["messages"][-1], AIMessage)
    assert r.calls and r.calls[0][1] == f"{Q} And why did he hide it there?"


def test_an_unsure_answer_says_so_and_is_not_built_on_by_a_follow_up(tmp_path: Path) -> None:
    from mindscape.graphs.chat import UNSURE_ANSWER, reply_parts, reply_text, turns

    sure = reply_parts({"answer": "the pigeons", "confidence": 0.8, "sufficient": True})
    unsure = reply_parts({"answer": "The step-mother", "confidence": 0.3, "sufficient": True})
    assert sure["trusted"] and not unsure["trusted"]
    assert "Unsure" not in reply_text(sure)
    assert reply_text(unsure).splitlines()[1].startswith("(Unsure:")
    assert "0.30" in reply_text(unsure)
    thread = [
        HumanMessage("Who helped Cinderella pick the lentils?"),
        AIMessage(reply_text(unsure), additional_kwargs={"mindscape": unsure}),
        HumanMessage("Who gave her the dress?"),
        AIMessage(reply_text(sure), additional_kwargs={"mindscape": sure}),
    ]
    assert turns(thread) == [
        ("Who helped Cinderella pick the lentils?", UNSURE_ANSWER),
        ("Who gave her the dress?", "the pigeons"),
    ]
    prompts: list[str] = []
    standalone("What did they do at her wedding?", turns(thread)[:1], prompts.append)
    assert "The step-mother" not in prompts[0] and UNSURE_ANSWER in prompts[0]
    # a reply from before the field (an older thread) counts as trusted
    old = AIMessage("Tobin\n\n1 round(s)", additional_kwargs={})
    assert turns([HumanMessage("Who hid the gold?"), old]) == [("Who hid the gold?", "Tobin")]
