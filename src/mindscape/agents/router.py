"""The pure router after `refine`: loop on REFINE while every budget lasts, else end.

No model calls, no side effects: it reads the decision `refine` wrote and the counters, so
edge cases are unit-testable with plain dicts.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from langgraph.graph import END

from mindscape.agents._common import exhausted
from mindscape.context import ctx_of
from mindscape.state import QAState

Route = Literal["tri_layer_retrieve", "__end__"]


def route_after_refine(state: QAState, runtime: Any = None) -> Route:
    """`tri_layer_retrieve` on REFINE with budget left; END on ANSWER, STOP or any exhausted budget."""
    if state.get("decision") != "REFINE" or exhausted(state, ctx_of(runtime)) is not None:
        return cast(Route, END)
    return "tri_layer_retrieve"
