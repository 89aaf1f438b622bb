"""Dependencies of the QA graph: the objects its nodes use, built lazily and cached.

`Deps` holds models, the embedder, the store and the retriever. Nothing is loaded when the
module is imported or when a `Deps` is created: each getter builds what it needs on first
use and caches it (stores and retrievers per path, process-wide, so the Studio server and
repeated CLI calls reuse them). Tests and parent agents inject their own objects.

Precedence:

* store / retriever: an injected object > ``Context.store`` (explicit, else ``MINDSCAPE_STORE``);
* reasoner: ``Context.backend``; ``auto`` is the LLM when a chat model is injected or the
  LLM settings resolve to a model (``local`` when the embedded model is installed, or
  ``openai``; see :func:`mindscape.llm.resolve_backend`), else extractive, with a one-line
  notice saying how to install the local model. The LLM plays ``Context.llm_roles``
  (default: every role; answer and update with the local model) and the extractive
  reasoner the rest.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindscape.errors import ModelError, StoreError
from mindscape.llm import LLMSettings, Usage, resolve_backend

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from mindscape.context import Context
    from mindscape.memory.store import MemoryStore
    from mindscape.memory.types import MemoryRetriever
    from mindscape.reasoners.base import Reasoner

logger = logging.getLogger(__name__)
_LOCK = threading.RLock()
_STORES: dict[str, Any] = {}
_RETRIEVERS: dict[tuple[str, int], Any] = {}
_VECTORS: dict[tuple[int, int], Any] = {}


def open_store(path: str | Path) -> MemoryStore:
    """The store at `path`, opened once per process; StoreError if there is none."""
    from mindscape.memory.store import MemoryStore

    key = str(Path(path).expanduser().resolve())
    with _LOCK:
        if key not in _STORES:
            _STORES[key] = MemoryStore.open_existing(key)
        return _STORES[key]


@dataclass
class Deps:
    """Models, embedder, store and retriever for the QA graph (all optional, all lazy)."""

    embedder: Embeddings | None = None
    """Default: `mindscape.embeddings.load_embedder()` (MiniLM, or MINDSCAPE_EMBEDDER)."""
    store: MemoryStore | None = None
    """Default: opened from Context.store / MINDSCAPE_STORE."""
    retriever: MemoryRetriever | None = None
    """Anything with `signature` and `retrieve` (:class:`~mindscape.memory.types.MemoryRetriever`);
    default: a `mindscape.memory.retriever.Retriever` on the store."""
    chat: BaseChatModel | None = None
    """A chat model for the LLM roles; default built from `llm_settings` when needed."""
    llm_settings: LLMSettings | None = None
    """Default: `LLMSettings.from_env()`."""
    usage: Usage = field(default_factory=Usage)
    """Ledger of every LLM call made through these deps (all runs, per role)."""
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

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
        from mindscape.memory.retriever import Retriever

        store = self.get_store(ctx)
        embedder = self.get_embedder()
        key = (str(store.path), id(embedder))
        with _LOCK:
            if key not in _RETRIEVERS:
                _RETRIEVERS[key] = Retriever(store, embedder)
            return _RETRIEVERS[key]

    def documents(self, ctx: Context) -> set[str] | None:
        """Ids of the documents in the store (None when the store cannot list them)."""
        retriever = self.get_retriever(ctx)
        store = getattr(retriever, "store", None) or self.store
        if store is None or not hasattr(store, "documents"):
            return None
        return {d["doc_id"] for d in store.documents()}

    # ---- reasoners
    def settings(self) -> LLMSettings:
        """The LLM settings with ``auto`` resolved (once; a fallback notice is logged once)."""
        settings = self.llm_settings or LLMSettings.from_env()
        if settings.backend == "auto":
            backend, notice = resolve_backend(settings)
            if notice:
                logger.warning("%s", notice)
            settings = replace(settings, backend=backend)
        self.llm_settings = settings
        return settings

    def backend(self, ctx: Context) -> str:
        """`extractive` or `llm` for this run."""
        if ctx.backend != "auto":
            return ctx.backend
        if self.chat is not None:
            return "llm"
        return "extractive" if self.settings().backend == "extractive" else "llm"

    def llm_answers(self, ctx: Context) -> bool:
        """Whether an LLM plays the answer role of this run (it then reads a focused set)."""
        return self.backend(ctx) == "llm" and (ctx.llm_roles is None or "answer" in ctx.llm_roles)

    def answers_locally(self, ctx: Context) -> bool:
        """Whether the local model plays the LLM roles of this run: the chat model is built
        from (or injected with) settings whose backend is ``local``."""
        if self.backend(ctx) != "llm":
            return False
        settings = self.settings() if self.chat is None else self.llm_settings
        return settings is not None and settings.backend == "local"

    def token_budget(self, ctx: Context) -> int | None:
        """A question's token budget: ``ctx.max_tokens``, capped by ``ctx.local_max_tokens``
        when the local model answers (its prompt tokens cost 10–25 ms each on two cores)."""
        budget = ctx.max_tokens
        if self.answers_locally(ctx) and ctx.local_max_tokens is not None:
            budget = ctx.local_max_tokens if budget is None else min(budget, ctx.local_max_tokens)
        return budget

    def sentence_vectors(self, ctx: Context) -> Any:
        """Sentence vectors over the run's store (memo shared across runs)."""
        from mindscape.reasoners.sentence_vectors import SentenceVectors

        retriever = self.get_retriever(ctx)
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

    def offline_reasoner(self, ctx: Context) -> Any:
        """The extractive reasoner with the run's calibration."""
        from mindscape.reasoners.offline import OfflineReasoner

        return OfflineReasoner(
            self.sentence_vectors(ctx),
            open_threshold=ctx.open_threshold,
            claim_threshold=ctx.claim_threshold,
            mc_margin=ctx.mc_margin,
            span=ctx.offline_span,
        )

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
        offline = self.offline_reasoner(ctx)
        if self.backend(ctx) == "extractive":
            return offline
        from mindscape.reasoners.base import LLM_ROLES, LOCAL_LLM_ROLES
        from mindscape.reasoners.llm import LLMReasoner

        chat = self.get_chat()
        settings = self.llm_settings or LLMSettings(backend="openai")
        roles = ctx.llm_roles
        if roles is None:
            roles = list(LOCAL_LLM_ROLES if self.answers_locally(ctx) else LLM_ROLES)
        return LLMReasoner(
            chat,
            offline,
            settings=settings,
            shared=self._cache,
            passage_tokens=int(ctx.resolved().llm_passage_tokens or 0),
            roles=roles,
            option_scoring=ctx.mc_scoring == "logprob",
        )
