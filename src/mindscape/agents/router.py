"""The pure router after `refine`: loop on REFINE while every budget lasts, else end.

No model calls, no side effects, no budget arithmetic: it reads the decision `refine` wrote
and the budget verdict next to it (``over_budget``, see :mod:`mindscape.agents.budget`), so
edge cases are unit-testable with plain dicts.
"""

from __future__ import annotations

from typing import Literal, cast

from langgraph.graph import END

from mindscape.state import QAState

Route = Literal["tri_layer_retrieve", "__end__"]


def route_after_refine(state: QAState) -> Route:
    """`tri_layer_retrieve` on REFINE with budget left; END on ANSWER, STOP or a used-up budget."""
    if state.get("decision") != "REFINE" or state.get("over_budget") is not None:
        return cast(Route, END)
    return "tri_layer_retrieve"
