"""How to reach the chat model: backend, endpoint, local-model options, retry policy.

Backends:

* ``local``: the embedded model (Qwen2.5-Coder-1.5B-Instruct, or any GGUF named by
  ``MINDSCAPE_LOCAL_MODEL``) served by llama.cpp on a loopback port and reached through the
  same OpenAI-compatible client as the other endpoints;
* ``openai``: any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, a llama.cpp server);
* ``extractive``: no chat model; every role is the deterministic extractive reasoner;
* ``auto`` (default): ``local`` when the model and its runtime are installed, else
  ``extractive`` with a one-line notice saying how to install the model.

Precedence for every field: **explicit argument > environment > default**
(:meth:`LLMSettings.from_env`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, get_args
from urllib.parse import urlparse

Backend = Literal["auto", "extractive", "local", "openai"]
StructuredMode = Literal["auto", "json_schema", "json_object", "function_calling", "off"]
BACKENDS: tuple[str, ...] = get_args(Backend)
STRUCTURED_MODES: tuple[str, ...] = get_args(StructuredMode)
_ALIASES = {"offline": "extractive"}

#: Key sent when the endpoint is not OpenAI's and no key is configured: local servers
#: (vLLM, Ollama, llama.cpp) ignore it, but ``ChatOpenAI`` refuses to start without one.
PLACEHOLDER_API_KEY = "sk-no-key-needed"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
LOCAL_MODEL_ALIAS = "local"


def env_name(field: str) -> str:
    """The environment variable that sets the LLMSettings field `field` (the first, where
    several do)."""
    return _ENV[field][0]


_ENV: dict[str, tuple[str, ...]] = {
    "backend": ("MINDSCAPE_LLM_BACKEND",),
    "model": ("MINDSCAPE_LLM_MODEL",),
    "base_url": ("MINDSCAPE_LLM_BASE_URL", "OPENAI_BASE_URL"),
    "api_key": ("OPENAI_API_KEY",),
    "structured": ("MINDSCAPE_LLM_STRUCTURED",),
    "timeout_s": ("MINDSCAPE_LLM_TIMEOUT_S",),
    "max_retries": ("MINDSCAPE_LLM_MAX_RETRIES",),
    "local_model": ("MINDSCAPE_LOCAL_MODEL",),
    "local_threads": ("MINDSCAPE_LOCAL_THREADS",),
    "local_ctx": ("MINDSCAPE_LOCAL_CTX",),
    "reader_adapter": ("MINDSCAPE_READER_ADAPTER",),
    "index_llm": ("MINDSCAPE_INDEX_LLM",),
}


def _env_str(env: Mapping[str, str], *names: str) -> str | None:
    """First non-empty value among ``names`` in ``env``."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def _is_openai_host(url: str) -> bool:
    """Whether ``url`` points at OpenAI's own API (which needs a real key)."""
    host = (urlparse(url).hostname or "").lower()
    return host == "openai.com" or host.endswith(".openai.com")


