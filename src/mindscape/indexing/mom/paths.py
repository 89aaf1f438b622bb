"""MoM's multi-path memories: N candidate memories of a section, one chosen by an evaluator.

The expert prompt is sampled N times (Zhao et al., 2025): path 0 is the client as configured
(greedy, temperature 0 by default, so one path is exactly the single-candidate memory), and
path i ≥ 1 decodes with :data:`SAMPLING` and seed i. An evaluator model then scores each
candidate from its token probabilities, with the formulas of :mod:`~mindscape.indexing.mom.select`:

* chunk clarity: for each pair of adjacent atomic chunks, P("yes") to
  :data:`~mindscape.prompts.mom.BREAK` shown the end of the first chunk and the start of the
  second (:data:`BREAK_CHARS` each); a boundary the evaluator answers neither yes nor no is
  unread: it is counted (``unread_breaks`` in the choice's record, a warning in the log) and
  left out of the mean (:data:`~mindscape.indexing.mom.select.UNREAD_RULE`);
* core completeness: each atomic chunk's perplexity after its item's core content
  (:data:`~mindscape.prompts.mom.CORE`), with ``|c_i|`` counted in cl100k tokens;

and reciprocal-rank fusion of the two rankings picks the candidate. The evaluator is any
object with the two methods of :class:`Evaluator`; by default the local model in process
(:class:`~mindscape.llm.logprobs.LocalScorer`). :class:`CachedEvaluator` keeps every score in
the store's cache by content hash, so a re-index scores nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from mindscape import prompts
from mindscape.indexing.mom.select import (
    UNREAD_RULE,
    chunk_clarity,
    completeness_of,
    rrf_select,
    unread,
)
from mindscape.memory.cache import content_key
from mindscape.prompts import mom as mom_prompt
from mindscape.tokens import TokenCounter

if TYPE_CHECKING:
    from mindscape.llm.client import TextCache

__all__ = [
    "BREAK_CHARS",
    "SAMPLING",
    "AtomicChunk",
    "CachedEvaluator",
    "Choice",
    "Evaluator",
    "break_probabilities",
    "choose",
    "clarity",
    "completeness",
    "default_evaluator",
    "path_clients",
]

logger = logging.getLogger(__name__)

SAMPLING = {"temperature": 0.7, "top_p": 0.9}
"""Decoding of the sampled paths (path i also gets seed i)."""
BREAK_CHARS = 600
"""Characters of each chunk the break question shows: the first chunk's end, the second's start."""

AtomicChunk = tuple[str, str]
"""An atomic chunk's text and the core content of the item it belongs to."""


class Evaluator(Protocol):
    """A model's probabilities, as MoM's selection reads them."""

    def yes_probability(self, question: str) -> float | None:
        """P(yes) / P(yes or no) of the first answer token to a yes/no question; None when
        that token is neither yes nor no."""
        ...

    def perplexity(self, context: str, target: str) -> float:
        """exp(−mean log p) of the tokens of `target` read after `context`."""
        ...


class CachedEvaluator:
    """An evaluator whose answers are kept in a cache under the hash of the evaluator's id
    and the inputs."""

    def __init__(self, evaluator: Evaluator, cache: TextCache) -> None:
        self.evaluator, self.cache = evaluator, cache
        self.model_id: str = getattr(evaluator, "model_id", type(evaluator).__name__)

    def _cached(self, parts: tuple[str, ...], compute: Callable[[], float | None]) -> float | None:
        key = content_key("mom-score", self.model_id, *parts)
        hit = self.cache.get_text(key)
        if hit is not None:
            return None if hit == "None" else float(hit)
        value = compute()
        self.cache.put_text(key, repr(value))
        return value

    def yes_probability(self, question: str) -> float | None:
        """The wrapped evaluator's answer (None kept as None), cached. The key is not the one
        of the scores cached before None existed, where an unread answer was stored as 0.5."""
        return self._cached(
            ("yes-or-none", question), lambda: self.evaluator.yes_probability(question)
        )

    def perplexity(self, context: str, target: str) -> float:
        """The wrapped evaluator's answer, cached."""
        value = self._cached(
            ("ppl", context, target), lambda: self.evaluator.perplexity(context, target)
        )
        return cast(float, value)  # a perplexity is always a number


