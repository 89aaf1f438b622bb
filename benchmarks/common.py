"""Helpers shared by the benchmark scripts: build-or-reuse stores, spans, timing figures, the
samples a script draws (stories, pools, questions), bootstrap CIs and their report lines, and
the parsers and `mindscape` runs several scripts start from.

Stores are cached under ``$MINDSCAPE_BENCH_CACHE`` (default ``/tmp/ms_bench``), one directory
per (dataset, split or doc set, the documents' content, index config). The `Indexer` skips documents it already
indexed the same way, so a second run costs only opening the store.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from mindscape.eval.bench import BenchDocument, documents_key, load_documents  # noqa: E402
from mindscape.indexing.indexer import IndexConfig, Indexer  # noqa: E402
from mindscape.memory.store import MemoryStore  # noqa: E402

CACHE_ENV = "MINDSCAPE_BENCH_CACHE"

# Ten narrativeqa_lit dev books that sum to about 1M tokens (the first alone is ~100K).
NQA_LATENCY_BOOKS: tuple[str, ...] = (
    "nqa-542feab28f75",  # Anne of the Island, ~102K
    "nqa-ea371ba9cc41",  # Summer, ~75K
    "nqa-879287f28574",  # The Picture of Dorian Gray, ~103K
    "nqa-27118c966288",  # Troilus and Criseyde, ~117K
    "nqa-e5514678c3a6",  # Rebecca of Sunnybrook Farm, ~98K
    "nqa-f94253b4b5f8",  # The Kreutzer Sonata, ~84K
    "nqa-7caf2f44d1a9",  # The Adventures of Sherlock Holmes, ~134K
    "nqa-afa2f47d1783",  # The Little Lady of the Big House, ~134K
    "nqa-845186ccb0a4",  # Beyond the Rocks, ~86K
    "nqa-a6dfeb4977cc",  # Goblin Market, ~65K
)


def cache_root() -> Path:
    """Where benchmark stores live."""
    return Path(os.environ.get(CACHE_ENV) or "/tmp/ms_bench")


def llm_namespace(args: argparse.Namespace) -> argparse.Namespace:
    """The options ``mindscape index --index-llm`` reads to build its LLM, from a benchmark
    script's ``--llm``/``--model``/``--base-url``/``--local-model``."""
    return argparse.Namespace(
        llm=args.llm,
        model=args.model,
        base_url=args.base_url,
        local_model=args.local_model,
        index_llm=True,
    )


def index_llm_id(args: argparse.Namespace) -> str:
    """The model id of the index LLM a script's ``--llm``/``--model``/... name (none loaded)."""
    from mindscape.commands.common import settings_from_args

    return settings_from_args(llm_namespace(args), index_llm=True).resolved().model_name()


def log(*parts: Any) -> None:
    """Progress to stderr, so stdout keeps only the table and the JSON line."""
    print(*parts, file=sys.stderr, flush=True)


def build_store(
    name: str,
    docs: Sequence[BenchDocument],
    embedder: Any,
    *,
    config: IndexConfig | None = None,
    root: Path | None = None,
    llm: Callable[[Any], Any] | None = None,
) -> MemoryStore:
    """A store under ``root/name`` holding ``docs`` (indexing only what is missing). `llm`,
    given the store's cache, makes the index LLM (None: offline indexing)."""
    path = (root or cache_root()) / name
    store = MemoryStore(path)
    index_llm = llm(store.cache) if llm is not None else None
    indexer = Indexer(
        store, embedder, llm=index_llm, config=config or IndexConfig(), progress=False
    )
    t0 = time.perf_counter()
    fresh = 0
    for n, doc in enumerate(docs, 1):
        rep = indexer.index(doc.doc_id, doc.text, title=doc.title)
        if not rep.skipped:
            fresh += 1
            log(
                f"  indexed {doc.doc_id} ({rep.tokens} tokens, {rep.seconds:.1f}s) [{n}/{len(docs)}]"
            )
    if fresh:
        log(f"store {path}: {fresh} new documents in {time.perf_counter() - t0:.1f}s")
    return store


def config_tag(config: IndexConfig, llm_id: str = "") -> str:
    """What names a store's index config (and its index LLM) in its cache directory."""
    return config.fingerprint("", llm_id)[:8]


