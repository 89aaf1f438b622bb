"""Peak memory of indexing one very large text file (issue: a 50 MB book).

    python benchmarks/speed/index_memory.py --bench ../shared/bench --mb 5,50 [--embedder hashing|minilm]

For each size, a text of that many megabytes is cut from the bench's narrativeqa_lit books
(joined, in file order), written to a file, and indexed from that file in a fresh child process
(one per size), which reports its peak RSS, seconds per stage and unit counts. The default
`hashing` embedder is a 384-dimension bag-of-words hash (MiniLM's width): it measures everything
but the embedding model, so a 50 MB run takes about half an hour instead of hours on two cores;
`minilm` runs the real model. The last line is one JSON object with every figure, including
the growth in peak RSS per extra megabyte of text between the first and the last size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, re, resource, sys, time, zlib
from pathlib import Path
import numpy as np
from langchain_core.embeddings import Embeddings
from mindscape.indexing.indexer import Indexer
from mindscape.memory.store import MemoryStore
from mindscape.indexing.sources import read_text_file

class Hashing(Embeddings):
    model_id = "hashing-384"
    def _vec(self, text):
        v = np.zeros(384)
        for w in re.findall(r"[a-z0-9]+", text.lower()):
            v[zlib.crc32(w.encode()) % 384] += 1.0
        return (v / (np.linalg.norm(v) or 1.0)).tolist()
    def embed_documents(self, texts):
        return [self._vec(t) for t in texts]
    def embed_query(self, text):
        return self._vec(text)

path, store_dir, spec = sys.argv[1:4]
if spec == "hashing":
    emb = Hashing()
else:
    from mindscape.embeddings import load_embedder
    emb = load_embedder(spec)
doc = read_text_file(Path(path))
t0 = time.perf_counter()
report = Indexer(MemoryStore(Path(store_dir)), emb, progress=False).index(doc.doc_id, doc.text)
print(json.dumps({
    "seconds": round(time.perf_counter() - t0, 1),
    "tokens": report.tokens,
    "units": report.layers,
    "stage_s": {k: round(v, 1) for k, v in report.stage_seconds.items()},
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
}))
"""


def book_text(bench: Path, megabytes: float) -> str:
    """`megabytes` of narrative text: the narrativeqa_lit books joined in file order."""
    want, parts, have = int(megabytes * 1_000_000), [], 0
    while have < want:
        with open(bench / "narrativeqa_lit" / "documents.jsonl") as f:
            for line in f:
                text = json.loads(line)["text"]
                parts.append(text)
                have += len(text) + 2
                if have >= want:
                    break
    return "\n\n".join(parts)[:want]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bench", default=str(REPO.parent / "shared" / "bench"))
    ap.add_argument("--mb", default="5,50", help="comma-separated sizes in megabytes")
    ap.add_argument("--embedder", default="hashing", help="hashing (default), minilm or a path")
    args = ap.parse_args()
    sizes = [float(x) for x in args.mb.split(",")]
    rows = []
    for mb in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "big.txt"
            path.write_text(book_text(Path(args.bench), mb))
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path), str(Path(tmp) / "store"), args.embedder],
                check=True,
                capture_output=True,
                text=True,
            )
            row = {"mb": mb, **json.loads(out.stdout.strip().splitlines()[-1])}
            row["wall_s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(
            f"{mb:6.1f} MB  {row['tokens']:>10} tokens  {row['seconds']:8.1f} s  "
            f"peak RSS {row['peak_rss_mb']:6d} MB  units {row['units']}  stages {row['stage_s']}",
            flush=True,
        )
    summary: dict = {"embedder": args.embedder, "rows": rows}
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        slope = (b["peak_rss_mb"] - a["peak_rss_mb"]) / (b["mb"] - a["mb"])
        summary["rss_mb_per_text_mb"] = round(slope, 1)
        print(f"peak RSS grows {slope:.1f} MB per extra MB of text")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
