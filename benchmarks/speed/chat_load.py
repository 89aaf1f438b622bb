"""Eight chat threads at once against one `langgraph dev`: answered, lost, equal to one at a time.

    python benchmarks/speed/chat_load.py [--threads 8] [--llm local|extractive] [--store DIR]

Starts ``langgraph dev`` on a free loopback port (the repository's ``langgraph.json``) over
the demo's store (``mindscape demo`` builds it) and asks the ``chat`` graph the demo's
questions through the LangGraph SDK, as a chat front end does: first one thread at a time,
then ``--threads`` new threads at once (the questions repeated round-robin). It prints, for
the concurrent round, how many were answered, lost (no reply) or failed (a run in error),
how many answers equal the one-at-a-time answer to the same question, and the latency p50 /
p95 of both rounds. The last line is one JSON object.

The local model server answers one request at a time (llama.cpp with one slot), so the
concurrent round queues there: its latency grows with the threads, its answers do not change.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import percentiles
from mindscape.serve.dev import ServeError, start_langgraph_dev, stop

REPO = Path(__file__).resolve().parents[2]


def start_server(store: str, llm: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``langgraph dev`` on a free port over `store`, answering with `llm`."""
    env = {"MINDSCAPE_STORE": store, "MINDSCAPE_LLM_BACKEND": llm}
    try:
        return start_langgraph_dev(REPO, log, env)
    except ServeError as exc:
        raise SystemExit(str(exc)) from exc


def ask(url: str, question: str) -> dict[str, Any]:
    """One question on a new thread: its reply's answer line, seconds, and any error."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url)
    t0 = time.perf_counter()
    try:
        thread = client.threads.create()["thread_id"]
        blocks = [{"type": "text", "text": question}]
        out = client.runs.wait(
            thread, "chat", input={"messages": [{"role": "user", "content": blocks}]}
        )
        messages = out.get("messages") if isinstance(out, dict) else None
        reply = messages[-1] if messages else None
        answer = str(reply["content"]).split("\n\n", 1)[0] if reply else None
        error = None if reply and reply.get("type") == "ai" else f"no reply: {out}"
    except Exception as exc:  # noqa: BLE001 - a failed run is a figure here
        answer, error = None, f"{type(exc).__name__}: {exc}"
    return {"question": question, "answer": answer, "seconds": time.perf_counter() - t0,
            "error": error}  # fmt: skip


def _rounded(p: dict[str, float]) -> dict[str, float]:
    return {k: round(v) for k, v in p.items()}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--llm", default="local", help="MINDSCAPE_LLM_BACKEND for the server")
    ap.add_argument("--store", default=str(REPO / ".mindscape" / "demo-store"))
    args = ap.parse_args()
    spec = json.loads((resources.files("mindscape") / "data" / "demo.json").read_text())
    questions = [q["question"] for q in spec["questions"]]
    log = Path(tempfile.mkdtemp()) / "langgraph-dev.log"
    proc, url = start_server(args.store, args.llm, log)
    try:
        alone = [ask(url, q) for q in questions]
        expected = {r["question"]: r["answer"] for r in alone}
        asked = [questions[n % len(questions)] for n in range(args.threads)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.threads) as pool:
            together = list(pool.map(lambda q: ask(url, q), asked))
        wall = time.perf_counter() - t0
    finally:
        stop(proc, grace_s=30)
    answered = [r for r in together if r["answer"] is not None and not r["error"]]
    summary = {
        "threads": args.threads, "llm": args.llm,
        "answered": len(answered), "lost": sum(r["answer"] is None for r in together),
        "failed": sum(bool(r["error"]) for r in together),
        "equal_to_one_at_a_time": sum(r["answer"] == expected[r["question"]] for r in answered),
        "alone_ms": _rounded(percentiles(1000 * r["seconds"] for r in alone)),
        "together_ms": _rounded(percentiles(1000 * r["seconds"] for r in together)),
        "together_wall_s": round(wall, 1),
        "errors": [r["error"] for r in together if r["error"]][:3],
    }  # fmt: skip
    print(f"{summary['answered']}/{args.threads} answered, {summary['lost']} lost, "
          f"{summary['failed']} failed, {summary['equal_to_one_at_a_time']} equal to one at a "
          f"time; p50/p95 ms alone {summary['alone_ms']}, together {summary['together_ms']}")  # fmt: skip
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
