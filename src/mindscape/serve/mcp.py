"""``mindscape mcp``: the books of one store as MCP tools over stdio, for agents that take
their tools over the Model Context Protocol (desktop assistants, coding agents,
``langchain-mcp-adapters``).

Built on the official ``mcp`` SDK's :class:`~mcp.server.fastmcp.FastMCP`; three tools:

* ``list_books``: what the store holds (ids, titles, sizes), from its manifest;
* ``find_passages``: retrieval only, no model: the chunks that best match a question, with
  their places (book, chapter where the outline has headings, chunk); well under a second
  once the embedder and the store are loaded (:meth:`BookTools.preload` loads them as the
  server starts);
* ``ask``: the whole loop, answered as :func:`~mindscape.graphs.tool_result.compact_result`
  (the answer, whether it is trusted, its confidence, three quotes with their places, the
  rounds and seconds), with a progress notification at each step of each round.

``ask`` goes through the warm process when one runs (``mindscape serve``: its models are
loaded already), else answers in this process, which stays up between calls and so keeps
its own models loaded. Questions run one at a time. The store is only read.

Whatever a call gets wrong (an empty or overlong question, an unknown book or preset, a
missing or damaged store, a model that is not installed) comes back as a one-line tool error
and the server goes on serving. Nothing but the protocol goes to stdout: the process's file
descriptor 1 is pointed at stderr for the rest (a library's print, a child process).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field
from typing_extensions import TypedDict

from mindscape.errors import MindscapeError, StoreError
from mindscape.graphs.tool_result import (
    CompactResult,
    checked_preset,
    checked_question,
    compact_result,
    one_line,
    place,
)

if TYPE_CHECKING:
    from mindscape.memory.store import MemoryStore

__all__ = [
    "tool_call",
    "ASK",
    "FIND_PASSAGES",
    "INSTRUCTIONS",
    "LIST_BOOKS",
    "MAX_PASSAGES",
    "Book",
    "BookList",
    "BookTools",
    "LogLevel",
    "Passage",
    "Passages",
    "Progress",
    "build_server",
    "one_model_thread",
    "serve",
]

logger = logging.getLogger(__name__)

MAX_PASSAGES = 10
"""Most passages ``find_passages`` returns."""
Progress = Callable[[dict[str, Any]], None]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

INSTRUCTIONS = """Answers questions about the books of one mindscape store (novels, stories,
long narratives). Call list_books to see which books there are; find_passages to get the
passages that match a question quickly, without a model; ask to have mindscape's reading
agent answer a question with quotes and their places in the book."""

LIST_BOOKS = """List the books this server can answer about: each book's id (pass it in
`books` to find_passages or ask), its title, its length in tokens and chunks, and its chapters
where the text has headings. Instant; call it first when you do not know the books."""

FIND_PASSAGES = """Find the passages of the books that best match a question, by retrieval
only (no model reads them): each passage's text, its place (book, chapter where the text has
headings, chunk number) and its score, best first. Fast (well under a second): use it to look
up or quote a detail yourself. `question`: what to look for, in plain words. `books`: ids from
list_books (default: every book). `k`: how many passages (default 5, at most 10)."""

ASK = """Answer a question about the books by having mindscape's reading agent read them: it
retrieves passages, reads them and, when unsure, looks again, round by round. Returns
`answer`; `trusted` (whether the agent accepted its answer: when false, treat it as a guess);
`confidence` (0 to 1); up to three `quotes`, each with its `place` (book, chapter where the
text has headings, chunk number); `rounds` and `seconds`. An answer takes seconds without a
model and about 10 seconds to a few minutes with the local model on a CPU (progress is
reported at each step). `question`: one question, at most 2,000 characters. `books`: ids from
list_books (default: every book). `preset`: mindscape (default, the full loop) or naive (one
retrieval, the fastest); raptor, mom, mia-rag, mia-agent and comorag reproduce the papers'
systems."""


class Passage(TypedDict):
    """A passage found for a question."""

    text: str
    place: str
    score: float


class Passages(TypedDict):
    """``find_passages``'s result."""

    passages: list[Passage]
    seconds: float


class Book(TypedDict):
    """One book of the store."""

    id: str
    title: str
    tokens: int
    chunks: int
    chapters: int


class BookList(TypedDict):
    """``list_books``'s result."""

    store: str
    books: list[Book]


