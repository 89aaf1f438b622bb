"""The LLM layer: settings, a chat-model factory, call accounting and tolerant JSON.

Every LLM role in mindscape (summaries, probes, cues, answers, refine decisions) goes
through :class:`LLM`, which adds what a bare ``BaseChatModel`` lacks:

* retries with exponential backoff on transient API errors (connection, timeout, 429, 5xx);
* a :class:`Usage` ledger: calls, tokens in/out, cache hits and retries, per role;
* an optional content-hash cache (any object with ``get_text``/``put_text``);
* :meth:`LLM.complete_json`: structured output where the model supports it, otherwise
  text plus :func:`extract_json`, which survives what weak local models do to JSON
  (fences, prose, trailing commas, single quotes, Python literals, ``<think>`` blocks),
  and one re-ask with a short "return only valid JSON" reminder before giving up.

Configuration precedence is **explicit argument > environment > default**
(:meth:`LLMSettings.from_env`). Nothing heavy is imported at module import time:
``langchain_openai``, ``openai`` and ``pydantic`` load on first use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, get_origin, overload
from urllib.parse import urlparse

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

__all__ = [
    "LLM",
    "PLACEHOLDER_API_KEY",
    "LLMOutputError",
    "LLMSettings",
    "TextCache",
    "Usage",
    "approx_tokens",
    "extract_json",
    "is_transient",
    "make_chat_model",
    "strip_reasoning",
    "validate_as",
]

logger = logging.getLogger(__name__)

Backend = Literal["offline", "openai"]
StructuredMode = Literal["auto", "json_schema", "function_calling", "off"]
_BACKENDS: tuple[str, ...] = ("offline", "openai")
_STRUCTURED_MODES: tuple[str, ...] = ("auto", "json_schema", "function_calling", "off")

#: Key sent when the endpoint is not OpenAI's and no key is configured: local servers
#: (vLLM, Ollama, llama.cpp) ignore it, but ``ChatOpenAI`` refuses to start without one.
PLACEHOLDER_API_KEY = "sk-no-key-needed"

REASK_REMINDER = (
    "Your previous answer could not be used: {error}\n"
    "Return only valid JSON{shape}, with double-quoted keys and strings, no comments, "
    "no trailing commas and no text before or after it."
)

M = TypeVar("M", bound="BaseModel")


class LLMOutputError(ValueError):
    """The model's answer could not be turned into the requested JSON / schema.

    Attributes:
        text: the offending model output (possibly truncated by the caller).
    """

    def __init__(self, message: str, *, text: str = "") -> None:
        super().__init__(message)
        self.text = text


class TextCache(Protocol):
    """What :class:`LLM` needs from a cache: string values under string keys."""

    def get_text(self, key: str) -> str | None:
        """Return the stored value for ``key``, or ``None`` on a miss."""
        ...

    def put_text(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``."""
        ...


# --------------------------------------------------------------------------- settings


