"""The two reasoners: offline extraction (determinism, spans, MC, claims, probes) and the LLM
reasoner's parsing, re-asks, fallbacks and call counting."""

from __future__ import annotations

import pytest

from mindscape.agents._common import cost
from mindscape.answers import parse_choice, parse_claim
from mindscape.llm import LLMSettings, Usage
from mindscape.reasoners.base import (
    AnswerRequest,
    EncodeGroup,
    EncodeRequest,
    RefineRequest,
    UpdateRequest,
)
from mindscape.reasoners.llm import LLMReasoner
from mindscape.reasoners.offline import OfflineReasoner
from mindscape.reasoners.schemas import AnswerOut
from mindscape.reasoners.sentence_vectors import SentenceVectors
from mindscape.reasoners.text import content_words, names, short_span, wh_word
from tests.fakes import STORY_CHUNKS, HashingEmbedder, ScriptedChatModel, offline_reasoner


def items(texts: list[str] | None = None) -> list[dict]:
    texts = texts or STORY_CHUNKS
    return [
        {
            "unit_id": f"tale:c{i}",
            "layer": "veridical",
            "doc_id": "tale",
            "chunk_ids": [f"tale:c{i}"],
            "text": t,
            "score": 1.0 - i / 100,
            "score_query": 0.0,
            "score_signature": 0.0,
            "tokens": len(t.split()),
            "round": 1,
            "probe": "q",
        }
        for i, t in enumerate(texts)
    ]


@pytest.fixture
def offline() -> OfflineReasoner:
    return offline_reasoner(
        SentenceVectors(HashingEmbedder(256)), open_threshold=0.5
    )  # hashing cosines run low


# ---------------------------------------------------------------- text helpers


def test_text_helpers() -> None:
    assert wh_word("How many days did Mara search?") == "how many"
    assert wh_word("Who told Mara?") == "who"
    assert names("Then Mara Quill met Edrin Vale. The Heron sank.") == [
        "Mara Quill",
        "Edrin Vale",
        "Heron",
    ]
    assert content_words("Tobin's ships were hidden") == {"tobin", "ship", "hidden"}
    assert (
        short_span("He saw the Heron near the Black Reef at dusk.", "Where did he see the Heron?")
        == "near the Black Reef at dusk"
    )
    assert (
        short_span("Mara searched the shore for three days.", "How many days did Mara search?")
        == "three days"
    )
    assert short_span("An old fisherman, Edrin Vale, told Mara.", "Who told Mara?") == "Edrin Vale"


# ---------------------------------------------------------------- offline


def test_offline_open_answer_is_deterministic(offline: OfflineReasoner) -> None:
    req = AnswerRequest("Where did Tobin hide the gold?", "open", passages=items())
    a = offline.answer(req, usage=Usage())
    b = offline_reasoner(SentenceVectors(HashingEmbedder(256)), open_threshold=0.5).answer(
        req, usage=Usage()
    )
    assert a == b
    assert a["answer"] == "in the cave beneath the lighthouse" and a["support"][0] == "tale:c5"
    assert a["sufficient"] and 0.5 <= a["confidence"] <= 1.0


def test_offline_confidence_drives_refine(offline: OfflineReasoner) -> None:
    weak = offline.answer(
        AnswerRequest("Which poem did the queen recite?", "open", passages=items()), usage=Usage()
    )
    assert not weak["sufficient"] and weak["confidence"] < 0.5
    empty = offline.answer(AnswerRequest("Anything?", "open", passages=[]), usage=Usage())
    assert empty["answer"] == "" and not empty["sufficient"]


def test_offline_multiple_choice(offline: OfflineReasoner) -> None:
    req = AnswerRequest(
        "What did Mara open the cave with?",
        "multiple-choice",
        ["a rusty sword", "the brass key her mother left her", "a letter", "a lamp"],
        items(),
    )
    a = offline.answer(req, usage=Usage())
    assert a["answer"] == "B" and a["choice"] == 1 and "tale:c6" in a["support"]


def test_offline_claims_true_and_false(offline: OfflineReasoner) -> None:
    true = offline.answer(
        AnswerRequest(
            "Mara opened the cave with the brass key her mother left her.",
            "claim",
            passages=items(),
        ),
        usage=Usage(),
    )
    false = offline.answer(
        AnswerRequest(
            "The queen of Norway crowned a dragon at the summer fair.", "claim", passages=items()
        ),
        usage=Usage(),
    )
    assert true["answer"] == "TRUE" and false["answer"] == "FALSE"


