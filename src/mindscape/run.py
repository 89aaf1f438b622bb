"""What one run of the QA graph uses, resolved once: :class:`Run`.

A run's settings come from three places: the :class:`~mindscape.context.Context` (with its
preset), the :class:`~mindscape.deps.Deps` (injected models, store, retriever) and the
environment (which LLM answers). :meth:`Deps.run <mindscape.deps.Deps.run>` turns them into
one :class:`Run` at the edge, top down: the preset applied, the backend chosen and the roles
it plays, the retriever, the sentence vectors, the extractive and the answering reasoner, the
token budget and the documents in the store. Every node of the run reads the same
:class:`Run`; nothing below it resolves the preset or chooses the backend again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from mindscape.context import LLM_ROLES, LOCAL_LLM_ROLES, Context
from mindscape.llm.settings import LLMSettings
from mindscape.memory.settings import RetrievalSettings, SignatureParams

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from mindscape.memory.retrieval.protocol import MemoryRetriever
    from mindscape.memory.retrieval.retriever import Retriever
    from mindscape.memory.store import MemoryStore
    from mindscape.reasoners.base import Reasoner
    from mindscape.reasoners.offline import OfflineReasoner
    from mindscape.reasoners.sentence_vectors import SentenceVectors


@dataclass(frozen=True)
class BackendChoice:
    """Which model answers a run, as :func:`choose_backend` decides it."""

    reasoner: Literal["extractive", "llm"]
    """What plays the LLM roles: the extractive reasoner, or an LLM."""
    settings: LLMSettings | None = None
    """The LLM settings, with ``auto`` resolved unless a chat model was injected (then they
    are the injected settings as given)."""
    notice: str | None = None
    """A one-line notice when ``auto`` fell back to extractive."""

    @property
    def local(self) -> bool:
        """Whether the local model plays the LLM roles (it then plays fewer roles and caps
        the token budget)."""
        return (
            self.reasoner == "llm"
            and self.settings is not None
            and self.settings.backend == "local"
        )


@dataclass(frozen=True)
class Run:
    """One run's resolved settings and the objects its nodes use."""

    ctx: Context
    """The run's Context with every ``None`` filled (explicit > preset > default)."""
    choice: BackendChoice
    """Which model answers (:func:`~mindscape.deps.choose_backend`)."""
    roles: tuple[str, ...]
    """The roles the LLM plays (:func:`run_roles`); the extractive reasoner
    plays the rest."""
    params: SignatureParams
    """The signature selection of this run (:func:`signature_params`)."""
    retriever: MemoryRetriever
    vectors: Any
    """Sentence vectors over the store (:class:`~mindscape.reasoners.sentence_vectors.SentenceVectors`)."""
    offline: Reasoner
    """The extractive reasoner with the run's calibration."""
    reasoner: Reasoner
    """What plays the LLM roles: an LLM reasoner, or :attr:`offline`."""
    token_budget: int | None
    """A question's token budget (:func:`token_budget`)."""
    documents: set[str] | None
    """Ids of the documents in the store (None when the store cannot list them)."""

    @property
    def llm_answers(self) -> bool:
        """Whether an LLM plays the answer role (it then reads a focused set)."""
        return self.choice.reasoner == "llm" and (
            self.ctx.llm_roles is None or "answer" in self.ctx.llm_roles
        )

    @property
    def backend(self) -> str:
        """What answers this run: ``extractive`` (no model plays the answer role), or the
        LLM backend that does (``local``, ``openai``; ``llm`` for an injected chat model
        without settings that name one)."""
        if not self.llm_answers:
            return "extractive"
        named = self.choice.settings.backend if self.choice.settings else "auto"
        return "llm" if named == "auto" else str(named)

    def retrieval_settings(
        self, budgets: dict[str, int] | None = None, *, signed: bool = True
    ) -> RetrievalSettings:
        """The retriever's settings for one query of this run (:func:`retrieval_settings`)."""
        return retrieval_settings(self.ctx, budgets, signed=signed)


def ctx_of(runtime: Any) -> Context:
    """The resolved Context of a run, whatever the caller passed as context.

    A :class:`Context` or a dict is used (resolved; a dict's unknown keys are ignored);
    anything else, including None or a parent graph's own context type, gives the defaults.
    """
    raw = getattr(runtime, "context", runtime)
    if isinstance(raw, dict):
        known = {f.name for f in fields(Context)}
        raw = Context(**{k: v for k, v in raw.items() if k in known})
    return (raw if isinstance(raw, Context) else Context()).resolved()