def _env_str(env: Mapping[str, str], *names: str) -> str | None:
    """First non-empty value among ``names`` in ``env``."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


@dataclass
class LLMSettings:
    """How to reach the chat model. Plain data: JSON-serialisable, no clients.

    Attributes:
        backend: ``"offline"`` (no chat model: the extractive implementations of every
            role are used) or ``"openai"`` (any OpenAI-compatible endpoint).
        model: model id sent to the endpoint.
        base_url: endpoint root, e.g. ``http://127.0.0.1:8000/v1`` for vLLM; ``None``
            means OpenAI's own API.
        api_key: ``None`` reads ``OPENAI_API_KEY`` when the model is built; for an
            endpoint other than OpenAI's with no key anywhere, a placeholder is sent.
        temperature: sampling temperature (0 keeps runs repeatable).
        timeout_s: per-request timeout in seconds.
        max_retries: retries of transient errors (so ``max_retries + 1`` attempts).
        structured: ``"auto"`` uses the model's native structured output when it has
            one and falls back to text parsing; ``"json_schema"`` / ``"function_calling"``
            force that method; ``"off"`` always parses text.
        retry_base_delay_s: first backoff delay; doubles on each retry.
        retry_max_delay_s: cap on a single backoff delay.
    """

    backend: Backend = "offline"
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.0
    timeout_s: float = 60.0
    max_retries: int = 3
    structured: StructuredMode = "auto"
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 8.0

    def __post_init__(self) -> None:
        if self.backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {_BACKENDS}, got {self.backend!r}")
        if self.structured not in _STRUCTURED_MODES:
            raise ValueError(
                f"structured must be one of {_STRUCTURED_MODES}, got {self.structured!r}"
            )
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        """Build settings with precedence explicit argument > environment > default.

        Environment variables (empty values count as unset):

        * ``MINDSCAPE_LLM_BACKEND`` → ``backend``
        * ``MINDSCAPE_LLM_MODEL`` → ``model``
        * ``MINDSCAPE_LLM_BASE_URL``, else ``OPENAI_BASE_URL`` → ``base_url``
        * ``OPENAI_API_KEY`` → ``api_key``
        * ``MINDSCAPE_LLM_STRUCTURED`` → ``structured``
        * ``MINDSCAPE_LLM_TIMEOUT_S`` → ``timeout_s``
        * ``MINDSCAPE_LLM_MAX_RETRIES`` → ``max_retries``

        Args:
            env: the environment to read (default ``os.environ``).
            **overrides: explicit field values; ``None`` means "not given".
        """
        env = os.environ if env is None else env
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown LLMSettings fields: {sorted(unknown)}")
        from_env: dict[str, Any] = {
            "backend": _env_str(env, "MINDSCAPE_LLM_BACKEND"),
            "model": _env_str(env, "MINDSCAPE_LLM_MODEL"),
            "base_url": _env_str(env, "MINDSCAPE_LLM_BASE_URL", "OPENAI_BASE_URL"),
            "api_key": _env_str(env, "OPENAI_API_KEY"),
            "structured": _env_str(env, "MINDSCAPE_LLM_STRUCTURED"),
            "timeout_s": _env_str(env, "MINDSCAPE_LLM_TIMEOUT_S"),
            "max_retries": _env_str(env, "MINDSCAPE_LLM_MAX_RETRIES"),
        }
        if from_env["timeout_s"] is not None:
            from_env["timeout_s"] = float(from_env["timeout_s"])
        if from_env["max_retries"] is not None:
            from_env["max_retries"] = int(from_env["max_retries"])
        if from_env["backend"] is not None:
            from_env["backend"] = from_env["backend"].lower()
        values = {k: v for k, v in from_env.items() if v is not None}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def resolve_api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """The key to send: explicit, else ``OPENAI_API_KEY``, else a placeholder for
        endpoints other than OpenAI's; ``None`` when OpenAI's API has no key."""
        env = os.environ if env is None else env
        key = self.api_key or _env_str(env, "OPENAI_API_KEY")
        if key:
            return key
        if self.base_url and not _is_openai_host(self.base_url):
            return PLACEHOLDER_API_KEY
        return None

    def as_dict(self) -> dict[str, Any]:
        """The settings as a dict, without the API key (safe to log or store)."""
        data = asdict(self)
        data.pop("api_key")
        return data


def _is_openai_host(url: str) -> bool:
    """Whether ``url`` points at OpenAI's own API (which needs a real key)."""
    host = (urlparse(url).hostname or "").lower()
    return host == "openai.com" or host.endswith(".openai.com")


def make_chat_model(
    settings: LLMSettings | None = None, *, client_retries: int = 0
) -> BaseChatModel:
    """Build the ``ChatOpenAI`` model described by ``settings`` (default: from the env).

    ``langchain_openai`` is imported here, not at module import. The SDK's own retries
    default to 0 because :class:`LLM` retries with backoff itself; pass
    ``client_retries`` when using the model without :class:`LLM`.

    Raises:
        ValueError: for the offline backend (it has no chat model), or when OpenAI's
            own API is targeted without any API key.
    """
    settings = LLMSettings.from_env() if settings is None else settings
    if settings.backend == "offline":
        raise ValueError(
            "the offline backend has no chat model (its roles are extractive); set "
            "backend='openai' or MINDSCAPE_LLM_BACKEND=openai to use an endpoint"
        )
    api_key = settings.resolve_api_key()
    if api_key is None:
        raise ValueError(
            "no API key for OpenAI: set OPENAI_API_KEY or LLMSettings.api_key, or point "
            "base_url (MINDSCAPE_LLM_BASE_URL) at a local OpenAI-compatible server"
        )
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=settings.model,
        base_url=settings.base_url,
        api_key=api_key,
        temperature=settings.temperature,
        timeout=settings.timeout_s,
        max_retries=client_retries,
    )