@dataclass
class BookTools:
    """What the tools do, over the store at `store` (each method raises a one-line
    MindscapeError or ValueError for a call it cannot answer)."""

    store: str
    answer_here: Callable[[argparse.Namespace, Progress | None], dict[str, Any]]
    """How ``ask``'s options are answered in this process (``ask``'s
    :func:`~mindscape.commands.ask.answer_here`: its caller hands it over)."""
    parse_ask: Callable[[list[str]], argparse.Namespace]
    """``ask``'s options from its command line (:func:`~mindscape.commands.ask.parse_options`)."""
    model_flags: tuple[str, ...] = ()
    """``ask``'s model options to pass on, flag then value (``--llm local``, ``--reader-adapter
    shipped``, ...): :func:`~mindscape.commands.mcp.model_flags` of ``mcp``'s own."""
    embedder: str | None = None
    preset: str | None = None
    """The preset of an ``ask`` that names none (None: the default, mindscape)."""
    warm: bool = True
    """Whether ``ask`` goes through the warm process when one runs."""
    _ask_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _load_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _chapters: dict[str, list[Any]] = field(default_factory=dict, repr=False)

    # ---- the store
    def open(self) -> MemoryStore:
        """The store, opened once per process and checked (StoreError saying what to do)."""
        from mindscape.deps import open_store

        if not Path(self.store).is_dir():
            raise StoreError(
                f"There is no store at {self.store}: run `mindscape demo` for the bundled "
                f"story, or `mindscape index BOOK --store {self.store}`, then restart the server."
            )
        try:
            store = open_store(self.store)
        except MindscapeError:
            raise
        except Exception as exc:  # noqa: BLE001 - sqlite, chroma: a broken folder, one line
            raise StoreError(
                f"the store {self.store} cannot be read ({type(exc).__name__}: "
                f"{one_line(exc)}); index the book again"
            ) from exc
        if not store.documents():
            raise StoreError(
                f"the store {self.store} holds no finished book (run `mindscape index`)"
            )
        return store

    def book_ids(self, books: list[str] | None) -> list[str]:
        """`books`, checked against the store (StoreError naming the ones it has)."""
        known = {d["doc_id"] for d in self.open().documents()}
        asked = [str(b).strip() for b in books or [] if str(b).strip()]
        unknown = [b for b in asked if b not in known]
        if unknown:
            raise StoreError(
                f"unknown book {', '.join(repr(b) for b in unknown)} (the store has: "
                f"{', '.join(sorted(known))})"
            )
        return asked

    def retriever(self) -> Any:
        """The store's retriever, as ``ask`` in this process uses it (cached per process)."""
        from mindscape.context import Context
        from mindscape.deps import Deps

        with self._load_lock:  # the preload and a first call load the embedder once
            deps = Deps(store=self.open(), embedder=self._embedder())
            return deps.get_retriever(Context(store=self.store))

    def _embedder(self) -> Any:
        from mindscape.embeddings import load_embedder

        return load_embedder(self.embedder) if self.embedder else load_embedder()

    def preload(self) -> None:
        """Load the embedder and the store's arrays, so that the first call is fast; a store
        that cannot be read is left for the calls to report."""
        try:
            self.retriever().warm()
        except Exception as exc:  # noqa: BLE001 - each call reports it in one line
            logger.warning("mindscape mcp: preloading failed: %s", one_line(exc))

    # ---- the tools
    def list_books(self) -> BookList:
        """The store's books."""
        summary = self.open().summary()
        return BookList(
            store=str(Path(self.store).resolve()),
            books=[
                Book(
                    id=d["doc_id"],
                    title=d.get("title") or d["doc_id"],
                    tokens=int(d.get("tokens") or 0),
                    chunks=int((d.get("layers") or {}).get("veridical", 0)),
                    chapters=len(self.chapters(d["doc_id"])),
                )
                for d in summary["docs"]
            ],
        )

    def chapters(self, doc_id: str) -> list[Any]:
        """A book's chapter labels (:func:`mindscape.trace.chapters`; cached)."""
        if doc_id not in self._chapters:
            from mindscape.trace import chapters

            outline = self.open().view("outline", {doc_id}).units
            self._chapters[doc_id] = chapters(sorted(outline, key=lambda u: u.order))
        return self._chapters[doc_id]

    def find_passages(self, question: str, books: list[str] | None, k: int = 5) -> Passages:
        """The `k` chunks that best match `question` (query-only retrieval, no model)."""
        started = time.perf_counter()
        text = checked_question(question)
        ids = self.book_ids(books)
        hits = self.retriever().rank_chunks(
            text, doc_ids=set(ids) or None, k=max(1, min(int(k), MAX_PASSAGES))
        )
        strips = {h.doc_id: {"chapters": self.chapters(h.doc_id)} for h in hits}
        return Passages(
            passages=[
                Passage(
                    text=" ".join(h.text.split()),
                    place=place(h.doc_id, _chunk_number(h.unit_id), strips),
                    score=round(float(h.score), 3),
                )
                for h in hits
            ],
            seconds=round(time.perf_counter() - started, 3),
        )

    def ask(
        self,
        question: str,
        books: list[str] | None = None,
        preset: str | None = None,
        progress: Progress | None = None,
    ) -> CompactResult:
        """The compact result of the whole loop on `question`; `progress` hears each
        progress event of the run."""
        from mindscape.context import Context

        started = time.perf_counter()
        text = checked_question(question)
        chosen = checked_preset(preset) or self.preset
        ids = self.book_ids(books)
        with self._ask_lock:
            out = self._answer(self.ask_args(text, ids, chosen), progress)
        threshold = Context(preset=chosen or "mindscape").resolved().confidence_threshold
        return compact_result(out, seconds=time.perf_counter() - started, threshold=threshold)

    def ask_args(self, question: str, books: list[str], preset: str | None) -> argparse.Namespace:
        """``mindscape ask``'s options for the question (what the warm process takes)."""
        argv = ["--store", self.store, "--quiet"]
        for book in books:
            argv += ["--doc", book]
        for flag, value in (("--preset", preset), ("--embedder", self.embedder)):
            if value:
                argv += [flag, value]
        return self.parse_ask([*argv, *self.model_flags, "--", question])

    def _answer(self, args: argparse.Namespace, progress: Progress | None) -> dict[str, Any]:
        """The QA output: from the warm process when one runs, else from this process."""
        from mindscape.serve.warm import client
        from mindscape.serve.warm.common import WarmUnavailable, enabled

        if self.warm and enabled():
            streamed = argparse.Namespace(**{**vars(args), "stream": True, "json": True})
            try:
                return client.ask(streamed, start=False, show=_ProgressLines(progress))
            except WarmUnavailable as exc:
                logger.info("mindscape mcp: %s; answering in this process", exc)
        return self.answer_here(args, progress)


