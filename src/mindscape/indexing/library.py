"""Indexing a library of books: each book's work (chunks, embeddings, layers) on Ray.

The driver (this process) owns the store; Ray workers build. For every book the store does not
already hold the same way, a Ray task builds its units and vectors in a scratch cache of its
own (:meth:`~mindscape.indexing.indexer.Indexer.build`) and returns them with that cache's rows;
the driver writes each book as it comes back (:class:`~mindscape.indexing.indexer.IndexWriter`),
so a killed run keeps every book it finished and the next run skips them. A worker on the
store's machine reads the store's cache before embedding, so nothing the store already
embedded is embedded again. A book that fails
(bad text, a crashed worker) is reported and the others go on.

Ray runs locally by default, started for this run and stopped after it, with one worker per
CPU, each with one thread for its model; ``ray_address`` joins an existing cluster instead
(``"auto"`` or ``"ray://host:10001"``), where mindscape must be installed on the workers.
Ray's tasks and retries do the scheduling: books go out longest first, so the long ones do
not finish last on one worker.

Indexing with an LLM (the index LLM writing summaries, outline or triples) stays in this
process, one book at a time: the model is the bottleneck, and one local model is loaded once.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mindscape.errors import InputError
from mindscape.indexing.indexer import (
    BuiltDoc,
    IndexConfig,
    Indexer,
    IndexReport,
    IndexWriter,
)
from mindscape.indexing.sources import SourceDoc
from mindscape.memory.store import MemoryStore

__all__ = [
    "BookFailure",
    "BookJob",
    "LibraryRun",
    "Progress",
    "build_book",
    "index_library",
]


@dataclass
class BookFailure:
    """A book that was not indexed, and why (one line)."""

    doc_id: str
    origin: str
    error: str


@dataclass
class LibraryRun:
    """What a library index did: a report per indexed or skipped book, the failures."""

    reports: list[IndexReport] = field(default_factory=list)
    failures: list[BookFailure] = field(default_factory=list)
    workers: int = 0
    """Ray workers that built books (0: every book was built in this process, or skipped)."""
    seconds: float = 0.0


Progress = Callable[[int, int, "IndexReport | BookFailure"], None]
"""``progress(done, total, outcome)``, called in the driver as each book finishes."""


def index_library(
    store: MemoryStore,
    docs: Sequence[SourceDoc],
    *,
    embedder: str,
    config: IndexConfig,
    emb_id: str,
    llm_id: str = "offline",
    ray_address: str | None = None,
    workers: int | None = None,
    use_ray: bool = True,
    progress: Progress | None = None,
    load: Callable[[], Indexer] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> LibraryRun:
    """Index `docs` into `store` offline, their building spread over Ray workers.

    `embedder` is the embedder spec the workers load (resolved, so every worker loads the same
    model) and `emb_id` the id it will have (:func:`~mindscape.embeddings.spec_model_id`).
    Books already held the same way are skipped. With ``use_ray`` false, or a single book to
    build and no `ray_address`, or an index LLM (`llm_id` other than "offline"), books are
    built here by the Indexer that `load` returns. A book held the same way whose title changed
    is built again like the others: here only its context vectors are embedded
    (:meth:`Indexer.index`); on Ray the worker finds the rest in the store's cache.
    `on_start(books, workers)` is called once Ray is up: the process's own when it already
    runs one (left running), else `ray_address`'s cluster, else a local Ray for this run.
    """
    t0 = time.perf_counter()
    run = LibraryRun()
    writer = IndexWriter(store, config, emb_id, llm_id)
    todo = _skip_held(writer, docs, run, progress)
    done = len(run.reports)
    if todo and use_ray and llm_id == "offline" and (len(todo) > 1 or ray_address):
        with _ray_session(ray_address, workers) as cpus:
            run.workers = cpus
            if on_start:
                on_start(len(todo), cpus)
            _build_on_ray(writer, todo, embedder, config, run, done, len(docs), progress)
    elif todo:
        _build_here(todo, load, run, done, len(docs), progress)
    run.seconds = time.perf_counter() - t0
    return run


def _skip_held(
    writer: IndexWriter, docs: Sequence[SourceDoc], run: LibraryRun, progress: Progress | None
) -> list[SourceDoc]:
    """The books to build; those the store holds the same way are reported into `run` as
    skipped (with progress)."""
    todo: list[SourceDoc] = []
    for d in docs:
        report = writer.skip_report(d.doc_id, d.text)
        if report is None or writer.needs_context(d.doc_id, d.title):
            todo.append(d)
            continue
        run.reports.append(report)
        if progress:
            progress(len(run.reports), len(docs), report)
    return todo


def _build_here(
    todo: Sequence[SourceDoc],
    load: Callable[[], Indexer] | None,
    run: LibraryRun,
    done: int,
    total: int,
    progress: Progress | None,
) -> None:
    """Index `todo` one by one in this process (one book's failure is that book's)."""
    if load is None:
        raise ValueError("index_library needs `load` to build books in this process")
    indexer = load()
    for d in todo:
        outcome: IndexReport | BookFailure
        try:
            outcome = indexer.index(d.doc_id, d.text, title=d.title)
            run.reports.append(outcome)
        except (InputError, ValueError, UnicodeError) as exc:
            outcome = BookFailure(d.doc_id, d.origin, _one_line(exc))
            run.failures.append(outcome)
        done += 1
        if progress:
            progress(done, total, outcome)


def _build_on_ray(
    writer: IndexWriter,
    todo: Sequence[SourceDoc],
    embedder: str,
    config: IndexConfig,
    run: LibraryRun,
    done: int,
    total: int,
    progress: Progress | None,
) -> None:
    """Build the books on Ray, longest first, at most `run.workers` at a time; write each one
    as it comes back."""
    import ray

    task = ray.remote(num_cpus=1, max_retries=1)(build_book)
    cache = str(writer.store.cache.path)
    queue = sorted(todo, key=lambda d: -len(d.text))
    by_ref: dict[Any, SourceDoc] = {}
    try:
        while queue or by_ref:
            while queue and len(by_ref) < run.workers:
                d = queue.pop(0)
                job = BookJob(embedder, writer.emb_id, config, d.doc_id, d.text, d.title, cache)
                by_ref[task.remote(job)] = d
            ready, _ = ray.wait(list(by_ref), num_returns=1)
            d = by_ref.pop(ready[0])
            outcome: IndexReport | BookFailure
            try:
                built, rows = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                outcome = BookFailure(d.doc_id, d.origin, _ray_error(exc))
                run.failures.append(outcome)
            else:
                outcome = _write(writer, built, rows)
                run.reports.append(outcome)
            done += 1
            if progress:
                progress(done, total, outcome)
    finally:  # stopped (Ctrl-C, an error): the books still building are not wanted
        for ref in by_ref:
            ray.cancel(ref, force=True)


def _write(writer: IndexWriter, built: BuiltDoc, rows: dict[str, dict[str, bytes]]) -> IndexReport:
    """Write a book a worker built: its cache rows, then its units (marked done last)."""
    writer.begin(built.doc_id, built.text, built.title)
    for ns, items in rows.items():
        writer.store.cache.put_many(ns, items)
    return writer.commit(built)


@dataclass(frozen=True)
class BookJob:
    """What a worker needs to build one book."""

    embedder: str
    """The embedder spec the worker loads."""
    emb_id: str
    """The id that embedder must have (the driver's, which the store is claimed with)."""
    config: IndexConfig
    doc_id: str
    text: str
    title: str | None
    cache_path: str | None = None
    """The store's cache, read first where it is on the worker's machine."""


def build_book(job: BookJob) -> tuple[BuiltDoc, dict[str, dict[str, bytes]]]:
    """One book's units and vectors, built in a scratch store; with every embedding it made
    (the scratch cache's rows). Runs in a Ray worker: the model loads once per worker process,
    and must be the one the driver expects. Where the store's cache is on this machine, it is
    read first, so what a store already embedded is not embedded again (a repeated text, a
    book re-indexed with new settings)."""
    from mindscape.embeddings import embedder_id, load_embedder
    from mindscape.memory.cache import IndexCache

    _one_thread()
    model = load_embedder(job.embedder)
    if embedder_id(model) != job.emb_id:
        raise ValueError(f"the worker loaded {embedder_id(model)!r}, not {job.emb_id!r}")
    path = job.cache_path
    shared = IndexCache(path) if path and os.path.exists(path) else None
    with tempfile.TemporaryDirectory(prefix="mindscape-book-") as tmp:
        scratch = MemoryStore(tmp)
        scratch.cache.fallback = shared
        try:
            indexer = Indexer(scratch, model, config=job.config, progress=False)
            built = indexer.build(job.doc_id, job.text, title=job.title)
            rows = scratch.cache.namespaces()
        finally:
            scratch.close()
            if shared is not None:
                shared.close()
    return built, rows


def _one_thread() -> None:
    """One model thread per worker: Ray gives each task one CPU."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch comes with FlagEmbedding
        return
    torch.set_num_threads(1)


@contextmanager
def _ray_session(address: str | None, workers: int | None) -> Iterator[int]:
    """Ray for one run: the caller's own when this process has already started or joined
    one (an application on Ray; used and left running), else a connection to the cluster at
    `address`, else a local instance started here (and stopped after). Yields how many books
    to build at once."""
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is a dependency
        raise InputError("Ray is not installed (pip install 'ray>=2.40')") from None
    owned = not ray.is_initialized()
    if owned:
        _start_ray(ray, address, workers)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    try:
        yield min(cpus, workers) if workers else cpus
    finally:
        if owned:
            ray.shutdown()


def _start_ray(ray: Any, address: str | None, workers: int | None) -> None:
    """Join the cluster at `address`, else start a local Ray with a CPU per worker."""
    logging.getLogger("ray").setLevel(logging.ERROR)
    quiet: dict[str, Any] = dict(log_to_driver=False, logging_level=logging.ERROR)
    if address:
        try:
            ray.init(address=address, **quiet)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError(
                f"cannot join the Ray cluster at {address}: {_one_line(exc)}"
            ) from None
    else:
        cpus = workers or os.cpu_count() or 1
        ray.init(num_cpus=cpus, include_dashboard=False, _node_ip_address="127.0.0.1", **quiet)


def _ray_error(exc: Exception) -> str:
    """One line for a failed book: the worker's own exception where there is one."""
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return _one_line(cause)
    return f"the worker failed ({type(exc).__name__}): {_one_line(exc)}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