# --------------------------------------------------------------------------- usage


_COUNTERS: tuple[str, ...] = (
    "calls",
    "tokens_in",
    "tokens_out",
    "cache_hits",
    "retries",
    "estimated",
)


class Usage:
    """Thread-safe ledger of LLM calls, kept per role.

    Counters: ``calls`` (model responses received, re-asks included), ``tokens_in``,
    ``tokens_out``, ``cache_hits`` (answers served from the cache, not calls),
    ``retries`` (transient failures that were retried) and ``estimated`` (calls whose
    token counts were estimated because the model reported none).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[str, dict[str, int]] = {}

    def add(self, role: str = "", **counts: int) -> None:
        """Add ``counts`` (any of the counter names) to ``role``'s row."""
        bad = set(counts) - set(_COUNTERS)
        if bad:
            raise TypeError(f"unknown usage counters: {sorted(bad)}")
        with self._lock:
            row = self._roles.setdefault(role, dict.fromkeys(_COUNTERS, 0))
            for name, value in counts.items():
                row[name] += int(value)

    def merge(self, other: Usage) -> Usage:
        """Add every row of ``other`` into this ledger; returns ``self``."""
        for role, row in other.by_role.items():
            self.add(role, **row)
        return self

    @property
    def by_role(self) -> dict[str, dict[str, int]]:
        """A snapshot of the per-role rows."""
        with self._lock:
            return {role: dict(row) for role, row in self._roles.items()}

    def total(self, name: str) -> int:
        """Sum of counter ``name`` over all roles."""
        if name not in _COUNTERS:
            raise KeyError(name)
        with self._lock:
            return sum(row[name] for row in self._roles.values())

    @property
    def calls(self) -> int:
        """Model responses received."""
        return self.total("calls")

    @property
    def tokens_in(self) -> int:
        """Prompt tokens."""
        return self.total("tokens_in")

    @property
    def tokens_out(self) -> int:
        """Completion tokens."""
        return self.total("tokens_out")

    @property
    def cache_hits(self) -> int:
        """Answers served from the cache."""
        return self.total("cache_hits")

    @property
    def retries(self) -> int:
        """Transient failures retried."""
        return self.total("retries")

    def as_dict(self) -> dict[str, Any]:
        """Totals plus ``by_role``, JSON-serialisable."""
        roles = self.by_role
        totals = {name: sum(row[name] for row in roles.values()) for name in _COUNTERS}
        return {**totals, "by_role": roles}

    def __repr__(self) -> str:
        d = self.as_dict()
        return f"Usage(calls={d['calls']}, tokens_in={d['tokens_in']}, tokens_out={d['tokens_out']}, cache_hits={d['cache_hits']})"

    def __getstate__(self) -> dict[str, Any]:
        return {"roles": self.by_role}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.Lock()
        self._roles = {role: dict(row) for role, row in state["roles"].items()}


def approx_tokens(text: str) -> int:
    """Rough token count (4 characters per token) used when a model reports none."""
    return len(text) // 4


# --------------------------------------------------------------------------- JSON extraction


_THINK_RE = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_LITERALS = {
    "true": "true",
    "True": "true",
    "false": "false",
    "False": "false",
    "null": "null",
    "None": "null",
    "NaN": "NaN",
    "Infinity": "Infinity",
}
_PAIRS = {"{": "}", "[": "]"}
#: Bound on bracket-matching work in :func:`_scan_values`, in passes over the text.
_SCAN_PASSES = 20


def strip_reasoning(text: str) -> str:
    """Remove ``<think>…</think>`` blocks that reasoning models put before the answer."""
    return _THINK_RE.sub("", text).strip()


def _read_string(s: str, i: int) -> tuple[str, int]:
    """Read the quoted string starting at ``s[i]``; return it as JSON text and the end index.

    Handles both quote styles; single-quoted strings are re-quoted with double quotes.
    An unterminated string runs to the end of ``s``.
    """
    quote, j, out = s[i], i + 1, ['"']
    while j < len(s):
        ch = s[j]
        if ch == "\\" and j + 1 < len(s):
            nxt = s[j + 1]
            out.append("'" if (quote == "'" and nxt == "'") else ch + nxt)
            j += 2
            continue
        if ch == quote:
            break
        out.append('\\"' if (ch == '"' and quote == "'") else ch)
        j += 1
    out.append('"')
    return "".join(out), j + 1


