"""`mindscape mcp`: the store's books as MCP tools over stdio (:mod:`mindscape.serve.mcp`).

    mindscape mcp --store DIR [--preset NAME] [--llm ...] [--no-warm] [--quiet]

An MCP client starts it (a desktop assistant's or a coding agent's configuration names the
command) and speaks the protocol on its stdin and stdout; its log goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from mindscape.commands.common import (
    add_command,
    add_context_option,
    add_model_options,
    add_quiet_option,
    add_store_option,
)
from mindscape.presets import PRESET_NAMES

if TYPE_CHECKING:
    from mindscape.serve.mcp import BookTools


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `mcp` on the CLI's subparsers."""
    p = add_command(sub, "mcp", run)
    add_store_option(p)
    add_context_option(
        p, "preset", choices=PRESET_NAMES, help="the preset of an `ask` that names none."
    )
    add_model_options(p)
    p.add_argument(
        "--no-warm",
        action="store_true",
        help="answer `ask` in this process even when a warm process runs (`mindscape serve`; "
        "also MINDSCAPE_WARM=0)",
    )
    add_quiet_option(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Serve the store's books as MCP tools over stdio, for other agents.

    Speak the Model Context Protocol on stdin and stdout (the official `mcp` SDK's FastMCP
    server) with three tools: list_books (the store's books, titles and sizes), find_passages
    (the passages that match a question, by retrieval alone: no model, well under a second)
    and ask (the whole agent: the answer, whether it is trusted, up to three quotes with
    their places, rounds and seconds; progress at each step). An MCP client starts it; the
    store is only read. `ask` goes through the warm process when one runs (`mindscape
    serve`), else answers here. A call that cannot be answered (an empty or overlong
    question, an unknown book or preset, a missing or damaged store, a model that is not
    installed) gets a one-line tool error, and the server goes on. The log goes to stderr.

    Examples:
        mindscape mcp --store runs/book
        mindscape mcp --store runs/book --preset naive --llm extractive
        mindscape mcp --store runs/library --no-warm --quiet
    """
    from mindscape.serve.mcp import serve

    log = logging.getLogger("mindscape")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.ERROR if args.quiet else logging.INFO)
    serve(book_tools(args), "ERROR" if args.quiet else "WARNING")
    return 0


def book_tools(args: argparse.Namespace) -> BookTools:
    """The tools of ``mcp``'s command line: its store, preset and model options, answered by
    ``ask``'s own function."""
    from mindscape.commands.ask import answer_here, parse_options
    from mindscape.serve.mcp import BookTools

    return BookTools(
        store=args.store,
        answer_here=answer_here,
        parse_ask=parse_options,
        model_flags=model_flags(args),
        embedder=args.embedder,
        preset=args.preset,
        warm=not args.no_warm,
    )


MODEL_OPTIONS = ("llm", "model", "base_url", "local_model", "reader_adapter")
"""The options of ``mcp`` that ``ask`` takes as they are (``add_llm_options``')."""


def model_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """The given :data:`MODEL_OPTIONS` as ``ask`` flags: ``("--llm", "local", ...)``."""
    given = [(name, getattr(args, name)) for name in MODEL_OPTIONS]
    return tuple(x for name, v in given if v for x in ("--" + name.replace("_", "-"), v))