# ---- the one mapping from a resolved Context to the memory side's settings
def signature_params(ctx: Context) -> SignatureParams:
    """The signature selection of a run (`ctx` resolved)."""
    return SignatureParams(
        k=ctx.signature_k,
        k0=ctx.k0,
        lambda_q=ctx.lambda_q,
        lambda_c=ctx.lambda_c,
        lambda_d=ctx.lambda_d,
        relevance=ctx.signature_relevance,
        match=ctx.signature_match,
        activation=_filled(ctx.activation, "activation"),
        hybrid_weight=ctx.hybrid_weight,
    )


def retrieval_settings(
    ctx: Context, budgets: dict[str, int] | None = None, *, signed: bool = True
) -> RetrievalSettings:
    """The retriever's settings for one query of a run (`ctx` resolved): `budgets` replaces
    the layer budgets (a round's split), and α is 0 without a signature."""
    return RetrievalSettings(
        alpha=_filled(ctx.alpha, "alpha") if signed else 0.0,
        signature_mode=_filled(ctx.signature_mode, "signature_mode"),
        budgets=dict(_filled(ctx.budgets, "budgets") if budgets is None else budgets),
        top_n=ctx.top_n,
        chunk_mode=_filled(ctx.chunk_mode, "chunk_mode"),
        hybrid_weight=ctx.hybrid_weight,
        gate=ctx.gate,
        region_doc_weight=ctx.region_doc_weight,
        narrative_order=_filled(ctx.narrative_order, "narrative_order"),
        signature_params=signature_params(ctx),
    )


def offline_reasoner(ctx: Context, vectors: SentenceVectors) -> OfflineReasoner:
    """The extractive reasoner of a run (`ctx` resolved) over `vectors`: the Context holds its
    thresholds."""
    from mindscape.reasoners.offline import OfflineReasoner

    return OfflineReasoner(
        vectors,
        open_threshold=ctx.open_threshold,
        claim_threshold=ctx.claim_threshold,
        mc_margin=ctx.mc_margin,
        span=ctx.offline_span,
    )


def _filled(value: Any, name: str) -> Any:
    """A preset-decided value, which :meth:`Context.resolved` always fills."""
    if value is None:
        raise ValueError(f"Context.{name} is unset: use ctx.resolved() (ctx_of does)")
    return value


def run_roles(llm_roles: list[str] | None, *, local: bool) -> list[str]:
    """The roles the LLM plays: ``Context.llm_roles``, else every role (answer and update
    with the local model)."""
    if llm_roles is not None:
        return list(llm_roles)
    return list(LOCAL_LLM_ROLES if local else LLM_ROLES)


def token_budget(
    max_tokens: int | None, local_max_tokens: int | None, *, local: bool
) -> int | None:
    """A question's token budget: `max_tokens`, capped by `local_max_tokens` when the local
    model answers (its prompt tokens cost 10–25 ms each on two cores)."""
    if not local or local_max_tokens is None:
        return max_tokens
    return local_max_tokens if max_tokens is None else min(max_tokens, local_max_tokens)


# ---- a default run's retrieval settings, for scripts, benchmarks and tests (the agent builds
# them from its own run's Context)


@cache
def _run_context() -> Context:
    return Context().resolved()


def default_params(**overrides: Any) -> SignatureParams:
    """The signature selection of a default run (chosen on the FairytaleQA dev split, see
    docs/retrieval.md), with `overrides`: ``signature_params(Context().resolved())``."""
    return dataclasses.replace(signature_params(_run_context()), **overrides)


def literal_params(**overrides: Any) -> SignatureParams:
    """MiA's literal objective: relevance and match through the session summary, dense
    activation (the defaults differ in these three places)."""
    literal: dict[str, Any] = {"relevance": "summary", "match": "summary", "activation": "dense"}
    return default_params(**(literal | overrides))


def default_settings(**overrides: Any) -> RetrievalSettings:
    """The retrieval settings of a default run
    (``retrieval_settings(Context().resolved())``), with `overrides`."""
    return dataclasses.replace(retrieval_settings(_run_context()), **overrides)


def default_retriever(store: MemoryStore, embedder: Embeddings, **kwargs: Any) -> Retriever:
    """A :class:`~mindscape.memory.retrieval.retriever.Retriever` whose calls default to a default
    run's settings (`kwargs` go to its constructor: a counter, cache sizes)."""
    from mindscape.memory.retrieval.retriever import Retriever

    return Retriever(
        store, embedder, params=default_params(), settings=default_settings(), **kwargs
    )
