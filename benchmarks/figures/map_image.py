"""The map of a question's reading in the README (docs/images/map.png), retaken.

    python benchmarks/figures/map_image.py --llm local --out docs/images/map.png

Runs ``mindscape ask QUESTION --store DEMO_STORE --map OUT`` (``make demo`` builds the store;
``--no-warm``: no background process is left behind) and prints the answer and how long it
took. ``--llm extractive`` draws it without the local model.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from mindscape.context import DEMO_STORE

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default=str(REPO / DEMO_STORE))
    ap.add_argument("--llm", default="local")
    ap.add_argument("--question", default="Who helped Cinderella sort the lentils from the ashes?")
    ap.add_argument("--out", default=str(REPO / "docs" / "images" / "map.png"))
    args = ap.parse_args()
    argv = [sys.executable, "-m", "mindscape", "ask", args.question, "--store", args.store]
    argv += ["--llm", args.llm, "--map", args.out, "--json", "--no-warm", "--quiet"]
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(done.stderr.strip() or f"ask exited with {done.returncode}")
    out = json.loads(done.stdout)
    read = sum(len(s.get("read_passages") or []) for s in out["trace"])
    print(
        f"{args.question} → {out['answer']} ({out['rounds']} round(s), {read} passages read, "
        f"{time.monotonic() - t0:.1f} s)"
    )
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