def default_evaluator() -> Evaluator:
    """The local model in process (:class:`~mindscape.llm.logprobs.LocalScorer`).

    Raises:
        ModelError: when the local model or llama-cpp-python is missing, naming the way out.
    """
    from mindscape.errors import ModelError
    from mindscape.models.local import INSTALL_HINT, runtime_available

    if not runtime_available():
        raise ModelError(
            "choosing among MoM paths needs an evaluator with token probabilities, the local "
            f"model: {INSTALL_HINT}; or sample one path (--mom-paths 1)"
        )
    from mindscape.llm.logprobs import LocalScorer

    return LocalScorer()


def path_clients(llm: Any, paths: int) -> list[Any]:
    """The LLM client of each path: the client itself, then sampled copies (seed = index)."""
    return [llm, *(llm.sampled(**SAMPLING, seed=i) for i in range(1, paths))]


def break_probabilities(evaluator: Evaluator, chunks: Sequence[AtomicChunk]) -> list[float | None]:
    """The evaluator's break probability of each boundary between adjacent atomic chunks, in
    memory order (None where it answered neither yes nor no)."""
    return [
        evaluator.yes_probability(
            prompts.render(
                mom_prompt.BREAK,
                first=prompts.as_data(a[-BREAK_CHARS:]),
                second=prompts.as_data(b[:BREAK_CHARS]),
            )
        )
        for (a, _), (b, _) in zip(chunks, chunks[1:], strict=False)
    ]


def clarity(evaluator: Evaluator, chunks: Sequence[AtomicChunk]) -> float:
    """``S_clarity`` of a candidate's atomic chunks, in memory order (unread boundaries left
    out, :data:`~mindscape.indexing.mom.select.UNREAD_RULE`)."""
    return chunk_clarity(break_probabilities(evaluator, chunks))


def completeness(
    evaluator: Evaluator, chunks: Sequence[AtomicChunk], counter: TokenCounter
) -> float:
    """``S_comp`` of a candidate's atomic chunks, each read after its item's core content."""
    ppls = [
        evaluator.perplexity(prompts.render(mom_prompt.CORE, core=core), text)
        for text, core in chunks
    ]
    return completeness_of(ppls, [counter.count(core) for _, core in chunks])


@dataclass
class Choice:
    """Which candidate was chosen, and the scores that chose it (one per candidate)."""

    chosen: int
    clarity: list[float]
    completeness: list[float]
    unread: list[int] = field(default_factory=list)
    """Per candidate: the boundaries the evaluator answered neither yes nor no, left out of
    its clarity (:data:`~mindscape.indexing.mom.select.UNREAD_RULE`)."""

    def as_meta(self) -> dict[str, Any]:
        """The record kept in the chosen outline units' metadata (``unread_breaks`` only when
        a boundary went unread)."""
        return {
            "paths": len(self.clarity),
            "chosen": self.chosen,
            "clarity": [round(s, 4) for s in self.clarity],
            "completeness": [round(s, 4) for s in self.completeness],
            **({"unread_breaks": list(self.unread)} if any(self.unread) else {}),
        }


def choose(
    candidates: Sequence[Sequence[AtomicChunk]],
    evaluator: Evaluator,
    counter: TokenCounter,
    k: int = 60,
) -> Choice:
    """Score every candidate and pick one by RRF of its clarity and completeness ranks.

    Boundaries the evaluator answers neither yes nor no are counted per candidate (the
    choice's ``unread``), logged as a warning and left out of clarity."""
    probs = [break_probabilities(evaluator, c) for c in candidates]
    cl = [chunk_clarity(p) for p in probs]
    missing = [unread(p) for p in probs]
    if any(missing):
        logger.warning(
            "MoM: %d of %d boundaries got neither yes nor no from the evaluator (%s)",
            sum(missing),
            sum(len(p) for p in probs),
            UNREAD_RULE,
        )
    comp = [completeness(evaluator, c, counter) for c in candidates]
    return Choice(rrf_select(cl, comp, k=k), cl, comp, missing)
