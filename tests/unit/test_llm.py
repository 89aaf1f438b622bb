"""Unit tests for mindscape.llm: JSON extraction, usage, settings and the LLM wrapper."""

from __future__ import annotations

import math
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from mindscape.llm import (
    LLM,
    PLACEHOLDER_API_KEY,
    LLMOutputError,
    LLMSettings,
    Usage,
    extract_json,
    is_transient,
    make_chat_model,
    strip_reasoning,
    validate_as,
)
from tests.fakes import DictCache, ScriptedChatModel, ScriptExhausted, scripted

SRC = Path(__file__).resolve().parents[2] / "src"


class Decision(BaseModel):
    sufficient: bool
    followups: list[str] = []


class Probes(BaseModel):
    probes: list[str]


# --------------------------------------------------------------------------- helpers


def _settings(**kw: Any) -> LLMSettings:
    base: dict[str, Any] = {"structured": "off", "retry_base_delay_s": 0.0, "max_retries": 2}
    return LLMSettings(**{**base, **kw})


def _llm(chat: ScriptedChatModel, **kw: Any) -> LLM:
    settings = kw.pop("settings", None) or _settings()
    return LLM(chat, settings=settings, **kw)


def _request() -> httpx.Request:
    # Real httpx objects: openai's error classes read their headers (3.60+).
    return httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def _connection_error() -> openai.APIConnectionError:
    return openai.APIConnectionError(request=_request())


def _status_error(cls: type[openai.APIStatusError], status: int) -> openai.APIStatusError:
    response = httpx.Response(status, request=_request())
    return cls(f"HTTP {status}", response=response, body=None)


class NoStructuredChat(ScriptedChatModel):
    """A scripted model without native structured output."""

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


# --------------------------------------------------------------------------- extract_json


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2, 3]", [1, 2, 3]),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here it is:\n```json\n{"a": [1, 2,],}\n```\nAnything else?', {"a": [1, 2]}),
        ('```json\n{"a": "unclosed fence"}', {"a": "unclosed fence"}),
        (
            'Here is the answer: {"answer": "Paris", "ok": true} as requested.',
            {"answer": "Paris", "ok": True},
        ),
        ('{"a": 1, "b": [1, 2, ], }', {"a": 1, "b": [1, 2]}),
        ("{'a': 'it\\'s', 'b': \"x\"}", {"a": "it's", "b": "x"}),
        ("{'quote': 'he said \"hi\"'}", {"quote": 'he said "hi"'}),
        ("{'a': True, 'b': False, 'c': None}", {"a": True, "b": False, "c": None}),
        ('{answer: "x", n: 2}', {"answer": "x", "n": 2}),
        ('{"a": 1, // a comment\n "b": 2 /* another */}', {"a": 1, "b": 2}),
        ('{"a": "line one\nline two"}', {"a": "line one\nline two"}),
        (
            '{"outer": {"inner": [{"x": 1}, {"y": [2, {"z": null}]}]}}',
            {"outer": {"inner": [{"x": 1}, {"y": [2, {"z": None}]}]}},
        ),
        ('Draft: {"a": 1}\nFinal: {"a": 2}', {"a": 2}),
        ('{"a": 1} and then a truncated {"b": [1, 2', [{"a": 1}, {"b": [1, 2]}]),
        ('<think>maybe {"x": 0}?</think>\n{"final": true}', {"final": True}),
        ("Probes: ['who', 'where']", ["who", "where"]),
        ('Use {"braces": "}{ inside strings"} fine', {"braces": "}{ inside strings"}),
        ("Here's what I found, it's [1, 2]", [1, 2]),
        ("Note: don't panic. {'a': 1}", {"a": 1}),
        ('"just a string"', "just a string"),
        ("42", 42),
    ],
)
def test_extract_json_tolerates_weak_model_output(text: str, expected: Any) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", "``` ```", "I think it is the cave."])
def test_extract_json_raises_clear_error(text: str) -> None:
    with pytest.raises(LLMOutputError, match="no JSON") as info:
        extract_json(text)
    assert info.value.text == text


