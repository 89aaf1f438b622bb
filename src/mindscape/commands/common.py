"""Options and builders shared by the CLI subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

DEFAULT_STORE = ".mindscape/store"


def add_store_option(p: argparse.ArgumentParser) -> None:
    """`--store DIR` (default: $MINDSCAPE_STORE or ./.mindscape/store)."""
    p.add_argument(
        "--store",
        default=os.environ.get("MINDSCAPE_STORE", DEFAULT_STORE),
        help="store directory (default: $MINDSCAPE_STORE or %(default)s)",
    )


def add_model_options(p: argparse.ArgumentParser) -> None:
    """Embedder and LLM backend options."""
    p.add_argument(
        "--embedder",
        default=None,
        help="'minilm' (default, packaged) or a local BGE model directory ($MINDSCAPE_EMBEDDER)",
    )
    p.add_argument(
        "--llm",
        choices=["offline", "openai"],
        default=None,
        help="offline extractive backend (default) or an OpenAI-compatible endpoint ($MINDSCAPE_LLM_BACKEND)",
    )
    p.add_argument("--model", default=None, help="chat model id ($MINDSCAPE_LLM_MODEL)")
    p.add_argument(
        "--base-url", default=None, help="OpenAI-compatible base URL ($MINDSCAPE_LLM_BASE_URL)"
    )


def llm_from_args(args: argparse.Namespace, cache: Any = None) -> Any:
    """The `LLM` the arguments ask for, or None for the offline backend."""
    from mindscape.llm import LLM, LLMSettings
    from mindscape.tokens import default_counter

    settings = LLMSettings.from_env(backend=args.llm, model=args.model, base_url=args.base_url)
    if settings.backend == "offline":
        return None
    return LLM.from_settings(settings, cache=cache, count_tokens=default_counter().count)


def warn(msg: str) -> None:
    """A warning line on stderr."""
    print(f"mindscape: warning: {msg}", file=sys.stderr)
