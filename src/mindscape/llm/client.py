"""The LLM client: a chat model plus retries, usage accounting, caching and tolerant JSON.

Every LLM role in mindscape (summaries, probes, cues, answers, decisions) goes through
:class:`LLM`, which adds what a bare ``BaseChatModel`` lacks:

* retries of transient API errors (connection, timeout, 429, 5xx) with exponential backoff,
  by ``tenacity`` (:mod:`~mindscape.llm.retry`);
* a :class:`~mindscape.llm.usage.Usage` ledger: calls, tokens in/out, cache hits, retries;
* an optional content-hash cache (any object with ``get_text``/``put_text``);
* :meth:`LLM.complete_json`: grammar-constrained JSON (``json_object`` with a schema, what
  llama.cpp's server takes), the model's native structured output, or text repaired by
  :func:`~mindscape.llm.output.extract_json`, and one re-ask with a short reminder before
  giving up (:mod:`~mindscape.llm.structured`);
* per-call output caps (``max_tokens``), so each role spends only what it needs;
* token log-probabilities where the endpoint gives them (:mod:`~mindscape.llm.logprobs`): a
  reply's mean token probability (:meth:`LLM.complete_scored`, the reader's certainty) and
  the first token's likeliest tokens (:meth:`LLM.first_token_logprobs`, option scoring;
  :meth:`LLM.complete_with_first_top`, a closed answer's option margin).

The facade holds the cache and the accounting; the rest lives in the modules named above.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from mindscape.llm.logprobs import first_top, mean_probability, reply_logprobs, token_logprobs
from mindscape.llm.output import LLMOutputError, short_error, strip_reasoning
from mindscape.llm.retry import (
    invoke_with_retries,
    is_request_error,
    is_transient,
    is_unsupported_request,
)
from mindscape.llm.settings import LLMSettings, StructuredMode
from mindscape.llm.structured import (
    REASK_REMINDER,
    Attempt,
    build_messages,
    from_structured,
    jsonable,
    message_text,
    parse_text,
    raw_json_text,
    reask_messages,
    salvage,
    structured_reply,
    structured_runnable,
    text_runnable,
)
from mindscape.llm.usage import Usage, approx_tokens

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

__all__ = ["LLM", "REASK_REMINDER", "TextCache", "is_request_error", "is_transient"]

logger = logging.getLogger(__name__)

M = TypeVar("M", bound="BaseModel")


class TextCache(Protocol):
    """What :class:`LLM` needs from a cache: string values under string keys."""

    def get_text(self, key: str) -> str | None:
        """Return the stored value for ``key``, or ``None`` on a miss."""
        ...

    def put_text(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``."""
        ...