def test_offline_probes_are_new_entities(offline: OfflineReasoner) -> None:
    def probe(previous: list[str], max_probes: int) -> RefineRequest:
        return RefineRequest(
            question="Where did Tobin hide the gold?",
            query="q",
            passages=items(),
            notes=[],
            attempt=None,
            previous_probes=previous,
            max_probes=max_probes,
        )

    first = offline.refine(probe([], 3), usage=Usage())
    assert 1 <= len(first.probes) <= 3 and first.decision is None
    assert not any(p.lower().startswith("tobin") for p in first.probes)  # already in the question
    again = offline.refine(probe(first.probes, 3), usage=Usage())
    assert not {p.split()[0] for p in again.probes} & {p.split()[0] for p in first.probes}
    assert offline.refine(probe([], 0), usage=Usage()).probes == []


def test_offline_encode_and_fuse(offline: OfflineReasoner) -> None:
    groups = [EncodeGroup("Where did Tobin hide the gold?", "veridical", items())]
    history = [
        {
            "probe": "p",
            "layer": "veridical",
            "evidence_ids": [],
            "cue": "Mara lit the lamp. Tobin hid the gold.",
            "round": 1,
        }
    ]
    out = offline.encode(
        EncodeRequest("Where did Tobin hide the gold?", groups, history, fuse=True), usage=Usage()
    )
    assert "cave" in out.cues[0] and out.fused and "gold" in out.fused


def test_sentence_vectors_memoise() -> None:
    emb = HashingEmbedder(64)
    sv = SentenceVectors(emb)
    sents, mat = sv.of_items(items())
    assert len(sents) == mat.shape[0] >= len(STORY_CHUNKS)
    before = sv.embedded
    sv.of_items(items())
    assert sv.embedded == before


# ---------------------------------------------------------------- LLM reasoner


def llm(*responses: object, structured: str = "off") -> tuple[LLMReasoner, ScriptedChatModel]:
    chat = ScriptedChatModel(responses=list(responses))
    settings = LLMSettings(backend="openai", structured=structured, retry_base_delay_s=0.0)
    return LLMReasoner(
        chat,
        offline_reasoner(SentenceVectors(HashingEmbedder(256))),
        settings=settings,
        passage_tokens=1000,
    ), chat


def test_llm_answer_tolerates_fences_and_counts_calls() -> None:
    r, chat = llm(
        'Sure!\n```json\n{"quote": "hidden the ship\'s gold in the cave beneath the lighthouse", '
        '"answer": "the cave", "sufficient": true, "confidence": "high", '
        '"evidence_ids": ["tale:c6", "bogus"]}\n```'
    )
    u = Usage()
    a = r.answer(AnswerRequest("Where?", "open", passages=items()), usage=u)
    # grounded: the quote is in c5 and holds the answer; the model's "high" is not used
    assert a["answer"] == "the cave" and a["confidence"] == 0.9
    assert a["support"] == ["tale:c5", "tale:c6"]  # the quoted passage first, then the cited one
    assert u.calls == 1 and u.tokens_in > 0 and u.tokens_out > 0


def test_llm_answer_reasks_once_on_malformed_json() -> None:
    r, chat = llm(
        "I think it is the cave.", '{"answer": "cave", "sufficient": true, "confidence": 0.8}'
    )
    u = Usage()
    a = r.answer(AnswerRequest("Where?", "open", passages=items()), usage=u)
    assert a["answer"] == "cave" and u.calls == 2
    assert "could not be used" in chat.prompts[-1]


def test_llm_answer_falls_back_to_offline_when_unusable() -> None:
    r, _ = llm("no json here", "still none")
    u = Usage()
    a = r.answer(AnswerRequest("Where did Tobin hide the gold?", "open", passages=items()), usage=u)
    assert a["reasoner"] == "llm->offline" and "cave" in a["answer"] and u.calls == 2


def test_llm_structured_output_path() -> None:
    r, chat = llm(
        AnswerOut(answer="B", sufficient=True, confidence=0.7), "B", structured="auto"
    )  # the second reply: the plain reading's first token (no log-probabilities here)
    a = r.answer(AnswerRequest("Which?", "multiple-choice", ["x", "y"], items()), usage=Usage())
    assert a["answer"] == "B" and a["choice"] == 1
    assert chat.structured_calls == [("AnswerOut", None)]


def test_llm_insufficient_and_formats() -> None:
    r, _ = llm(
        '{"answer": "", "sufficient": false, "confidence": 0.9}',
        '{"answer": "Option C", "sufficient": true, "confidence": 0.9}',
        "C",  # a closed answer's margin call (its endpoint returns no log-probabilities)
        '{"answer": "true", "sufficient": true, "confidence": 0.6}',
        "TRUE",
    )
    a = r.answer(AnswerRequest("Where?", "open", passages=items()), usage=Usage())
    assert not a["sufficient"] and a["confidence"] <= 0.5
    mc = r.answer(
        AnswerRequest("Which?", "multiple-choice", ["a", "b", "c"], items()), usage=Usage()
    )
    assert mc["answer"] == "C"
    claim = r.answer(AnswerRequest("Mara is brave.", "claim", passages=items()), usage=Usage())
    assert claim["answer"] == "TRUE"