@dataclass
class LLMSettings:
    """How to reach the chat model. Plain data: JSON-serialisable, no clients.

    Attributes:
        backend: ``auto`` | ``extractive`` | ``local`` | ``openai`` (module docstring).
        model: model id sent to the endpoint; ``None`` is ``gpt-4o-mini`` for ``openai``
            and the server's alias for ``local``.
        base_url: endpoint root, e.g. ``http://127.0.0.1:8000/v1``; ``None`` means OpenAI's
            own API (``openai``) or a server started for this process (``local``).
        api_key: ``None`` reads ``OPENAI_API_KEY`` when the model is built; for an
            endpoint other than OpenAI's with no key anywhere, a placeholder is sent.
        temperature: sampling temperature (0 keeps runs repeatable).
        timeout_s: per-request timeout in seconds (a long prompt on two cores takes minutes).
        max_retries: retries of transient errors (so ``max_retries + 1`` attempts).
        structured: ``auto`` (``json_object`` with a schema for ``local``, which llama.cpp
            turns into a grammar; the model's native structured output elsewhere, falling
            back to text parsing when the endpoint rejects it); or force ``json_schema``,
            ``json_object``, ``function_calling``; ``off`` always parses text.
        retry_base_delay_s: first backoff delay; doubles on each retry.
        retry_max_delay_s: cap on a single backoff delay.
        local_model: a GGUF file for ``local``; ``None`` is the installed default.
        local_threads: llama.cpp threads; ``None`` is every core this process may use.
        local_ctx: llama.cpp context size in tokens.
        reader_adapter: with ``local``, the LoRA adapter llama.cpp loads beside the model:
            ``none`` (the base weights), ``shipped`` (trained on FairytaleQA train, in the
            package) or a path to an adapter GGUF (:mod:`mindscape.models.adapter`).
        index_llm: with ``local``, also use the model at index time (summaries, outline,
            triples); off by default: a 100K-token book would take hours on two cores.
    """

    backend: Backend = "auto"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.0
    timeout_s: float = 600.0
    max_retries: int = 3
    structured: StructuredMode = "auto"
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 8.0
    local_model: str | None = None
    local_threads: int | None = None
    local_ctx: int = 8192
    reader_adapter: str = "none"
    index_llm: bool = False

    def __post_init__(self) -> None:
        self.backend = _ALIASES.get(self.backend, self.backend)  # type: ignore[assignment]
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.structured not in STRUCTURED_MODES:
            raise ValueError(
                f"structured must be one of {STRUCTURED_MODES}, got {self.structured!r}"
            )
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.local_threads is not None and self.local_threads < 1:
            raise ValueError(f"local_threads must be >= 1, got {self.local_threads}")
        if self.local_ctx < 512:
            raise ValueError(f"local_ctx must be >= 512, got {self.local_ctx}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        """Build settings with precedence explicit argument > environment > default.

        Environment variables (empty values count as unset): ``MINDSCAPE_LLM_BACKEND``,
        ``MINDSCAPE_LLM_MODEL``, ``MINDSCAPE_LLM_BASE_URL`` (else ``OPENAI_BASE_URL``),
        ``OPENAI_API_KEY``, ``MINDSCAPE_LLM_STRUCTURED``, ``MINDSCAPE_LLM_TIMEOUT_S``,
        ``MINDSCAPE_LLM_MAX_RETRIES``, ``MINDSCAPE_LOCAL_MODEL``, ``MINDSCAPE_LOCAL_THREADS``,
        ``MINDSCAPE_LOCAL_CTX``, ``MINDSCAPE_READER_ADAPTER``, ``MINDSCAPE_INDEX_LLM``
        (1/true/yes).

        Args:
            env: the environment to read (default ``os.environ``).
            **overrides: explicit field values; ``None`` means "not given".
        """
        env = os.environ if env is None else env
        known = {f.name: f for f in fields(cls)}
        unknown = set(overrides) - set(known)
        if unknown:
            raise TypeError(f"unknown LLMSettings fields: {sorted(unknown)}")
        values: dict[str, Any] = {}
        for name, names in _ENV.items():
            raw = _env_str(env, *names)
            if raw is not None:
                values[name] = _convert(name, raw)
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

    def endpoint_name(self) -> str:
        """Where requests go, safe to print: scheme, host, port and path of ``base_url``
        (credentials and query dropped)."""
        if self.base_url:
            from urllib.parse import urlsplit

            u = urlsplit(self.base_url)
            port = f":{u.port}" if u.port else ""
            return f"{u.scheme}://{u.hostname or ''}{port}{u.path}"
        return "the local model server" if self.backend == "local" else "https://api.openai.com/v1"

    def model_name(self) -> str:
        """The model id to send (the backend's default when none is set)."""
        if self.model:
            return self.model
        return LOCAL_MODEL_ALIAS if self.backend == "local" else DEFAULT_OPENAI_MODEL

    def structured_mode(self) -> StructuredMode:
        """``structured`` with ``auto`` resolved for the local backend."""
        if self.structured == "auto" and self.backend == "local":
            return "json_object"
        return self.structured

    def resolved(self) -> LLMSettings:
        """A copy with ``auto`` replaced by the backend that will run (see :func:`resolve_backend`)."""
        if self.backend != "auto":
            return self
        return replace(self, backend=resolve_backend(self)[0])

    def as_dict(self) -> dict[str, Any]:
        """The settings as a dict, without the API key (safe to log or store)."""
        data = asdict(self)
        data.pop("api_key")
        return data


def _convert(name: str, raw: str) -> Any:
    if name == "backend":
        return raw.lower()
    if name == "timeout_s":
        return float(raw)
    if name in ("max_retries", "local_threads", "local_ctx"):
        return int(raw)
    if name == "index_llm":
        return raw.lower() in ("1", "true", "yes", "on")
    return raw


def resolve_backend(settings: LLMSettings) -> tuple[Backend, str | None]:
    """The backend ``auto`` stands for, and a one-line notice when it falls back.

    ``local`` when a local model is found (``local_model``, ``MINDSCAPE_LOCAL_MODEL``, or
    the installed default) and llama-cpp-python is importable; else ``extractive``.
    """
    if settings.backend != "auto":
        return settings.backend, None
    from mindscape.models.local import INSTALL_HINT, find_model, runtime_available

    path = find_model(settings.local_model)
    if path is None:
        return "extractive", f"no local model installed, answering extractively; {INSTALL_HINT}"
    if not path.is_file():
        return "extractive", f"no local model at {path}, answering extractively; {INSTALL_HINT}"
    if not runtime_available():
        return "extractive", (
            f"llama-cpp-python is not installed, answering extractively; {INSTALL_HINT}"
        )
    return "local", None