class LLM:
    """A chat model plus retries, usage accounting, caching and tolerant JSON.

    Args:
        chat: any ``BaseChatModel`` (``make_chat_model(...)`` or a test fake).
        settings: retry/backoff and structured-output policy. Default: ``LLMSettings()``.
        cache: optional :class:`TextCache`; keys are sha256 of (model id, system, prompt,
            schema name).
        usage: ledger to record into (share one across roles or runs); default new.
        count_tokens: estimator used when a response carries no ``usage_metadata``.
        sleep: the backoff's sleep (tests pass a no-op).
    """

    def __init__(
        self,
        chat: BaseChatModel,
        *,
        settings: LLMSettings | None = None,
        cache: TextCache | None = None,
        usage: Usage | None = None,
        count_tokens: Callable[[str], int] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.chat = chat
        self.settings = settings if settings is not None else LLMSettings()
        self.cache = cache
        self.usage = usage if usage is not None else Usage()
        self.count_tokens = count_tokens or approx_tokens
        self._sleep = sleep
        self.structured: StructuredMode = self.settings.structured_mode()
        """The structured-output mode in use; ``auto`` turns ``off`` when the endpoint
        rejects structured requests (callers may read it to remember the switch)."""
        self.decoding: dict[str, Any] = {}
        """Decoding parameters set by :meth:`sampled` (part of the cache keys when set)."""
        self.cached_prompt = False
        """Set by :meth:`sampled`: input tokens are counted as ``tokens_cached``."""

    @classmethod
    def from_settings(
        cls,
        settings: LLMSettings | None = None,
        *,
        cache: TextCache | None = None,
        usage: Usage | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> LLM:
        """Build the chat model with :func:`~mindscape.llm.chat.make_chat_model` and wrap it."""
        from mindscape.llm.chat import make_chat_model

        settings = (LLMSettings.from_env() if settings is None else settings).resolved()
        return cls(
            make_chat_model(settings),
            settings=settings,
            cache=cache,
            usage=usage,
            count_tokens=count_tokens,
        )

    @property
    def model_id(self) -> str:
        """Identifier of the underlying model (part of every cache key)."""
        for attr in ("model_name", "model"):
            value = getattr(self.chat, attr, None)
            if isinstance(value, str) and value:
                return value
        return self.settings.model_name() or type(self.chat).__name__

    def sampled(self, *, cached_prompt: bool = False, **decoding: Any) -> LLM:
        """This client decoding with other parameters (``temperature``, ``top_p``, ``seed``):
        a copy of the chat model with those fields, sharing the cache and the usage ledger.
        The parameters join its cache keys, so each sampled answer is cached on its own.
        ``cached_prompt``: its prompts are ones the model has just read (an answer drawn again
        over the same prompt), so their input tokens are counted as ``tokens_cached``, not
        ``tokens_in``: they cost neither prompt time nor the question's token budget."""
        twin = copy.copy(self)
        twin.chat = self.chat.model_copy(update=decoding)
        twin.decoding = {**self.decoding, **decoding}
        twin.cached_prompt = cached_prompt
        return twin

    def cache_key(self, prompt: str, *, system: str | None = None, schema_name: str = "") -> str:
        """sha256 of (model id, system, prompt, schema name); ``""`` for plain text. A
        :meth:`sampled` client adds its decoding parameters."""
        parts: list[Any] = [self.model_id, system or "", prompt, schema_name]
        if self.decoding:
            parts.append(sorted(self.decoding.items()))
        return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()

    # ---- accounting and calls

    def _record(self, role: str, messages: list[BaseMessage], reply: Any) -> None:
        """Count one model response, with reported tokens or an estimate."""
        meta = getattr(reply, "usage_metadata", None)
        if meta:
            tokens = {
                "tokens_in": meta.get("input_tokens", 0),
                "tokens_out": meta.get("output_tokens", 0),
            }
        else:  # no usage reported: estimated
            out = raw_json_text(reply) if hasattr(reply, "content") else json.dumps(jsonable(reply))
            prompt_text = "\n".join(message_text(m) for m in messages)
            tokens = {
                "tokens_in": self.count_tokens(prompt_text),
                "tokens_out": self.count_tokens(out),
                "estimated": 1,
            }
        if self.cached_prompt:
            tokens["tokens_cached"] = tokens.pop("tokens_in")
        self.usage.add(role, calls=1, **tokens)

    def _invoke(self, runnable: Any, messages: list[BaseMessage], role: str) -> Any:
        """``runnable.invoke(messages)`` with retries of transient errors (tenacity)."""
        settings, usage, sleep = self.settings, self.usage, self._sleep
        return invoke_with_retries(
            runnable, messages, settings=settings, usage=usage, role=role, sleep=sleep
        )

    def _capped(self, runnable: Any, max_tokens: int | None) -> Any:
        return runnable.bind(max_tokens=max_tokens) if max_tokens else runnable

    # ---- plain text

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        role: str = "",
        max_tokens: int | None = None,
    ) -> str:
        """Ask for free text (at most ``max_tokens``). ``<think>`` blocks are removed."""
        runnable = self._capped(self.chat, max_tokens)
        return str(self._cached_call(prompt, system, role, "", runnable, _text, as_text=True))

    def complete_scored(
        self,
        prompt: str,
        *,
        system: str | None = None,
        role: str = "",
        max_tokens: int | None = None,
    ) -> tuple[str, float | None]:
        """Free text, as :meth:`complete`, with the model's confidence in it: the geometric-mean
        probability of its output tokens (:func:`mean_probability` of the endpoint's
        ``logprobs``; None when it returns none). A small reader's wrong answers are its unsure
        ones (docs/agent.md), so the refine loop reads this where the model does not say so."""

        text, logprobs = self.complete_logprobs(
            prompt, system=system, role=role, max_tokens=max_tokens
        )
        return text, mean_probability(logprobs)

    def complete_logprobs(
        self,
        prompt: str,
        *,
        system: str | None = None,
        role: str = "",
        max_tokens: int | None = None,
    ) -> tuple[str, list[float]]:
        """Free text, as :meth:`complete`, with its output tokens' log-probabilities (empty
        when the endpoint returns none): what :meth:`complete_scored` and the answer verifier
        read."""

        def read(reply: Any) -> list[Any]:
            return [_text(reply), token_logprobs(reply_logprobs(reply))]

        runnable = self._capped(self.chat.bind(logprobs=True, top_logprobs=1), max_tokens)
        text, logprobs = self._cached_call(prompt, system, role, "logprobs", runnable, read)
        return str(text), [float(x) for x in logprobs]

    def complete_with_first_top(
        self,
        prompt: str,
        *,
        system: str | None = None,
        role: str = "",
        max_tokens: int | None = None,
        top: int = 20,
    ) -> tuple[str, list[float], dict[str, float]]:
        """Free text with its output tokens' log-probabilities, as :meth:`complete_logprobs`,
        and the log-probabilities of the reply's first token's ``top`` likeliest tokens, by
        token text (empty when the endpoint returns none): in one call, what a closed answer
        (an option letter, TRUE or FALSE) reads its option margin from."""

        def read(reply: Any) -> list[Any]:
            records = reply_logprobs(reply)
            return [_text(reply), token_logprobs(records), first_top(records)]

        runnable = self._capped(self.chat.bind(logprobs=True, top_logprobs=top), max_tokens)
        text, logprobs, first = self._cached_call(
            prompt, system, role, f"logprobs-top{top}", runnable, read
        )
        return str(text), [float(x) for x in logprobs], {str(k): float(v) for k, v in first.items()}

    def first_token_logprobs(
        self, prompt: str, *, system: str | None = None, role: str = "", top: int = 20
    ) -> dict[str, float]:
        """The log-probabilities of the reply's first token: its ``top`` likeliest tokens, by
        token text (empty when the endpoint returns none). One call of one output token."""

        def read(reply: Any) -> dict[str, float]:
            return first_top(reply_logprobs(reply))

        runnable = self.chat.bind(logprobs=True, top_logprobs=top, max_tokens=1)
        return dict(
            self._cached_call(prompt, system, role, f"first-token-top{top}", runnable, read)
        )

    def _cached_call(
        self,
        prompt: str,
        system: str | None,
        role: str,
        name: str,
        runnable: Any,
        read: Callable[[Any], Any],
        *,
        as_text: bool = False,
    ) -> Any:
        """``read(reply)`` of one call, cached under the cache key named `name`: as JSON, or
        as the text itself when `as_text` (a hit returns what was stored, decoded)."""
        key = self.cache_key(prompt, system=system, schema_name=name)
        if self.cache is not None and (hit := self.cache.get_text(key)) is not None:
            self.usage.add(role, cache_hits=1)
            return hit if as_text else json.loads(hit)
        messages = build_messages(prompt, system)
        reply = self._invoke(runnable, messages, role)
        self._record(role, messages, reply)
        out = read(reply)
        if self.cache is not None:
            self.cache.put_text(key, out if as_text else json.dumps(out))
        return out

    # ---- JSON

    def _attempt_structured(
        self, runnable: Any, messages: list[BaseMessage], schema: type[BaseModel], role: str
    ) -> Attempt | None:
        """One call in a native structured-output mode; ``None`` when ``auto`` found the
        endpoint rejecting it (the mode is ``off`` from then on: parse text)."""
        try:
            out = self._invoke(runnable, messages, role)
        except Exception as exc:
            salvaged = self._salvage(exc, messages, schema, role)
            if salvaged is not None:
                return salvaged
            if not (self.settings.structured == "auto" and is_unsupported_request(exc)):
                raise
            logger.warning(
                "structured output rejected by %s (%s); parsing text instead",
                self.model_id,
                short_error(exc),
            )
            self.structured = "off"
            return None
        self._record(role, messages, structured_reply(out))
        return from_structured(out, schema)

    def _attempt_json(
        self,
        messages: list[BaseMessage],
        schema: type[BaseModel] | None,
        role: str,
        max_tokens: int | None,
    ) -> Attempt:
        runnable, self.structured = structured_runnable(self.chat, self.structured, schema)
        if runnable is not None and schema is not None:
            attempt = self._attempt_structured(runnable, messages, schema, role)
            if attempt is not None:
                return attempt
        runnable = self._capped(text_runnable(self.chat, self.structured, schema), max_tokens)
        reply = self._invoke(runnable, messages, role)
        self._record(role, messages, reply)
        return parse_text(message_text(reply), schema)

    def _salvage(
        self, exc: Exception, messages: list[BaseMessage], schema: type[BaseModel], role: str
    ) -> Attempt | None:
        """A client-side parse failure (the SDK's ``ValidationError``) is a malformed answer:
        parse the raw text it carries. ``None`` for any other exception."""
        salvaged = salvage(exc, schema)
        if salvaged is None:
            return None
        from langchain_core.messages import AIMessage

        raw, attempt = salvaged
        self._record(role, messages, AIMessage(content=raw))  # no usage reported: estimated
        return attempt

    def _cached_json(self, key: str, schema: type[BaseModel] | None, role: str) -> Attempt | None:
        """A cached JSON answer (``None`` on a miss or a stale, non-validating entry)."""
        hit = self.cache.get_text(key) if self.cache is not None else None
        if hit is None:
            return None
        cached = parse_text(hit, schema)
        if not cached.ok:
            logger.warning("ignoring cached entry %s… that no longer validates", key[:12])
            return None
        self.usage.add(role, cache_hits=1)
        return cached

    @overload
    def complete_json(
        self,
        prompt: str,
        *,
        system: str | None = ...,
        schema: type[M],
        role: str = ...,
        max_tokens: int | None = ...,
    ) -> M: ...
    @overload
    def complete_json(
        self,
        prompt: str,
        *,
        system: str | None = ...,
        schema: None = ...,
        role: str = ...,
        max_tokens: int | None = ...,
    ) -> Any: ...

    def complete_json(
        self,
        prompt: str,
        *,
        system: str | None = None,
        schema: type[BaseModel] | None = None,
        role: str = "",
        max_tokens: int | None = None,
    ) -> Any:
        """Ask for JSON; return the parsed value, or a ``schema`` instance if given.

        Raises:
            LLMOutputError: if the answer is still unusable after one re-ask.
        """
        name = schema.__name__ if schema is not None else "<json>"
        key = self.cache_key(prompt, system=system, schema_name=name)
        cached = self._cached_json(key, schema, role)
        if cached is not None:
            return cached.value
        first = self._attempt_json(build_messages(prompt, system), schema, role, max_tokens)
        result = first
        if not first.ok:
            self.usage.add(role, malformed=1)
            logger.info("LLM %s: malformed JSON (%s); re-asking once", role or "call", first.error)
            messages = reask_messages(prompt, system, first, schema)
            result = self._attempt_json(messages, schema, role, max_tokens)
        if not result.ok:
            self.usage.add(role, unusable=1)
            raise LLMOutputError(
                f"{role or 'LLM'}: no valid {name} after one re-ask: {result.error} "
                f"(first answer: {first.error})",
                text=result.text,
            )
        if self.cache is not None:
            self.cache.put_text(key, json.dumps(jsonable(result.value)))
        return result.value


def _text(reply: Any) -> str:
    """A chat reply's text without its ``<think>`` block."""
    return strip_reasoning(message_text(reply))
