"""The whole QA graph as a script: InMemorySaver, invoke/stream, multi-round refinement,
budgets, answer formats, every preset, partial runs, and the real store."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.graphs.qa import answer_question, build_qa_graph
from mindscape.presets import PRESET_NAMES
from mindscape.tokens import default_counter
from tests.fakes import QAScript, ScriptedChatModel, qa_role
from tests.integration.conftest import QA_DOC

pytestmark = pytest.mark.integration

Q = "Who helped Cinderella pick the lentils out of the ashes?"


def app_for(deps: Deps) -> Any:
    return build_qa_graph(deps).compile(checkpointer=InMemorySaver())


def cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def llm_deps(qa_deps: Deps, script: QAScript) -> Deps:
    return Deps(store=qa_deps.store, embedder=qa_deps.embedder, chat=script.chat_model())


# ---------------------------------------------------------------- offline, real store


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_every_preset_answers_offline(qa_deps: Deps, preset: str) -> None:
    out = app_for(qa_deps).invoke(
        {"question": Q, "doc_id": QA_DOC},
        cfg(preset),
        context=Context(preset=preset, backend="extractive"),
    )
    assert out["answer"] and out["preset"] == preset and out["llm_calls"] == 0
    assert 1 <= out["rounds"] <= Context(preset=preset).resolved().max_rounds
    assert out["evidence"] and all(e["chunk_ids"] and e["text"] for e in out["evidence"])
    assert all(c.startswith(f"{QA_DOC}:c") for e in out["evidence"] for c in e["chunk_ids"])
    uses_signature = Context(preset=preset).resolved().signature != "none"
    assert bool(out["signature"]) == uses_signature
    if uses_signature:
        assert all(
            s["unit_id"].startswith(f"{QA_DOC}:e") and s["chunk_ids"] for s in out["signature"]
        )
    assert len(out["trace"]) == out["rounds"] and out["trace"][-1]["decision"] in {"ANSWER", "STOP"}


def test_answer_formats_offline(qa_deps: Deps) -> None:
    app = app_for(qa_deps)
    mc = app.invoke(
        {
            "question": "What did the father bring back for cinderella?",
            "doc_id": QA_DOC,
            "options": [
                "pearls and jewels",
                "a branch of the hazel-bush",
                "a golden slipper",
                "a dress",
            ],
        },
        cfg("mc"),
        context=Context(preset="naive"),
    )
    assert mc["task"] == "multiple-choice" and mc["answer"] in {"A", "B", "C", "D"}
    claim = app.invoke(
        {
            "question": "Cinderella planted the hazel branch on her mother's grave.",
            "doc_id": QA_DOC,
            "task": "claim",
        },
        cfg("claim"),
        context=Context(preset="naive"),
    )
    assert claim["task"] == "claim" and claim["answer"] == "TRUE"  # the story says so
    open_ = app.invoke(
        {"question": "What did cinderella's father bring back for her?", "doc_id": QA_DOC},
        cfg("open"),
        context=Context(preset="naive"),
    )
    assert open_["task"] == "open" and 0 < len(open_["answer"].split()) <= 30


def test_offline_refines_when_unsure_and_probes_never_repeat(qa_deps: Deps) -> None:
    ctx = Context(preset="comorag", backend="extractive", open_threshold=0.99, max_rounds=4)
    out = app_for(qa_deps).invoke({"question": Q, "doc_id": QA_DOC}, cfg("refine"), context=ctx)
    assert out["rounds"] >= 2 and out["trace"][0]["decision"] == "REFINE"
    probes = [p for step in out["trace"] for p in step["probes"]]
    assert len(probes) == len({p.lower() for p in probes})
    assert out["stop_reason"] in {"rounds", "exhausted"} and out["answer"]


def test_second_question_on_the_same_thread_starts_clean(qa_deps: Deps) -> None:
    app = app_for(qa_deps)
    ctx = Context(preset="comorag", backend="extractive", open_threshold=0.99, max_rounds=2)
    first = app.invoke({"question": Q, "doc_id": QA_DOC}, cfg("same"), context=ctx)
    second = app.invoke(
        {"question": "Where did the father go?", "doc_id": QA_DOC}, cfg("same"), context=ctx
    )
    assert first["rounds"] == second["rounds"] == 2 and len(second["trace"]) == 2
    state = app.get_state(cfg("same")).values
    assert (
        all(i["round"] <= 2 for i in state["retrieved"])
        and state["question"] == "Where did the father go?"
    )


def test_stream_updates_and_progress_events(qa_deps: Deps) -> None:
    app = app_for(qa_deps)
    nodes, events = [], []
    for mode, chunk in app.stream(
        {"question": Q, "doc_id": QA_DOC},
        cfg("stream"),
        context=Context(preset="mindscape", max_rounds=1),
        stream_mode=["updates", "custom"],
    ):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            events.append(chunk["event"])
    assert nodes == [
        "init_signature",
        "tri_layer_retrieve",
        "signature_update",
        "evidence_fuse",
        "try_answer",
        "refine",
    ]
    assert (
        events[:2] == ["signature", "retrieve"] and "answer" in events and events[-1] == "decision"
    )


def test_partial_run_from_a_given_state(qa_deps: Deps) -> None:
    """Run a slice: set the state as if evidence_fuse had run, stop after try_answer."""
    app = app_for(qa_deps)
    item = {
        "unit_id": f"{QA_DOC}:c0",
        "layer": "veridical",
        "doc_id": QA_DOC,
        "chunk_ids": [f"{QA_DOC}:c0"],
        "text": "The two white pigeons came in by the kitchen window and picked the lentils out of the ashes.",
        "score": 0.9,
        "score_query": 0.9,
        "score_signature": 0.0,
        "tokens": 20,
        "round": 1,
        "probe": Q,
    }
    config = cfg("slice")
    app.update_state(
        config,
        {
            "question": Q,
            "task": "open",
            "rounds": 1,
            "query": Q,
            "round_hits": [{"probe": Q, "layer": "veridical", "items": [item]}],
            "retrieved": [item],
            "evidence_memory": [],
            "attempts": [],
        },
        as_node="evidence_fuse",
    )
    app.invoke(None, config, context=Context(preset="naive"), interrupt_after=["try_answer"])
    state = app.get_state(config)
    assert state.next == ("refine",)
    assert "pigeons" in state.values["attempts"][-1]["answer"]


def test_answer_question_helper(qa_deps: Deps) -> None:
    out = answer_question(
        {"qid": "x1", "question": Q, "doc_id": QA_DOC, "task": "open"}, preset="naive", deps=qa_deps
    )
    assert out["answer"] and out["rounds"] == 1


# ---------------------------------------------------------------- scripted LLM, real store


def test_a_refining_round_reads_a_new_focused_set(qa_deps: Deps) -> None:
    """With focused reading, each answer prompt holds at most ~600 tokens of passages, and a
    refining round reads mostly sentences the refused round did not: new evidence, not a
    longer prompt."""
    script = QAScript(answer="two white pigeons", refuse=1)
    prompts: list[str] = []

    def answer(prompt: str) -> str:
        if qa_role(prompt) == "answer":
            prompts.append(prompt)
        return script(prompt)

    deps = llm_deps(qa_deps, QAScript())
    deps.chat = ScriptedChatModel(responses=[answer] * 50)
    out = app_for(deps).invoke(
        {"question": Q, "doc_id": QA_DOC}, cfg("focus"), context=Context(preset="mindscape")
    )
    assert out["rounds"] >= 2 and len(prompts) >= 2
    read = [re.findall(r'<evidence id="[^"]+">(.*?)</evidence>', p, re.DOTALL) for p in prompts]
    first = {s.strip() for t in read[0] for s in re.split(r"(?<=[.!?])\s+", t) if s.strip()}
    second = {s.strip() for t in read[1] for s in re.split(r"(?<=[.!?])\s+", t) if s.strip()}
    # what round 1 read comes back only as a neighbour of a new sentence, never as a choice
    assert first and second and len(second - first) > len(second & first)
    counter = default_counter()
    assert all(sum(counter.count(t) for t in r) <= 600 + 20 * len(r) for r in read)
    assert out["trace"][0]["passages"] and out["trace"][1]["passages"]


def _reader(*certainties: float) -> ScriptedChatModel:
    """A local reader that answers with words from the first sentence it reads (so the answer
    is grounded) and, round after round, the given token log-probability per reply token."""
    from langchain_core.messages import AIMessage

    def reply(certainty: float) -> Any:
        def read(prompt: str) -> AIMessage:
            passage = prompt.split("<passages>", 1)[1].split("</passages>", 1)[0]
            words = " ".join(re.sub(r"<[^>]+>", " ", passage).split()[:6])
            lp = math.log(certainty)
            tokens = [{"token": w, "logprob": lp, "top_logprobs": []} for w in words.split()]
            return AIMessage(content=words, response_metadata={"logprobs": {"content": tokens}})

        return read

    return ScriptedChatModel(responses=[reply(c) for c in certainties])


def _local_deps(qa_deps: Deps, chat: ScriptedChatModel) -> Deps:
    """The test store's deps with ``chat`` as the local model."""
    from mindscape.llm import LLMSettings

    return Deps(
        store=qa_deps.store,
        embedder=qa_deps.embedder,
        chat=chat,
        llm_settings=LLMSettings(backend="local"),
    )


