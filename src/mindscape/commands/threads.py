"""`mindscape threads`: the threads `ask --thread` keeps in a store."""

from __future__ import annotations

import argparse
import json

from mindscape.commands.common import add_listing_command
from mindscape.errors import StoreError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `threads`."""
    add_listing_command(sub, "threads", run, "print one JSON list")


def run(args: argparse.Namespace) -> int:
    """List the threads of a store.

    List the threads `mindscape ask --thread ID` kept in a store, newest first: whether
    each one's last run finished (an unfinished one resumes when asked again), its last
    question and answer.

    Examples:
        mindscape threads --store runs/book
    """
    from pathlib import Path

    from mindscape.graphs.threads import list_threads

    if not args.store or not Path(args.store).is_dir():
        raise StoreError(f"no store at {args.store} (pass --store DIR or set MINDSCAPE_STORE)")
    rows = list_threads(args.store)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return 0
    if not rows:
        print(f"no threads in {args.store} (`mindscape ask --thread ID` keeps one)")
    for r in rows:
        state = "finished" if r["finished"] else "unfinished"
        answer = f" → {r['answer']}" if r["answer"] else ""
        print(f"{r['thread']}  {state}  {r['updated'][:19]}  {r['question']}{answer}")
    return 0