def _skip_comment(s: str, i: int) -> int | None:
    """If a ``//``, ``/* */`` or ``#`` comment starts at ``i``, return the index after it."""
    if s.startswith("//", i) or s[i] == "#":
        end = s.find("\n", i)
        return len(s) if end < 0 else end
    if s.startswith("/*", i):
        end = s.find("*/", i + 2)
        return len(s) if end < 0 else end + 2
    return None


def _next_significant(s: str, i: int) -> str:
    """The next character at or after ``i`` that is not whitespace or a comment."""
    while i < len(s):
        if s[i].isspace():
            i += 1
            continue
        after = _skip_comment(s, i)
        if after is None:
            return s[i]
        i = after
    return ""


def _normalize(s: str) -> str:
    """Rewrite near-JSON into JSON, outside string literals only.

    Converts single-quoted strings, Python/JS literals (``True``, ``None``…), bare
    identifier keys (``{answer: 1}``), and drops comments and trailing commas.
    """
    out: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch in "\"'":
            text, i = _read_string(s, i)
            out.append(text)
            continue
        after = _skip_comment(s, i)
        if after is not None:
            i = after
            continue
        if ch.isalpha() or ch == "_":
            j = i
            while j < len(s) and (s[j].isalnum() or s[j] == "_"):
                j += 1
            word = s[i:j]
            if word in _LITERALS:
                out.append(_LITERALS[word])
            elif _next_significant(s, j) == ":":
                out.append(json.dumps(word))
            else:
                out.append(word)
            i = j
            continue
        if ch == "," and _next_significant(s, i + 1) in ("}", "]", ""):
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _loads_lenient(candidate: str) -> Any:
    """Parse ``candidate`` strictly, then after :func:`_normalize`. Raises ValueError."""
    try:
        return json.loads(candidate, strict=False)
    except ValueError:
        return json.loads(_normalize(candidate), strict=False)


def _opens_string(s: str, i: int) -> bool:
    """Whether the quote at ``s[i]`` can start a string (an apostrophe inside a word cannot)."""
    if s[i] == '"':
        return True
    j = i - 1
    while j >= 0 and s[j].isspace():
        j -= 1
    return j < 0 or s[j] in "{[,:"


def _balanced_end(s: str, start: int) -> tuple[int | None, int]:
    """Match the bracket at ``s[start]``.

    Returns ``(end, scanned)``: ``end`` is the index just past the matching bracket, or
    ``None`` if the segment is unbalanced; ``scanned`` is how far the scan got.
    """
    stack: list[str] = []
    i = start
    while i < len(s):
        ch = s[i]
        if ch in "\"'" and _opens_string(s, i):
            _, i = _read_string(s, i)
            continue
        if ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif ch in "}]":
            if stack.pop() != ch:
                return None, i
            if not stack:
                return i + 1, i
        i += 1
    return None, i


def _scan_values(s: str) -> Iterator[Any]:
    """Yield each parseable top-level object/array found in ``s``, in order.

    A bracket whose segment does not parse is skipped and scanning resumes just after
    it. The total scanning work is bounded (a few passes over ``s``), so pathological
    answers full of unmatched brackets cannot take quadratic time.
    """
    i, budget = 0, _SCAN_PASSES * len(s) + 10_000
    while i < len(s) and budget > 0:
        if s[i] not in _PAIRS:
            i += 1
            continue
        end, scanned = _balanced_end(s, i)
        budget -= scanned - i + 1
        if end is not None:
            try:
                value = _loads_lenient(s[i:end])
            except ValueError:
                pass  # not JSON after all (e.g. "[see above]"): look inside it instead
            else:
                yield value
                i = end
                continue
        i += 1


