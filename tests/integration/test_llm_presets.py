"""The LLM path for real: `langchain-openai` against scripted OpenAI-compatible replies
served on 127.0.0.1 (tests/fake_openai.py), with malformed JSON and an answer that needs two
refinement rounds, for the `mindscape` and `comorag` presets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.graphs.qa import build_qa_graph
from mindscape.llm import LLMSettings
from tests.fake_openai import FakeOpenAIServer, all_text
from tests.fakes import QAScript, qa_role
from tests.integration.conftest import QA_DOC

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("loopback_only")]

Q = "Who helped Cinderella pick the lentils out of the ashes?"
MALFORMED_ANSWER = "Final answer: {answer: 'pigeons', sufficient: maybe,"  # unusable: re-asked
SLOPPY_PROBE = (
    "```json\n{'decision': 'REFINE', 'probes': ['the white pigeons', 'the hazel tree',],}\n```"
)


def run(qa_deps: Deps, server: FakeOpenAIServer, preset: str, structured: str) -> dict[str, Any]:
    settings = LLMSettings(
        backend="openai",
        model="fake-model",
        base_url=server.base_url,
        api_key="sk-test",
        structured=structured,
        retry_base_delay_s=0.0,
        max_retries=2,
        timeout_s=20,
    )
    deps = Deps(store=qa_deps.store, embedder=qa_deps.embedder, llm_settings=settings)
    app = build_qa_graph(deps).compile(checkpointer=InMemorySaver())
    out = app.invoke(
        {"question": Q, "doc_id": QA_DOC},
        {"configurable": {"thread_id": preset}},
        # whole chunks (focus_tokens=0): these tests are about the loop, and a focused round
        # never shows again what a refused round read (tests/integration/test_qa_graph.py)
        context=Context(preset=preset, backend="llm", max_tokens=300_000, focus_tokens=0),
    )
    out["_usage"] = deps.usage
    return out


@pytest.mark.parametrize("preset,structured", [("mindscape", "auto"), ("comorag", "off")])
def test_llm_preset_refines_twice_then_answers(qa_deps: Deps, preset: str, structured: str) -> None:
    script = QAScript(
        answer="two white pigeons",
        refuse=2,
        replies={"answer": [MALFORMED_ANSWER], "probe": [SLOPPY_PROBE]},
    )
    with FakeOpenAIServer(script.request) as server:
        out = run(qa_deps, server, preset, structured)
        requests = list(server.requests)
    assert (
        out["answer"] == "two white pigeons"
        and out["sufficient"]
        and out["stop_reason"] == "answered"
    )
    assert out["rounds"] == 3
    assert [s["decision"] for s in out["trace"]] == ["REFINE", "REFINE", "ANSWER"]
    # the sloppy probe JSON was parsed: round 2 retrieved with its probes
    assert out["trace"][1]["queries"] == ["the white pigeons", "the hazel tree"]
    # every HTTP request is one counted call (the malformed answer was re-asked once)
    assert out["llm_calls"] == len(requests) == out["_usage"].calls
    roles = [qa_role(all_text(r)) for r in requests]
    assert roles.count("answer") == 4 and roles.count("probe") == 2
    assert any("could not be used" in all_text(r) for r in requests)
    served = sum((len(all_text(r)) + 3) // 4 for r in requests)  # what the server reported
    assert abs(out["tokens_in"] - served) <= len(requests)  # a parse failure's tokens are estimated
    if preset == "comorag":
        assert roles.count("encode") >= 3 and roles.count("fuse") >= 1
    else:
        assert roles.count("encode") <= 3 and "fuse" not in roles
    if structured == "auto":
        assert any("response_format" in r or "tools" in r for r in requests)
    evidence_ids = {c for e in out["evidence"] for c in e["chunk_ids"]}
    assert evidence_ids and all(c.startswith(f"{QA_DOC}:c") for c in evidence_ids)
    json.dumps({k: v for k, v in out.items() if k != "_usage"})  # the output is plain JSON data


def test_server_errors_are_retried_and_counted(qa_deps: Deps) -> None:
    from tests.fake_openai import fail_first

    script = QAScript(answer="the pigeons")
    with FakeOpenAIServer(fail_first(script.request, 500, 429)) as server:
        out = run(qa_deps, server, "mindscape", "off")
        n = len(server.requests)
    assert out["answer"] == "the pigeons" and out["rounds"] == 1
    assert out["_usage"].retries == 2 and out["llm_calls"] == n - 2
