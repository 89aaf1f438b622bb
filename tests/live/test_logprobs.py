"""The in-process log-probability scorer on the real local model.

Without the model: a failure under CI, locally a skip naming `make model` (`require`).
"""

from __future__ import annotations

import pytest

from tests.conftest import require_local_model

pytestmark = [pytest.mark.local_model, pytest.mark.integration]

CHUNK = (
    "Then he went home, and gave the two sisters what they had wished for, and to Cinderella "
    "he gave the branch from the hazel-bush."
)


@pytest.fixture(scope="module")
def scorer():  # noqa: ANN201
    require_local_model()
    from mindscape.llm.logprobs import LocalScorer

    return LocalScorer(n_ctx=512)


def test_a_core_that_describes_its_chunk_predicts_it_better(scorer) -> None:  # noqa: ANN001
    right = "Summary: Cinderella's father brings her a hazel twig.\nPassage: "
    wrong = "Summary: The stock market fell as investors feared higher rates.\nPassage: "
    lps = scorer.continuation_logprobs(right, CHUNK)
    assert len(lps) > 20 and all(lp <= 0 for lp in lps)
    assert scorer.perplexity(right, CHUNK) < scorer.perplexity(wrong, CHUNK)


def test_yes_probability_reads_the_answer_token(scorer) -> None:  # noqa: ANN001
    assert scorer.yes_probability("Is water wet? Answer yes or no.") > 0.5
    assert scorer.yes_probability("Is fire cold? Answer yes or no.") < 0.5


def test_the_scorer_chooses_among_mom_candidates(scorer) -> None:  # noqa: ANN001
    """MoM's choice with the real model: cores that describe their chunks beat cores that do
    not, and every score is a probability or a positive completeness."""
    from mindscape.indexing.mom.paths import CachedEvaluator, choose
    from mindscape.tokens import default_counter
    from tests.fakes import DictCache

    ball = "The king held a festival that lasted three days, and all the maidens were invited."
    right = [
        (CHUNK, "Cinderella's father brings her the hazel branch she asked for."),
        (ball, "The king announces a three-day festival for all the maidens."),
    ]
    wrong = [(text, "The stock market fell as investors feared higher rates.") for text, _ in right]
    cache = DictCache()
    choice = choose([wrong, right], CachedEvaluator(scorer, cache), default_counter())
    assert all(0.0 <= s <= 1.0 for s in choice.clarity)
    assert choice.completeness[1] > choice.completeness[0] > 0
    assert choice.clarity[0] == choice.clarity[1]  # the same chunks: the same break question
    assert choice.chosen == 1
    assert len(cache.data) == 5  # one break question and four reads, each cached once
