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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mindscape.llm.settings import LLMSettings

if TYPE_CHECKING:
    from mindscape.context import Context
    from mindscape.memory.retrieval.protocol import MemoryRetriever
    from mindscape.reasoners.base import Reasoner


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
    """The roles the LLM plays (:func:`~mindscape.deps.run_roles`); the extractive reasoner
    plays the rest."""
    retriever: MemoryRetriever
    vectors: Any
    """Sentence vectors over the store (:class:`~mindscape.reasoners.sentence_vectors.SentenceVectors`)."""
    offline: Reasoner
    """The extractive reasoner with the run's calibration."""
    reasoner: Reasoner
    """What plays the LLM roles: an LLM reasoner, or :attr:`offline`."""
    token_budget: int | None
    """A question's token budget (:func:`~mindscape.deps.token_budget`)."""
    documents: set[str] | None
    """Ids of the documents in the store (None when the store cannot list them)."""

    @property
    def llm_answers(self) -> bool:
        """Whether an LLM plays the answer role (it then reads a focused set)."""
        return self.choice.reasoner == "llm" and (
            self.ctx.llm_roles is None or "answer" in self.ctx.llm_roles
        )
