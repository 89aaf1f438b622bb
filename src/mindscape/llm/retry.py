"""Retries of one model call: which errors are transient, the backoff, the local-server restart.

:func:`invoke_with_retries` runs ``runnable.invoke(messages)`` under ``tenacity`` (the library
langchain-core's own ``with_retry`` uses): transient API errors (connection, timeout, 429, 5xx)
are retried with exponential backoff and jitter, each retry is counted in the
:class:`~mindscape.llm.usage.Usage` ledger, and a connection error from the ``local`` backend
starts the killed llama.cpp server again. What is left after the last try becomes a one-line
:class:`~mindscape.errors.EndpointError` when the user can act on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mindscape.errors import EndpointError

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from mindscape.llm.settings import LLMSettings
    from mindscape.llm.usage import Usage

logger = logging.getLogger("mindscape.llm.client")  # the facade's log, as before the split


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a transient API failure (retry it) rather than a real error."""
    import openai

    if getattr(exc, "is_retryable", False) is True:  # langchain_core.exceptions.ModelError
        return True
    transient = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
    return isinstance(exc, transient) and not is_unsupported_request(exc)


def is_connection_error(exc: BaseException | None) -> bool:
    """The endpoint could not be reached (the OpenAI SDK's or langchain-core's error)."""
    import openai
    from langchain_core.exceptions import ModelConnectionError

    return isinstance(exc, (openai.APIConnectionError, ModelConnectionError))


def failure(exc: BaseException) -> str:
    """What went wrong, without the message (which may quote a request or a header)."""
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}, HTTP {status}" if status else type(exc).__name__


def is_refusal(exc: BaseException) -> bool:
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


def is_unsupported_request(exc: BaseException) -> bool:
    """Whether the endpoint rejected the request itself: HTTP 400, or a server error that
    names the structured-output parameter (llama.cpp answers ``json_schema`` with a 500)."""
    import openai

    if is_request_error(exc):
        return True
    text = str(exc)
    return isinstance(exc, openai.InternalServerError) and (
        "response_format" in text or "json_schema" in text
    )


def endpoint_error(exc: BaseException, settings: LLMSettings) -> EndpointError | None:
    """The one-line error for a call that failed for good, or ``None`` to re-raise ``exc``."""
    if is_refusal(exc):
        return EndpointError(
            f"the LLM endpoint {settings.endpoint_name()} refused the request "
            f"({failure(exc)}); check the API key, the model name "
            f"({settings.model_name()}) and the base URL"
        )
    if is_transient(exc):
        return EndpointError(
            f"the LLM endpoint {settings.endpoint_name()} failed "
            f"{settings.max_retries + 1} times ({failure(exc)}); check that it is running "
            f"and reachable, raise MINDSCAPE_LLM_MAX_RETRIES, or answer offline with "
            f"--llm extractive"
        )
    return None


def _retrying(
    settings: LLMSettings, usage: Usage, role: str, sleep: Callable[[float], None]
) -> Any:
    """The ``tenacity.Retrying`` policy of ``settings``, counting each retry in ``usage``."""
    from tenacity import (
        Retrying,
        retry_if_exception,
        stop_after_attempt,
        wait_exponential,
        wait_random,
    )

    s = settings

    def count_retry(state: Any) -> None:
        usage.add(role, retries=1)
        if s.backend == "local" and is_connection_error(state.outcome.exception()):
            from mindscape.models.server import revive

            revive()  # the local server was killed: start it again, once
        logger.info("LLM %s: transient error, retry %d", role or "call", state.attempt_number)

    return Retrying(
        stop=stop_after_attempt(s.max_retries + 1),
        wait=wait_exponential(multiplier=s.retry_base_delay_s, max=s.retry_max_delay_s)
        + wait_random(0, s.retry_base_delay_s),  # jitter: parallel callers do not align
        retry=retry_if_exception(is_transient),
        before_sleep=count_retry,
        sleep=sleep,
        reraise=True,
    )


def invoke_with_retries(
    runnable: Any,
    messages: list[BaseMessage],
    *,
    settings: LLMSettings,
    usage: Usage,
    role: str,
    sleep: Callable[[float], None],
) -> Any:
    """``runnable.invoke(messages)`` with retries of transient errors (tenacity)."""
    try:
        return _retrying(settings, usage, role, sleep)(runnable.invoke, messages)
    except Exception as exc:
        error = endpoint_error(exc, settings)
        if error is not None:
            raise error from exc
        raise