def test_extract_json_is_fast_on_pathological_text() -> None:
    start = time.perf_counter()
    assert extract_json("it is " * 5000 + '{"a": 1}') == {"a": 1}
    assert isinstance(extract_json("[unclosed " * 5000), list)  # repaired, not a hang
    assert time.perf_counter() - start < 2.0


def test_schema_validation_takes_the_last_of_several_objects() -> None:
    assert validate_as(Decision, extract_json('{"x": 1} then {"sufficient": false}')) == Decision(
        sufficient=False
    )


def test_extract_json_prefers_last_fenced_block() -> None:
    text = 'Example:\n```json\n{"v": 1}\n```\nActual:\n```json\n{"v": 2}\n```'
    assert extract_json(text) == {"v": 2}


def test_strip_reasoning() -> None:
    assert strip_reasoning("<think>\nhmm\n</think>\n Paris ") == "Paris"


def test_validate_as_unwraps_common_mistakes() -> None:
    assert validate_as(Decision, [{"sufficient": True}]) == Decision(sufficient=True)
    assert validate_as(Decision, {"Decision": {"sufficient": False}}) == Decision(sufficient=False)
    assert validate_as(Probes, ["a", "b"]) == Probes(probes=["a", "b"])
    with pytest.raises(ValidationError):
        validate_as(Decision, {"wrong": 1})


# --------------------------------------------------------------------------- Usage


def test_usage_totals_roles_and_merge() -> None:
    usage = Usage()
    usage.add("answer", calls=1, tokens_in=10, tokens_out=2)
    usage.add("answer", cache_hits=1)
    usage.add("probe", calls=2, tokens_in=5, tokens_out=5, estimated=2)
    other = Usage()
    other.add("probe", calls=1, tokens_in=1, tokens_out=1, retries=3)
    assert usage.merge(other) is usage
    d = usage.as_dict()
    assert (d["calls"], d["tokens_in"], d["tokens_out"], d["cache_hits"], d["retries"]) == (
        4,
        16,
        8,
        1,
        3,
    )
    assert d["by_role"]["probe"]["calls"] == 3 and d["by_role"]["answer"]["cache_hits"] == 1
    assert usage.calls == 4 and usage.tokens_in == 16 and usage.tokens_out == 8
    assert (usage.cache_hits, usage.retries) == (1, 3)
    with pytest.raises(TypeError):
        usage.add("x", bogus=1)
    with pytest.raises(AttributeError, match="Usage.add"):
        usage.calls = 0  # a total is read, never set


def test_usage_is_thread_safe_and_picklable() -> None:
    usage = Usage()

    def work() -> None:
        for _ in range(2000):
            usage.add("r", calls=1, tokens_in=2)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert usage.calls == 16000 and usage.tokens_in == 32000
    clone = pickle.loads(pickle.dumps(usage))
    assert clone.as_dict() == usage.as_dict()
    clone.add("r", calls=1)
    assert clone.calls == usage.calls + 1


# --------------------------------------------------------------------------- settings


