"""Dependencies of the QA graph: the objects its nodes use, built lazily and cached.

`Deps` holds models, the embedder, the store and the retriever. Nothing is loaded when the
module is imported or when a `Deps` is created: each getter builds what it needs on first
use and caches it (stores and retrievers per path, process-wide, so the Studio server and
repeated CLI calls reuse them). Tests and parent agents inject their own objects.

Precedence:

* store / retriever: an injected object > ``Context.store`` (explicit, else ``MINDSCAPE_STORE``);
* which model answers: :func:`choose_backend`, the one rule, from ``Context.backend``, the
  LLM settings and whether a chat model is injected. ``auto`` is the LLM when a chat model
  is injected or the LLM settings resolve to a model (``local`` when the embedded model is
  installed, or ``openai``; see :func:`mindscape.llm.resolve_backend`), else extractive,
  with a one-line notice saying how to install the local model. The LLM plays
  ``Context.llm_roles`` (default: every role; answer and update with the local model,
  :func:`~mindscape.run.run_roles`) and the extractive reasoner the rest.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindscape.errors import ModelError, StoreError
from mindscape.llm import LLMSettings, Usage, resolve_backend
from mindscape.run import (
    BackendChoice,
    Run,
    ctx_of,
    offline_reasoner,
    retrieval_settings,
    run_roles,
    signature_params,
    token_budget,
)

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from mindscape.context import Context
    from mindscape.memory.retrieval.protocol import MemoryRetriever
    from mindscape.memory.settings import RetrievalSettings, SignatureParams
    from mindscape.memory.store import MemoryStore
    from mindscape.reasoners.base import Reasoner
    from mindscape.reasoners.offline import OfflineReasoner
    from mindscape.reasoners.rankers import Ranker

logger = logging.getLogger(__name__)
_LOCK = threading.RLock()
_STORES: dict[str, Any] = {}
_RETRIEVERS: dict[tuple[str, int], Any] = {}
_VECTORS: dict[tuple[int, int], Any] = {}
RUNS_KEPT = 32
"""Resolved runs a :class:`Deps` keeps, by their context object (concurrent Studio runs)."""


def choose_backend(run: str, settings: LLMSettings | None, *, chat: bool = False) -> BackendChoice:
    """The one rule for which model answers a run.

    Args:
        run: the run's ``Context.backend``: ``extractive``, ``llm`` or ``auto``.
        settings: the LLM settings (None: from the environment, unless `chat`).
        chat: whether a chat model is injected: with ``auto`` it answers, and it is the
            local model only when `settings` say ``local`` (whatever the environment names).

    ``extractive`` resolves nothing. Otherwise, without an injected chat model, the settings
    are resolved (``auto`` → ``local``, ``openai`` or ``extractive`` with a notice); ``auto``
    then answers with the LLM unless they resolve to ``extractive``, and ``llm`` always asks
    for the LLM (building it fails loudly when none is configured).
    """
    if run == "extractive":
        return BackendChoice("extractive", settings)
    if chat:
        return BackendChoice("llm", settings)
    settings = settings or LLMSettings.from_env()
    notice = None
    if settings.backend == "auto":
        backend, notice = resolve_backend(settings)
        settings = replace(settings, backend=backend)
    if run == "auto" and settings.backend == "extractive":
        return BackendChoice("extractive", settings, notice)
    return BackendChoice("llm", settings, notice)


def open_store(path: str | Path) -> MemoryStore:
    """The store at `path`, opened once per process; StoreError if there is none."""
    from mindscape.memory.store import MemoryStore

    key = str(Path(path).expanduser().resolve())
    with _LOCK:
        if key not in _STORES:
            _STORES[key] = MemoryStore.open_existing(key)
        return _STORES[key]


def forget_store(path: str | Path) -> None:
    """Drop the store at `path`, and the retrievers and sentence vectors built on it, from
    this process's caches and release its files, so that the next :func:`open_store` reads
    it afresh (the warm process does this when a store was indexed again under it)."""
    key = str(Path(path).expanduser().resolve())
    with _LOCK:
        store = _STORES.pop(key, None)
        for built in [k for k in _RETRIEVERS if k[0] == key]:
            del _RETRIEVERS[built]
        if store is not None:
            for memo in [k for k in _VECTORS if k[0] == id(store)]:
                del _VECTORS[memo]
            store.release()


@dataclass
class Deps:
    """Models, embedder, store and retriever for the QA graph (all optional, all lazy)."""

    embedder: Embeddings | None = None
    """Default: `mindscape.embeddings.load_embedder()` (MiniLM, or MINDSCAPE_EMBEDDER)."""
    store: MemoryStore | None = None
    """Default: opened from Context.store / MINDSCAPE_STORE."""
    retriever: MemoryRetriever | None = None
    """Anything with `signature` and `retrieve` (:class:`~mindscape.memory.retrieval.protocol.MemoryRetriever`);
    default: a `mindscape.memory.retrieval.retriever.Retriever` on the store."""
    chat: BaseChatModel | None = None
    """A chat model for the LLM roles; default built from `llm_settings` when needed."""
    llm_settings: LLMSettings | None = None
    """Default: `LLMSettings.from_env()`."""
    ranker: Ranker | None = None
    """Orders the focused reader's candidates; default from ``Context.evidence_ranker``
    (:func:`mindscape.reasoners.rankers.load_ranker`)."""
    usage: Usage = field(default_factory=Usage)
    """Ledger of every LLM call made through these deps (all runs, per role)."""
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _runs: dict[int, tuple[Any, Run]] = field(default_factory=dict, repr=False, compare=False)
    backend_notice: str | None = field(default=None, repr=False, compare=False)
    """Why ``auto`` fell back to extractive, once it did (the LLM settings are then kept
    resolved, so later runs get this notice from here: each run's output says it)."""

    @classmethod
    def default(cls) -> Deps:
        """Deps that build everything on first use."""
        return cls()

    # ---- embedder, store, retriever
    def get_embedder(self) -> Embeddings:
        """The embedder (loaded on first use)."""
        if self.embedder is None:
            from mindscape.embeddings import load_embedder

            self.embedder = load_embedder()
        return self.embedder

    def get_store(self, ctx: Context) -> MemoryStore:
        """The store: injected, else the one at `ctx.store`."""
        if self.store is not None:
            return self.store
        if not ctx.store:
            raise StoreError(
                "no store given: pass --store DIR, Context(store=...), or set MINDSCAPE_STORE"
            )
        return open_store(ctx.store)

    def get_retriever(self, ctx: Context) -> MemoryRetriever:
        """The retriever: injected, else one per store (cached)."""
        if self.retriever is not None:
            return self.retriever
        run = ctx.resolved()  # the fallbacks; the nodes pass their settings per call
        return self._retriever(run, signature_params(run), retrieval_settings(run))

    def _retriever(
        self, ctx: Context, params: SignatureParams, settings: RetrievalSettings
    ) -> MemoryRetriever:
        """:meth:`get_retriever` with the run's settings already derived."""
        if self.retriever is not None:
            return self.retriever
        from mindscape.memory.retrieval.retriever import Retriever

        store = self.get_store(ctx)
        embedder = self.get_embedder()
        key = (str(store.path), id(embedder))
        with _LOCK:
            if key not in _RETRIEVERS:
                _RETRIEVERS[key] = Retriever(store, embedder, params=params, settings=settings)
            return _RETRIEVERS[key]

    def documents(self, ctx: Context) -> set[str] | None:
        """Ids of the documents in the store (None when the store cannot list them)."""
        return self._documents(self.get_retriever(ctx))

    def _documents(self, retriever: MemoryRetriever) -> set[str] | None:
        store = getattr(retriever, "store", None) or self.store
        if store is None or not hasattr(store, "documents"):
            return None
        return {d["doc_id"] for d in store.documents()}

    # ---- a run, resolved once
    def run(self, runtime: Any) -> Run:
        """What this run uses, resolved once (:class:`mindscape.run.Run`). `runtime` is a
        node's LangGraph ``Runtime`` or a context (a :class:`Context`, a dict or None); a run
        is kept by its context object, so every node of one run reads the same one."""
        from mindscape.context import Context

        raw = getattr(runtime, "context", runtime)
        keep = isinstance(raw, Context | dict)  # None and foreign contexts: the defaults, fresh
        with _LOCK:
            hit = self._runs.get(id(raw)) if keep else None
            if hit is not None and hit[0] is raw:
                return hit[1]
        run = self._resolve(ctx_of(raw))
        if keep:
            with _LOCK:
                self._runs[id(raw)] = (raw, run)
                while len(self._runs) > RUNS_KEPT:
                    self._runs.pop(next(iter(self._runs)))
        return run

    def _resolve(self, ctx: Context) -> Run:
        """:meth:`run` for a resolved Context, top down: what the Context decides, then which
        model answers, then the objects built from both."""
        params, settings = signature_params(ctx), retrieval_settings(ctx)
        choice = self.choice(ctx)
        roles = run_roles(ctx.llm_roles, local=choice.local)
        retriever = self._retriever(ctx, params, settings)
        vectors = self._vectors(retriever)
        offline = offline_reasoner(ctx, vectors)
        return Run(
            ctx=ctx,
            choice=choice,
            roles=tuple(roles),
            params=params,
            retriever=retriever,
            vectors=vectors,
            offline=offline,
            reasoner=offline if choice.reasoner == "extractive" else self._llm(ctx, offline, roles),
            token_budget=token_budget(ctx.max_tokens, ctx.local_max_tokens, local=choice.local),
            documents=self._documents(retriever),
        )

    # ---- reasoners
    def settings(self) -> LLMSettings:
        """The LLM settings with ``auto`` resolved (once; a fallback notice is kept in
        :attr:`backend_notice`)."""
        settings = self._remember(choose_backend("llm", self.llm_settings)).settings
        assert settings is not None  # without an injected chat model they are resolved
        return settings

    def choice(self, ctx: Context) -> BackendChoice:
        """Which model answers this run (:func:`choose_backend`); resolved settings are kept.
        An ``auto`` run answered extractively because ``auto`` fell back carries the fallback
        notice every time, not only when the settings were first resolved."""
        choice = self._remember(
            choose_backend(ctx.backend, self.llm_settings, chat=self.chat is not None)
        )
        if ctx.backend == "auto" and choice.reasoner == "extractive" and not choice.notice:
            choice = replace(choice, notice=self.backend_notice)
        return choice

    def _remember(self, choice: BackendChoice) -> BackendChoice:
        """Keep the resolved settings (so ``auto`` resolves once) and the fallback notice. The
        notice is not only a log line: each run's output carries it (``backend_notice``), and
        ``ask`` and ``demo`` print it on stderr, ``--quiet`` or not."""
        if choice.notice:
            logger.info("%s", choice.notice)
            self.backend_notice = choice.notice
        self.llm_settings = choice.settings
        return choice

    def backend(self, ctx: Context) -> str:
        """`extractive` or `llm` for this run."""
        return self.choice(ctx).reasoner

    def answers_locally(self, ctx: Context) -> bool:
        """Whether the local model plays the LLM roles of this run: the chat model is built
        from (or injected with) settings whose backend is ``local``."""
        return self.choice(ctx).local

    def token_budget(self, ctx: Context) -> int | None:
        """A question's token budget (:func:`~mindscape.run.token_budget`)."""
        return token_budget(ctx.max_tokens, ctx.local_max_tokens, local=self.answers_locally(ctx))

    def _vectors(self, retriever: MemoryRetriever) -> Any:
        """Sentence vectors over the retriever's store (memo shared across runs)."""
        from mindscape.reasoners.sentence_vectors import SentenceVectors

        store = getattr(retriever, "store", None)
        embedder = getattr(retriever, "embedder", None) or self.get_embedder()
        key = (id(store), id(embedder))
        with _LOCK:
            if key not in _VECTORS:
                _VECTORS[key] = SentenceVectors(
                    embedder,
                    store if hasattr(store, "cache") else None,
                    query_fn=getattr(retriever, "embed_query", None),
                )
            return _VECTORS[key]

    def get_chat(self) -> BaseChatModel:
        """The chat model (built from the LLM settings on first use)."""
        if self.chat is None:
            from mindscape.llm import make_chat_model

            settings = self.settings()
            if settings.backend == "extractive":
                raise ModelError(
                    "the run asks for an LLM but none is configured: install the local model "
                    "(`make model`) or set MINDSCAPE_LLM_BACKEND=openai"
                )
            self.chat = make_chat_model(settings)
        return self.chat

    def reasoner(self, ctx: Context) -> Reasoner:
        """The reasoner behind the LLM roles for this run."""
        return self.run(ctx).reasoner

    def _llm(self, ctx: Context, offline: OfflineReasoner, roles: list[str]) -> Reasoner:
        """The LLM reasoner of a resolved run: the chat model, the roles it plays, the
        extractive reasoner for the rest."""
        from mindscape.reasoners.llm import LLMReasoner
        from mindscape.reasoners.verifier import load_verifier

        chat = self.get_chat()
        settings = self.llm_settings or LLMSettings(backend="openai")
        return LLMReasoner(
            chat,
            offline,
            settings=settings,
            shared=self._cache,
            passage_tokens=int(ctx.llm_passage_tokens or 0),
            roles=roles,
            option_scoring=ctx.mc_scoring == "logprob",
            reader=ctx.reader,
            verifier=load_verifier() if ctx.verifier and "answer" in roles else None,
            samples=ctx.reader_samples,
            ranker=self.get_ranker(ctx) if "answer" in roles else None,
        )

    def get_ranker(self, ctx: Context) -> Ranker:
        """The evidence ranker: injected, else ``ctx.evidence_ranker`` (loaded once)."""
        if self.ranker is not None:
            return self.ranker
        from mindscape.reasoners.rankers import load_ranker

        return load_ranker(ctx.evidence_ranker)
