"""Index speed, re-index cost and peak memory, on real books from the bench.

    python benchmarks/index_speed.py --bench ../shared/bench [--doc-id ID] [--skip-rss]

1. Indexes a ~100K-token `narrativeqa_lit` dev book into a fresh store (model already loaded)
   and times it; then embeds the very same unit texts with the plain embedding path, in the
   same run, and prints the ratio index time / embedding-only time (target ≤ 1.15 offline).
2. Re-indexes the unchanged book, in process and through the CLI, as a fraction of the first
   index time (target ≤ 0.03).
3. Indexes the longest bench book in a child process and prints its peak RSS (target ≤ 2.5 GB).
The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]


def pick_book(bench: Path, doc_id: str | None, split: str | None, target: int | None) -> dict:
    """A document by id, or the one whose size is closest to `target` tokens (or the longest)."""
    best = None
    with open(bench / "narrativeqa_lit" / "documents.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if doc_id and row["doc_id"] != doc_id:
                continue
            if split and row["split"] != split:
                continue
            key = -row["approx_tokens"] if target is None else abs(row["approx_tokens"] - target)
            if best is None or key < best[0]:
                best = (key, row)
    if best is None:
        raise SystemExit(f"no such document: {doc_id}")
    return best[1]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bench", default=str(REPO.parent / "shared" / "bench"))
    ap.add_argument("--doc-id", default=None, help="default: the dev book closest to 100K tokens")
    ap.add_argument("--skip-rss", action="store_true", help="skip the longest-book memory run")
    args = ap.parse_args()
    bench = Path(args.bench)

    from mindscape.embeddings import encode, load_embedder
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore
    from mindscape.memory.types import LAYERS

    book = pick_book(bench, args.doc_id, None if args.doc_id else "dev", 100_000)
    emb = load_embedder()
    encode(emb, ["warm up the model"] * 4)
    out: dict = {"book": book["doc_id"], "title": book["title"]}
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "store")
        ix = Indexer(store, emb, progress=False)
        t0 = time.perf_counter()
        report = ix.index(book["doc_id"], book["text"], title=book["title"])
        index_s = time.perf_counter() - t0
        texts = [u.text for layer in LAYERS for u in store.view(layer).units]
        t0 = time.perf_counter()
        encode(emb, texts)
        embed_only_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = ix.index(book["doc_id"], book["text"], title=book["title"])
        reindex_s = time.perf_counter() - t0
        assert again.skipped
        jsonl = bench / "narrativeqa_lit" / "documents.jsonl"
        cmd = [
            sys.executable,
            "-m",
            "mindscape",
            "index",
            str(jsonl),
            "--doc-id",
            book["doc_id"],
            "--store",
            str(Path(tmp) / "store"),
            "--quiet",
        ]
        store.close()
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        reindex_cli_s = time.perf_counter() - t0
    out.update(
        tokens=report.tokens,
        units=report.layers,
        index_s=round(index_s, 2),
        stage_s={k: round(v, 2) for k, v in report.stage_seconds.items()},
        embed_only_s=round(embed_only_s, 2),
        ratio=round(index_s / embed_only_s, 3),
        reindex_s=round(reindex_s, 4),
        reindex_fraction=round(reindex_s / index_s, 5),
        reindex_cli_s=round(reindex_cli_s, 2),
        reindex_cli_fraction=round(reindex_cli_s / index_s, 4),
    )
    print(f"book            {book['title']} ({book['doc_id']})")
    print(f"tokens          {report.tokens}")
    print("units           " + ", ".join(f"{k} {v}" for k, v in report.layers.items()))
    print(f"index           {index_s:.1f} s   stages: {out['stage_s']}")
    print(f"embedding only  {embed_only_s:.1f} s for the same {len(texts)} units")
    print(f"ratio           {out['ratio']:.3f}   (target <= 1.15)")
    print(
        f"re-index        {reindex_s * 1000:.1f} ms in process = {out['reindex_fraction']:.5f} of the first "
        f"(target <= 0.03); CLI process {reindex_cli_s:.2f} s = {out['reindex_cli_fraction']:.3f}"
    )

    if not args.skip_rss:
        longest = pick_book(bench, None, None, None)
        with tempfile.TemporaryDirectory() as tmp:
            jsonl = bench / "narrativeqa_lit" / "documents.jsonl"
            t0 = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "mindscape",
                    "index",
                    str(jsonl),
                    "--doc-id",
                    longest["doc_id"],
                    "--store",
                    str(Path(tmp) / "s"),
                    "--quiet",
                ],
                check=True,
                capture_output=True,
            )
            secs = time.perf_counter() - t0
        peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
        out.update(
            longest=longest["doc_id"],
            longest_tokens=longest["approx_tokens"],
            longest_index_s=round(secs, 1),
            peak_rss_gb=round(peak_gb, 3),
        )
        print(
            f"longest book    {longest['title']} (~{longest['approx_tokens']} tokens): "
            f"{secs:.0f} s, peak RSS {peak_gb:.2f} GB (target <= 2.5)"
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