_ENV_VARS = (
    "MINDSCAPE_LLM_BACKEND",
    "MINDSCAPE_LLM_MODEL",
    "MINDSCAPE_LLM_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "MINDSCAPE_LLM_STRUCTURED",
    "MINDSCAPE_LLM_TIMEOUT_S",
    "MINDSCAPE_LLM_MAX_RETRIES",
    "MINDSCAPE_LOCAL_MODEL",
    "MINDSCAPE_LOCAL_THREADS",
    "MINDSCAPE_LOCAL_CTX",
    "MINDSCAPE_INDEX_LLM",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_settings_defaults(clean_env: pytest.MonkeyPatch) -> None:
    s = LLMSettings.from_env()
    assert s == LLMSettings()
    assert (s.backend, s.temperature, s.structured, s.base_url, s.api_key) == (
        "auto",
        0.0,
        "auto",
        None,
        None,
    )


def test_settings_env_then_explicit_precedence(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("MINDSCAPE_LLM_BACKEND", "OpenAI")
    clean_env.setenv("MINDSCAPE_LLM_MODEL", "env-model")
    clean_env.setenv("OPENAI_BASE_URL", "http://openai-base/v1")
    clean_env.setenv("MINDSCAPE_LLM_BASE_URL", "http://mindscape-base/v1")
    clean_env.setenv("OPENAI_API_KEY", "sk-env")
    clean_env.setenv("MINDSCAPE_LLM_TIMEOUT_S", "12.5")
    clean_env.setenv("MINDSCAPE_LLM_MAX_RETRIES", "7")
    clean_env.setenv("MINDSCAPE_LLM_STRUCTURED", "function_calling")
    s = LLMSettings.from_env()
    assert (s.backend, s.model, s.base_url, s.api_key) == (
        "openai",
        "env-model",
        "http://mindscape-base/v1",
        "sk-env",
    )
    assert (s.timeout_s, s.max_retries, s.structured) == (12.5, 7, "function_calling")
    explicit = LLMSettings.from_env(
        model="arg-model", base_url="http://arg/v1", max_retries=0, api_key=None
    )
    assert (explicit.model, explicit.base_url, explicit.max_retries) == (
        "arg-model",
        "http://arg/v1",
        0,
    )
    assert explicit.api_key == "sk-env"  # None means "not given": the env value stays


def test_settings_openai_base_url_fallback_and_empty_values(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_BASE_URL", "http://fallback/v1")
    clean_env.setenv("MINDSCAPE_LLM_MODEL", "")
    s = LLMSettings.from_env()
    assert s.base_url == "http://fallback/v1" and s.model is None
    assert s.model_name() == "gpt-4o-mini"
    assert LLMSettings(backend="local").model_name() == "local"


def test_settings_from_explicit_mapping_ignores_os_environ(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("MINDSCAPE_LLM_MODEL", "from-os")
    assert LLMSettings.from_env({"MINDSCAPE_LLM_MODEL": "from-map"}).model == "from-map"


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="backend"):
        LLMSettings(backend="anthropic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="structured"):
        LLMSettings(structured="maybe")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown"):
        LLMSettings.from_env({}, modle="typo")


def test_api_key_resolution_and_secrecy(clean_env: pytest.MonkeyPatch) -> None:
    local = LLMSettings(backend="openai", base_url="http://127.0.0.1:8000/v1")
    assert local.resolve_api_key() == PLACEHOLDER_API_KEY
    assert LLMSettings(backend="openai").resolve_api_key() is None
    assert (
        LLMSettings(backend="openai", base_url="https://api.openai.com/v1").resolve_api_key()
        is None
    )
    clean_env.setenv("OPENAI_API_KEY", "sk-env")
    assert local.resolve_api_key() == "sk-env"
    secret = LLMSettings(api_key="sk-secret")
    assert secret.resolve_api_key() == "sk-secret"
    assert "sk-secret" not in repr(secret) and "api_key" not in secret.as_dict()


def test_make_chat_model(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="extractive"):
        make_chat_model(LLMSettings(backend="extractive"))
    with pytest.raises(ValueError, match="API key"):
        make_chat_model(LLMSettings(backend="openai"))
    chat = make_chat_model(
        LLMSettings(backend="openai", model="m1", base_url="http://127.0.0.1:9/v1", timeout_s=3)
    )
    assert type(chat).__name__ == "ChatOpenAI"
    assert (chat.model_name, chat.max_retries, chat.temperature) == ("m1", 0, 0.0)  # type: ignore[attr-defined]
    assert chat.openai_api_key.get_secret_value() == PLACEHOLDER_API_KEY  # type: ignore[attr-defined]


def test_module_import_is_light() -> None:
    code = (
        "import sys, mindscape.llm; heavy = [m for m in ('langchain_openai', 'openai', 'langchain_core', "
        "'pydantic') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(SRC)},
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- LLM: text


def test_complete_counts_reported_tokens_per_role() -> None:
    chat = scripted("Paris", "<think>hmm</think>London")
    llm = _llm(chat)
    assert llm.complete("Capital of France?", system="Be brief.", role="answer") == "Paris"
    assert llm.complete("Capital of UK?", role="probe") == "London"
    assert chat.calls[0] == [
        SystemMessage(content="Be brief."),
        HumanMessage(content="Capital of France?"),
    ]
    by_role = llm.usage.as_dict()["by_role"]
    # fake usage: ceil(chars / 4) per message
    assert by_role["answer"]["tokens_in"] == 3 + 5 and by_role["answer"]["tokens_out"] == 2
    assert (
        by_role["probe"]["calls"] == 1
        and llm.usage.calls == 2
        and llm.usage.as_dict()["estimated"] == 0
    )


def test_complete_estimates_tokens_without_usage_metadata() -> None:
    chat = scripted("four", report_usage=False)
    llm = _llm(chat, count_tokens=lambda text: len(text.split()))
    llm.complete("one two three", role="x")
    row = llm.usage.by_role["x"]
    assert (row["tokens_in"], row["tokens_out"], row["estimated"]) == (3, 1, 1)


def test_complete_uses_cache() -> None:
    cache = DictCache()
    chat = scripted("first answer")
    llm = _llm(chat, cache=cache)
    assert llm.complete("q", role="answer") == "first answer"
    assert llm.complete("q", role="answer") == "first answer"  # no second scripted answer needed
    assert len(chat.calls) == 1
    assert llm.usage.calls == 1 and llm.usage.cache_hits == 1
    assert llm.usage.by_role["answer"]["cache_hits"] == 1
    assert cache.data == {llm.cache_key("q"): "first answer"}


def _with_logprobs(text: str, *logprobs: float) -> AIMessage:
    """A reply as an OpenAI-compatible server sends it with ``logprobs=True``."""
    tokens = [
        {"token": f"t{n}", "logprob": lp, "top_logprobs": []} for n, lp in enumerate(logprobs)
    ]
    return AIMessage(content=text, response_metadata={"logprobs": {"content": tokens}})


def test_complete_scored_reads_the_replys_geometric_mean_token_probability() -> None:
    cache = DictCache()
    chat = scripted(_with_logprobs("the pigeons", -0.1, -0.5), "no logprobs here")
    llm = _llm(chat, cache=cache)
    text, confidence = llm.complete_scored("q", role="answer")
    assert text == "the pigeons" and confidence == pytest.approx(math.exp(-0.3))
    assert llm.complete_scored("q", role="answer") == (text, confidence)  # cached, with it
    assert len(chat.calls) == 1 and llm.usage.cache_hits == 1
    assert llm.complete_scored("other") == ("no logprobs here", None)  # endpoint gave none
    assert llm.cache_key("q") not in cache.data  # apart from complete's plain-text entries


def test_cache_key_components() -> None:
    llm = _llm(scripted())
    keys = {
        llm.cache_key("p"),
        llm.cache_key("p", system="s"),
        llm.cache_key("p2"),
        llm.cache_key("p", schema_name="Decision"),
        _llm(scripted(model_name="other")).cache_key("p"),
    }
    assert len(keys) == 5 and all(len(k) == 64 for k in keys)


def test_a_sampled_client_decodes_and_caches_on_its_own() -> None:
    """`sampled` copies the chat model with the decoding fields; its answers are cached under
    keys of their own (N sampled paths never collapse into one cached answer), and it shares
    the cache, the ledger and the unsampled keys of its parent."""
    cache = DictCache()
    chat = scripted("greedy", "path 1", "path 2")
    llm = _llm(chat, cache=cache)
    one, two = (llm.sampled(temperature=0.7, top_p=0.9, seed=s) for s in (1, 2))
    assert (one.chat.temperature, one.chat.top_p, one.chat.seed) == (0.7, 0.9, 1)
    assert llm.decoding == {} and llm.chat is chat
    assert [c.complete("q") for c in (llm, one, two)] == ["greedy", "path 1", "path 2"]
    assert [c.complete("q") for c in (llm, one, two)] == ["greedy", "path 1", "path 2"]  # cached
    assert len(cache.data) == 3 and llm.usage.calls == 3 and llm.usage.cache_hits == 3
    assert llm.cache_key("q") == _llm(scripted()).cache_key("q")  # unsampled keys unchanged


def test_a_client_over_a_cached_prompt_counts_its_input_as_cached() -> None:
    """An answer drawn again over the prompt just read costs its output tokens: its input
    tokens go to ``tokens_cached``, not ``tokens_in`` (which the token budget counts)."""
    llm = _llm(scripted("greedy", "again"))
    again = llm.sampled(cached_prompt=True, temperature=0.8, seed=1)
    llm.complete("the same prompt")
    first_in = llm.usage.tokens_in
    again.complete("the same prompt")
    assert first_in > 0 and llm.usage.tokens_in == first_in
    assert llm.usage.total("tokens_cached") == first_in and llm.usage.calls == 2
    assert not llm.cached_prompt and not llm.sampled(seed=2).cached_prompt


def test_complete_and_complete_json_do_not_share_cache_entries() -> None:
    cache = DictCache()
    llm = _llm(scripted('```json\n{"a": 1}\n```', '{"a": 1}'), cache=cache)
    assert llm.complete("p") == '```json\n{"a": 1}\n```'
    assert llm.complete_json("p") == {"a": 1}
    assert llm.usage.calls == 2 and llm.usage.cache_hits == 0


# --------------------------------------------------------------------------- LLM: JSON via text


def test_complete_json_parses_fenced_prose() -> None:
    llm = _llm(scripted('Sure:\n```json\n{"sufficient": true, "followups": ["who",],}\n```'))
    result = llm.complete_json("decide", schema=Decision, role="refine")
    assert result == Decision(sufficient=True, followups=["who"])
    assert llm.usage.calls == 1


def test_complete_json_without_schema_returns_data() -> None:
    llm = _llm(scripted("Probes: ['a', 'b']"))
    assert llm.complete_json("probes?") == ["a", "b"]


def test_complete_json_reasks_once_on_malformed_json() -> None:
    chat = scripted("I think it is sufficient.", '{"sufficient": false, "followups": ["where"]}')
    llm = _llm(chat)
    assert llm.complete_json("decide", system="sys", schema=Decision, role="refine") == Decision(
        sufficient=False, followups=["where"]
    )
    assert llm.usage.by_role["refine"]["calls"] == 2
    second = chat.calls[1]
    assert second[:2] == [SystemMessage(content="sys"), HumanMessage(content="decide")]
    assert second[2] == AIMessage(content="I think it is sufficient.")
    assert "valid JSON" in chat.prompts[1] and "sufficient, followups" in chat.prompts[1]


def test_complete_json_reasks_on_schema_mismatch() -> None:
    chat = scripted('{"enough": true}', '{"sufficient": true}')
    llm = _llm(chat)
    assert llm.complete_json("decide", schema=Decision) == Decision(sufficient=True)
    assert "sufficient: Field required" in chat.prompts[1]


def test_complete_json_gives_up_after_one_reask() -> None:
    chat = scripted("no", "still no", "never reached")
    llm = _llm(chat, cache=(cache := DictCache()))
    with pytest.raises(LLMOutputError, match="after one re-ask") as info:
        llm.complete_json("decide", schema=Decision, role="refine")
    assert info.value.text == "still no"
    assert len(chat.calls) == 2 and cache.data == {}
    assert llm.usage.calls == 2


def test_complete_json_cache_round_trip() -> None:
    cache = DictCache()
    chat = scripted('{"sufficient": true, "followups": []}')
    llm = _llm(chat, cache=cache)
    first = llm.complete_json("decide", schema=Decision, role="refine")
    again = llm.complete_json("decide", schema=Decision, role="refine")
    assert first == again == Decision(sufficient=True)
    assert len(chat.calls) == 1 and llm.usage.cache_hits == 1 and llm.usage.calls == 1
    assert list(cache.data) == [llm.cache_key("decide", schema_name="Decision")]


def test_stale_cache_entry_is_recomputed() -> None:
    llm = _llm(scripted('{"sufficient": true}'))
    key = llm.cache_key("decide", schema_name="Decision")
    llm.cache = DictCache({key: '{"old_shape": 1}'})
    assert llm.complete_json("decide", schema=Decision) == Decision(sufficient=True)
    assert (
        llm.usage.cache_hits == 0 and llm.cache.data[key] == '{"sufficient": true, "followups": []}'
    )  # type: ignore[union-attr]


def test_callable_responses_route_on_prompt() -> None:
    def route(prompt: str) -> str:
        return '{"probes": ["q1"]}' if "probe" in prompt else "plain"

    llm = _llm(scripted(route, route))
    assert llm.complete_json("write a probe", schema=Probes).probes == ["q1"]
    assert llm.complete("other") == "plain"


def test_script_exhausted_is_loud() -> None:
    with pytest.raises(ScriptExhausted):
        _llm(scripted()).complete("anything")


# --------------------------------------------------------------------------- LLM: structured output


def test_structured_output_path_returns_pydantic_object() -> None:
    chat = scripted(Decision(sufficient=True, followups=["a"]))
    llm = _llm(chat, settings=_settings(structured="auto"))
    assert llm.complete_json("decide", schema=Decision, role="refine") == Decision(
        sufficient=True, followups=["a"]
    )
    assert chat.structured_calls == [("Decision", None)]
    assert llm.usage.by_role["refine"]["calls"] == 1 and llm.usage.tokens_out > 0


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_structured_output_explicit_method(method: str) -> None:
    chat = scripted('{"sufficient": false}')
    llm = _llm(chat, settings=_settings(structured=method))
    assert llm.complete_json("decide", schema=Decision) == Decision(sufficient=False)
    assert chat.structured_calls == [("Decision", method)]


def test_structured_parse_error_is_salvaged_from_raw_text() -> None:
    chat = scripted('```json\n{"sufficient": true,}\n```')
    llm = _llm(chat, settings=_settings(structured="auto"))
    assert llm.complete_json("decide", schema=Decision) == Decision(sufficient=True)
    assert len(chat.calls) == 1


def test_structured_malformed_answer_is_reasked() -> None:
    chat = scripted("garbage", Decision(sufficient=True))
    llm = _llm(chat, settings=_settings(structured="json_schema"))
    assert llm.complete_json("decide", schema=Decision) == Decision(sufficient=True)
    assert len(chat.structured_calls) == 2 and "valid JSON" in chat.prompts[1]


def test_structured_not_implemented_falls_back_to_text() -> None:
    chat = NoStructuredChat(responses=['{"sufficient": true}', '{"sufficient": false}'])
    llm = _llm(chat, settings=_settings(structured="json_schema"))
    assert llm.complete_json("a", schema=Decision) == Decision(sufficient=True)
    assert llm.complete_json("b", schema=Decision) == Decision(sufficient=False)
    assert chat.structured_calls == []


def test_auto_mode_falls_back_when_server_rejects_structured_requests() -> None:
    chat = scripted(
        _status_error(openai.BadRequestError, 400), '{"sufficient": true}', '{"sufficient": false}'
    )
    llm = _llm(chat, settings=_settings(structured="auto"))
    assert llm.complete_json("a", schema=Decision) == Decision(sufficient=True)
    assert llm.complete_json("b", schema=Decision) == Decision(sufficient=False)
    assert len(chat.structured_calls) == 1  # structured output stays off afterwards


def test_explicit_mode_surfaces_rejected_structured_requests() -> None:
    chat = scripted(_status_error(openai.BadRequestError, 400))
    llm = _llm(chat, settings=_settings(structured="function_calling"))
    with pytest.raises(openai.BadRequestError):
        llm.complete_json("a", schema=Decision)


def test_structured_off_never_uses_structured_output() -> None:
    chat = scripted('{"sufficient": true}')
    _llm(chat, settings=_settings(structured="off")).complete_json("a", schema=Decision)
    assert chat.structured_calls == []


# --------------------------------------------------------------------------- LLM: retries


@pytest.mark.parametrize(
    "error",
    [
        _connection_error(),
        openai.APITimeoutError(request=_request()),
        _status_error(openai.RateLimitError, 429),
        _status_error(openai.InternalServerError, 500),
    ],
    ids=["connection", "timeout", "rate_limit", "server_error"],
)
def test_transient_errors_are_retried_with_backoff(error: Exception) -> None:
    delays: list[float] = []
    chat = scripted(error, error, "ok")
    settings = _settings(max_retries=3, retry_base_delay_s=0.25, retry_max_delay_s=0.4)
    llm = LLM(chat, settings=settings, sleep=delays.append)
    assert llm.complete("q", role="answer") == "ok"
    # exponential backoff capped at 0.4 s, plus up to 0.25 s of jitter
    assert len(delays) == 2
    assert 0.25 <= delays[0] <= 0.5 and 0.4 <= delays[1] <= 0.65
    assert llm.usage.by_role["answer"]["retries"] == 2 and llm.usage.calls == 1


def test_retries_are_bounded_then_one_error_names_the_endpoint_not_the_key() -> None:
    from mindscape.errors import EndpointError

    chat = scripted(*[_connection_error() for _ in range(3)], "never")
    settings = _settings(
        max_retries=2, base_url="http://user:pw@127.0.0.1:9/v1?k=1", api_key="sk-SECRET"
    )
    llm = LLM(chat, settings=settings, sleep=lambda _: None)
    with pytest.raises(EndpointError) as err:
        llm.complete("q")
    assert len(chat.calls) == 3 and llm.usage.retries == 2
    msg = str(err.value)
    assert "http://127.0.0.1:9/v1" in msg and "3 times" in msg and "APIConnectionError" in msg
    assert "SECRET" not in msg and "pw" not in msg and "k=1" not in msg


def test_a_refused_key_is_one_error_without_retries() -> None:
    from mindscape.errors import EndpointError

    chat = scripted(_status_error(openai.AuthenticationError, 401), "never")
    llm = _llm(chat)
    with pytest.raises(EndpointError, match="refused the request .*HTTP 401"):
        llm.complete("q")
    assert len(chat.calls) == 1 and llm.usage.retries == 0
    assert not is_transient(ValueError("x")) and is_transient(_connection_error())


# --------------------------------------------------------------------------- LLM: threads


def test_concurrent_calls_share_one_usage() -> None:
    usage = Usage()
    llm_a = _llm(scripted(*["a"] * 5), usage=usage)
    llm_b = _llm(scripted(*["b"] * 5), usage=usage)

    from concurrent.futures import ThreadPoolExecutor

    jobs = [(llm_a, f"qa{i}", "a") for i in range(5)] + [(llm_b, f"qb{i}", "b") for i in range(5)]
    with ThreadPoolExecutor(4) as pool:
        out = list(pool.map(lambda j: j[0].complete(j[1], role=j[2]), jobs))
    assert sorted(out) == ["a"] * 5 + ["b"] * 5
    assert usage.calls == 10 and usage.by_role["a"]["calls"] == 5
