"""Structured output for :class:`~mindscape.llm.client.LLM`: the modes, parsing and the re-ask.

* the runnables of the structured-output modes: the model's native structured output
  (``with_structured_output``, ``json_schema`` or ``function_calling``), or the chat model
  bound to a JSON grammar (``json_object`` with a schema, what llama.cpp's server takes);
* reading a reply: text repaired by :func:`~mindscape.llm.output.extract_json` and validated
  against the schema, a ``with_structured_output(include_raw=True)`` result, and the raw
  answer salvaged from a client-side ``ValidationError``;
* the conversation of the single re-ask with a short reminder.

Each reading is an :class:`Attempt`: the value, or the raw text and why it failed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindscape.llm.output import LLMOutputError, extract_json, short_error, validate_as

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

    from mindscape.llm.settings import StructuredMode

logger = logging.getLogger("mindscape.llm.client")  # the facade's log, as before the split

REASK_REMINDER = (
    "Your previous answer could not be used: {error}\n"
    "Return only valid JSON{shape}, with double-quoted keys and strings, no comments, "
    "no trailing commas and no text before or after it."
)


@dataclass
class Attempt:
    """One JSON attempt: either ``value`` (ok) or the raw text and why it failed."""

    ok: bool
    value: Any = None
    text: str = ""
    error: str = ""


# ---- reply text


def message_text(message: Any) -> str:
    """Plain text of a message, whatever its content shape."""
    return str(message.text) if hasattr(message, "text") else str(message)


def raw_json_text(message: Any) -> str:
    """The JSON-ish text of a reply: tool-call arguments first (function calling), then content."""
    for call in getattr(message, "tool_calls", None) or []:
        return json.dumps(call.get("args", {}))
    for call in getattr(message, "invalid_tool_calls", None) or []:
        if call.get("args"):
            return str(call["args"])
    return message_text(message)


def jsonable(value: Any) -> Any:
    """``value`` with pydantic models dumped to plain JSON data."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def raw_from_validation_error(exc: Any) -> str:
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


# ---- messages


def build_messages(prompt: str, system: str | None) -> list[BaseMessage]:
    """The conversation of one call: the optional system message, then the prompt."""
    from langchain_core.messages import HumanMessage, SystemMessage

    head: list[BaseMessage] = [SystemMessage(content=system)] if system else []
    return [*head, HumanMessage(content=prompt)]


def reask_messages(
    prompt: str, system: str | None, first: Attempt, schema: type[BaseModel] | None
) -> list[BaseMessage]:
    """The conversation for the single re-ask: the bad answer, then the reminder."""
    from langchain_core.messages import AIMessage, HumanMessage

    shape = f" with the keys {', '.join(schema.model_fields)}" if schema is not None else ""
    reminder = REASK_REMINDER.format(error=first.error, shape=shape)
    messages = build_messages(prompt, system)
    if first.text:
        return [*messages, AIMessage(content=first.text), HumanMessage(content=reminder)]
    messages[-1] = HumanMessage(content=f"{prompt}\n\n{reminder}")
    return messages


# ---- the modes' runnables


def structured_runnable(
    chat: BaseChatModel, mode: StructuredMode, schema: type[BaseModel] | None
) -> tuple[Any | None, StructuredMode]:
    """The runnable for native structured output (``None`` to parse text), and the mode from
    now on: ``off`` when the chat model has no structured output."""
    if schema is None or mode in ("off", "json_object"):
        return None, mode
    kwargs: dict[str, Any] = {"include_raw": True}
    if mode in ("json_schema", "function_calling"):
        kwargs["method"] = mode
    try:
        return chat.with_structured_output(schema, **kwargs), mode
    except NotImplementedError:
        logger.debug("%s has no structured output; parsing text", type(chat).__name__)
        return None, "off"


def text_runnable(chat: BaseChatModel, mode: StructuredMode, schema: type[BaseModel] | None) -> Any:
    """The chat model, bound to a JSON grammar in ``json_object`` mode."""
    if mode != "json_object":
        return chat
    fmt: dict[str, Any] = {"type": "json_object"}
    if schema is not None:
        grammar = getattr(schema, "grammar_schema", None)
        fmt["schema"] = grammar() if callable(grammar) else schema.model_json_schema()
    return chat.bind(response_format=fmt)


# ---- reading a reply


def parse_text(text: str, schema: type[BaseModel] | None) -> Attempt:
    """Text → JSON → (optionally) schema instance, as an :class:`Attempt`."""
    from pydantic import ValidationError

    try:
        data = extract_json(text)
        value = validate_as(schema, data) if schema is not None else data
    except (LLMOutputError, ValidationError) as exc:
        return Attempt(ok=False, text=text, error=short_error(exc))
    return Attempt(ok=True, value=value, text=text)


def structured_reply(out: Any) -> Any:
    """The model's message inside a ``with_structured_output(include_raw=True)`` result."""
    return out["raw"] if isinstance(out, dict) and "raw" in out else out


def from_structured(out: Any, schema: type[BaseModel]) -> Attempt:
    """Interpret a ``with_structured_output(include_raw=True)`` result."""
    if not (isinstance(out, dict) and "raw" in out):
        return parse_text(json.dumps(jsonable(out)), schema)
    raw_text = raw_json_text(out["raw"])
    if out.get("parsed") is not None and out.get("parsing_error") is None:
        from pydantic import ValidationError

        try:
            return Attempt(ok=True, value=validate_as(schema, out["parsed"]), text=raw_text)
        except ValidationError as exc:
            return Attempt(ok=False, text=raw_text, error=short_error(exc))
    return parse_text(raw_text, schema)  # salvage what the raw answer holds


def salvage(exc: Exception, schema: type[BaseModel]) -> tuple[str, Attempt] | None:
    """A client-side parse failure (the SDK's ``ValidationError``) is a malformed answer:
    the raw text it carries, and that text parsed. ``None`` for any other exception."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    raw = raw_from_validation_error(exc)
    return raw, (parse_text(raw, schema) if raw else Attempt(ok=False, error=short_error(exc)))
