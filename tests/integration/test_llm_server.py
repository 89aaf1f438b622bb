"""Real ``ChatOpenAI`` through :class:`mindscape.llm.LLM` against the local fake server.

Nothing leaves 127.0.0.1: an autouse fixture fails any socket connection elsewhere.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from pydantic import BaseModel

from mindscape.llm import LLM, LLMOutputError, LLMSettings
from tests.fake_openai import (
    FakeOpenAIServer,
    all_text,
    fail_first,
    last_user_text,
    serve,
    tool_call,
)
from tests.fakes import DictCache

pytestmark = pytest.mark.integration


class Answer(BaseModel):
    answer: str
    confidence: float


pytestmark = [pytestmark, pytest.mark.usefixtures("loopback_only")]


def _llm(base_url: str, *, cache: DictCache | None = None, **kw: Any) -> LLM:
    fields: dict[str, Any] = {
        "structured": "off",
        "retry_base_delay_s": 0.0,
        "max_retries": 2,
        "timeout_s": 10,
    }
    settings = LLMSettings(
        backend="openai",
        model="fake-model",
        base_url=base_url,
        api_key="sk-test-placeholder",
        **{**fields, **kw},
    )
    return LLM.from_settings(settings, cache=cache)


def test_plain_completion_counts_server_usage() -> None:
    reply = {"content": "Paris", "usage": {"prompt_tokens": 17, "completion_tokens": 2}}
    with FakeOpenAIServer([reply]) as server:
        llm = _llm(server.base_url)
        assert (
            llm.complete("Capital of France?", system="Answer briefly.", role="answer") == "Paris"
        )
    request = server.requests[0]
    assert request["model"] == "fake-model" and request["temperature"] == 0
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    row = llm.usage.by_role["answer"]
    assert (row["calls"], row["tokens_in"], row["tokens_out"], row["estimated"]) == (1, 17, 2, 0)


def test_serve_yields_base_url_and_lists_models() -> None:
    with serve(["hi"]) as base_url:
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
            models = json.load(response)
        assert [m["id"] for m in models["data"]] == ["fake-model"]
        assert _llm(base_url).complete("hello") == "hi"


def test_env_configured_llm_uses_placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with serve(["from env"]) as base_url:
        monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "openai")
        monkeypatch.setenv("MINDSCAPE_LLM_MODEL", "env-model")
        monkeypatch.setenv("MINDSCAPE_LLM_BASE_URL", base_url)
        llm = LLM.from_settings()
        assert llm.model_id == "env-model"
        assert llm.complete("q") == "from env"


def test_malformed_json_is_fixed_on_reask() -> None:
    script = [
        "Sure! The answer is Paris, quite confident.",
        '{"answer": "Paris", "confidence": 0.9}',
    ]
    with FakeOpenAIServer(script) as server:
        llm = _llm(server.base_url)
        assert llm.complete_json("Who?", schema=Answer, role="answer") == Answer(
            answer="Paris", confidence=0.9
        )
    reask = server.requests[1]["messages"]
    assert [m["role"] for m in reask] == ["user", "assistant", "user"]
    assert reask[1]["content"].startswith("Sure!") and "valid JSON" in reask[2]["content"]
    assert llm.usage.by_role["answer"]["calls"] == 2


def test_weak_model_json_is_parsed_without_reask() -> None:
    weak = "Here you go:\n```json\n{'answer': 'Paris', 'confidence': 1,}\n```"
    with FakeOpenAIServer([weak]) as server:
        llm = _llm(server.base_url)
        assert llm.complete_json("Who?", schema=Answer) == Answer(answer="Paris", confidence=1)
    assert len(server.requests) == 1


def test_still_malformed_after_reask_raises() -> None:
    with FakeOpenAIServer(["nope", "{broken"]) as server:
        with pytest.raises(LLMOutputError):
            _llm(server.base_url).complete_json("Who?", schema=Answer)
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [500, 429])
def test_transient_http_error_is_retried(status: int) -> None:
    with FakeOpenAIServer([{"status": status}, "recovered"]) as server:
        llm = _llm(server.base_url)
        assert llm.complete("q", role="answer") == "recovered"
    assert len(server.requests) == 2
    assert llm.usage.by_role["answer"]["retries"] == 1 and llm.usage.calls == 1


def test_persistent_server_error_surfaces() -> None:
    from mindscape.errors import EndpointError

    with FakeOpenAIServer([{"status": 500}] * 3) as server:
        with pytest.raises(EndpointError, match="HTTP 500"):
            _llm(server.base_url).complete("q")
    assert len(server.requests) == 3  # max_retries=2 → three attempts


def test_router_script_answers_by_role_with_initial_failures() -> None:
    def route(request: dict[str, Any]) -> str:
        if "You write probes" in all_text(request):
            return '["who is Ahab?", "where is the whale?"]'
        return f"answer to: {last_user_text(request)}"

    with FakeOpenAIServer(fail_first(route, 500, 429)) as server:
        llm = _llm(server.base_url)
        probes = llm.complete_json("Question: ...", system="You write probes.", role="probe")
        answer = llm.complete("Why?", system="You answer.", role="answer")
    assert probes == ["who is Ahab?", "where is the whale?"] and answer == "answer to: Why?"
    assert llm.usage.by_role["probe"]["retries"] == 2 and llm.usage.calls == 2


def test_json_schema_mode() -> None:
    with FakeOpenAIServer(['{"answer": "Ishmael", "confidence": 0.7}']) as server:
        llm = _llm(server.base_url, structured="json_schema")
        assert llm.complete_json("Narrator?", schema=Answer) == Answer(
            answer="Ishmael", confidence=0.7
        )
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Answer"
    assert llm.usage.calls == 1 and llm.usage.tokens_out > 0


def test_structured_call_is_retried_after_server_error() -> None:
    script = [{"status": 503}, '{"answer": "x", "confidence": 0.2}']
    with FakeOpenAIServer(script) as server:
        llm = _llm(server.base_url, structured="json_schema")
        assert llm.complete_json("q", schema=Answer, role="answer").confidence == 0.2
    assert all("response_format" in r for r in server.requests) and len(server.requests) == 2
    assert llm.usage.by_role["answer"]["retries"] == 1 and llm.usage.calls == 1


def test_auto_mode_uses_native_structured_output() -> None:
    with FakeOpenAIServer(['{"answer": "x", "confidence": 0}']) as server:
        assert (
            _llm(server.base_url, structured="auto").complete_json("q", schema=Answer).answer == "x"
        )
    assert "response_format" in server.requests[0]


def test_json_schema_mode_salvages_server_that_ignores_response_format() -> None:
    fenced = 'Sure:\n```json\n{"answer": "Ishmael", "confidence": 0.7}\n```'
    with FakeOpenAIServer([fenced]) as server:
        llm = _llm(server.base_url, structured="json_schema")
        assert llm.complete_json("Narrator?", schema=Answer).answer == "Ishmael"
    assert len(server.requests) == 1


def test_json_schema_mode_reasks_on_garbage() -> None:
    with FakeOpenAIServer(["no idea", '{"answer": "Ishmael", "confidence": 0.5}']) as server:
        llm = _llm(server.base_url, structured="json_schema")
        assert llm.complete_json("Narrator?", schema=Answer).confidence == 0.5
    assert "valid JSON" in last_user_text(server.requests[1])
    assert "response_format" in server.requests[1]


def test_function_calling_mode() -> None:
    with FakeOpenAIServer(
        [tool_call("Answer", {"answer": "Queequeg", "confidence": 0.8})]
    ) as server:
        llm = _llm(server.base_url, structured="function_calling")
        assert llm.complete_json("Harpooneer?", schema=Answer) == Answer(
            answer="Queequeg", confidence=0.8
        )
    request = server.requests[0]
    assert request["tools"][0]["function"]["name"] == "Answer"
    assert request["tool_choice"]["function"]["name"] == "Answer"


def test_function_calling_bad_arguments_are_reasked() -> None:
    script = [
        tool_call("Answer", '{"answer": "Queequeg"'),
        tool_call("Answer", {"answer": "Q", "confidence": 1}),
    ]
    with FakeOpenAIServer(script) as server:
        llm = _llm(server.base_url, structured="function_calling")
        assert llm.complete_json("Harpooneer?", schema=Answer).answer == "Q"
    assert len(server.requests) == 2


def test_auto_mode_falls_back_when_server_rejects_response_format() -> None:
    def route(request: dict[str, Any]) -> Any:
        if "response_format" in request:
            return {"status": 400, "message": "response_format is not supported"}
        return '{"answer": "text path", "confidence": 0.1}'

    with FakeOpenAIServer(route) as server:
        llm = _llm(server.base_url, structured="auto")
        assert llm.complete_json("q", schema=Answer).answer == "text path"
        assert llm.complete_json("q2", schema=Answer).answer == "text path"
    assert ["response_format" in r for r in server.requests] == [True, False, False]


def test_cache_spares_the_server() -> None:
    cache = DictCache()
    with FakeOpenAIServer(['{"answer": "a", "confidence": 1}']) as server:
        first = _llm(server.base_url, cache=cache).complete_json("q", schema=Answer)
        second_llm = _llm(server.base_url, cache=cache)
        assert second_llm.complete_json("q", schema=Answer) == first
    assert (
        len(server.requests) == 1
        and second_llm.usage.cache_hits == 1
        and second_llm.usage.calls == 0
    )


def test_concurrent_calls_against_server() -> None:
    from concurrent.futures import ThreadPoolExecutor

    def route(request: dict[str, Any]) -> str:
        return f"echo {last_user_text(request)}"

    with FakeOpenAIServer(fail_first(route, 500)) as server:
        llm = _llm(server.base_url)
        with ThreadPoolExecutor(4) as pool:
            out = list(pool.map(lambda i: llm.complete(f"q{i}", role="bulk"), range(4)))
        assert sorted(out) == [f"echo q{i}" for i in range(4)]
    assert llm.usage.by_role["bulk"]["calls"] == 4 and llm.usage.retries == 1


def test_the_output_cap_reaches_llama_cpp_as_max_tokens() -> None:
    """llama-cpp-python's server ignores `max_completion_tokens`, the name ChatOpenAI sends:
    the local backend's client sends the cap as `max_tokens`; an endpoint keeps OpenAI's."""
    with FakeOpenAIServer(['{"answer": "Paris", "confidence": 0.9}'] * 2) as server:
        settings = LLMSettings(
            backend="local", model="local", base_url=server.base_url, structured="off"
        )
        local = LLM.from_settings(settings)
        local.complete("Capital of France?", role="answer", max_tokens=64)
        endpoint = _llm(server.base_url)
        endpoint.complete("Capital of France?", role="answer", max_tokens=64)
    to_local, to_endpoint = server.requests
    assert to_local.get("max_tokens") == 64 and "max_completion_tokens" not in to_local
    assert to_endpoint.get("max_completion_tokens") == 64 and "max_tokens" not in to_endpoint
