"""The answer verifier: its features, its JSON model, its loading, and how the local reader
uses it for a plain answer's confidence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from mindscape.llm import LLMSettings, Usage
from mindscape.models.manifest import MANIFEST
from mindscape.reasoners.base import AnswerRequest
from mindscape.reasoners.llm import LLMReasoner
from mindscape.reasoners.sentence_vectors import SentenceVectors
from mindscape.reasoners.verifier import (
    MODEL_FILE,
    Reading,
    Verifier,
    VerifierError,
    features,
    load_verifier,
)
from mindscape.state import EvidenceItem
from tests.fakes import HashingEmbedder, ScriptedChatModel, offline_reasoner

PASSAGE = (
    "Then two white pigeons came in by the kitchen window, and they picked the lentils out "
    "of the ashes. The step-mother laughed at Cinderella."
)
QUESTION = "Who helped Cinderella pick the lentils out of the ashes?"


def test_features_see_a_restated_question_and_an_answer_from_the_passage() -> None:
    restated = features(Reading(QUESTION, "Cinderella picked the lentils", PASSAGE, (-0.1,)))
    right = features(Reading(QUESTION, "two white pigeons", PASSAGE, (-0.1,)))
    invented = features(Reading(QUESTION, "a kind fairy", PASSAGE, (-0.1,)))
    assert restated["in_question"] == 1.0 and right["in_question"] == 0.0
    assert right["in_passage"] == 1.0 and invented["in_passage"] == 0.0
    assert right["wh_who"] == 1.0 and right["wh_why"] == 0.0


def test_agreement_is_the_mean_f1_with_the_samples() -> None:
    f = features(
        Reading(
            QUESTION, "two white pigeons", PASSAGE, (-0.2, -1.0), ("pigeons", "the step-mother")
        )
    )
    assert f["agreement"] == pytest.approx((0.5 + 0.0) / 2)
    assert f["mean_logprob"] == pytest.approx(-0.6) and f["min_logprob"] == -1.0
    assert f["first_logprob"] == -0.2


def toy(**coef: float) -> Verifier:
    names = tuple(features(Reading("", "", "", ())))
    return Verifier(
        names=names,
        mean=tuple(0.0 for _ in names),
        scale=tuple(1.0 for _ in names),
        coef=tuple(coef.get(n, 0.0) for n in names),
        intercept=0.0,
        samples=2,
    )


def test_probability_follows_the_coefficients_and_survives_json() -> None:
    v = toy(in_passage=3.0, in_question=-6.0)
    right = Reading(QUESTION, "two white pigeons", PASSAGE, (-0.1,))
    restated = Reading(QUESTION, "Cinderella picked the lentils", PASSAGE, (-0.1,))
    assert v.probability(right) > 0.9 > 0.1 > v.probability(restated)
    again = Verifier.from_json(json.loads(json.dumps(v.to_json())))
    assert again.probability(right) == v.probability(right)
    with pytest.raises(ValueError, match="unknown features"):
        Verifier.from_json({**v.to_json(), "features": ["shoe_size", *v.names[1:]]})


def ship(folder: Path, v: Verifier, sha: str | None = None) -> Path:
    raw = json.dumps(v.to_json()).encode()
    (folder / MODEL_FILE).write_bytes(raw)
    digest = sha or hashlib.sha256(raw).hexdigest()
    (folder / MANIFEST).write_text(json.dumps({"sha256": digest}))
    return folder


def test_loading_checks_the_sha256_and_names_the_make_target(tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    good = ship(tmp_path / "good", toy())
    assert load_verifier.__wrapped__(good).names == toy().names
    bad = tmp_path / "bad"
    bad.mkdir()
    ship(bad, toy(), sha="0" * 64)
    with pytest.raises(VerifierError, match="make verifier"):
        load_verifier.__wrapped__(bad)
    with pytest.raises(VerifierError, match="make verifier"):
        load_verifier.__wrapped__(tmp_path / "missing")


def reply(text: str, logprobs: list[float]) -> AIMessage:
    content = [{"token": t, "logprob": lp} for t, lp in zip(text.split(), logprobs, strict=False)]
    return AIMessage(content=text, response_metadata={"logprobs": {"content": content}})


def reasoner(chat: ScriptedChatModel, **kw: object) -> LLMReasoner:
    settings = LLMSettings(backend="local", retry_base_delay_s=0.0)
    fallback = offline_reasoner(SentenceVectors(HashingEmbedder(256)))
    return LLMReasoner(chat, fallback, settings=settings, passage_tokens=1000, **kw)  # type: ignore[arg-type]


def shown() -> list[EvidenceItem]:
    return [
        EvidenceItem(
            unit_id="tale:c1", layer="veridical", doc_id="tale", chunk_ids=[], text=PASSAGE,
            score=1.0, score_query=0.0, score_signature=0.0, tokens=40, round=1, probe=QUESTION,
        )
    ]  # fmt: skip


def test_a_plain_answer_takes_the_verifiers_probability_and_draws_its_samples() -> None:
    chat = ScriptedChatModel(
        responses=[reply("two white pigeons", [-0.1, -0.2, -0.1]), "pigeons", "two pigeons"]
    )
    v = toy(in_passage=2.0, agreement=1.0)
    usage = Usage()
    a = reasoner(chat, verifier=v, samples=2).plain_answer(
        AnswerRequest(QUESTION, "open"), shown(), usage
    )
    assert len(chat.prompts) == 3  # the answer, then two samples over the same prompt
    # the samples' prompt is the one just read: cached tokens, outside tokens_in and the budget
    assert usage.calls == 3 and usage.tokens_in > 0
    assert usage.total("tokens_cached") == pytest.approx(2 * usage.tokens_in, rel=0.02)
    assert a["grounding"] == "verified"
    expected = v.probability(
        Reading(
            QUESTION, "two white pigeons", PASSAGE, (-0.1, -0.2, -0.1), ("pigeons", "two pigeons")
        )
    )
    assert a["confidence"] == pytest.approx(expected)
    assert a["certainty"] == pytest.approx(2.718281828 ** (-0.4 / 3), rel=1e-6)


def test_without_a_verifier_a_plain_answer_is_not_called_grounded() -> None:
    # the quote is the passage sentence nearest the answer, so the quote check cannot fail:
    # the attempt's level says "lexical", never "grounded"
    chat = ScriptedChatModel(responses=[reply("two white pigeons", [-0.05, -0.05, -0.05])])
    a = reasoner(chat).plain_answer(AnswerRequest(QUESTION, "open"), shown(), Usage())
    assert a["grounding"] == "lexical" and a["confidence"] == 0.9  # words found: capped later
    assert len(chat.prompts) == 1
    # the checks that remain can fail: an answer whose words are not in the passage
    chat = ScriptedChatModel(responses=[reply("a kind fairy", [-0.05, -0.05, -0.05])])
    a = reasoner(chat).plain_answer(AnswerRequest(QUESTION, "open"), shown(), Usage())
    assert "grounding" not in a and a["confidence"] < 0.5  # try_answer names its level


def test_the_shipped_verifier_loads_and_scores_dev_as_its_manifest_says() -> None:
    """The committed model.json matches its manifest and, on the committed dev readings, gives
    the AUROC the manifest (and the model card) records; it ranks the restated question below
    the passage's answer."""
    from sklearn.metrics import roc_auc_score

    from mindscape.reasoners.verifier import VERIFIER_DIR

    verifier = load_verifier.__wrapped__(VERIFIER_DIR)
    manifest = json.loads((VERIFIER_DIR / MANIFEST).read_text())
    dev_file = "docs/results/reader/fairytaleqa-dev60/readings.jsonl"
    recorded = manifest["figures"][dev_file]
    root = Path(__file__).resolve().parents[2]
    rows = [json.loads(line) for line in (root / dev_file).read_text().splitlines() if line]
    rows = [r for r in rows if r["variant"] == "plain" and r.get("evidence", "gold") == "gold"]
    assert len(rows) == recorded["n"]
    p = [
        verifier.probability(
            Reading(
                r["question"],
                r["answer"],
                r["passage"],
                tuple(r["logprobs"]),
                tuple(r.get("sampled") or ()),
            )
        )
        for r in rows
    ]
    assert roc_auc_score([r["f1"] >= 0.5 for r in rows], p) == pytest.approx(recorded["auroc"])
    right = verifier.probability(Reading(QUESTION, "two white pigeons", PASSAGE, (-0.2,)))
    restated = verifier.probability(
        Reading(QUESTION, "Cinderella picked the lentils", PASSAGE, (-0.2,))
    )
    assert right > restated


def test_the_verifier_judges_answers_only_when_asked() -> None:
    """Off by default (on FairytaleQA dev it did not beat the capped certainty, at twice the
    cost); asked for, it judges any endpoint's plain answers."""
    from mindscape.context import Context
    from mindscape.deps import Deps
    from tests.fakes import FakeRetriever

    def judge(backend: str, **ctx: object) -> Verifier | None:
        r = FakeRetriever()
        settings = LLMSettings(backend=backend)  # type: ignore[arg-type]
        deps = Deps(
            chat=ScriptedChatModel(), llm_settings=settings, retriever=r, embedder=r.embedder
        )
        reasoner = deps.reasoner(Context(**ctx).resolved())  # type: ignore[arg-type]
        assert isinstance(reasoner, LLMReasoner)
        return reasoner.verifier

    assert judge("local") is None and judge("openai") is None
    assert judge("local", verifier=True) is not None and judge("openai", verifier=True) is not None
