"""MoM document memories: export training data for a MemReader.

MoM's document memories beyond indexing: the chosen memories of a store as training data
for a small memory-extraction model (see docs/mom.md). `export` writes one chat-format
record (document, reasoning path, memory) per document.

Examples:
    mindscape mom export --store runs/tales --out runs/tales/com.jsonl
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mindscape.commands.common import (
    add_actions,
    add_command,
    add_llm_options,
    add_quiet_option,
    add_store_option,
    llm_from_args,
    say,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `mom` and its actions."""
    p = add_command(sub, "mom", doc=__doc__)
    actions = add_actions(p)
    e = add_command(actions, "export", run_export)
    add_store_option(e)
    e.add_argument("--out", required=True, metavar="FILE", help="the JSONL file to append to")
    e.add_argument(
        "--max-doc-tokens",
        type=int,
        default=None,
        metavar="N",
        help="cut a longer document to its first N tokens, keeping the memory of that part "
        "(default 8000, the outline prompt's section cap)",
    )
    add_llm_options(e)
    add_quiet_option(e)
    e.add_argument("--json", action="store_true", help="print what was written as JSON")


def export_llm(args: argparse.Namespace, cache: Any) -> Any:
    """The LLM that writes the reasoning paths, caching in the store.

    Raises:
        ModelError: when the backend resolves to extractive (the paths need a model).
    """
    from mindscape.errors import ModelError

    llm = llm_from_args(args, cache, index_llm=True)
    if llm is None:
        raise ModelError(
            "mom export needs an LLM to write the reasoning paths: install the local model "
            "(`mindscape model install`) or use --llm openai with an endpoint"
        )
    return llm


def run_export(args: argparse.Namespace) -> int:
    """Write (document, reasoning path, memory) records as chat-format JSONL.

    For each document of a store indexed with an LLM, ask the LLM for the expert's
    reasoning from the document to its chosen MoM memory, and append a record
    {"doc_id", "messages": [system, user: the document, assistant: reasoning + memory JSON]}
    to the output, the format TRL's SFTTrainer and axolotl's chat_template read. A rerun
    skips the documents the output holds; every LLM answer is cached in the store.

    Examples:
        mindscape mom export --store runs/tales --out runs/tales/com.jsonl
        mindscape mom export --store runs/tales --out com.jsonl --llm openai --json
    """
    from mindscape.indexing.mom.export import MAX_DOC_TOKENS, export_com
    from mindscape.memory.store import MemoryStore
    from mindscape.tokens import default_counter

    store = MemoryStore.open_existing(args.store)
    report = export_com(
        store,
        export_llm(args, store.cache),
        Path(args.out),
        default_counter(),
        max_doc_tokens=args.max_doc_tokens or MAX_DOC_TOKENS,
        on_doc=lambda doc_id, what: say(args, f"{doc_id}: {what}"),
    )
    if args.json:
        print(json.dumps(asdict(report), indent=1))
    else:
        say(
            args,
            f"{len(report.written)} record(s) written to {report.out}, {len(report.already)} "
            f"already there, {len(report.no_memory)} document(s) without an LLM memory",
        )
    return 0
