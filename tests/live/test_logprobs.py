"""The in-process log-probability scorer on the real local model (skipped without it)."""

from __future__ import annotations

import pytest

from mindscape.llm import LLMSettings, resolve_backend

pytestmark = [pytest.mark.local_model, pytest.mark.integration]

CHUNK = (
    "Then he went home, and gave the two sisters what they had wished for, and to Cinderella "
    "he gave the branch from the hazel-bush."
)


@pytest.fixture(scope="module")
def scorer():  # noqa: ANN201
    if resolve_backend(LLMSettings())[0] != "local":
        pytest.skip("the local model is not installed (make model)")
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
