"""The LLM client: a chat model plus retries, usage accounting, caching and tolerant JSON.

Every LLM role in mindscape (summaries, probes, cues, answers, decisions) goes through
:class:`LLM`, which adds what a bare ``BaseChatModel`` lacks:

* retries of transient API errors (connection, timeout, 429, 5xx) with exponential backoff,
  by ``tenacity`` (the library langchain-core's own ``with_retry`` uses);
* a :class:`~mindscape.llm.usage.Usage` ledger: calls, tokens in/out, cache hits, retries;
* an optional content-hash cache (any object with ``get_text``/``put_text``);
* :meth:`LLM.complete_json`: grammar-constrained JSON (``json_object`` with a schema, what
  llama.cpp's server takes), the model's native structured output, or text repaired by
  :func:`~mindscape.llm.output.extract_json`, and one re-ask with a short reminder before
  giving up;
* per-call output caps (``max_tokens``), so each role spends only what it needs.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from mindscape.errors import EndpointError
from mindscape.llm.output import (
    LLMOutputError,
    extract_json,
    short_error,
    strip_reasoning,
    validate_as,
)
from mindscape.llm.settings import LLMSettings, StructuredMode
from mindscape.llm.usage import Usage, approx_tokens

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

logger = logging.getLogger(__name__)

M = TypeVar("M", bound="BaseModel")

REASK_REMINDER = (
    "Your previous answer could not be used: {error}\n"
    "Return only valid JSON{shape}, with double-quoted keys and strings, no comments, "
    "no trailing commas and no text before or after it."
)


class TextCache(Protocol):
    """What :class:`LLM` needs from a cache: string values under string keys."""

    def get_text(self, key: str) -> str | None:
        """Return the stored value for ``key``, or ``None`` on a miss."""
        ...

    def put_text(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``."""
        ...


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a transient API failure (retry it) rather than a real error."""
    import openai

    if getattr(exc, "is_retryable", False) is True:  # langchain_core.exceptions.ModelError
        return True
    transient = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
    return isinstance(exc, transient) and not _is_unsupported_request(exc)


def _is_connection_error(exc: BaseException | None) -> bool:
    """The endpoint could not be reached (the OpenAI SDK's or langchain-core's error)."""
    import openai
    from langchain_core.exceptions import ModelConnectionError

    return isinstance(exc, (openai.APIConnectionError, ModelConnectionError))


def _failure(exc: BaseException) -> str:
    """What went wrong, without the message (which may quote a request or a header)."""
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}, HTTP {status}" if status else type(exc).__name__


def _is_refusal(exc: BaseException) -> bool:
    """HTTP 401, 403 or 404: a key, permission or model the endpoint rejects (no retry helps)."""
    import openai

    return isinstance(
        exc, (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError)
    )


def is_request_error(exc: BaseException) -> bool:
    """Whether the endpoint refused the request itself (HTTP 400: bad parameters, a prompt
    over the context size), so that retrying the same request cannot help."""
    import openai
    from langchain_core.exceptions import ModelInvalidRequestError

    return isinstance(exc, (openai.BadRequestError, ModelInvalidRequestError))


def _is_unsupported_request(exc: BaseException) -> bool:
    """Whether the endpoint rejected the request itself: HTTP 400, or a server error that
    names the structured-output parameter (llama.cpp answers ``json_schema`` with a 500)."""
    import openai

    if is_request_error(exc):
        return True
    text = str(exc)
    return isinstance(exc, openai.InternalServerError) and (
        "response_format" in text or "json_schema" in text
    )


def _message_text(message: Any) -> str:
    """Plain text of a message, whatever its content shape."""
    return str(message.text) if hasattr(message, "text") else str(message)


def _raw_json_text(message: Any) -> str:
    """The JSON-ish text of a reply: tool-call arguments first (function calling), then content."""
    for call in getattr(message, "tool_calls", None) or []:
        return json.dumps(call.get("args", {}))
    for call in getattr(message, "invalid_tool_calls", None) or []:
        if call.get("args"):
            return str(call["args"])
    return _message_text(message)


def _jsonable(value: Any) -> Any:
    """``value`` with pydantic models dumped to plain JSON data."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def _raw_from_validation_error(exc: Any) -> str:
    """The model's raw answer as kept in a pydantic ``ValidationError``, or ``""``."""
    for err in exc.errors(include_url=False):
        value = err.get("input")
        if err.get("type") == "json_invalid" and isinstance(value, str):
            return value
        if (
            err.get("type") == "missing"
            and len(err.get("loc", ())) == 1
            and isinstance(value, dict)
        ):
            return json.dumps(value)
    return ""