def test_parsers_read_answers_as_the_metrics_do() -> None:
    assert parse_choice("(B) because", ["x", "y"]) == 1
    assert parse_choice("the brass key", ["a sword", "the brass key"]) == 1
    assert parse_choice("I think it was the brass key", ["a sword", "the brass key"]) == 1
    assert parse_choice("a sword or the brass key", ["a sword", "the brass key"]) is None
    assert parse_choice("E", ["a", "b"]) is None
    assert parse_claim("False, the key was silver") is False
    assert parse_claim("Not true: she stayed") is False
    assert parse_claim("maybe") is None and parse_claim("nothing is said") is None


def test_llm_encode_maps_blocks_and_fills_gaps() -> None:
    r, chat = llm('{"cues": [{"block": "b2", "findings": "second"}], "fused": "all together"}')
    groups = [
        EncodeGroup("q", "veridical", items()[:2]),
        EncodeGroup("q", "episodic", items()[2:4]),
    ]
    history = [{"probe": "p", "layer": "veridical", "evidence_ids": [], "cue": "old", "round": 1}]
    u = Usage()
    out = r.encode(
        EncodeRequest("Where did Tobin hide the gold?", groups, history, fuse=True), usage=u
    )
    assert out.cues[1] == "second" and out.cues[0]  # b1 filled extractively
    assert out.fused == "all together"
    # the filled-in block is a fallback: counted, reported beside the calls
    assert u.total("filled") == 1 and cost(u)["llm_fallbacks"] == 1
    assert (
        'block id="b1"' in chat.prompts[0] and "integrates the earlier findings" in chat.prompts[0]
    )


def test_llm_update_filters_unknown_ids() -> None:
    r, _ = llm(
        '{"decision": "answer", "next_query": "x", "signature": ["tale:e2", "nope", "tale:e2"], '
        '"evidence": [{"note": "n", "ids": ["tale:c1", "zzz"]}, {"note": "  "}]}'
    )
    sig = [{"unit_id": "tale:e0", "text": "s0", "chunk_ids": []}]
    cand = [{"unit_id": "tale:e2", "text": "s2", "chunk_ids": []}]
    out = r.update(
        UpdateRequest(
            question="Q",
            query="Q",
            signature=sig,
            candidates=cand,
            passages=items(),
            notes=[],
            k=5,
            rewrite=False,
        ),
        usage=Usage(),
    )
    assert out.decision == "ANSWER" and out.signature_ids == ["tale:e2"] and out.next_query is None
    assert out.notes == [("n", ["tale:c1"])]


def test_round_requests_name_every_field() -> None:
    with pytest.raises(TypeError):
        RefineRequest("Q", "Q", None, [], [], items())  # type: ignore[misc]
    req = UpdateRequest(question="Q", query="Q", passages=[], notes=[], signature=[], candidates=[])
    assert req.rewrite and req.k == 5  # UPDATE rewrites the query unless told otherwise


def test_roles_outside_llm_roles_make_no_call() -> None:
    chat = ScriptedChatModel(responses=[])
    settings = LLMSettings(backend="openai", structured="off", retry_base_delay_s=0.0)
    offline = offline_reasoner(SentenceVectors(HashingEmbedder(256)))
    r = LLMReasoner(chat, offline, settings=settings, passage_tokens=1000, roles=("answer",))
    u = Usage()
    req = RefineRequest(
        question="Where did Mara hide the gold?",
        query="q",
        passages=items(),
        notes=[],
        attempt=None,
        previous_probes=[],
        max_probes=2,
        rewrite=False,
    )
    probe = r.refine(req, usage=u)
    groups = [EncodeGroup("Where?", "veridical", items())]
    cues = r.encode(EncodeRequest("Where?", groups, [], fuse=True), usage=u)
    assert u.calls == 0 and not chat.calls  # both roles played by the extractive reasoner
    expected = offline.refine(req, usage=Usage())
    assert probe.probes == expected.probes and cues.cues and cues.cues[0]


def test_local_backend_plays_answer_and_update_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mindscape.context import LLM_ROLES, LOCAL_LLM_ROLES, Context
    from mindscape.deps import Deps
    from tests.fakes import FakeRetriever

    r = FakeRetriever()
    local = Deps(
        retriever=r,
        embedder=r.embedder,
        chat=ScriptedChatModel(),
        llm_settings=LLMSettings(backend="local"),
    )
    endpoint = Deps(
        retriever=r,
        embedder=r.embedder,
        chat=ScriptedChatModel(),
        llm_settings=LLMSettings(backend="openai"),
    )
    ctx = Context().resolved()
    assert local.reasoner(ctx).roles == frozenset(LOCAL_LLM_ROLES)  # type: ignore[attr-defined]
    assert endpoint.reasoner(ctx).roles == frozenset(LLM_ROLES)  # type: ignore[attr-defined]
    chosen = Context(llm_roles=["answer", "probe"]).resolved()
    assert local.reasoner(chosen).roles == {"answer", "probe"}  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="llm_roles must be among"):
        Context(llm_roles=["answer", "decide"])