def split_store(
    bench: str | Path,
    dataset: str,
    split: str | Sequence[str],
    embedder: Any,
    *,
    config: IndexConfig | None = None,
    llm: Callable[[Any], Any] | None = None,
    llm_id: str = "",
) -> tuple[MemoryStore, list[BenchDocument]]:
    """All documents of one split (or several) of a dataset in one store (the series
    setting), cached by the documents' content, the index config and the index LLM
    (`llm` makes it from the store's cache; `llm_id` names it)."""
    splits = [split] if isinstance(split, str) else list(split)
    docs = [d for s in splits for d in load_documents(bench, dataset, s)]
    cfg = config or IndexConfig()
    name = f"{dataset}-{'+'.join(splits)}-{documents_key(docs)}-{config_tag(cfg, llm_id)}"
    return build_store(name, docs, embedder, config=cfg, llm=llm), docs


def chunk_spans(store: MemoryStore) -> dict[str, tuple[int, int]]:
    """Chunk id -> (char_start, char_end) in its document, for Recall@k against gold spans."""
    view = store.view("veridical")
    return {u.id: (int(u.meta["char_start"]), int(u.meta["char_end"])) for u in view.units}


def retrieved_spans(
    question: Any, ranked: Iterable[tuple[str, str]], spans: Mapping[str, tuple[int, int]]
) -> list[tuple[int, int]]:
    """The spans of ranked (chunk id, doc id) pairs, for Recall@k against `question`'s gold
    spans: a chunk of another document overlaps nothing."""
    return [spans[unit] if doc == question.doc_id else (0, 0) for unit, doc in ranked]


def percentiles(values_ms: Iterable[float]) -> dict[str, float]:
    """p50/p95/mean/max of timings in milliseconds."""
    a = np.asarray(list(values_ms), dtype=np.float64)
    if a.size == 0:
        return {"p50": float("nan"), "p95": float("nan"), "mean": float("nan"), "max": float("nan")}
    return {
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "mean": float(a.mean()),
        "max": float(a.max()),
    }


def latency_stores(
    bench: str | Path,
    embedder: Any,
    n_books: Sequence[int] = (1, 10),
    *,
    config: IndexConfig | None = None,
) -> dict[int, tuple[MemoryStore, list[BenchDocument]]]:
    """Stores of the first n of `NQA_LATENCY_BOOKS` (narrativeqa_lit dev), for each n.

    A larger store starts as a copy of the next smaller one (same index, same embedding
    cache), so the books shared by both are indexed once.
    """
    import shutil

    cfg = config or IndexConfig()
    tag = config_tag(cfg)
    docs_all = {
        d.doc_id: d for d in load_documents(bench, "narrativeqa_lit", "dev", NQA_LATENCY_BOOKS)
    }
    docs_all_ordered = [docs_all[i] for i in NQA_LATENCY_BOOKS if i in docs_all]
    out: dict[int, tuple[MemoryStore, list[BenchDocument]]] = {}
    prev: Path | None = None
    for n in sorted(n_books):
        docs = docs_all_ordered[:n]
        path = cache_root() / f"nqa-lat{n}-{documents_key(docs)}-{tag}"
        if not path.exists() and prev is not None:
            out[max(out)][0].close()
            shutil.copytree(prev, path)
            out[max(out)] = (MemoryStore(prev), out[max(out)][1])
        out[n] = (build_store(path.name, docs, embedder, config=cfg), docs)
        prev = path
    return out


def limit_threads(n: int) -> None:
    """Run torch and BLAS with ``n`` threads.

    On a small shared machine a single-query MiniLM pass with torch's default intra-op threads
    can be an order of magnitude slower than with one thread (threads spin against each other
    and against other processes), so the benchmarks default to 1.
    """
    if n <= 0:
        return
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:  # pragma: no cover - torch comes with FlagEmbedding
        pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        pass


def paired_points(
    a: Sequence[float], b: Sequence[float], n_resamples: int = 2000
) -> dict[str, float]:
    """Mean of ``a − b`` over the same questions, in points (×100), with its paired bootstrap
    95% CI and the number of questions each side wins."""
    from mindscape.eval.metrics import bootstrap_ci

    if len(a) != len(b):
        raise ValueError(f"paired scores need the same questions ({len(a)} vs {len(b)})")
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    mean, low, high = bootstrap_ci(diff.tolist(), n_resamples=n_resamples)
    return {
        "mean": round(100 * mean, 2),
        "low": round(100 * low, 2),
        "high": round(100 * high, 2),
        "better": int((diff > 0).sum()),
        "worse": int((diff < 0).sum()),
    }


def paired_diffs(
    scores: Mapping[str, Sequence[float]],
    pairs: Iterable[tuple[str, str]],
    n_resamples: int = 2000,
) -> dict[str, dict[str, float]]:
    """`paired_points` of each pair ``(a, b)`` of `scores`' rows, keyed ``"a - b"`` (a pair
    naming a row without scores is left out)."""
    return {
        f"{a} - {b}": paired_points(scores[a], scores[b], n_resamples)
        for a, b in pairs
        if a in scores and b in scores
    }


