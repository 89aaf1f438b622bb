"""The pure router after `refine`."""

from __future__ import annotations

from langgraph.graph import END
from langgraph.runtime import Runtime

from mindscape.agents.router import route_after_refine
from mindscape.context import Context


def rt(**kw) -> Runtime:
    return Runtime(context=Context(**kw))


def test_refine_with_budget_left_loops() -> None:
    assert route_after_refine({"decision": "REFINE", "rounds": 1}, rt()) == "tri_layer_retrieve"


def test_answer_and_stop_end() -> None:
    assert route_after_refine({"decision": "ANSWER", "rounds": 1}, rt()) == END
    assert route_after_refine({"decision": "STOP", "rounds": 1}, rt()) == END


def test_missing_or_unknown_decision_ends() -> None:
    assert route_after_refine({"rounds": 1}, rt()) == END
    assert route_after_refine({"decision": "", "rounds": 1}, rt()) == END
    assert route_after_refine({"decision": "refine", "rounds": 1}, rt()) == END


def test_round_budget() -> None:
    assert (
        route_after_refine({"decision": "REFINE", "rounds": 4}, rt(max_rounds=5))
        == "tri_layer_retrieve"
    )
    assert route_after_refine({"decision": "REFINE", "rounds": 5}, rt(max_rounds=5)) == END
    assert route_after_refine({"decision": "REFINE", "rounds": 1}, rt(preset="naive")) == END


def test_call_and_token_budgets() -> None:
    state = {"decision": "REFINE", "rounds": 1, "llm_calls": 10, "tokens_in": 0, "tokens_out": 0}
    assert route_after_refine(state, rt(max_llm_calls=11)) == "tri_layer_retrieve"
    assert route_after_refine(state, rt(max_llm_calls=10)) == END
    # one round spent 1000 tokens: another like it must fit in what is left
    state = {"decision": "REFINE", "rounds": 1, "tokens_in": 900, "tokens_out": 100}
    assert route_after_refine(state, rt(max_tokens=2000)) == "tri_layer_retrieve"
    assert route_after_refine(state, rt(max_tokens=1999)) == END
    state = {"decision": "REFINE", "rounds": 2, "tokens_in": 1800, "tokens_out": 200}
    assert route_after_refine(state, rt(max_tokens=3000)) == "tri_layer_retrieve"
    assert route_after_refine(state, rt(max_tokens=2999)) == END


def test_router_without_runtime_uses_defaults() -> None:
    assert route_after_refine({"decision": "REFINE", "rounds": 1}) == "tri_layer_retrieve"
    assert route_after_refine({"decision": "REFINE", "rounds": 5}) == END
