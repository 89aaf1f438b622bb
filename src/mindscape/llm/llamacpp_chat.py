"""``ChatOpenAI`` for llama-cpp-python's server, which reads the output cap as ``max_tokens``.

``langchain_openai`` sends a call's cap as ``max_completion_tokens`` (OpenAI's name since
September 2024); llama-cpp-python's OpenAI-compatible server does not know that field and
ignores it, so every capped role would run uncapped on the local model. This client sends
the cap under the older name instead. Imported only when the local backend builds its chat
model (``langchain_openai`` stays a first-use import).
"""

from __future__ import annotations

from typing import Any

from langchain_openai import ChatOpenAI


class LlamaCppChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` whose requests carry the output cap as ``max_tokens``."""

    def _get_request_payload(
        self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        return payload