def mean_ci(values: Iterable[float], n_resamples: int = 2000) -> dict[str, float]:
    """The mean of `values` with its percentile-bootstrap 95% CI, rounded to 4 places."""
    from mindscape.eval.metrics import bootstrap_ci

    mean, low, high = bootstrap_ci(values, n_resamples=n_resamples)
    return {"mean": round(mean, 4), "low": round(low, 4), "high": round(high, 4)}


def fmt_ci(r: Mapping[str, float]) -> str:
    """A `mean_ci` figure as a table cell: ``mean  [low, high]``."""
    return f"{r['mean']:.4f}  [{r['low']:.4f}, {r['high']:.4f}]"


def paired_line(label: str, d: Mapping[str, float], metric: str) -> str:
    """A `paired_points` figure in words, after `label`."""
    return (
        f"{label}: {d['mean']:+.2f} {metric} points (paired 95% CI {d['low']:+.2f} to "
        f"{d['high']:+.2f}; better on {d['better']}, worse on {d['worse']})"
    )


def print_paired(
    diffs: Mapping[str, Mapping[str, float]], metric: str, names: Mapping[str, str] | None = None
) -> None:
    """One `paired_line` per ``"a - b"`` difference; with `names`, a and b by their names there
    first (the key after them)."""
    for key, d in diffs.items():
        label = key
        if names is not None:
            a, b = key.split(" - ")
            label = f"{names.get(a, a)} − {names.get(b, b)} ({key})"
        print(paired_line(label, d, metric))


def choose_stories(docs: Sequence[Any], n: int | None, seed: int | None) -> list[Any]:
    """All of `docs`, the first `n`, or with `seed` `n` drawn at random (kept in the split's
    order, so a store built from a smaller draw is not reordered)."""
    if not n or n >= len(docs):
        return list(docs)
    if seed is None:
        return list(docs[:n])
    import random

    picked = set(random.Random(seed).sample(range(len(docs)), n))
    return [d for i, d in enumerate(docs) if i in picked]


def draw_pools(doc_ids: Sequence[str], n_pools: int, size: int, seed: int) -> list[list[str]]:
    """`n_pools` random pools of `size` stories: disjoint blocks of one shuffle while the
    stories last, then blocks of a fresh shuffle (so pools overlap only when they must)."""
    if not 1 <= size <= len(doc_ids):
        raise SystemExit(f"--pool-size must be in 1..{len(doc_ids)} (stories available)")
    rng = np.random.default_rng(seed)
    pools: list[list[str]] = []
    order: list[str] = []
    while len(pools) < n_pools:
        if len(order) < size:
            order = [str(d) for d in rng.permutation(sorted(doc_ids))]
        pools.append(sorted(order[:size]))
        order = order[size:]
    return pools


def spread(questions: Sequence[Any], n: int) -> list[Any]:
    """`n` questions spread over their stories: every story's first, then every story's
    second, and so on (stories in the order they come)."""
    by_doc: dict[str, list[Any]] = {}
    for q in questions:
        by_doc.setdefault(q.doc_id, []).append(q)
    out: list[Any] = []
    depth = 0
    while len(out) < n and any(depth < len(qs) for qs in by_doc.values()):
        out.extend(qs[depth] for qs in by_doc.values() if depth < len(qs))
        depth += 1
    return out[:n]


def doc_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser with a script's docstring as its description (kept as written) and --bench."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bench", default="../shared/bench")
    allow_dirty_option(ap)
    return ap


def allow_dirty_option(ap: argparse.ArgumentParser) -> None:
    """``--allow-dirty``: a test split from a tree with uncommitted code (see begin_test_run)."""
    ap.add_argument(
        "--allow-dirty",
        action="store_true",
        help="run a test split from a tree with uncommitted changes under src/ or benchmarks/ "
        "(refused otherwise; the test-run log records it)",
    )


def run_eval(cmd: Sequence[str], cwd: Path) -> None:
    """Runs a ``mindscape ...`` command line (as the results show it) with this Python in
    `cwd`, saying so on stderr first."""
    log(f"running: {shlex.join(cmd)}")
    subprocess.run([sys.executable, "-m", "mindscape", *cmd[1:]], cwd=cwd, check=True)


