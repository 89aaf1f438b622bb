"""The LLM layer, one concern per module.

* :mod:`~mindscape.llm.settings`: backends (``auto``, ``local``, ``openai``, ``extractive``)
  and every option, from arguments and the environment;
* :mod:`~mindscape.llm.chat`: the ``ChatOpenAI`` factory (for ``local``, after starting the
  model's server);
* :mod:`~mindscape.llm.client`: :class:`LLM`, retries, caching, JSON with one re-ask;
* :mod:`~mindscape.llm.output`: JSON repair (``json-repair``) and schema validation;
* :mod:`~mindscape.llm.usage`: the per-role ledger of calls and tokens;
* :mod:`~mindscape.models.local`: installing and checking the embedded GGUF model;
* :mod:`~mindscape.models.server`: the llama.cpp server's lifecycle (no orphans).

Nothing heavy is imported here: ``langchain_openai``, ``openai``, ``pydantic`` and
``json_repair`` load on first use.
"""

from mindscape.llm.chat import make_chat_model
from mindscape.llm.client import LLM, TextCache, is_transient
from mindscape.llm.output import LLMOutputError, extract_json, strip_reasoning, validate_as
from mindscape.llm.settings import PLACEHOLDER_API_KEY, LLMSettings, resolve_backend
from mindscape.llm.usage import Usage, approx_tokens

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
    "resolve_backend",
    "strip_reasoning",
    "validate_as",
]