def extract_json(text: str) -> Any:
    """Extract a JSON value from a model's answer, tolerating weak-model habits.

    Order of attempts:

    1. the whole answer (after removing ``<think>`` blocks) as JSON or near-JSON;
    2. fenced code blocks (```` ```json ````, plain ```` ``` ````, or an unclosed fence):
       the last one that parses;
    3. objects/arrays anywhere in the text: the last complete one that parses.

    "Near-JSON" means single quotes, ``True``/``False``/``None``, unquoted keys,
    comments and trailing commas; raw newlines inside strings are accepted too.

    Raises:
        LLMOutputError: if nothing in ``text`` parses.
    """
    body = strip_reasoning(text)
    if body:
        try:
            return _loads_lenient(body)
        except ValueError:
            pass  # not a bare JSON answer; try fences and embedded values below
    fenced = [m.group(2) for m in _FENCE_RE.finditer(body)]
    for block in reversed(fenced):
        values = list(_scan_values(block))
        if values:
            return values[-1]
        try:
            return _loads_lenient(block.strip())
        except ValueError:
            continue
    values = list(_scan_values(body))
    if values:
        return values[-1]
    snippet = text if len(text) <= 300 else text[:300] + "…"
    raise LLMOutputError(f"no JSON object or array found in model output: {snippet!r}", text=text)


def _coerce_candidates(schema: type[BaseModel], data: Any) -> Iterator[Any]:
    """Shapes weak models often wrap the right object in, to try after ``data`` itself.

    ``[{...}]`` → ``{...}``; ``{"Name": {...}}`` → ``{...}``; and a bare list for a
    schema with exactly one list-typed field → ``{field: list}``.
    """
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        yield data[0]
    if isinstance(data, dict) and len(data) == 1:
        (inner,) = data.values()
        if isinstance(inner, dict):
            yield inner
    if isinstance(data, list):
        list_fields = [
            name
            for name, info in schema.model_fields.items()
            if info.annotation is list or get_origin(info.annotation) is list
        ]
        if len(list_fields) == 1:
            yield {list_fields[0]: data}


def validate_as(schema: type[M], data: Any) -> M:
    """Validate ``data`` against ``schema``, also trying common mis-wrappings.

    Raises:
        pydantic.ValidationError: from validating ``data`` itself, if no shape fits.
    """
    from pydantic import ValidationError

    if isinstance(data, schema):
        return data
    try:
        return schema.model_validate(data)
    except ValidationError as first:
        for candidate in _coerce_candidates(schema, data):
            try:
                return schema.model_validate(candidate)
            except ValidationError:
                continue
        raise first


# --------------------------------------------------------------------------- the LLM wrapper


