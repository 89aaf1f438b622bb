"""Turning a model's answer into data: JSON repair and schema validation.

Repair is the well-kept ``json-repair`` library (fences, prose around the object, trailing
commas, single quotes, Python literals, comments, truncated output). This module only adds
what is specific to chat models: ``<think>`` blocks are removed, the last fenced block wins
over earlier drafts, and an answer with no JSON at all is an :class:`LLMOutputError` (the
caller re-asks once) rather than an empty string.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar, get_origin

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")

_THINK_RE = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)


class LLMOutputError(ValueError):
    """The model's answer could not be turned into the requested JSON / schema.

    Attributes:
        text: the offending model output.
    """

    def __init__(self, message: str, *, text: str = "") -> None:
        super().__init__(message)
        self.text = text


def strip_reasoning(text: str) -> str:
    """Remove ``<think>…</think>`` blocks that reasoning models put before the answer."""
    return _THINK_RE.sub("", text).strip()


def extract_json(text: str) -> Any:
    """The JSON value in a model's answer (the last fenced block's, if there are fences).

    Raises:
        LLMOutputError: if the answer holds no JSON value.
    """
    import json_repair

    body = strip_reasoning(text)
    fenced = [b.strip() for b in _FENCE_RE.findall(body) if b.strip()]
    candidate = fenced[-1] if fenced else body
    value = json_repair.loads(candidate) if candidate else ""
    if value == "" and candidate not in ('""', "''"):
        snippet = text if len(text) <= 300 else text[:300] + "…"
        raise LLMOutputError(f"no JSON value found in model output: {snippet!r}", text=text)
    return value


def _coerce_candidates(schema: type[BaseModel], data: Any) -> Iterator[Any]:
    """Shapes weak models often wrap the right object in, to try after ``data`` itself.

    ``[{...}]`` or several objects → the last object; ``{"Name": {...}}`` → ``{...}``; and a
    bare list for a schema with exactly one list-typed field → ``{field: list}``.
    """
    if isinstance(data, list) and data and isinstance(data[-1], dict):
        yield data[-1]
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


def short_error(exc: BaseException, limit: int = 300) -> str:
    """A one-line, bounded description of ``exc`` for logs and re-ask reminders.

    Pydantic errors are listed as ``field: message`` without inputs or URLs.
    """
    errors = getattr(exc, "errors", None)
    if callable(errors) and hasattr(exc, "title"):
        text = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or '(root)'}: {e.get('msg', '')}"
            for e in errors(include_url=False)
        )
    else:
        text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"