class _ProgressLines:
    """The warm process's printed lines for an ``ask --stream --json``: each
    ``{"progress": event}`` line goes to `progress`; nothing else is shown."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.buffer = ""

    def __call__(self, message: dict[str, Any]) -> None:
        if "out" not in message or self.progress is None:
            return
        self.buffer += str(message["out"])
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            try:
                event = json.loads(line).get("progress")
            except (ValueError, AttributeError):
                continue
            if isinstance(event, dict):
                self.progress(event)


def _chunk_number(unit_id: str) -> int:
    return int(unit_id.rpartition(":c")[2])


# --------------------------------------------------------------------------- the server


async def tool_call(work: Callable[[], Any]) -> Any:
    """`work` in a worker thread; its failure as one line (ToolError)."""
    try:
        return await anyio.to_thread.run_sync(work)
    except (MindscapeError, ValueError) as exc:
        raise ToolError(one_line(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - the server answers the next call all the same
        logger.exception("mindscape mcp: a call failed")
        raise ToolError(f"{type(exc).__name__}: {one_line(exc)}") from exc


def build_server(library: BookTools, log_level: LogLevel = "WARNING") -> FastMCP:
    """The FastMCP server with the three tools over `library` (the SDK's own log at
    `log_level`, on stderr)."""
    server = FastMCP("mindscape", instructions=INSTRUCTIONS, log_level=log_level)
    for handler in logging.getLogger().handlers:  # the SDK's: libraries' debug lines stay out
        handler.setLevel(log_level)
    reading = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)

    @server.tool(name="list_books", description=LIST_BOOKS, annotations=reading)
    async def list_books() -> BookList:
        return await tool_call(library.list_books)

    @server.tool(name="find_passages", description=FIND_PASSAGES, annotations=reading)
    async def find_passages(
        question: Annotated[str, Field(description="What to look for, in plain words.")],
        books: Annotated[
            list[str] | None,
            Field(description="Book ids from list_books; default: every book."),
        ] = None,
        k: Annotated[int, Field(description="How many passages (1 to 10).")] = 5,
    ) -> Passages:
        return await tool_call(lambda: library.find_passages(question, books, k))

    @server.tool(name="ask", description=ASK, annotations=reading)
    async def ask(
        question: Annotated[str, Field(description="One question about the books.")],
        ctx: Context,
        books: Annotated[
            list[str] | None,
            Field(description="Book ids from list_books; default: every book."),
        ] = None,
        preset: Annotated[
            str | None,
            Field(
                description="mindscape (default), naive (fastest), raptor, mom, mia-rag, "
                "mia-agent or comorag."
            ),
        ] = None,
    ) -> CompactResult:
        steps = [0]

        def progress(event: dict[str, Any]) -> None:  # in the worker thread
            from mindscape.trace import step_of

            step = step_of(event)
            if step:
                steps[0] += 1
                anyio.from_thread.run(ctx.report_progress, float(steps[0]), None, step)

        return await tool_call(lambda: library.ask(question, books, preset, progress))

    return server


def one_model_thread() -> None:
    """The embedder on one thread: a tool server embeds one short query at a time, which
    one thread does in tens of milliseconds, where two threads waiting for each other on a
    busy CPU took a second (two cores, a training job beside)."""
    import torch

    torch.set_num_threads(1)


def serve(library: BookTools, log_level: LogLevel = "WARNING") -> None:
    """Serve `library` over stdio until the client closes stdin.

    The protocol keeps the real stdout; file descriptor 1 and ``sys.stdout`` go to stderr
    for anything else, so that a stray print cannot break the stream."""
    from mcp.server.stdio import stdio_server

    one_model_thread()
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", newline="\n")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    server = build_server(library, log_level)
    threading.Thread(target=library.preload, daemon=True, name="mcp-preload").start()

    async def run() -> None:
        async with stdio_server(stdout=anyio.wrap_file(protocol)) as (read, write):
            low = server._mcp_server
            await low.run(read, write, low.create_initialization_options())

    anyio.run(run)
