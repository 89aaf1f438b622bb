"""The pure router after `refine`."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END

from mindscape.agents.budget import spent_budget
from mindscape.agents.router import route_after_refine
from mindscape.context import Context


def route(state: dict, **ctx: Any) -> str:
    """Route as the graph does: `refine` leaves the budget verdict next to its decision."""
    over = spent_budget(state, Context(**ctx).resolved())
    return route_after_refine({**state, "over_budget": over})


def test_refine_with_budget_left_loops() -> None:
    assert route({"decision": "REFINE", "rounds": 1}) == "tri_layer_retrieve"


def test_answer_and_stop_end() -> None:
    assert route({"decision": "ANSWER", "rounds": 1}) == END
    assert route({"decision": "STOP", "rounds": 1}) == END


def test_missing_or_unknown_decision_ends() -> None:
    assert route({"rounds": 1}) == END
    assert route({"decision": "", "rounds": 1}) == END
    assert route({"decision": "refine", "rounds": 1}) == END


def test_round_budget() -> None:
    assert route({"decision": "REFINE", "rounds": 4}, max_rounds=5) == "tri_layer_retrieve"
    assert route({"decision": "REFINE", "rounds": 5}, max_rounds=5) == END
    assert route({"decision": "REFINE", "rounds": 1}, preset="naive") == END


def test_call_and_token_budgets() -> None:
    state = {"decision": "REFINE", "rounds": 1, "llm_calls": 10, "tokens_in": 0, "tokens_out": 0}
    assert route(state, max_llm_calls=11) == "tri_layer_retrieve"
    assert route(state, max_llm_calls=10) == END
    # one round spent 1000 tokens: another like it must fit in what is left
    state = {"decision": "REFINE", "rounds": 1, "tokens_in": 900, "tokens_out": 100}
    assert route(state, max_tokens=2000) == "tri_layer_retrieve"
    assert route(state, max_tokens=1999) == END
    state = {"decision": "REFINE", "rounds": 2, "tokens_in": 1800, "tokens_out": 200}
    assert route(state, max_tokens=3000) == "tri_layer_retrieve"
    assert route(state, max_tokens=2999) == END


def test_router_without_runtime_uses_defaults() -> None:
    assert route({"decision": "REFINE", "rounds": 1}) == "tri_layer_retrieve"
    assert route({"decision": "REFINE", "rounds": 5}) == END


def test_the_router_reads_the_budget_verdict() -> None:
    assert route_after_refine({"decision": "REFINE", "over_budget": None}) == "tri_layer_retrieve"
    assert route_after_refine({"decision": "REFINE", "over_budget": "tokens"}) == END
