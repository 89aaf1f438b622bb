"""The retriever's interface: what the QA agent needs from a retriever (signature, hits).

Apart from the implementation (:mod:`.retriever`) so that the agent, tests and parent agents
depend on two methods, not on Chroma or the index.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from mindscape.memory.settings import RetrievalSettings, SignatureParams
from mindscape.memory.types import Hit, Layer, SignatureUnit


@runtime_checkable
class MemoryRetriever(Protocol):
    """What the QA agent needs from a retriever: a signature, and hits per layer.

    :class:`mindscape.memory.retrieval.retriever.Retriever` is the implementation; tests and parent
    agents may inject anything with these two methods (``Deps(retriever=...)``).
    """

    def signature(
        self,
        query: str,
        *,
        doc_ids: set[str] | None = None,
        method: str = "coverage",
        params: SignatureParams | None = None,
        extra_text: str = "",
    ) -> list[SignatureUnit]:
        """The signature σ for `query`: session summaries chosen by `method`."""
        ...

    def retrieve(
        self,
        query: str,
        *,
        signature: list[SignatureUnit] | None = None,
        doc_ids: set[str] | None = None,
        settings: RetrievalSettings | None = None,
        exclude: set[str] | frozenset[str] = frozenset(),
    ) -> dict[Layer, list[Hit]]:
        """Per layer: hits ranked by the σ-conditioned score, minus `exclude`, within budget."""
        ...