def test_answer_prompt_keeps_memory_and_passages_within_the_passage_budget() -> None:
    chat = ScriptedChatModel(responses=['{"quote": "", "answer": "cave", "sufficient": false}'])
    settings = LLMSettings(backend="openai", structured="off", retry_base_delay_s=0.0)
    offline = offline_reasoner(SentenceVectors(HashingEmbedder(256)))
    r = LLMReasoner(chat, offline, settings=settings, passage_tokens=400)
    memory = [
        {
            "probe": f"probe {n}",
            "layer": "veridical",
            "evidence_ids": [],
            "cue": f"cue {n} " * 40,
            "round": 1,
        }
        for n in range(30)
    ]
    signature = [{"unit_id": f"tale:e{n}", "text": f"session {n} " * 60} for n in range(5)]
    r.answer(
        AnswerRequest("Where?", "open", passages=items(), notes=memory, signature=signature),  # type: ignore[arg-type]
        usage=Usage(),
    )
    prompt = chat.prompts[-1]
    sigma = prompt.split("<signature>")[1].split("</signature>")[0]
    assert "session 0 " in sigma and "session 4 " not in sigma  # σ's first sessions, a quarter
    assert len(sigma) // 4 <= 400 // 4 + 20
    between = prompt.split("<memory>")[1].split("</memory>")[0]
    assert "cue 29" in between and "cue 0 " not in between  # the latest findings are kept
    assert len(between) // 4 <= 400 // 4
    body = prompt.split("<passages>")[1].split("</passages>")[0]
    assert 0 < (len(sigma) + len(between) + len(body)) // 4 <= 400 + 70  # one budget for all


def test_an_attempt_records_the_passages_the_model_read() -> None:
    chat = ScriptedChatModel(responses=['{"quote": "", "answer": "cave", "sufficient": false}'])
    settings = LLMSettings(backend="openai", structured="off", retry_base_delay_s=0.0)
    offline = offline_reasoner(SentenceVectors(HashingEmbedder(256)))
    r = LLMReasoner(chat, offline, settings=settings, passage_tokens=200)
    passages = [{**p, "tokens": 60} for p in items()]  # 8 passages, 480 tokens: over budget
    attempt = r.answer(AnswerRequest("Where?", "open", passages=passages), usage=Usage())  # type: ignore[arg-type]
    prompt = chat.prompts[-1]
    read = attempt["read"]
    assert read, "the attempt names what it read"
    for p in passages:  # exactly the passages in the prompt, after the budget's cut
        assert (p["unit_id"] in read) == (p["text"] in prompt)
    assert len(read) < len(passages), "the budget cut some passages"


def test_a_request_may_widen_the_prompt_window() -> None:
    chat = ScriptedChatModel(responses=['{"quote": "", "answer": "cave", "sufficient": false}'] * 2)
    settings = LLMSettings(backend="openai", structured="off", retry_base_delay_s=0.0)
    offline = offline_reasoner(SentenceVectors(HashingEmbedder(256)))
    r = LLMReasoner(chat, offline, settings=settings, passage_tokens=200)
    passages = [{**p, "tokens": 60} for p in items()]
    narrow = r.answer(AnswerRequest("Where?", "open", passages=passages), usage=Usage())  # type: ignore[arg-type]
    wide = r.answer(
        AnswerRequest("Where?", "open", passages=passages, passage_tokens=300),  # type: ignore[arg-type]
        usage=Usage(),
    )
    assert len(narrow["read"]) == 3 and len(wide["read"]) == 5
    assert wide["read"][:3] == narrow["read"]  # the wider window reads the same ones first


def test_a_refused_request_is_counted_as_a_fallback() -> None:
    import httpx
    import openai

    refused = openai.BadRequestError(
        "prompt over the context size",
        response=httpx.Response(400, request=httpx.Request("POST", "http://127.0.0.1/v1")),
        body=None,
    )
    r, _ = llm(refused)
    u = Usage()
    a = r.answer(AnswerRequest("Where did Tobin hide the gold?", "open", passages=items()), usage=u)
    assert a["reasoner"] == "llm->offline" and "cave" in a["answer"]
    assert u.total("unusable") == 1  # shown as an LLM fallback in reports and ask's output
