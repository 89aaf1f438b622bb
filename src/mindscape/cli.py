"""The `mindscape` command line.

Subcommands live in `mindscape.commands.*`. Errors a user can fix (`MindscapeError`) print one
line on stderr and exit with 2 (``--debug`` adds the traceback); nothing heavy is imported until
a subcommand runs.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from mindscape import __version__
from mindscape.commands.common import report_error
from mindscape.errors import MindscapeError

COMMANDS = (
    "index",
    "inspect",
    "ask",
    "serve",
    "mcp",
    "threads",
    "ui",
    "eval",
    "demo",
    "model",
    "mom",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="mindscape",
        description="Question answering over very long narratives: index a book into a layered "
        "memory, then ask questions with the LangGraph agent.",
        epilog="examples:\n  mindscape demo\n  mindscape index book.txt --store runs/book\n"
        '  mindscape ask "Who finds the slipper?" --store runs/book\n'
        "  mindscape COMMAND --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mindscape {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="print the traceback behind a one-line error (also MINDSCAPE_DEBUG=1); "
        "internal errors always show theirs",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"mindscape.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"mindscape.commands.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    logger = logging.getLogger("mindscape")
    level = logger.level
    if getattr(args, "quiet", False):  # notices are log warnings; errors still print
        logger.setLevel(logging.ERROR)
    try:
        return int(args.func(args) or 0)
    except MindscapeError as exc:
        return report_error(exc, args)
    except KeyboardInterrupt:
        print("mindscape: interrupted; finished work is cached, rerun to resume", file=sys.stderr)
        return 130
    finally:
        logger.setLevel(level)  # main() may run in a larger process (tests, notebooks)


if __name__ == "__main__":
    raise SystemExit(main())
