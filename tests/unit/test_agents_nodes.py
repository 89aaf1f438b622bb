"""Each node called directly, with a fake retriever, a hashing embedder and scripted models."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from mindscape.agents import (
    make_evidence_fuse,
    make_init_signature,
    make_refine,
    make_signature_update,
    make_tri_layer_retrieve,
    make_try_answer,
)
from mindscape.agents.refine import NO_ANSWER, quote_found
from mindscape.agents.try_answer import answer_window, grounding_level, select_passages
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.errors import StoreError
from mindscape.reasoners import grounding
from tests.fakes import FakeRetriever, QAScript

Q = "Where did Tobin hide the gold?"


def deps(chat: Any = None) -> Deps:
    r = FakeRetriever()
    return Deps(retriever=r, embedder=r.embedder, chat=chat)


def run(make: Any, d: Deps, state: dict, **ctx: Any) -> dict:
    events: list[dict] = []
    out = make(d)(state, Runtime(context=Context(**ctx), stream_writer=events.append))
    out["_events"] = events
    return out


def after_retrieve(d: Deps, **ctx: Any) -> dict:
    """A state as the graph has it after init_signature and tri_layer_retrieve."""
    state: dict = {
        "question": Q,
        "doc_id": "tale",
        "query": Q,
        "rounds": 0,
        "llm_calls": 0,
        "tokens_in": 0,
        "tokens_out": 0,
    }
    init = run(make_init_signature, d, state, **ctx)
    state.update({k: v for k, v in init.items() if not isinstance(v, Overwrite) and k != "_events"})
    got = run(make_tri_layer_retrieve, d, state, **ctx)
    state.update(
        round_hits=got["round_hits"],
        retrieved=got["retrieved"],
        rounds=1,
        evidence_memory=[],
        attempts=[],
        probes=[],
    )
    return state


# ---------------------------------------------------------------- init_signature


def test_init_signature_resets_and_activates() -> None:
    d = deps()
    out = run(make_init_signature, d, {"question": f"  {Q} ", "doc_id": "tale"}, preset="mindscape")
    assert out["question"] == Q and out["task"] == "open" and out["query"] == Q
    assert [s["unit_id"] for s in out["signature"]][:1] == ["tale:e1"]
    for key in ("rounds", "llm_calls", "tokens_in", "tokens_out"):
        assert out[key] == Overwrite(0)
    for key in ("probes", "retrieved", "evidence_memory", "attempts", "trace"):
        assert out[key] == Overwrite([])
    assert out["_events"][0]["event"] == "signature"


def test_init_signature_without_signature() -> None:
    d = deps()
    out = run(make_init_signature, d, {"question": Q}, preset="comorag")
    assert out["signature"] == []
    assert not [c for c in d.retriever.calls if c[0] == "signature"]


def test_init_signature_first_k_method() -> None:
    d = deps()
    run(make_init_signature, d, {"question": Q}, preset="mia-agent")
    assert d.retriever.calls[0][2]["method"] == "first-k"


@pytest.mark.parametrize(
    "state,error,match",
    [
        ({"question": "  "}, ValueError, "empty"),
        ({"question": Q, "task": "multiple-choice", "options": ["one"]}, ValueError, "two options"),
        ({"question": Q, "task": "sonnet"}, ValueError, "unknown task"),
        ({"question": Q, "doc_id": "missing"}, StoreError, "unknown document missing"),
        ({"question": Q, "doc_ids": ["tale", "other"]}, StoreError, "other"),
    ],
)
def test_init_signature_rejects_bad_input(state: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        run(make_init_signature, deps(), state)


# ---------------------------------------------------------------- tri_layer_retrieve


def test_retrieve_uses_query_then_probes_and_excludes_seen() -> None:
    d = deps()
    state = after_retrieve(d, preset="comorag")
    first = {i["unit_id"] for i in state["retrieved"]}
    assert {g["layer"] for g in state["round_hits"]} == {"veridical", "semantic", "episodic"}
    assert all(i["round"] == 1 and i["probe"] == Q for i in state["retrieved"])
    state.update(pending_probes=["Edrin Vale", "Black Reef"], rounds=1)
    out = run(make_tri_layer_retrieve, d, state, preset="comorag", budgets={"veridical": 30})
    calls = [c for c in d.retriever.calls if c[0] == "retrieve"]
    assert [c[1] for c in calls[-2:]] == ["Edrin Vale", "Black Reef"]
    assert calls[-2][2]["exclude"] >= first
    assert out["rounds"] == 1 and all(i["round"] == 2 for i in out["retrieved"])
    assert not {i["unit_id"] for i in out["retrieved"]} & first


def test_round_scope_splits_the_budget_between_probes() -> None:
    d = deps()
    state = {"question": Q, "query": Q, "pending_probes": ["a", "b"], "rounds": 1}
    run(make_tri_layer_retrieve, d, state, preset="mindscape", budgets={"veridical": 1000})
    settings = [c for c in d.retriever.calls if c[0] == "retrieve"][-1][2]["settings"]
    assert settings.budgets["veridical"] == 500
    run(make_tri_layer_retrieve, d, state, preset="comorag", budgets={"veridical": 1000})
    settings = [c for c in d.retriever.calls if c[0] == "retrieve"][-1][2]["settings"]
    assert settings.budgets["veridical"] == 1000


def test_signature_conditions_retrieval_only_when_present() -> None:
    d = deps()
    state = after_retrieve(d, preset="mindscape")
    call = [c for c in d.retriever.calls if c[0] == "retrieve"][-1]
    assert call[2]["signature"] and call[2]["settings"].alpha == 0.5
    d2 = deps()
    after_retrieve(d2, preset="naive")
    call = [c for c in d2.retriever.calls if c[0] == "retrieve"][-1]
    assert not call[2]["signature"] and call[2]["settings"].alpha == 0.0
    assert state["rounds"] == 1


def test_collapsed_tree_packs_all_layers_into_one_budget() -> None:
    d = deps()
    state = {"question": Q, "query": Q, "rounds": 0}
    out = run(make_tri_layer_retrieve, d, state, preset="raptor", collapse_budget=120)
    assert sum(i["tokens"] for i in out["retrieved"]) <= 120
    assert len({i["layer"] for i in out["retrieved"]}) >= 2  # one ranking across the layers


def test_collapse_keeps_the_best_scores_across_layers_within_the_budget() -> None:
    from mindscape.memory.retrieval.raptor_collapse import collapse
    from mindscape.memory.types import Hit, Unit

    def hit(layer: str, uid: str, score: float, tokens: int) -> Hit:
        unit = Unit(id=uid, doc_id="d", layer=layer, text=uid, chunk_ids=[])  # type: ignore[arg-type]
        return Hit(unit, score_query=score, score_signature=0.0, score=score, tokens=tokens)

    hits = {
        "veridical": [hit("veridical", "c1", 0.9, 10), hit("veridical", "c2", 0.3, 10)],
        "semantic": [hit("semantic", "s1", 0.8, 10), hit("semantic", "s2", 0.7, 30)],
        "episodic": [hit("episodic", "e1", 0.5, 10)],
        "outline": [],
    }
    out = collapse(hits, 30)  # type: ignore[arg-type]
    kept = {layer: [h.unit_id for h in hs] for layer, hs in out.items()}
    # c1, s1 fit (20); s2 (30) does not; e1 (0.5) is next best and fits; c2 (0.3) is left out
    assert kept == {"veridical": ["c1"], "semantic": ["s1"], "episodic": ["e1"], "outline": []}


# ---------------------------------------------------------------- signature_update


def test_signature_update_none_for_static_presets() -> None:
    assert run(make_signature_update, deps(), {"question": Q}, preset="mia-rag") == {
        "update": {},
        "_events": [],
    }


def test_reselect_uses_the_evidence_augmented_query() -> None:
    d = deps()
    state = after_retrieve(d, preset="mindscape")
    out = run(make_signature_update, d, state, preset="mindscape")
    call = [c for c in d.retriever.calls if c[0] == "signature"][-1]
    assert call[2]["extra_text"] and call[2]["method"] == "coverage"
    assert 0 < len(out["signature"]) <= 5 and out["update"]["decision"] is None
    assert "llm_calls" in out and out["llm_calls"] == 0


def test_llm_update_chooses_signature_and_decides() -> None:
    script = QAScript(refuse=1)
    d = deps(script.chat_model())
    state = after_retrieve(d, preset="mia-agent")
    out = run(make_signature_update, d, state, preset="mia-agent", signature_k=2)
    assert script.counts == {"update": 1}
    assert (
        out["update"]["decision"] == "REFINE" and out["update"]["next_query"] == "where is the gold"
    )
    assert len(out["signature"]) <= 2 and out["llm_calls"] == 1 and out["tokens_in"] > 0
    assert out["update"]["notes"] == [{"cue": "a grounded note", "evidence_ids": []}]


def test_offline_update_keeps_reselection() -> None:
    d = deps()
    state = after_retrieve(d, preset="mia-agent")
    out = run(make_signature_update, d, state, preset="mia-agent", backend="extractive")
    assert out["update"]["decision"] is None and out["llm_calls"] == 0
    assert out["signature"]


# ---------------------------------------------------------------- evidence_fuse


def test_per_layer_encode_makes_one_call_per_unit_and_fuses_history() -> None:
    script = QAScript()
    d = deps(script.chat_model())
    state = after_retrieve(d, preset="comorag")
    out = run(make_evidence_fuse, d, state, preset="comorag")
    assert script.counts == {"encode": 3} and out["llm_calls"] == 3
    assert sorted(u["layer"] for u in out["evidence_memory"]) == [
        "episodic",
        "semantic",
        "veridical",
    ]
    assert all(u["cue"].startswith("finding b1") for u in out["evidence_memory"])
    # next round: the pool has history, so Mem-Fuse runs as its own call
    state["evidence_memory"] = out["evidence_memory"]
    state["rounds"] = 2
    out2 = run(make_evidence_fuse, d, state, preset="comorag")
    assert script.counts == {"encode": 6, "fuse": 1}
    fusion = [u for u in out2["evidence_memory"] if u["layer"] == "fusion"]
    assert len(fusion) == 1 and out2["fused"] == fusion[0]["cue"]


def test_batched_encode_is_one_call_with_fusion() -> None:
    script = QAScript()
    d = deps(script.chat_model())
    state = after_retrieve(d, preset="mindscape")
    out = run(make_evidence_fuse, d, state, preset="mindscape", defer_encode=False)
    assert script.counts == {"encode": 1} and out["llm_calls"] == 1
    assert [u["cue"] for u in out["evidence_memory"]] == [
        f"finding b{i + 1}" for i in range(len(out["evidence_memory"]))
    ]
    state["evidence_memory"], state["rounds"] = out["evidence_memory"], 2
    out2 = run(make_evidence_fuse, d, state, preset="mindscape", defer_encode=False)
    assert script.counts == {"encode": 2} and out2["fused"] == "synthesis so far"


def test_deferred_encode_covers_round_one_in_round_two() -> None:
    script = QAScript()
    d = deps(script.chat_model())
    state = after_retrieve(
        d, preset="mindscape", budgets={"veridical": 40, "semantic": 0, "episodic": 0, "outline": 0}
    )
    first = run(make_evidence_fuse, d, state, preset="mindscape")
    assert (
        "evidence_memory" not in first and first["_events"][0]["deferred"] and script.counts == {}
    )
    state.update(pending_probes=["Edrin Vale"])
    got = run(make_tri_layer_retrieve, d, state, preset="mindscape")
    state.update(
        round_hits=got["round_hits"], retrieved=[*state["retrieved"], *got["retrieved"]], rounds=2
    )
    out = run(make_evidence_fuse, d, state, preset="mindscape")
    assert script.counts == {"encode": 1} and out["llm_calls"] == 1
    probes = [u["probe"] for u in out["evidence_memory"]]
    assert probes[0] == Q and probes[-1] == "Edrin Vale"  # round 1's evidence first, then round 2's
    covered = {i for u in out["evidence_memory"] for i in u["evidence_ids"]}
    assert covered == {i["unit_id"] for i in state["retrieved"]}


def test_notes_mode_turns_update_notes_into_units() -> None:
    d = deps()
    state = after_retrieve(d, preset="mia-agent")
    state["update"] = {
        "notes": [{"cue": "Tobin hid the gold in the cave", "evidence_ids": ["tale:c5"]}]
    }
    out = run(make_evidence_fuse, d, state, preset="mia-agent")
    assert out["evidence_memory"] == [
        {
            "probe": Q,
            "layer": "notes",
            "evidence_ids": ["tale:c5"],
            "cue": "Tobin hid the gold in the cave",
            "round": 1,
        }
    ]


def test_offline_encode_is_extractive_and_free() -> None:
    d = deps()
    state = after_retrieve(d, preset="mindscape")
    out = run(
        make_evidence_fuse, d, state, preset="mindscape", backend="extractive", defer_encode=False
    )
    assert out["llm_calls"] == 0 and all(u["cue"] for u in out["evidence_memory"])
    assert run(make_evidence_fuse, d, state, preset="naive") == {"_events": []}


# ---------------------------------------------------------------- try_answer


def test_offline_answer_finds_the_span() -> None:
    d = deps()
    state = after_retrieve(d, preset="naive")
    out = run(make_try_answer, d, {**state, "task": "open"}, preset="naive", open_threshold=0.5)
    attempt = out["attempts"][0]
    assert attempt["answer"] == "in the cave beneath the lighthouse"
    assert attempt["sufficient"] and attempt["round"] == 1 and "tale:c5" in attempt["support"]
    assert attempt["grounding"] == "extractive"


def test_answer_policy_on_decision_defers_until_answer() -> None:
    script = QAScript()
    d = deps(script.chat_model())
    state = after_retrieve(d, preset="mia-agent")
    deferred = run(
        make_try_answer, d, {**state, "update": {"decision": "REFINE"}}, preset="mia-agent"
    )
    assert "attempts" not in deferred and deferred["_events"][0]["deferred"] is True
    assert deferred["over_budget"] is None
    last = run(
        make_try_answer,
        d,
        {**state, "rounds": 5, "update": {"decision": "REFINE"}},
        preset="mia-agent",
    )
    assert last["attempts"][0]["answer"] == "in the cave" and last["over_budget"] == "rounds"
    decided = run(
        make_try_answer, d, {**state, "update": {"decision": "ANSWER"}}, preset="mia-agent"
    )
    assert decided["llm_calls"] == 1 and decided["over_budget"] is None
    assert decided["attempts"][0]["grounding"] == "grounded"  # its quote holds the answer
    spent = run(
        make_try_answer,
        d,
        {**state, "update": {"decision": "ANSWER"}},
        preset="mia-agent",
        max_llm_calls=1,
    )
    assert spent["over_budget"] == "llm_calls"  # its own call used up the budget


def test_answer_context_follows_the_switches() -> None:
    script = QAScript()
    d = deps(script.chat_model())
    state = after_retrieve(d, preset="mindscape")
    state["evidence_memory"] = [
        {"probe": Q, "layer": "veridical", "evidence_ids": [], "cue": "CUE-TEXT", "round": 1}
    ]
    run(make_try_answer, d, state, preset="mindscape")
    prompt = d.chat.prompts[-1]
    assert "<signature>" not in prompt and "CUE-TEXT" in prompt  # the preset's answerer: no σ
    run(make_try_answer, d, state, preset="mindscape", answer_with_signature=True)
    prompt = d.chat.prompts[-1]
    assert "<signature>" in prompt and "CUE-TEXT" in prompt
    run(
        make_try_answer,
        d,
        state,
        preset="mindscape",
        answer_with_signature=False,
        answer_with_evidence=False,
    )
    prompt = d.chat.prompts[-1]
    assert "<signature>" not in prompt and "CUE-TEXT" not in prompt


def test_select_passages_puts_this_round_first_within_budget() -> None:
    old = {"unit_id": "old", "layer": "veridical", "score": 0.99, "tokens": 5, "round": 2}
    new = {"unit_id": "new", "layer": "episodic", "score": 0.1, "tokens": 5, "round": 1}
    ver = {"unit_id": "ver", "layer": "veridical", "score": 0.2, "tokens": 5, "round": 1}
    state = {
        "round_hits": [
            {"probe": "q", "layer": "episodic", "items": [new]},
            {"probe": "q", "layer": "veridical", "items": [ver]},
        ],
        "retrieved": [old, new, ver],
    }
    assert [i["unit_id"] for i in select_passages(state, 100)] == ["ver", "new", "old"]
    assert [i["unit_id"] for i in select_passages(state, 10)] == ["ver", "new"]


def test_a_refining_round_reads_the_questions_hits_then_its_own() -> None:
    def item(uid: str, round_: int, score: float, layer: str = "veridical") -> dict:
        return {"unit_id": uid, "layer": layer, "score": score, "tokens": 5, "round": round_}

    q1, q2, q3 = item("q1", 1, 0.9), item("q2", 1, 0.8), item("q3", 1, 0.7, "semantic")
    p1, p2 = item("p1", 3, 0.6), item("p2", 3, 0.5)
    mid = item("mid", 2, 0.95)
    state = {
        "rounds": 3,
        "round_hits": [{"probe": "a probe", "layer": "veridical", "items": [p2, p1]}],
        "retrieved": [q1, q2, q3, mid, p1, p2],
    }
    ids = [i["unit_id"] for i in select_passages(state, 100)]
    # what the question retrieved (veridical first), then this round's new hits, then the rest
    assert ids == ["q1", "q2", "q3", "p1", "p2", "mid"]
    assert [i["unit_id"] for i in select_passages(state, 20)] == ["q1", "q2", "q3", "p1"]


def test_a_refining_round_widens_the_answer_window() -> None:
    ctx = Context.from_preset("mindscape")
    base = ctx.resolved().llm_passage_tokens
    assert base and answer_window(ctx, 1) is None  # round 1: the reasoner's own window
    assert answer_window(ctx, 2) == round(base * 1.5)
    assert answer_window(Context.from_preset("mindscape", refine_window=2.0), 3) == 2 * base


def test_multiple_choice_and_claim_formats_offline() -> None:
    d = deps()
    state = after_retrieve(d, preset="naive")
    mc = run(
        make_try_answer,
        d,
        {
            **state,
            "task": "multiple-choice",
            "question": "Who saw the Heron near the Black Reef?",
            "options": ["Tobin Quill", "an old fisherman, Edrin Vale", "Mara's mother"],
        },
        preset="naive",
    )
    assert mc["attempts"][0]["answer"] == "B" and mc["attempts"][0]["choice"] == 1
    claim = run(
        make_try_answer,
        d,
        {
            **state,
            "task": "claim",
            "question": "Mara opened the cave with the brass key her mother left her.",
        },
        preset="naive",
    )
    assert claim["attempts"][0]["answer"] == "TRUE"  # the story says so (tale:c5)


# ---------------------------------------------------------------- refine


def _attempt(
    round_: int,
    answer: str = "x",
    sufficient: bool = True,
    confidence: float = 0.9,
    grounding: str | None = None,
) -> dict:
    return {
        "round": round_,
        "answer": answer,
        "sufficient": sufficient,
        "confidence": confidence,
        "grounding": grounding or ("grounded" if sufficient else "insufficient"),
        "support": [],
    }


@pytest.mark.parametrize(
    "confidence",
    [grounding.GROUNDED, grounding.QUOTED, grounding.UNGROUNDED, grounding.INSUFFICIENT],
)
def test_the_grounding_level_keeps_the_quote_rule(confidence: float) -> None:
    """Self-Probe's ANSWER stands for a graded answer at QUOTED confidence or above, as when
    the rule compared the confidence; an extractive answer quotes the passages."""
    graded: Any = {**_attempt(1, confidence=confidence), "reasoner": "llm"}
    graded["grounding"] = grounding_level(graded)
    assert quote_found(graded) == (confidence >= grounding.QUOTED)
    extractive: Any = {**_attempt(1, confidence=0.5), "reasoner": "llm->offline"}
    assert grounding_level(extractive) == "extractive"


def test_self_probes_answer_reads_the_verifiers_probability_not_its_label() -> None:
    """A verified answer counts as found only when the verifier thinks it more likely right
    than not; a closed answer's option margin (the reader's own say-so) never counts."""
    assert not quote_found(_attempt(1, confidence=0.2, grounding="verified"))
    assert quote_found(_attempt(1, confidence=0.7, grounding="verified"))
    assert not quote_found(_attempt(1, confidence=0.95, grounding="margin"))


def test_refine_answers_a_sufficient_attempt() -> None:
    d = deps()
    state = after_retrieve(d, preset="comorag")
    out = run(make_refine, d, {**state, "attempts": [_attempt(1)]}, preset="comorag")
    assert out["decision"] == "ANSWER" and out["answer"] == "x" and out["stop_reason"] == "answered"
    assert out["trace"][0]["decision"] == "ANSWER" and out["trace"][0]["hits"]["veridical"] > 0
    assert out["llm_calls"] == 0


def test_refine_probes_entities_first_and_never_repeats() -> None:
    d = deps()
    state = after_retrieve(d, preset="comorag")
    state["attempts"] = [_attempt(1, sufficient=False, confidence=0.2)]
    out = run(make_refine, d, state, preset="comorag", backend="extractive")
    assert out["decision"] == "REFINE" and 1 <= len(out["pending_probes"]) <= 3
    names = [p.split(" ")[0] for p in out["pending_probes"]]
    assert all(n[0].isupper() for n in names)
    state["probes"] = out["pending_probes"]
    again = run(make_refine, d, state, preset="comorag", backend="extractive")
    assert not set(again["pending_probes"]) & set(out["pending_probes"])
    assert out["answer"] == "x" and out["stop_reason"] == ""


def test_refine_stops_at_the_round_budget_with_the_best_attempt() -> None:
    d = deps()
    state = after_retrieve(d, preset="comorag")
    attempts = [_attempt(1, "first", False, 0.4), _attempt(2, "", False, 0.1)]
    out = run(
        make_refine, d, {**state, "rounds": 2, "attempts": attempts}, preset="comorag", max_rounds=2
    )
    assert out["decision"] == "STOP" and out["stop_reason"] == "rounds" and out["answer"] == "first"
    tie = [_attempt(1, "first", False, 0.45), _attempt(2, "second", False, 0.45)]
    out = run(
        make_refine, d, {**state, "rounds": 2, "attempts": tie}, preset="comorag", max_rounds=2
    )
    assert out["answer"] == "first"  # a tie goes to the round that read the better-ranked evidence
    none = run(
        make_refine, d, {**state, "rounds": 2, "attempts": []}, preset="comorag", max_rounds=2
    )
    assert none["answer"] == NO_ANSWER


def test_refine_stops_on_the_budget_try_answer_left_without_probing() -> None:
    script = QAScript()
    d = deps(script.chat_model())
    state = after_retrieve(d, preset="mindscape")
    state.update(attempts=[_attempt(1, "g", False, 0.2)], over_budget="tokens")
    out = run(make_refine, d, state, preset="mindscape")
    assert out["decision"] == "STOP" and out["stop_reason"] == "tokens"
    assert out["over_budget"] == "tokens" and script.counts == {} and out["llm_calls"] == 0


def test_refine_llm_decision_and_probe_dedup() -> None:
    script = QAScript(
        replies={
            "probe": [
                '{"decision": "REFINE", "probes": ["Tobin", "tobin", "Old probe"]}',
                '{"decision": "answer", "probes": []}',
                '{"decision": "answer", "probes": []}',
                '{"decision": "answer", "probes": []}',
            ]
        }
    )
    d = deps(script.chat_model())
    state = after_retrieve(d, preset="mindscape")
    state.update(attempts=[_attempt(1, "guess", False, 0.3)], probes=["old probe"])
    out = run(make_refine, d, state, preset="mindscape")
    assert (
        out["decision"] == "REFINE" and out["pending_probes"] == ["Tobin"] and out["llm_calls"] == 1
    )
    again = run(make_refine, d, state, preset="mindscape")  # ANSWER on an unquoted attempt
    assert again["decision"] == "REFINE"
    state.update(attempts=[_attempt(1, "guess", True, 0.3, "ungrounded")])  # quote not found
    assert run(make_refine, d, state, preset="mindscape")["decision"] == "REFINE"
    state.update(attempts=[_attempt(1, "guess", True, 0.45, "quoted")])  # sufficient, quote found
    out = run(make_refine, d, state, preset="mindscape")
    assert out["decision"] == "ANSWER" and out["answer"] == "guess"


def test_refine_stops_when_its_own_call_spends_the_budget() -> None:
    script = QAScript()
    d = deps(script.chat_model())
    state = after_retrieve(d, preset="mindscape")
    state.update(attempts=[_attempt(1, "g", False, 0.3)], llm_calls=4)
    out = run(make_refine, d, state, preset="mindscape", max_llm_calls=5)
    assert out["decision"] == "STOP" and out["stop_reason"] == "llm_calls"
    assert out["over_budget"] == "llm_calls"  # what the router reads


def test_refine_stops_when_nothing_is_left_to_try() -> None:
    d = deps()
    state = {
        "question": Q,
        "query": Q,
        "rounds": 2,
        "round_hits": [],
        "retrieved": [],
        "evidence_memory": [],
        "attempts": [_attempt(2, "g", False, 0.1)],
        "probes": [],
    }
    out = run(make_refine, d, state, preset="mia-agent", backend="extractive")
    assert out["decision"] == "STOP" and out["stop_reason"] == "exhausted"


def test_an_unusable_model_answer_is_counted_and_the_run_goes_on() -> None:
    """Malformed JSON twice (the answer and its re-ask): the extractive fallback answers and
    the node's counters say so."""
    from tests.fakes import ScriptedChatModel

    chat = ScriptedChatModel(responses=["no json here", "still none"])
    d = deps(chat)
    state = after_retrieve(d, preset="naive", backend="llm")
    out = run(make_try_answer, d, {**state, "task": "open"}, preset="naive", backend="llm")
    attempt = out["attempts"][0]
    assert attempt["reasoner"] == "llm->offline" and "cave" in attempt["answer"]
    assert out["llm_calls"] == 2 and out["llm_fallbacks"] == 1
    assert d.usage.total("malformed") == 1 and d.usage.total("unusable") == 1
