"""LLM calls and tokens per question for each preset, at equal rounds.

A scripted OpenAI-compatible server on 127.0.0.1 (tests/fake_openai.py) answers every role;
its answer attempts say "insufficient" and its REFINE/UPDATE decisions say REFINE, so every
looping preset runs exactly `--rounds` rounds. The LLM path is the real one: langchain-openai,
the LLM wrapper, prompts, tolerant JSON. Single-shot presets run their one round.

Targets (at equal rounds): mia-agent <= 0.3 x comorag, mindscape <= 0.4 x comorag.

    python benchmarks/speed/llm_calls.py [--rounds 5] [--questions 3] [--store DIR --doc ID]

The default store is the first book of the latency set (narrativeqa_lit dev, ~100K tokens,
cached under $MINDSCAPE_BENCH_CACHE; built on first use), or the bundled story when the
bench data is missing. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.common import cache_root, latency_stores, log  # noqa: E402
from mindscape.context import Context  # noqa: E402
from mindscape.deps import Deps  # noqa: E402
from mindscape.graphs.qa import build_qa_graph  # noqa: E402
from mindscape.llm import LLMSettings  # noqa: E402
from mindscape.presets import PRESET_NAMES  # noqa: E402
from tests.fake_openai import FakeOpenAIServer, all_text  # noqa: E402
from tests.fakes import QAScript, qa_role  # noqa: E402

TARGETS = {"mia-agent": 0.3, "mindscape": 0.4}
BENCH = REPO.parent / "shared" / "bench"


def default_store(embedder: Any) -> tuple[Any, str, list[str]]:
    """(store, doc id, questions): the latency set's first book, else the bundled story."""
    if BENCH.is_dir():
        from mindscape.eval.bench import load_questions

        store, docs = latency_stores(BENCH, embedder, (1,))[1]
        doc = docs[0]
        questions = [
            q.question
            for q in load_questions(BENCH, "narrativeqa_lit", "dev")
            if q.doc_id == doc.doc_id
        ]
        return store, doc.doc_id, questions
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    data = REPO / "src" / "mindscape" / "data"
    spec = json.loads((data / "demo.json").read_text())
    store = MemoryStore(cache_root() / "llm-calls-demo")
    Indexer(store, embedder, progress=False).index(
        spec["doc_id"], (data / spec["file"]).read_text(), title=spec["title"]
    )
    return store, spec["doc_id"], [q["question"] for q in spec["questions"]]


def run_preset(
    store: Any, embedder: Any, doc: str, questions: list[str], preset: str, rounds: int
) -> dict[str, Any]:
    """Mean calls and tokens per question for one preset, with per-role calls."""
    totals = {"llm_calls": 0, "tokens_in": 0, "tokens_out": 0, "rounds": 0}
    roles: dict[str, int] = {}
    t0 = time.perf_counter()
    for n, question in enumerate(questions):
        script = QAScript(refuse=10_000, n_probes=3)  # ComoRAG's most probes per round
        with FakeOpenAIServer(script.request) as server:
            settings = LLMSettings(
                backend="openai",
                model="fake-model",
                base_url=server.base_url,
                api_key="sk-bench",
                structured="off",
                retry_base_delay_s=0.0,
            )
            deps = Deps(store=store, embedder=embedder, llm_settings=settings)
            app = build_qa_graph(deps).compile()
            ctx = Context(
                preset=preset,
                backend="llm",
                max_llm_calls=10_000,
                max_tokens=10**9,
                max_rounds=rounds if Context(preset=preset).resolved().max_rounds > 1 else None,
            )
            out = app.invoke({"question": question, "doc_id": doc}, context=ctx)
            for r in server.requests:
                role = qa_role(all_text(r)) or "other"
                roles[role] = roles.get(role, 0) + 1
            assert out["llm_calls"] == len(server.requests), "every request must be counted"
        for k in totals:
            totals[k] += int(out[k])
        log(f"  {preset} q{n + 1}: {out['rounds']} rounds, {out['llm_calls']} calls")
    q = len(questions)
    return {
        "rounds": totals["rounds"] / q,
        "llm_calls": totals["llm_calls"] / q,
        "tokens_in": totals["tokens_in"] / q,
        "tokens_out": totals["tokens_out"] / q,
        "calls_by_role": {k: v / q for k, v in sorted(roles.items())},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--rounds", type=int, default=5, help="rounds every looping preset runs (default 5)"
    )
    p.add_argument("--questions", type=int, default=3, help="questions per preset (default 3)")
    p.add_argument("--presets", default=",".join(PRESET_NAMES))
    p.add_argument("--store", default=None, help="an existing store directory (with --doc)")
    p.add_argument("--doc", default=None)
    args = p.parse_args(argv)

    from mindscape.embeddings import load_embedder

    embedder = load_embedder()
    if args.store:
        from mindscape.deps import open_store

        store, doc = open_store(args.store), args.doc
        questions = [
            "What is the story about?",
            "Who is the main character?",
            "How does the story end?",
        ]
    else:
        store, doc, questions = default_store(embedder)
    questions = questions[: args.questions]
    log(f"store {store.path}, doc {doc}, {len(questions)} questions, {args.rounds} rounds")

    results = {}
    for preset in [x.strip() for x in args.presets.split(",") if x.strip()]:
        results[preset] = run_preset(store, embedder, doc, questions, preset, args.rounds)

    base = results.get("comorag", {}).get("llm_calls")
    base_tok = results.get("comorag", {}).get("tokens_in")
    header = f"{'preset':<10} {'rounds':>6} {'calls/q':>8} {'x comorag':>9} {'tok_in/q':>9} {'tok_out/q':>9}  calls by role"
    print(header)
    print("-" * len(header))
    for preset, r in results.items():
        ratio = f"{r['llm_calls'] / base:.2f}" if base else "-"
        by_role = " ".join(f"{k}={v:g}" for k, v in r["calls_by_role"].items())
        print(
            f"{preset:<10} {r['rounds']:>6.1f} {r['llm_calls']:>8.1f} {ratio:>9} {r['tokens_in']:>9.0f} {r['tokens_out']:>9.0f}  {by_role}"
        )
    ratios = {p: round(results[p]["llm_calls"] / base, 3) for p in TARGETS if p in results and base}
    token_ratios = {
        p: round(results[p]["tokens_in"] / base_tok, 3)
        for p in TARGETS
        if p in results and base_tok
    }
    met = {p: ratios[p] <= TARGETS[p] for p in ratios}
    print(
        json.dumps(
            {
                "benchmark": "llm_calls",
                "rounds": args.rounds,
                "questions": len(questions),
                "doc": doc,
                "presets": results,
                "call_ratio_vs_comorag": ratios,
                "token_in_ratio_vs_comorag": token_ratios,
                "targets": TARGETS,
                "targets_met": met,
            }
        )
    )
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