def _transient_errors() -> tuple[type[BaseException], ...]:
    """Exception types worth retrying (imported lazily)."""
    import openai

    return (
        openai.APIConnectionError,  # includes APITimeoutError
        openai.APITimeoutError,
        openai.RateLimitError,
        openai.InternalServerError,
    )


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a transient API failure (retry it) rather than a real error."""
    if getattr(exc, "is_retryable", False) is True:  # langchain_core.exceptions.ModelError
        return True
    return isinstance(exc, _transient_errors())


def _is_unsupported_request(exc: BaseException) -> bool:
    """Whether ``exc`` says the endpoint rejected the request (HTTP 400-style)."""
    import openai
    from langchain_core.exceptions import ModelInvalidRequestError

    return isinstance(exc, (openai.BadRequestError, ModelInvalidRequestError))


def _message_text(message: BaseMessage) -> str:
    """Plain text of a message, whatever its content shape."""
    return str(message.text)


def _raw_json_text(message: BaseMessage) -> str:
    """The JSON-ish text carried by a structured-output raw message.

    Tool-call arguments first (function calling), then invalid tool calls, then content.
    """
    for call in getattr(message, "tool_calls", None) or []:
        return json.dumps(call.get("args", {}))
    for call in getattr(message, "invalid_tool_calls", None) or []:
        if call.get("args"):
            return str(call["args"])
    return _message_text(message)


def _raw_of(out: Any) -> Any:
    """The raw message of an ``include_raw=True`` structured result (else ``out`` itself)."""
    return out["raw"] if isinstance(out, dict) and "raw" in out else out


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
        settings: retry/backoff and structured-output policy; ``model`` names the
            cache namespace. Default: ``LLMSettings()``.
        cache: optional :class:`TextCache`; keys are sha256 of (model id, system,
            prompt, schema name).
        usage: ledger to record into (share one across roles or runs); default new.
        count_tokens: estimator used when a response carries no ``usage_metadata``.
        sleep / asleep: injectable sleeps for the backoff (default ``time.sleep`` /
            ``asyncio.sleep``; tests pass no-ops or set the delays to 0).
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
        asleep: Callable[[float], Any] | None = None,
    ) -> None:
        self.chat = chat
        self.settings = settings if settings is not None else LLMSettings()
        self.cache = cache
        self.usage = usage if usage is not None else Usage()
        self.count_tokens = count_tokens or approx_tokens
        self._sleep = sleep
        self._asleep = asleep
        self._structured_off = self.settings.structured == "off"
        self._runnables: dict[type, Any] = {}

    @classmethod
    def from_settings(
        cls,
        settings: LLMSettings | None = None,
        *,
        cache: TextCache | None = None,
        usage: Usage | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> LLM:
        """Build the chat model with :func:`make_chat_model` and wrap it."""
        settings = LLMSettings.from_env() if settings is None else settings
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
        return self.settings.model or type(self.chat).__name__

    # ---- small pure helpers

    def cache_key(self, prompt: str, *, system: str | None = None, schema_name: str = "") -> str:
        """sha256 of (model id, system, prompt, schema name); ``""`` for plain text."""
        payload = json.dumps([self.model_id, system or "", prompt, schema_name])
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

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

    def _backoff(self, attempt: int) -> float:
        s = self.settings
        return min(s.retry_base_delay_s * (2**attempt), s.retry_max_delay_s)

    def _should_retry(self, exc: BaseException, attempt: int, role: str) -> bool:
        if attempt >= self.settings.max_retries or not is_transient(exc):
            return False
        self.usage.add(role, retries=1)
        logger.info(
            "LLM %s: transient %s, retry %d/%d",
            role or "call",
            type(exc).__name__,
            attempt + 1,
            self.settings.max_retries,
        )
        return True

    # ---- invocation with retries

    async def _async_sleep(self, seconds: float) -> None:
        if self._asleep is not None:
            await self._asleep(seconds)
            return
        import asyncio

        await asyncio.sleep(seconds)

    def _invoke(self, runnable: Any, messages: list[BaseMessage], role: str) -> Any:
        """``runnable.invoke(messages)`` with retries of transient errors."""
        attempt = 0
        while True:
            try:
                return runnable.invoke(messages)
            except Exception as exc:
                if not self._should_retry(exc, attempt, role):
                    raise
            self._sleep(self._backoff(attempt))
            attempt += 1

    async def _ainvoke(self, runnable: Any, messages: list[BaseMessage], role: str) -> Any:
        """Async twin of :meth:`_invoke`."""
        attempt = 0
        while True:
            try:
                return await runnable.ainvoke(messages)
            except Exception as exc:
                if not self._should_retry(exc, attempt, role):
                    raise
            await self._async_sleep(self._backoff(attempt))
            attempt += 1

    # ---- plain text

    def _cached_text(self, key: str, role: str) -> str | None:
        if self.cache is None:
            return None
        hit = self.cache.get_text(key)
        if hit is not None:
            self.usage.add(role, cache_hits=1)
        return hit

    def _finish_text(self, key: str, reply: Any, messages: list[BaseMessage], role: str) -> str:
        self._record(role, messages, reply)
        text = strip_reasoning(_message_text(reply))
        if self.cache is not None:
            self.cache.put_text(key, text)
        return text

    def complete(self, prompt: str, *, system: str | None = None, role: str = "") -> str:
        """Ask for free text. ``<think>`` blocks are removed from the answer."""
        key = self.cache_key(prompt, system=system)
        hit = self._cached_text(key, role)
        if hit is not None:
            return hit
        messages = self._messages(prompt, system)
        reply = self._invoke(self.chat, messages, role)
        return self._finish_text(key, reply, messages, role)

    async def acomplete(self, prompt: str, *, system: str | None = None, role: str = "") -> str:
        """Async :meth:`complete`."""
        key = self.cache_key(prompt, system=system)
        hit = self._cached_text(key, role)
        if hit is not None:
            return hit
        messages = self._messages(prompt, system)
        reply = await self._ainvoke(self.chat, messages, role)
        return self._finish_text(key, reply, messages, role)

    # ---- JSON

    def _structured_runnable(self, schema: type[BaseModel] | None) -> Any | None:
        """The model's structured-output runnable for ``schema``, or ``None`` for text."""
        if schema is None or self._structured_off:
            return None
        if schema in self._runnables:
            return self._runnables[schema]
        mode = self.settings.structured
        kwargs: dict[str, Any] = {"include_raw": True}
        if mode in ("json_schema", "function_calling"):
            kwargs["method"] = mode
        try:
            runnable = self.chat.with_structured_output(schema, **kwargs)
        except NotImplementedError:
            logger.debug("%s has no structured output; parsing text", type(self.chat).__name__)
            self._structured_off = True
            return None
        self._runnables[schema] = runnable
        return runnable

    def _parse_text(self, text: str, schema: type[BaseModel] | None) -> _Attempt:
        """Text → JSON → (optionally) schema instance, as an :class:`_Attempt`."""
        from pydantic import ValidationError

        try:
            data = extract_json(text)
            value = validate_as(schema, data) if schema is not None else data
        except (LLMOutputError, ValidationError) as exc:
            return _Attempt(ok=False, text=text, error=_short_error(exc))
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
                return _Attempt(ok=False, text=raw_text, error=_short_error(exc))
        return self._parse_text(raw_text, schema)  # salvage what the raw answer holds

    def _structured_failed(
        self, exc: Exception, messages: list[BaseMessage], schema: type[BaseModel] | None, role: str
    ) -> _Attempt | None:
        """Handle an exception from the structured call; ``None`` means "use text instead".

        A client-side parse failure (``pydantic.ValidationError`` from the SDK) is a
        malformed answer, salvaged with :func:`extract_json` when the error still carries
        the raw text. In ``auto`` mode a rejected request (HTTP 400: the server does not
        support ``response_format``/tools) switches this LLM to text parsing. Anything
        else is re-raised.
        """
        from pydantic import ValidationError

        if isinstance(exc, ValidationError) and schema is not None:
            raw = _raw_from_validation_error(exc)
            self.usage.add(
                role,
                calls=1,
                estimated=1,
                tokens_out=self.count_tokens(raw),
                tokens_in=self.count_tokens("\n".join(_message_text(m) for m in messages)),
            )
            if raw:
                return self._parse_text(raw, schema)  # e.g. JSON in fences despite response_format
            return _Attempt(ok=False, error=_short_error(exc))
        if self.settings.structured == "auto" and _is_unsupported_request(exc):
            logger.warning(
                "structured output rejected by %s (%s); parsing text instead",
                self.model_id,
                _short_error(exc),
            )
            self._structured_off = True
            return None
        raise exc

    def _attempt_json(
        self, messages: list[BaseMessage], schema: type[BaseModel] | None, role: str
    ) -> _Attempt:
        runnable = self._structured_runnable(schema)
        if runnable is not None and schema is not None:
            try:
                out = self._invoke(runnable, messages, role)
            except Exception as exc:
                failed = self._structured_failed(exc, messages, schema, role)
                if failed is not None:
                    return failed
            else:
                self._record(role, messages, _raw_of(out))
                return self._from_structured(out, schema)
        reply = self._invoke(self.chat, messages, role)
        self._record(role, messages, reply)
        return self._parse_text(_message_text(reply), schema)

    async def _aattempt_json(
        self, messages: list[BaseMessage], schema: type[BaseModel] | None, role: str
    ) -> _Attempt:
        runnable = self._structured_runnable(schema)
        if runnable is not None and schema is not None:
            try:
                out = await self._ainvoke(runnable, messages, role)
            except Exception as exc:
                failed = self._structured_failed(exc, messages, schema, role)
                if failed is not None:
                    return failed
            else:
                self._record(role, messages, _raw_of(out))
                return self._from_structured(out, schema)
        reply = await self._ainvoke(self.chat, messages, role)
        self._record(role, messages, reply)
        return self._parse_text(_message_text(reply), schema)

    def _cached_json(self, key: str, schema: type[BaseModel] | None, role: str) -> _Attempt | None:
        """A cached JSON answer, or ``None`` on a miss (or a stale, non-validating entry)."""
        if self.cache is None:
            return None
        hit = self.cache.get_text(key)
        if hit is None:
            return None
        cached = self._parse_text(hit, schema)
        if not cached.ok:
            logger.warning(
                "ignoring cached entry %s… that no longer validates: %s", key[:12], cached.error
            )
            return None
        self.usage.add(role, cache_hits=1)
        return cached

    def _finish_json(
        self,
        key: str,
        result: _Attempt,
        first: _Attempt | None,
        schema: type[BaseModel] | None,
        role: str,
    ) -> Any:
        if not result.ok:
            what = schema.__name__ if schema is not None else "JSON"
            raise LLMOutputError(
                f"{role or 'LLM'}: no valid {what} after one re-ask: {result.error} "
                f"(first answer: {first.error if first else ''})",
                text=result.text,
            )
        if self.cache is not None:
            self.cache.put_text(key, json.dumps(_jsonable(result.value)))
        return result.value

    @overload
    def complete_json(
        self, prompt: str, *, system: str | None = ..., schema: type[M], role: str = ...
    ) -> M: ...
    @overload
    def complete_json(
        self, prompt: str, *, system: str | None = ..., schema: None = ..., role: str = ...
    ) -> Any: ...

    def complete_json(
        self,
        prompt: str,
        *,
        system: str | None = None,
        schema: type[BaseModel] | None = None,
        role: str = "",
    ) -> Any:
        """Ask for JSON; return the parsed value, or a ``schema`` instance if given.

        Uses native structured output when ``settings.structured`` allows it and the
        model has it, else text + :func:`extract_json`; a malformed answer is re-asked
        once with a short reminder.

        Raises:
            LLMOutputError: if the re-asked answer is still unusable.
        """
        key = self.cache_key(prompt, system=system, schema_name=_schema_name(schema))
        cached = self._cached_json(key, schema, role)
        if cached is not None:
            return cached.value
        first = self._attempt_json(self._messages(prompt, system), schema, role)
        if first.ok:
            return self._finish_json(key, first, None, schema, role)
        logger.info("LLM %s: malformed JSON (%s); re-asking once", role or "call", first.error)
        second = self._attempt_json(
            self._reask_messages(prompt, system, first, schema), schema, role
        )
        return self._finish_json(key, second, first, schema, role)

    @overload
    async def acomplete_json(
        self, prompt: str, *, system: str | None = ..., schema: type[M], role: str = ...
    ) -> M: ...
    @overload
    async def acomplete_json(
        self, prompt: str, *, system: str | None = ..., schema: None = ..., role: str = ...
    ) -> Any: ...

    async def acomplete_json(
        self,
        prompt: str,
        *,
        system: str | None = None,
        schema: type[BaseModel] | None = None,
        role: str = "",
    ) -> Any:
        """Async :meth:`complete_json`."""
        key = self.cache_key(prompt, system=system, schema_name=_schema_name(schema))
        cached = self._cached_json(key, schema, role)
        if cached is not None:
            return cached.value
        first = await self._aattempt_json(self._messages(prompt, system), schema, role)
        if first.ok:
            return self._finish_json(key, first, None, schema, role)
        logger.info("LLM %s: malformed JSON (%s); re-asking once", role or "call", first.error)
        second = await self._aattempt_json(
            self._reask_messages(prompt, system, first, schema), schema, role
        )
        return self._finish_json(key, second, first, schema, role)


def _schema_name(schema: type[BaseModel] | None) -> str:
    """Cache-key component: the schema's name, or ``"<json>"`` for schema-less JSON."""
    return schema.__name__ if schema is not None else "<json>"


def _jsonable(value: Any) -> Any:
    """``value`` with pydantic models dumped to plain JSON data."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def _raw_from_validation_error(exc: Any) -> str:
    """The model's raw answer as kept in a pydantic ``ValidationError``, or ``""``.

    Invalid JSON keeps the whole string; a missing top-level field keeps the object.
    """
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


def _short_error(exc: BaseException, limit: int = 300) -> str:
    """A one-line, bounded description of ``exc`` for logs and re-ask reminders.

    Pydantic errors are listed as ``field: message`` without inputs or URLs.
    """
    errors = getattr(exc, "errors", None)
    if callable(errors) and hasattr(exc, "title"):
        parts = [
            f"{'.'.join(str(p) for p in e.get('loc', ())) or '(root)'}: {e.get('msg', '')}"
            for e in errors(include_url=False)
        ]
        text = "; ".join(parts)
    else:
        text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"
