"""`mindscape inspect`: what a store holds."""

from __future__ import annotations

import argparse
import json

from mindscape.commands.common import add_listing_command


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `inspect`."""
    add_listing_command(sub, "inspect", run_inspect, "machine-readable output")


def run_inspect(args: argparse.Namespace) -> int:
    """Print what a store holds.

    Print a store's documents and the units of each layer.

    Examples:
        mindscape inspect --store runs/book
        mindscape inspect --store runs/book --json
    """
    from mindscape.memory.store import MemoryStore

    store = MemoryStore.open_existing(args.store)
    summary = store.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary)
    return 0


def print_summary(s: dict) -> None:
    """What a store holds: its documents, the units of each layer, MoM's chosen paths (and the
    boundaries its evaluator could not judge)."""
    from mindscape.indexing.mom.select import UNREAD_RULE

    print(f"store {s['store']}: {s['documents']} document(s)")
    for layer, n in s["layers"].items():
        print(f"  {layer:<10} {n:>7} units")
    for d in s["docs"]:
        print(f"  - {d['doc_id']}: {d.get('title') or ''} ({d.get('tokens') or '?'} tokens)")
        if d.get("mom_chosen"):
            chosen = " ".join(str(c) for c in d["mom_chosen"])
            print(f"    MoM path chosen per outline section: {chosen}")
        if d.get("mom_unread_breaks"):
            print(
                f"    MoM boundaries the evaluator answered neither yes nor no: "
                f"{d['mom_unread_breaks']} ({UNREAD_RULE})"
            )
