"""Errors a user can act on. The CLI prints their message on one line and exits with 2."""

from __future__ import annotations


class MindscapeError(Exception):
    """A problem with the user's input or setup, with a message that says what to do."""


class InputError(MindscapeError):
    """An input file that cannot be indexed (missing, empty, binary, unreadable)."""


class ModelError(MindscapeError):
    """A model that cannot be loaded (a missing local path, an unknown name)."""


class StoreError(MindscapeError):
    """A store that is missing, empty or inconsistent with the request."""


class EndpointError(MindscapeError):
    """An LLM endpoint that cannot be reached or keeps failing after the configured retries.
    The message names the endpoint, never a key."""
