"""`mindscape demo`: index the bundled story offline and answer a few questions about it."""

from __future__ import annotations

import argparse
import json
from importlib import resources

from mindscape.commands.common import add_store_option


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `demo`."""
    p = sub.add_parser("demo", help="index the bundled story and query it, fully offline")
    add_store_option(p)
    p.set_defaults(func=run, store=None)
    p.add_argument("--top", type=int, default=3, help="passages shown per question")


def run(args: argparse.Namespace) -> int:
    """Index the story (cached after the first run), print the store, then the questions."""
    from mindscape.embeddings import encode_query, load_embedder
    from mindscape.memory.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    data = resources.files("mindscape") / "data"
    spec = json.loads((data / "demo.json").read_text())
    text = (data / spec["file"]).read_text()
    store = MemoryStore(args.store or ".mindscape/demo-store")
    embedder = load_embedder()
    report = Indexer(store, embedder).index(spec["doc_id"], text, title=spec["title"])
    state = "already indexed" if report.skipped else f"indexed in {report.seconds:.1f}s"
    print(f"{spec['title']}: {report.tokens} tokens, {state}")
    print(json.dumps(store.summary()["layers"]))
    view = store.view("veridical", {spec["doc_id"]})
    for question in spec["questions"]:
        scores = view.vecs @ encode_query(embedder, question)
        print(f"\nQ: {question}")
        for rank, i in enumerate(scores.argsort()[::-1][: args.top], 1):
            passage = " ".join(view.units[i].text.split())
            print(f"  {rank}. [{view.units[i].id} {scores[i]:.2f}] {passage[:220]}")
    return 0