@dataclass
class _Attempt:
    """One JSON attempt: either ``value`` (ok) or the raw text and why it failed."""

    ok: bool
    value: Any = None
    text: str = ""
    error: str = ""


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

    def sampled(self, **decoding: Any) -> LLM:
        """This client decoding with other parameters (``temperature``, ``top_p``, ``seed``):
        a copy of the chat model with those fields, sharing the cache and the usage ledger.
        The parameters join its cache keys, so each sampled answer is cached on its own."""
        twin = copy.copy(self)
        twin.chat = self.chat.model_copy(update=decoding)
        twin.decoding = {**self.decoding, **decoding}
        return twin

    def cache_key(self, prompt: str, *, system: str | None = None, schema_name: str = "") -> str:
        """sha256 of (model id, system, prompt, schema name); ``""`` for plain text. A
        :meth:`sampled` client adds its decoding parameters."""
        parts: list[Any] = [self.model_id, system or "", prompt, schema_name]
        if self.decoding:
            parts.append(sorted(self.decoding.items()))
        return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()

    # ---- messages and accounting

    @staticmethod
    def _messages(prompt: str, system: str | None) -> list[BaseMessage]:
        from langchain_core.messages import HumanMessage, SystemMessage

        head: list[BaseMessage] = [SystemMessage(content=system)] if system else []
        return [*head, HumanMessage(content=prompt)]

    @staticmethod
    def _reask_messages(
        prompt: str, system: str | None, first: _Attempt, schema: type[BaseModel] | None
    ) -> list[BaseMessage]:
        """The conversation for the single re-ask: the bad answer, then the reminder."""
        from langchain_core.messages import AIMessage, HumanMessage

        shape = f" with the keys {', '.join(schema.model_fields)}" if schema is not None else ""
        reminder = REASK_REMINDER.format(error=first.error, shape=shape)
        messages = LLM._messages(prompt, system)
        if first.text:
            return [*messages, AIMessage(content=first.text), HumanMessage(content=reminder)]
        messages[-1] = HumanMessage(content=f"{prompt}\n\n{reminder}")
        return messages

    def _record(self, role: str, messages: list[BaseMessage], reply: Any) -> None:
        """Count one model response, with reported tokens or an estimate."""
        meta = getattr(reply, "usage_metadata", None)
        if meta:
            self.usage.add(
                role,
                calls=1,
                tokens_in=meta.get("input_tokens", 0),
                tokens_out=meta.get("output_tokens", 0),
            )
            return
        prompt_text = "\n".join(_message_text(m) for m in messages)
        out_text = (
            _raw_json_text(reply) if hasattr(reply, "content") else json.dumps(_jsonable(reply))
        )
        self.usage.add(
            role,
            calls=1,
            estimated=1,
            tokens_in=self.count_tokens(prompt_text),
            tokens_out=self.count_tokens(out_text),
        )

    def _invoke(self, runnable: Any, messages: list[BaseMessage], role: str) -> Any:
        """``runnable.invoke(messages)`` with retries of transient errors (tenacity)."""
        from tenacity import (
            Retrying,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential,
            wait_random,
        )

        s = self.settings

        def count_retry(state: Any) -> None:
            self.usage.add(role, retries=1)
            if s.backend == "local" and _is_connection_error(state.outcome.exception()):
                from mindscape.llm.server import revive

                revive()  # the local server was killed: start it again, once
            logger.info("LLM %s: transient error, retry %d", role or "call", state.attempt_number)

        retrying = Retrying(
            stop=stop_after_attempt(s.max_retries + 1),
            wait=wait_exponential(multiplier=s.retry_base_delay_s, max=s.retry_max_delay_s)
            + wait_random(0, s.retry_base_delay_s),  # jitter: parallel callers do not align
            retry=retry_if_exception(is_transient),
            before_sleep=count_retry,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(runnable.invoke, messages)
        except Exception as exc:
            if _is_refusal(exc):
                raise EndpointError(
                    f"the LLM endpoint {self.settings.endpoint_name()} refused the request "
                    f"({_failure(exc)}); check the API key, the model name "
                    f"({self.settings.model_name()}) and the base URL"
                ) from exc
            if is_transient(exc):
                raise EndpointError(
                    f"the LLM endpoint {self.settings.endpoint_name()} failed "
                    f"{s.max_retries + 1} times ({_failure(exc)}); check that it is running "
                    f"and reachable, raise MINDSCAPE_LLM_MAX_RETRIES, or answer offline with "
                    f"--llm extractive"
                ) from exc
            raise

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
        key = self.cache_key(prompt, system=system)
        if self.cache is not None and (hit := self.cache.get_text(key)) is not None:
            self.usage.add(role, cache_hits=1)
            return hit
        messages = self._messages(prompt, system)
        reply = self._invoke(self._capped(self.chat, max_tokens), messages, role)
        self._record(role, messages, reply)
        text = strip_reasoning(_message_text(reply))
        if self.cache is not None:
            self.cache.put_text(key, text)
        return text

    # ---- JSON

    def _structured_runnable(self, schema: type[BaseModel] | None) -> Any | None:
        """The runnable for native structured output, or ``None`` to parse text."""
        mode = self.structured
        if schema is None or mode in ("off", "json_object"):
            return None
        kwargs: dict[str, Any] = {"include_raw": True}
        if mode in ("json_schema", "function_calling"):
            kwargs["method"] = mode
        try:
            return self.chat.with_structured_output(schema, **kwargs)
        except NotImplementedError:
            logger.debug("%s has no structured output; parsing text", type(self.chat).__name__)
            self.structured = "off"
            return None

    def _text_runnable(self, schema: type[BaseModel] | None) -> Any:
        """The chat model, bound to a JSON grammar in ``json_object`` mode."""
        if self.structured != "json_object":
            return self.chat
        fmt: dict[str, Any] = {"type": "json_object"}
        if schema is not None:
            grammar = getattr(schema, "grammar_schema", None)
            fmt["schema"] = grammar() if callable(grammar) else schema.model_json_schema()
        return self.chat.bind(response_format=fmt)

    def _parse_text(self, text: str, schema: type[BaseModel] | None) -> _Attempt:
        """Text → JSON → (optionally) schema instance, as an :class:`_Attempt`."""
        from pydantic import ValidationError

        try:
            data = extract_json(text)
            value = validate_as(schema, data) if schema is not None else data
        except (LLMOutputError, ValidationError) as exc:
            return _Attempt(ok=False, text=text, error=short_error(exc))
        return _Attempt(ok=True, value=value, text=text)

    def _from_structured(self, out: Any, schema: type[BaseModel]) -> _Attempt:
        """Interpret a ``with_structured_output(include_raw=True)`` result."""
        if not (isinstance(out, dict) and "raw" in out):
            return self._parse_text(json.dumps(_jsonable(out)), schema)
        raw_text = _raw_json_text(out["raw"])
        if out.get("parsed") is not None and out.get("parsing_error") is None:
            from pydantic import ValidationError

            try:
                return _Attempt(ok=True, value=validate_as(schema, out["parsed"]), text=raw_text)
            except ValidationError as exc:
                return _Attempt(ok=False, text=raw_text, error=short_error(exc))
        return self._parse_text(raw_text, schema)  # salvage what the raw answer holds

    def _attempt_json(
        self,
        messages: list[BaseMessage],
        schema: type[BaseModel] | None,
        role: str,
        max_tokens: int | None,
    ) -> _Attempt:
        runnable = self._structured_runnable(schema)
        if runnable is not None and schema is not None:
            try:
                out = self._invoke(runnable, messages, role)
            except Exception as exc:
                salvaged = self._salvage(exc, messages, schema, role)
                if salvaged is not None:
                    return salvaged
                if not (self.settings.structured == "auto" and _is_unsupported_request(exc)):
                    raise
                logger.warning(
                    "structured output rejected by %s (%s); parsing text instead",
                    self.model_id,
                    short_error(exc),
                )
                self.structured = "off"
            else:
                raw = out["raw"] if isinstance(out, dict) and "raw" in out else out
                self._record(role, messages, raw)
                return self._from_structured(out, schema)
        runnable = self._capped(self._text_runnable(schema), max_tokens)
        reply = self._invoke(runnable, messages, role)
        self._record(role, messages, reply)
        return self._parse_text(_message_text(reply), schema)

    def _salvage(
        self, exc: Exception, messages: list[BaseMessage], schema: type[BaseModel], role: str
    ) -> _Attempt | None:
        """A client-side parse failure (the SDK's ``ValidationError``) is a malformed answer:
        parse the raw text it carries. ``None`` for any other exception."""
        from pydantic import ValidationError

        if not isinstance(exc, ValidationError):
            return None
        from langchain_core.messages import AIMessage

        raw = _raw_from_validation_error(exc)
        self._record(role, messages, AIMessage(content=raw))  # no usage reported: estimated
        return self._parse_text(raw, schema) if raw else _Attempt(ok=False, error=short_error(exc))

    def _cached_json(self, key: str, schema: type[BaseModel] | None, role: str) -> Any:
        """A cached JSON answer (``None`` on a miss or a stale, non-validating entry)."""
        hit = self.cache.get_text(key) if self.cache is not None else None
        if hit is None:
            return None
        cached = self._parse_text(hit, schema)
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
        first = self._attempt_json(self._messages(prompt, system), schema, role, max_tokens)
        result = first
        if not first.ok:
            self.usage.add(role, malformed=1)
            logger.info("LLM %s: malformed JSON (%s); re-asking once", role or "call", first.error)
            messages = self._reask_messages(prompt, system, first, schema)
            result = self._attempt_json(messages, schema, role, max_tokens)
        if not result.ok:
            self.usage.add(role, unusable=1)
            raise LLMOutputError(
                f"{role or 'LLM'}: no valid {name} after one re-ask: {result.error} "
                f"(first answer: {first.error})",
                text=result.text,
            )
        if self.cache is not None:
            self.cache.put_text(key, json.dumps(_jsonable(result.value)))
        return result.value
