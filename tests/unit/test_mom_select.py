"""MoM's selection scores on hand-made log-probabilities (the formulas of mom.txt)."""

from __future__ import annotations

import math

import pytest

from mindscape.indexing.mom.select import (
    UNREAD_RULE,
    chunk_clarity,
    core_completeness,
    perplexity,
    ranks,
    rrf_select,
    unread,
)
from mindscape.llm.logprobs import yes_share


def test_break_probability_normalises_yes_against_no():
    """A boundary's break probability: the evaluator's yes-share (llm.logprobs)."""
    assert yes_share({" Yes": math.log(0.6), "No": math.log(0.2), "Maybe": -1.0}) == (
        pytest.approx(0.75)
    )
    assert yes_share({"true": math.log(0.1), " false": math.log(0.3)}) == pytest.approx(0.25)
    # neither yes nor no among the top tokens: no share, not a silent 0.5
    assert yes_share({"Perhaps": -0.1}) is None
    assert yes_share({}) is None


def test_clarity_is_the_mean_over_the_boundaries():
    assert chunk_clarity([0.9, 0.5, 0.7]) == pytest.approx(0.7)
    assert chunk_clarity([]) == 0.0  # one chunk: nothing judged


def test_unread_boundaries_are_counted_and_left_out_of_clarity():
    assert chunk_clarity([0.9, None, 0.7]) == pytest.approx(0.8)  # not (0.9 + 0.5 + 0.7) / 3
    assert unread([0.9, None, 0.7, None]) == 2 and unread([0.1]) == 0
    assert chunk_clarity([None, None]) == 0.0  # nothing read: as a memory without boundaries
    assert "left out" in UNREAD_RULE


def test_completeness_follows_the_formula():
    # chunk 1: tokens with p = 0.5 each -> PPL 2; core of e^2 ≈ 7.39 -> 8 tokens
    # chunk 2: p = 0.25 each -> PPL 4; core of 2 tokens
    one, two = [math.log(0.5)] * 3, [math.log(0.25)] * 5
    assert perplexity(one) == pytest.approx(2.0)
    want = (1 / (2 * math.log(8)) + 1 / (4 * math.log(2))) / 2
    assert core_completeness([one, two], [8, 2]) == pytest.approx(want)
    assert core_completeness([one], [1]) == pytest.approx(1 / (2 * math.log(2)))  # floor of 2
    assert core_completeness([], []) == 0.0


def test_a_core_that_predicts_its_chunk_scores_higher():
    likely, unlikely = [math.log(0.9)] * 10, [math.log(0.1)] * 10
    assert core_completeness([likely], [20]) > core_completeness([unlikely], [20])


def test_rrf_fuses_the_two_rankings():
    assert ranks([0.2, 0.9, 0.5, 0.9]) == [4, 1, 3, 1]
    # candidate 2 is second on clarity and first on completeness: 1/(k+2) + 1/(k+1)
    assert rrf_select([0.9, 0.1, 0.5], [0.2, 0.3, 0.8]) == 2
    # 1st + 3rd beats 2nd + 2nd (1/(k+r) is convex), for any k
    for k in (1, 60):
        assert rrf_select([0.9, 0.5, 0.1], [0.1, 0.5, 0.9], k=k) == 0
    assert rrf_select([0.5, 0.5], [0.3, 0.3]) == 0  # a tie goes to the first (greedy) path
    with pytest.raises(ValueError):
        rrf_select([0.1], [0.1, 0.2])
