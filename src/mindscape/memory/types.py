"""Plain data types shared by the index, the retriever and the agent.

Every unit of every layer keeps the ids of the source chunks it covers, so a hit in any
layer maps back to source text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Layer = Literal["veridical", "episodic", "semantic", "outline"]
LAYERS: tuple[Layer, ...] = ("veridical", "episodic", "semantic", "outline")


@dataclass
class Unit:
    """One memory unit of one layer, anchored to source chunks."""

    id: str
    """Stable id: `<doc_id>:<layer tag>:<n>`; re-indexing the same text gives the same id."""
    doc_id: str
    """The document the unit belongs to."""
    layer: Layer
    """Which layer of the memory the unit lives in."""
    text: str
    """What is embedded and shown: a chunk, a summary, or an outline item with its core content."""
    chunk_ids: list[str]
    """Ids of the veridical chunks this unit covers (a chunk lists itself)."""
    kind: str = ""
    """Finer type inside the layer: chunk, session, cluster, core, section."""
    order: int = 0
    """Source order inside the document (chunk index, window index, section index)."""
    level: int = 0
    """Tree level for semantic clusters (0 = clusters of chunks); 0 elsewhere."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Extras: char spans, the chunk's window id, triples, a section title."""


@dataclass
class Hit:
    """A retrieved unit with the scores that ranked it: the memory side of a passage.

    The unit is held whole (``unit``); its id, layer, document, chunks and text are read
    through it. The graph state carries a passage as a JSON-serialisable
    :class:`~mindscape.state.EvidenceItem` (LangGraph's checkpoints and Studio read the state
    as JSON), made from a hit in one place, :func:`mindscape.agents._common.to_item`."""

    unit: Unit
    score_query: float = 0.0
    """s(q, u): the query-only score (cosine; in hybrid mode the BM25+dense mix)."""
    score_signature: float = 0.0
    """s(σ, u): the signature score under the configured representation (0 without a signature)."""
    score: float = 0.0
    """The fused score the hit was ranked by."""
    tokens: int = 0
    """cl100k tokens of `text`, used for budget packing."""
    meta: dict[str, Any] = field(default_factory=dict)
    """The unit's meta with its kind, order and level, and how it was ranked (rank, α, the
    layers it was fused from)."""

    @property
    def unit_id(self) -> str:
        return self.unit.id

    @property
    def layer(self) -> Layer:
        return self.unit.layer

    @property
    def doc_id(self) -> str:
        return self.unit.doc_id

    @property
    def chunk_ids(self) -> list[str]:
        return self.unit.chunk_ids

    @property
    def text(self) -> str:
        return self.unit.text


@dataclass
class SignatureUnit:
    """One high-level unit chosen into a signature, with why it was chosen."""

    unit_id: str
    text: str
    chunk_ids: list[str]
    gains: dict[str, float] = field(default_factory=dict)
    """Marginal gain terms at the step it was picked: `query`, `coverage`, `diversity`, `total`."""
    rank: int = 0
    """Position in the signature (0 = picked first)."""
