"""`mindscape mcp` through the official MCP client: how fast find_passages answers once the
server is up, and how long the ask tool's result is for the demo question.

    python benchmarks/speed/mcp_tools.py [--llm extractive|local] [--repeats 10] [--store DIR]

Starts ``mindscape mcp`` over stdio on the demo's store (``mindscape demo`` builds it) as a
desktop client would, and waits until it is up: ``initialize`` answered and a first
``find_passages`` answered (the server loads the embedder and the store's arrays as it
starts; the first call waits for that). Then it times ``--repeats`` ``find_passages`` calls
on the demo's questions (the client's wall clock, the round trip over stdio included), and
asks the first demo question once with ``ask``: the characters of its tool result (the text a
calling model reads), its quotes' places, its seconds and the progress notifications heard.
The warm process is not used (``--no-warm``). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[2]


async def measure(store: str, llm: str, repeats: int, questions: list[str]) -> dict[str, Any]:
    """The figures, from one server."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mindscape", "mcp", "--store", store, "--llm", llm, "--no-warm", "--quiet"],
        env=dict(os.environ),  # this checkout's settings and paths, not the SDK's few defaults
    )
    t0 = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized_s = time.perf_counter() - t0
        first = await session.call_tool("find_passages", {"question": questions[0]})
        if first.isError:
            raise SystemExit(first.content[0].text)  # type: ignore[union-attr]
        up_s = time.perf_counter() - t0
        times = []
        for n in range(repeats):
            t = time.perf_counter()
            await session.call_tool("find_passages", {"question": questions[n % len(questions)]})
            times.append(time.perf_counter() - t)
        heard: list[str] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            heard.append(str(message))

        t = time.perf_counter()
        result = await session.call_tool(
            "ask", {"question": questions[0]}, progress_callback=progress
        )
        ask_s = time.perf_counter() - t
    text = "".join(c.text for c in result.content if c.type == "text")
    out = json.loads(text) if not result.isError else {"error": text}
    return {
        "llm": llm,
        "initialize_s": round(initialized_s, 2),
        "up_s": round(up_s, 2),
        "find_passages_s_median": round(statistics.median(times), 4),
        "find_passages_s_max": round(max(times), 4),
        "repeats": repeats,
        "ask_s": round(ask_s, 2),
        "ask_result_chars": len(text),
        "ask_answer": out.get("answer") or out.get("error"),
        "ask_places": [q["place"] for q in out.get("quotes") or []],
        "ask_progress": heard,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--llm", default="extractive", choices=["extractive", "local"])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--store", default=str(REPO / ".mindscape" / "demo-store"))
    args = ap.parse_args()
    if not (Path(args.store) / "cache.sqlite3").is_file():
        raise SystemExit(f"no store at {args.store}: run `mindscape demo` first")
    spec = json.loads((resources.files("mindscape") / "data" / "demo.json").read_text())
    questions = [q["question"] for q in spec["questions"]]
    got = anyio.run(measure, args.store, args.llm, args.repeats, questions)
    print(f"server up in {got['up_s']} s (initialize {got['initialize_s']} s)")
    print(
        f"find_passages: median {got['find_passages_s_median']} s, max "
        f"{got['find_passages_s_max']} s over {got['repeats']} calls"
    )
    print(
        f"ask ({got['llm']}): {got['ask_result_chars']} characters in {got['ask_s']} s; "
        f"places {', '.join(got['ask_places'])}; progress {' / '.join(got['ask_progress'])}"
    )
    print(json.dumps(got))


if __name__ == "__main__":
    main()
