"""The question's budgets, checked in one place.

:func:`spent_budget` is the only code that compares what a question has spent with its
limits. Its verdict travels in the state as ``over_budget``:

* `try_answer` writes it after its call (on the counters `refine` decides with);
* `refine` writes it again after Self-Probe's call (on the counters the router routes with).

`try_answer` also asks it before its call, under ``answer_policy="on-decision"``: the round
that spends the last of a budget is the last, so the generator answers in it.
"""

from __future__ import annotations

from mindscape.context import Context
from mindscape.llm import Usage
from mindscape.state import BudgetName, QAState


def spent_budget(state: QAState, ctx: Context, usage: Usage | None = None) -> BudgetName | None:
    """Which budget is used up (rounds, llm_calls, tokens), or None, counting the calls in
    `usage` that the state does not hold yet (the calling node's own)."""
    rounds = state.get("rounds", 0)
    calls = state.get("llm_calls", 0) + (usage.calls if usage else 0)
    spent = state.get("tokens_in", 0) + state.get("tokens_out", 0)
    spent += (usage.tokens_in + usage.tokens_out) if usage else 0
    if rounds >= (ctx.max_rounds or 1):
        return "rounds"
    if calls >= ctx.max_llm_calls:
        return "llm_calls"
    budget = state.get("token_budget", ctx.max_tokens)
    limit = float("inf") if budget is None else budget
    if spent >= limit or (rounds and spent + spent / rounds > limit):
        return "tokens"  # spent, or another round like the average one would pass it
    return None
