"""Shared test fakes. Each section belongs to the module it fakes; add new sections below."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, Field, ValidationError

# =====================================================================================
# LLM layer fakes (mindscape.llm): ScriptedChatModel, ScriptExhausted, DictCache
# =====================================================================================

#: A scripted response: text, a pydantic object, a dict (structured output), an
#: AIMessage, an exception instance (raised), or a callable of the prompt text
#: returning any of these.
Scripted = Any


class ScriptExhausted(AssertionError):
    """The test asked the fake model more often than it scripted answers."""


def _tokens(text: str) -> int:
    """The fake's deterministic token count: one per started 4 characters."""
    return (len(text) + 3) // 4


def _prompt_of(messages: Sequence[BaseMessage]) -> str:
    """The text of the last human message (what scripted callables receive)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return str(message.text)
    return str(messages[-1].text) if messages else ""


def _as_messages(value: Any) -> list[BaseMessage]:
    """Coerce a runnable input (str, PromptValue, message list) to messages."""
    if isinstance(value, str):
        return [HumanMessage(content=value)]
    if hasattr(value, "to_messages"):
        return list(value.to_messages())
    return list(value)


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a queue, for offline tests of LLM roles.

    ``responses`` are consumed in order by ``invoke`` and by the runnable returned from
    ``with_structured_output``. Every call records the messages it got (``calls``), the
    last human message (``prompts``) and, for structured calls, ``(schema name,
    method)`` in ``structured_calls``. AIMessages carry ``usage_metadata`` (tokens
    = ceil(chars / 4)) unless ``report_usage`` is False.
    """

    responses: list[Any] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    structured_calls: list[tuple[str, str | None]] = Field(default_factory=list)
    report_usage: bool = True
    model_name: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def queue(self, *responses: Scripted) -> ScriptedChatModel:
        """Append responses to the script; returns self."""
        self.responses.extend(responses)
        return self

    def _next(self, messages: Sequence[BaseMessage]) -> Any:
        """Record the call and return the next scripted item (callables resolved)."""
        prompt = _prompt_of(messages)
        self.calls.append(list(messages))
        self.prompts.append(prompt)
        if not self.responses:
            raise ScriptExhausted(f"no scripted response left for prompt {prompt[:200]!r}")
        item = self.responses.pop(0)
        if callable(item) and not isinstance(item, (BaseModel, BaseException, type)):
            item = item(prompt)
        if isinstance(item, BaseException):
            raise item
        return item

    def _message(self, messages: Sequence[BaseMessage], content: str) -> AIMessage:
        """An AIMessage with usage metadata computed from the exchange."""
        if not self.report_usage:
            return AIMessage(content=content)
        tokens_in = sum(_tokens(str(m.text)) for m in messages)
        tokens_out = _tokens(content)
        return AIMessage(
            content=content,
            usage_metadata={
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        )

    def _to_ai(self, messages: Sequence[BaseMessage], item: Any) -> AIMessage:
        if isinstance(item, AIMessage):
            return item
        if isinstance(item, BaseModel):
            return self._message(messages, item.model_dump_json())
        if isinstance(item, (dict, list)):
            return self._message(messages, json.dumps(item))
        return self._message(messages, str(item))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._to_ai(messages, self._next(messages))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """Tools are ignored: scripted answers decide what happens."""
        return self

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: str | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, Any]:
        """A runnable popping the next item and returning it as ``schema``.

        Strings are parsed strictly (``model_validate_json``); a failure becomes
        ``parsing_error`` with ``include_raw=True`` and is raised otherwise, like
        langchain's own structured-output runnables.
        """
        name = getattr(schema, "__name__", None) or str(schema.get("title", "schema"))  # type: ignore[union-attr]

        def run(value: Any) -> Any:
            messages = _as_messages(value)
            self.structured_calls.append((name, method))
            item = self._next(messages)
            raw = self._to_ai(messages, item)
            parsed, error = _parse_structured(schema, item)
            if include_raw:
                return {"raw": raw, "parsed": parsed, "parsing_error": error}
            if error is not None:
                raise error
            return parsed

        return RunnableLambda(run, name=f"structured_{name}")


def _parse_structured(schema: Any, item: Any) -> tuple[Any, BaseException | None]:
    """Turn a scripted item into ``(parsed, parsing_error)`` for ``schema``."""
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        try:
            return (json.loads(item) if isinstance(item, str) else item), None
        except ValueError as exc:
            return None, exc
    if isinstance(item, schema):
        return item, None
    try:
        if isinstance(item, str):
            return schema.model_validate_json(item), None
        if isinstance(item, AIMessage):
            return schema.model_validate_json(str(item.text)), None
        return schema.model_validate(item), None
    except ValidationError as exc:
        return None, exc


class DictCache:
    """In-memory :class:`mindscape.llm.TextCache` that records gets and puts."""

    def __init__(self, initial: dict[str, str] | None = None) -> None:
        self.data: dict[str, str] = dict(initial or {})
        self.gets: list[str] = []
        self.puts: list[str] = []

    def get_text(self, key: str) -> str | None:
        """Return the value under ``key`` or ``None``."""
        self.gets.append(key)
        return self.data.get(key)

    def put_text(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``."""
        self.puts.append(key)
        self.data[key] = value


def scripted(*responses: Scripted, **fields: Any) -> ScriptedChatModel:
    """Shorthand: ``scripted("a", "b")`` is a ScriptedChatModel answering a then b."""
    return ScriptedChatModel(responses=list(responses), **fields)


# ---------------------------------------------------------------------------
# Index fakes: a deterministic embedder whose similarities mean something
# ---------------------------------------------------------------------------
import re as _re
import zlib as _zlib

import numpy as _np
from langchain_core.embeddings import Embeddings as _Embeddings


class HashingEmbedder(_Embeddings):
    """Bag of words hashed into `dim` buckets, unit-normalised: texts sharing words are similar."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.model_id = f"hashing-{dim}"
        self.calls = 0
        self.texts_embedded = 0

    def _vec(self, text: str) -> list[float]:
        v = _np.zeros(self.dim, dtype=_np.float64)
        for w in _re.findall(r"[a-z0-9]+", text.lower()):
            v[_zlib.crc32(w.encode()) % self.dim] += 1.0
        n = _np.linalg.norm(v)
        if n == 0:
            v[0] = 1.0
            n = 1.0
        return (v / n).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.texts_embedded += len(texts)
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)