def sample_parser(
    doc: str | None, *, split: str = "dev", sample: int = 60, seed: int = 7
) -> argparse.ArgumentParser:
    """A parser with a script's docstring and the options naming a fixed random sample of a
    bench split: --bench, --dataset, --split, --sample, --seed."""
    ap = doc_parser(doc)
    ap.add_argument("--dataset", default="fairytaleqa")
    ap.add_argument("--split", default=split)
    ap.add_argument("--sample", type=int, default=sample)
    ap.add_argument("--seed", type=int, default=seed)
    return ap


def bench_questions(args: argparse.Namespace, **slice_: Any) -> tuple[list[Any], Any]:
    """The questions of ``args.bench/dataset/split`` (sliced by `slice_`: limit, per_doc,
    sample, seed) with their per-document stores built under ``args.stores``, as
    `mindscape eval` builds them; returns ``(questions, settings)``."""
    from mindscape.eval.runner import EvalSettings, prepare

    settings = EvalSettings(
        bench=Path(args.bench),
        dataset=args.dataset,
        split=args.split,
        presets=[],
        out=Path("/dev/null"),
        stores=Path(args.stores),
        progress=False,
        **slice_,
    )
    return prepare(settings)[0], settings


def sample_answers(args: argparse.Namespace, filename: str) -> tuple[list[Any], Any, Path]:
    """The open and multiple-choice questions of a script's fixed sample (`sample_parser`'s
    options), their eval settings, and the script's answers file under ``args.out`` (its
    folder created; the file holds what earlier runs answered, so a rerun resumes)."""
    questions, settings = bench_questions(args, sample=args.sample, seed=args.seed)
    questions = [q for q in questions if q.task in ("open_qa", "multiple_choice")]
    path = Path(args.out) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    return questions, settings, path


def on_test(args: argparse.Namespace) -> bool:
    """Whether the script's ``--split`` reads test rows (``test``, or ``dev+test``)."""
    return "test" in str(getattr(args, "split", "") or "").split("+")


def begin_test_run(args: argparse.Namespace) -> None:
    """Start the script's run in the test-run log, on a test split, before any row is read:
    the commit and the tree's state are taken now (:func:`mindscape.eval.testlog.start_test_run`),
    and a tree with uncommitted changes under src/ or benchmarks/ stops the script unless
    ``--allow-dirty``. Nothing on dev. :func:`log_test_run` writes the line at the end."""
    from mindscape.errors import MindscapeError
    from mindscape.eval.testlog import start_test_run

    if not on_test(args):
        return
    try:
        args.test_run = start_test_run(allow_dirty=bool(getattr(args, "allow_dirty", False)))
    except MindscapeError as exc:
        raise SystemExit(f"{Path(sys.argv[0]).name}: error: {exc}") from None


def script_path(argv0: str) -> str:
    """A script's path from the repository root (``benchmarks/reader/ceiling.py``), however it
    was started (``python benchmarks/...``, an absolute path, ``python -m``)."""
    parts = Path(argv0).parts
    if "benchmarks" not in parts:
        return f"benchmarks/{Path(argv0).name}"
    start = len(parts) - 1 - parts[::-1].index("benchmarks")
    return "/".join(parts[start:])


def log_test_run(
    args: argparse.Namespace,
    figures: Mapping[str, tuple[str | None, float | None, int]] | None,
    *,
    presets: Sequence[str] = (),
    llm: str | None = None,
    qids: Sequence[str] | None = None,
) -> None:
    """On a test split, append the script's run, as :func:`begin_test_run` started it, to the
    test-run log (:mod:`mindscape.eval.testlog`): its questions (``args``' sample, seed, limit,
    per_doc, doc_id and stories where it has them, and `qids`, the ids it scored), what
    answered, each reader's headline figure as ``name -> (metric, mean, n)`` (None: the script
    prints figures the log does not keep), and ``args.out``. Nothing on dev."""
    from mindscape.eval.testlog import append_test_run, figure, log_line

    if not on_test(args):
        return
    run = getattr(args, "test_run", None)
    if run is None:
        raise RuntimeError("a test run logged but never started: call begin_test_run(args) first")
    names = ("sample", "seed", "limit", "per_doc", "stories")
    filters = {name: getattr(args, name, None) for name in names}
    filters["doc_ids"] = getattr(args, "doc_id", None)
    if args.split != "test":
        filters["splits"] = args.split
    line = log_line(
        source=script_path(sys.argv[0]),
        dataset=str(getattr(args, "dataset", "")),
        split="test",
        filters=filters,
        presets=list(presets or (figures or {})),
        llm=llm,
        figures={k: figure(*v) for k, v in figures.items()} if figures is not None else None,
        out=getattr(args, "out", None) or None,
        run=run,
        command=shlex.join(["python", *sys.argv]),
        qids=qids,
    )
    append_test_run(line)
