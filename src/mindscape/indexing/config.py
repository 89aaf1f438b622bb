"""How a document is cut and summarised: :class:`IndexConfig` and the parts an index LLM writes.

Every field of the config shapes the index, so changing one re-indexes a document (its
:meth:`IndexConfig.fingerprint` is in the store's manifest).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any

from mindscape.indexing.cluster import ClusterParams
from mindscape.memory.cache import content_key

__all__ = [
    "COVERAGE",
    "LLM_PARTS",
    "PART_GROUPS",
    "SUMMARIES_INPUT_TOKENS",
    "IndexConfig",
    "ordered_parts",
    "parse_llm_parts",
]

COVERAGE = "anchor-to-next-item"
"""How an LLM outline item maps to chunks (in the index fingerprint: a store built under
another rule is re-indexed, from the cached answers). See
:func:`~mindscape.indexing.outline.item_regions`."""

LLM_PARTS: tuple[str, ...] = ("episodic", "semantic", "outline", "triples")
"""The index parts an LLM can write (the indexer's stages, the estimate's parts): the session
summaries, the semantic tree's summaries, the MoM outline (its N paths and their scoring) and
the chunks' triples."""
SUMMARIES_INPUT_TOKENS = 800
"""What one LLM session summary of ``index --summaries`` reads: the session's most central
sentences, this many tokens (a session is ~2,300 tokens)."""
PART_GROUPS: dict[str, tuple[str, ...]] = {
    "summaries": ("episodic", "semantic"),
    "all": LLM_PARTS,
}
"""Names that stand for several parts in :func:`parse_llm_parts`."""


def parse_llm_parts(spec: str) -> tuple[str, ...]:
    """The parts a comma-separated list names (``outline,triples``; ``summaries`` is episodic
    and semantic, ``all`` every part), in :data:`LLM_PARTS` order. Raises ValueError naming
    the valid names on an unknown or empty one."""
    names = [n.strip().lower() for n in spec.split(",")]
    parts: set[str] = set()
    for name in names:
        if name in PART_GROUPS:
            parts.update(PART_GROUPS[name])
        elif name in LLM_PARTS:
            parts.add(name)
        else:
            valid = ", ".join([*LLM_PARTS, *PART_GROUPS])
            raise ValueError(f"unknown index LLM part {name!r} in {spec!r}; valid: {valid}")
    return tuple(p for p in LLM_PARTS if p in parts)


def ordered_parts(parts: Collection[str]) -> tuple[str, ...]:
    """`parts` in :data:`LLM_PARTS` order; ValueError naming the parts on an unknown one."""
    if isinstance(parts, str) or set(parts) - set(LLM_PARTS):
        raise ValueError(
            f"unknown index LLM part(s) {parts!r}; the parts are {', '.join(LLM_PARTS)}"
        )
    return tuple(p for p in LLM_PARTS if p in set(parts))


@dataclass(frozen=True)
class IndexConfig:
    """How a document is cut and summarised. Changing any field re-indexes a document."""

    chunk_size: int = 128
    chunk_overlap: int = 16
    window: int = 20
    """W: chunks per episodic session for long documents (shorter windows for short ones)."""
    summary_tokens: int = 160
    """Length of session and cluster summaries."""
    summary_input_tokens: int = 0
    """With an index LLM: a summary reads its passages' most central sentences, this many
    tokens of them (:func:`~mindscape.indexing.summarize.extractive_summary`), instead of the
    passages themselves (0: the passages, up to 6,000 tokens). ``index --summaries`` reads
    :data:`SUMMARIES_INPUT_TOKENS`: a prompt a third as long for a local model."""
    core_tokens: int = 120
    """Length of an outline item's core content (offline)."""
    max_section_chunks: int = 40
    """Longer heading sections are split into parts of at most this many chunks."""
    cluster: ClusterParams = field(default_factory=ClusterParams)
    triples: bool = True
    """Extract triples per chunk (LLM backend only)."""
    mom_paths: int = 3
    """N: candidate MoM memories per outline section (LLM backend only); an evaluator model
    chooses one by clarity and completeness. 1: the single greedy memory, nothing scored."""
    mom_k: int = 60
    """k of the reciprocal-rank fusion that chooses among the MoM paths."""
    llm_parts: Collection[str] = LLM_PARTS
    """The parts an index LLM writes (names from :data:`LLM_PARTS`, any collection; kept as a
    tuple in that order). The others are built as without an LLM: extractive summaries, the
    offline outline (headings or windows, extractive cores), no triples. Default: all."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "llm_parts", ordered_parts(self.llm_parts))

    def llm_writes(self, part: str) -> bool:
        """Whether an index LLM (when there is one) writes `part`."""
        return part in self.llm_parts

    def fingerprint(self, embedder: str, llm: str) -> str:
        """A hash of everything that shapes the index. Without an LLM (`llm` "offline" or "")
        the MoM path settings and the LLM parts shape nothing and are left out, so such a
        store stays current when they change; with one, the parts are in only when they are
        not all of them (an index of every part keeps the fingerprint it had before parts
        could be chosen), and the path settings and the rule mapping items to chunks
        (:data:`COVERAGE`) only when the LLM writes the
        outline."""
        fields: dict[str, Any] = asdict(self)
        offline = llm in ("offline", "")
        if offline or not self.llm_writes("outline"):
            del fields["mom_paths"], fields["mom_k"]
        else:
            fields["outline_coverage"] = COVERAGE
        if offline or self.llm_parts == LLM_PARTS:
            del fields["llm_parts"]
        if offline or not self.summary_input_tokens:
            del fields["summary_input_tokens"]
        return content_key(repr(fields), embedder, llm)[:16]
