"""MoM's choice among candidate document memories: chunk clarity, core completeness, RRF.

MoM samples N candidate memories of a document (outline, core content per item, atomic
chunks) and keeps the one an evaluator model finds best on two scores, both read from the
evaluator's token log-probabilities (Zhao et al., 2025, the formulas in
``shared/papers/mom.txt``):

* **chunk clarity** — the mean, over adjacent atomic chunks ``a_i, a_{i+1}``, of the
  evaluator's probability that the boundary between them is a real break:
  ``S_clarity = 1/(n-1) · Σ P(b_{i,i+1} | a_i, a_{i+1})``;
* **core completeness** — the mean, over chunks, of ``1 / (PPL(a_i | c_i) · log |c_i|)``:
  a chunk its core content predicts well (low perplexity) is one the core covers; the
  ``log |c_i|`` term keeps long cores from winning by length alone;

and ranks the candidates by reciprocal-rank fusion of the two rankings,
``1/(k + rank_clarity) + 1/(k + rank_completeness)``.

These functions take the log-probabilities as plain numbers, so they are exact and testable on
hand-made values; reading them from a model is the evaluator's job (a boundary's break
probability is the evaluator's :func:`~mindscape.llm.logprobs.yes_share` when asked whether
the boundary is a real break, None when it answers neither yes nor no: :data:`UNREAD_RULE`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "UNREAD_RULE",
    "chunk_clarity",
    "completeness_of",
    "core_completeness",
    "perplexity",
    "ranks",
    "rrf_select",
    "unread",
]

UNREAD_RULE = (
    "a boundary the evaluator answered neither yes nor no is left out of the clarity mean; "
    "a candidate with no boundary read scores 0, like one without boundaries"
)
"""What chunk clarity does with a boundary whose break probability could not be read."""


def chunk_clarity(break_probs: Sequence[float | None]) -> float:
    """``S_clarity``: the mean break probability over the n-1 boundaries of n chunks (a memory
    of one chunk has no boundary to judge: 0, so any real segmentation ranks above it).

    A boundary whose probability is None (the evaluator's first token was neither yes nor no)
    is left out of the mean, and with none read the score is 0 (:data:`UNREAD_RULE`);
    :func:`unread` counts them so that the caller can report them."""
    read = [p for p in break_probs if p is not None]
    return sum(read) / len(read) if read else 0.0


def unread(break_probs: Sequence[float | None]) -> int:
    """How many boundaries have no break probability (None)."""
    return sum(p is None for p in break_probs)


def perplexity(token_logprobs: Sequence[float]) -> float:
    """``exp(-mean log p)`` of a chunk's tokens given its core content."""
    if not token_logprobs:
        return math.inf
    return math.exp(-sum(token_logprobs) / len(token_logprobs))


def core_completeness(
    chunk_logprobs: Sequence[Sequence[float]], core_tokens: Sequence[int]
) -> float:
    """``S_comp``: the mean over chunks of ``1 / (PPL(a_i | c_i) · log |c_i|)``.

    ``chunk_logprobs[i]`` holds the log-probabilities of chunk i's tokens read after its core
    content; ``core_tokens[i]`` is the core's length in tokens (at least 2 is assumed, so the
    log stays positive: a one-token core is no summary).
    """
    return completeness_of([perplexity(lps) for lps in chunk_logprobs], core_tokens)


def completeness_of(perplexities: Sequence[float], core_tokens: Sequence[int]) -> float:
    """``S_comp`` from each chunk's perplexity given its core, ``PPL(a_i | c_i)``, and the
    core's length in tokens (floored at 2, as in :func:`core_completeness`)."""
    if not perplexities:
        return 0.0
    terms = [
        1.0 / (ppl * math.log(max(2, n))) for ppl, n in zip(perplexities, core_tokens, strict=True)
    ]
    return sum(terms) / len(terms)


def ranks(scores: Sequence[float]) -> list[int]:
    """1-based ranks, best (highest) score first; ties share the better rank."""
    return [1 + sum(other > s for other in scores) for s in scores]


def rrf_select(clarity: Sequence[float], completeness: Sequence[float], k: int = 60) -> int:
    """The index of the candidate with the highest ``1/(k + rank_clarity) + 1/(k + rank_comp)``;
    ties go to the earlier candidate (the first path is the greedy one)."""
    if not clarity or len(clarity) != len(completeness):
        raise ValueError("one clarity and one completeness score per candidate")
    rc, rp = ranks(clarity), ranks(completeness)
    fused = [1.0 / (k + a) + 1.0 / (k + b) for a, b in zip(rc, rp, strict=True)]
    return max(range(len(fused)), key=lambda i: (fused[i], -i))
