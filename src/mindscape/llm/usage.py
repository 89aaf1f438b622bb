"""The usage ledger: LLM calls, tokens in and out, cache hits and retries, per role.

Input tokens are the dominating cost with a local model (~100 prompt tokens/s on two cores),
so every call is counted, per role, and reported beside every quality figure.
"""

from __future__ import annotations

import threading
from typing import Any, overload

_COUNTERS: tuple[str, ...] = (
    "calls",
    "tokens_in",
    "tokens_out",
    "tokens_cached",
    "cache_hits",
    "retries",
    "estimated",
    "malformed",
    "unusable",
    "filled",
)


class _Total:
    """A read-only attribute of :class:`Usage`: the sum of the counter of its name over all
    roles (``usage.calls`` is ``usage.total("calls")``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, usage: None, owner: type | None = None) -> _Total: ...
    @overload
    def __get__(self, usage: Usage, owner: type | None = None) -> int: ...
    def __get__(self, usage: Usage | None, owner: type | None = None) -> int | _Total:
        return self if usage is None else usage.total(self.name)

    def __set__(self, usage: Usage, value: int) -> None:
        raise AttributeError(f"Usage.{self.name} is a total: add to a role with Usage.add")


class Usage:
    """Thread-safe ledger of LLM calls, kept per role.

    Counters: ``calls`` (model responses received, re-asks included), ``tokens_in``,
    ``tokens_out``, ``tokens_cached`` (the prompt tokens of a call over a prompt the model
    has just read, such as an answer sampled again: llama.cpp reuses its cached state, so they
    are not read again and are not in ``tokens_in``), ``cache_hits`` (answers served from the
    cache, not calls),
    ``retries`` (transient failures that were retried), ``estimated`` (calls whose
    token counts were estimated because the model reported none), ``malformed`` (replies
    re-asked), ``unusable`` (replies still unusable after the re-ask, or refused requests:
    the extractive reasoner answered instead) and ``filled`` (parts of a usable reply the
    model left out, which the extractive reasoner filled in: Mem-Encode's blocks without a
    finding). ``unusable`` and ``filled`` together are a run's LLM fallbacks.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[str, dict[str, int]] = {}

    def add(self, role: str = "", **counts: int) -> None:
        """Add ``counts`` (any of the counter names) to ``role``'s row."""
        bad = set(counts) - set(_COUNTERS)
        if bad:
            raise TypeError(f"unknown usage counters: {sorted(bad)}")
        with self._lock:
            row = self._roles.setdefault(role, dict.fromkeys(_COUNTERS, 0))
            for name, value in counts.items():
                row[name] += int(value)

    def merge(self, other: Usage) -> Usage:
        """Add every row of ``other`` into this ledger; returns ``self``."""
        for role, row in other.by_role.items():
            self.add(role, **row)
        return self

    @property
    def by_role(self) -> dict[str, dict[str, int]]:
        """A snapshot of the per-role rows."""
        with self._lock:
            return {role: dict(row) for role, row in self._roles.items()}

    def total(self, name: str) -> int:
        """Sum of counter ``name`` over all roles."""
        if name not in _COUNTERS:
            raise KeyError(name)
        with self._lock:
            return sum(row[name] for row in self._roles.values())

    calls = _Total()
    """Model responses received."""
    tokens_in = _Total()
    """Prompt tokens."""
    tokens_out = _Total()
    """Completion tokens."""
    cache_hits = _Total()
    """Answers served from the cache."""
    retries = _Total()
    """Transient failures retried."""

    def as_dict(self) -> dict[str, Any]:
        """Totals plus ``by_role``, JSON-serialisable."""
        roles = self.by_role
        totals = {name: sum(row[name] for row in roles.values()) for name in _COUNTERS}
        return {**totals, "by_role": roles}

    def __repr__(self) -> str:
        d = self.as_dict()
        return f"Usage(calls={d['calls']}, tokens_in={d['tokens_in']}, tokens_out={d['tokens_out']}, cache_hits={d['cache_hits']})"

    def __getstate__(self) -> dict[str, Any]:
        return {"roles": self.by_role}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.Lock()
        self._roles = {role: dict(row) for role, row in state["roles"].items()}


def approx_tokens(text: str) -> int:
    """Rough token count (4 characters per token) used when a model reports none."""
    return len(text) // 4
