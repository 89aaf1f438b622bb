"""The chat-model factory: one ``ChatOpenAI`` for every backend that has a model.

``openai`` talks to the configured endpoint; ``local`` first starts (or reuses) this
process's llama.cpp server for the local model (:mod:`mindscape.models.server`) and talks to it
through the same client, one that sends each call's output cap as ``max_tokens``, the only
name that server reads (:mod:`mindscape.llm.llamacpp_chat`). ``langchain_openai`` is imported
on first use only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from mindscape.errors import ModelError
from mindscape.llm.settings import LLMSettings

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def local_base_url(settings: LLMSettings) -> str:
    """The base URL of the local model's server, started for this process if needed.

    Raises:
        ModelError: one line saying what to run when the model or its runtime is missing.
    """
    from mindscape.models.adapter import resolve_adapter
    from mindscape.models.local import INSTALL_HINT, require_model, runtime_available
    from mindscape.models.server import default_threads, shared_server

    path = require_model(settings.local_model)
    if not runtime_available():
        raise ModelError(f"llama-cpp-python[server] is not installed: {INSTALL_HINT}")
    adapter = resolve_adapter(settings.reader_adapter, path)
    threads = settings.local_threads or default_threads()
    return shared_server(path, threads=threads, n_ctx=settings.local_ctx, adapter=adapter).base_url


def make_chat_model(
    settings: LLMSettings | None = None, *, client_retries: int = 0
) -> BaseChatModel:
    """Build the ``ChatOpenAI`` model described by ``settings`` (default: from the env).

    The SDK's own retries default to 0 because :class:`~mindscape.llm.client.LLM` retries
    with backoff itself; pass ``client_retries`` when using the model without it.

    Raises:
        ValueError: for the extractive backend (it has no chat model), or when OpenAI's
            own API is targeted without any API key.
        ModelError: for ``local`` when the model or llama-cpp-python is missing.
    """
    settings = (LLMSettings.from_env() if settings is None else settings).resolved()
    if settings.backend == "extractive":
        raise ValueError(
            "the extractive backend has no chat model; set backend='local' or 'openai' "
            "(MINDSCAPE_LLM_BACKEND) to use a model"
        )
    base_url = settings.base_url
    if settings.backend == "local" and base_url is None:
        base_url = local_base_url(settings)
    key = replace(settings, base_url=base_url).resolve_api_key()
    if key is None:
        raise ValueError(
            "no API key for OpenAI: set OPENAI_API_KEY or LLMSettings.api_key, or point "
            "base_url (MINDSCAPE_LLM_BASE_URL) at a local OpenAI-compatible server"
        )
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    chat_class = ChatOpenAI
    if settings.backend == "local":
        from mindscape.llm.llamacpp_chat import LlamaCppChatOpenAI

        chat_class = LlamaCppChatOpenAI  # the server reads the output cap as max_tokens
    return chat_class(
        model=settings.model_name(),
        base_url=base_url,
        api_key=SecretStr(key),
        temperature=settings.temperature,
        timeout=settings.timeout_s,
        max_retries=client_retries,
        seed=0 if settings.backend == "local" else None,
    )
