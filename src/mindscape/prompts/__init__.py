"""Prompt templates, one module per LLM role, as `str.format` constants.

`render(template, **values)` fills a template and raises on a missing placeholder, so a
template and its caller can never silently drift apart.
"""

from __future__ import annotations

import string


def placeholders(template: str) -> set[str]:
    """The `{names}` a template needs."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def render(template: str, **values: object) -> str:
    """Fill `template`; a missing value raises `KeyError` naming it."""
    missing = placeholders(template) - values.keys()
    if missing:
        raise KeyError(f"prompt is missing values for: {', '.join(sorted(missing))}")
    return template.format(**values)