def _ask_locally(
    qa_deps: Deps, chat: ScriptedChatModel, thread: str, certainty: bool = True
) -> dict[str, Any]:
    """`mindscape` (three rounds at most) with ``chat`` as the local reader."""
    return app_for(_local_deps(qa_deps, chat)).invoke(
        {"question": Q, "doc_id": QA_DOC},
        cfg(thread),
        context=Context(preset="mindscape", certainty=certainty, max_rounds=3, verifier=False),
    )


def test_with_the_local_model_the_verifier_judges_each_round_over_its_cached_prompt(
    qa_deps: Deps,
) -> None:
    """Asked for, the shipped verifier judges the local model's plain answers: each
    round is the answer and 3 answers sampled over the same prompt, the attempt's confidence is
    the verifier's P(right) (grounding ``verified``), and the samples' prompt tokens are counted
    as cached, outside ``tokens_in`` and so outside the token budget."""
    chat = _reader(*[0.9] * 12)
    out = app_for(_local_deps(qa_deps, chat)).invoke(
        {"question": Q, "doc_id": QA_DOC},
        cfg("verified"),
        context=Context(preset="mindscape", verifier=True),
    )
    rounds = out["rounds"]
    assert len(chat.prompts) == 4 * rounds and out["llm_calls"] == 4 * rounds
    assert all(p == chat.prompts[4 * (p_i // 4)] for p_i, p in enumerate(chat.prompts))
    steps = out["trace"]
    assert len(steps) == rounds and all(s["grounding"] == "verified" for s in steps)
    assert all(0.0 < s["confidence"] < 1.0 for s in steps)
    assert out["tokens_cached"] == pytest.approx(3 * out["tokens_in"], rel=0.05)
    assert out["confidence"] == max(s["confidence"] for s in steps)


@pytest.mark.parametrize(
    "certainties,certainty,rounds,kept,stop",
    [
        ((0.3, 0.8), True, 2, 2, "answered"),  # unsure: it reads new evidence, then is sure
        ((0.3, 0.2), True, 2, 1, "no surer"),  # no surer: it stops, round 1's answer stays
        ((0.3, 0.4, 0.45), True, 3, 3, "rounds"),  # surer each round, till the round budget
        ((0.8,), True, 1, 1, "answered"),  # sure: answered in round 1
        ((0.3,), False, 1, 1, "answered"),  # certainty off: a grounded answer ends the loop
    ],
)
def test_an_unsure_local_reader_refines(
    qa_deps: Deps, certainties: tuple, certainty: bool, rounds: int, kept: int, stop: str
) -> None:
    chat = _reader(*certainties)
    out = _ask_locally(qa_deps, chat, f"certainty-{certainties}-{certainty}", certainty)
    assert out["rounds"] == rounds and len(chat.prompts) == rounds
    assert out["stop_reason"] == stop
    answers = [step["answer"] for step in out["trace"]]
    assert out["answer"] == answers[kept - 1] and out["answer_round"] == kept
    expected = certainties[kept - 1] if certainty else 0.9  # 0.9: a grounded answer
    assert out["confidence"] == pytest.approx(expected)


def test_the_answer_shows_what_its_own_round_read(qa_deps: Deps) -> None:
    """`ask`'s text output lists the focused passages of the round whose answer was kept
    (round 1 here: round 2 left the reader no surer), word for word as in that prompt."""
    from mindscape.commands.ask import read_passages, render_text

    chat = _reader(0.3, 0.2)
    out = _ask_locally(qa_deps, chat, "shows-read")
    assert out["answer_round"] == 1 and out["rounds"] == 2
    read = read_passages(out)
    assert read and all(p in chat.prompts[0] for p in read)
    assert not any(p in chat.prompts[1] for p in read)  # a refining round reads new sentences
    text = render_text(out)
    assert "Read by the answer (round 1, ordered by the learned ranker):" in text
    assert all(f"  · {p[:100]}" in text for p in read)


def test_the_learned_ranker_orders_what_the_local_reader_reads(qa_deps: Deps) -> None:
    """By default the shipped cross-encoder orders the focus candidates, and the run says
    so; ``evidence_ranker="fused"`` reads the fused order. On this question the two differ:
    the learned ranker puts the sentence where the pigeons come to help first."""

    def first_read(ranker: str) -> tuple[str, str]:
        out = app_for(_local_deps(qa_deps, _reader(0.9))).invoke(
            {"question": Q, "doc_id": QA_DOC},
            cfg(f"ranker-{ranker}"),
            context=Context(preset="naive", evidence_ranker=ranker, verifier=False),
        )
        step = out["trace"][0]
        return step["ranker"], step["passages"][0]

    learned, fused = first_read("learned"), first_read("fused")
    assert learned[0] == "learned" and fused[0] == "fused"
    assert "pigeons" in learned[1].lower()
    assert learned[1] != fused[1]


def test_llm_run_refines_twice_then_answers(qa_deps: Deps) -> None:
    script = QAScript(answer="two white pigeons", refuse=2)
    deps = llm_deps(qa_deps, script)
    out = app_for(deps).invoke(
        {"question": Q, "doc_id": QA_DOC},
        cfg("llm"),
        # whole chunks: a focused round never rereads what the refused rounds read (above)
        context=Context(preset="mindscape", max_tokens=300_000, focus_tokens=0),
    )
    assert (
        out["answer"] == "two white pigeons"
        and out["rounds"] == 3
        and out["stop_reason"] == "answered"
    )
    assert [s["decision"] for s in out["trace"]] == ["REFINE", "REFINE", "ANSWER"]
    assert out["trace"][1]["queries"] == [
        "probe 1.1",
        "probe 1.2",
    ]  # round 2 retrieves with the probes
    assert out["llm_calls"] == sum(script.counts.values()) == deps.usage.calls
    assert script.counts["answer"] == 3 and script.counts["probe"] == 2
    assert out["tokens_in"] > 0 and out["tokens_out"] > 0
    # each round records what its answer read; the answer came from round 3, which read the
    # question's own best round-1 passage alongside the probes' new ones
    assert out["answer_round"] == 3 and all(step["read"] for step in out["trace"])
    assert out["trace"][0]["read"][0] in out["trace"][2]["read"]


@pytest.mark.parametrize(
    "limits,reason",
    [
        ({"max_rounds": 2}, "rounds"),
        ({"max_llm_calls": 4}, "llm_calls"),
        ({"max_tokens": 3000}, "tokens"),
    ],
)
def test_each_budget_stops_the_loop(qa_deps: Deps, limits: dict, reason: str) -> None:
    script = QAScript(refuse=100)
    out = app_for(llm_deps(qa_deps, script)).invoke(
        {"question": Q, "doc_id": QA_DOC},
        cfg(reason),
        context=Context(preset="mindscape", **limits),
    )
    assert out["stop_reason"] == reason and out["trace"][-1]["decision"] == "STOP"
    assert out["answer"] == "not enough evidence" and not out["sufficient"]
    if reason == "rounds":
        assert out["rounds"] == 2
    if reason == "llm_calls":
        assert 4 <= out["llm_calls"] <= 4 + 3  # at most one round past the budget
    if reason == "tokens":  # stopped because another average round would pass the budget
        spent = out["tokens_in"] + out["tokens_out"]
        assert spent + spent / out["rounds"] > 3000 and out["rounds"] < 5


def test_mia_agent_answers_once_update_decides(qa_deps: Deps) -> None:
    script = QAScript(answer="the pigeons", refuse=1)
    out = app_for(llm_deps(qa_deps, script)).invoke(
        {"question": Q, "doc_id": QA_DOC}, cfg("mia"), context=Context(preset="mia-agent")
    )
    assert out["answer"] == "the pigeons" and out["rounds"] == 2
    assert script.counts == {"update": 2, "answer": 1}
    assert re.search(r"e\d+$", out["signature"][0]["unit_id"])
