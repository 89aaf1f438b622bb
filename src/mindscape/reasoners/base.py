"""The reasoner interface: one method per LLM role, plain requests and results.

Every method takes a :class:`~mindscape.llm.Usage` ledger and records the LLM calls it made
there (none for the offline reasoner), so a node can return exact per-run counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from mindscape.llm import Usage
from mindscape.state import Attempt, EvidenceItem, EvidenceNote, SignatureItem


@dataclass
class EncodeGroup:
    """What one probe retrieved from one layer: the input of one evidence note."""

    probe: str
    layer: str
    items: list[EvidenceItem]


@dataclass
class EncodeRequest:
    """What Mem-Encode sees: the groups to encode and, to fuse them, the earlier notes."""

    question: str
    groups: list[EncodeGroup]
    history: list[EvidenceNote]
    fuse: bool
    """Also Mem-Fuse `history` with the new cues (when there is a history)."""

    @property
    def fuses(self) -> bool:
        """Whether this request fuses: fusion is asked for and there is a history."""
        return self.fuse and bool(self.history)


@dataclass
class EncodeResult:
    """Mem-Encode output: one cue per group (same order), and the Mem-Fuse cue if asked."""

    cues: list[str]
    fused: str | None = None


@dataclass
class AnswerRequest:
    """What the answerer sees."""

    question: str
    task: str
    options: list[str] = field(default_factory=list)
    passages: list[EvidenceItem] = field(default_factory=list)
    signature: list[SignatureItem] = field(default_factory=list)
    """Empty unless the answerer is allowed to see σ."""
    notes: list[EvidenceNote] = field(default_factory=list)
    """Empty unless the answerer is allowed to see the evidence memory."""
    fused: str = ""
    passage_tokens: int | None = None
    """This attempt's prompt window for passages, σ and memory; None: the reasoner's own."""
    focus_tokens: int = 0
    """An LLM answerer reads a focused set of at most this many tokens built from the
    passages' sentences (:mod:`mindscape.reasoners.focus`); 0 reads whole passages."""
    focus_window: int = 2
    """Neighbouring sentences read either side of a chosen one."""
    focus_windows: int = 0
    """The local model's plain prompt reads only this many focused windows, the best first;
    0 reads all of them in story order."""
    seen: list[str] = field(default_factory=list)
    """Texts earlier attempts of the question read (a refining round reads new ones)."""
    read_summaries: str = "off"
    """Whether the local reader reads a retrieved session summary before its best window:
    ``off``, ``routed`` (when the layer router says the question needs one) or ``always``."""


@dataclass(kw_only=True)
class RoundRequest:
    """What a role that closes a round (Self-Probe, UPDATE) sees of it: the question, the
    round's query and passages, the evidence memory, and whether to rewrite the query."""

    question: str
    query: str
    passages: list[EvidenceItem]
    notes: list[EvidenceNote]
    rewrite: bool


@dataclass(kw_only=True)
class RoundOutcome:
    """What a role that closes a round (Self-Probe, UPDATE) decides, and why."""

    decision: str | None = None
    """REFINE or ANSWER; None leaves the decision to the attempt's confidence."""
    next_query: str | None = None
    """The rewritten query of the next round; None keeps the current one."""
    reason: str = ""


@dataclass(kw_only=True)
class RefineRequest(RoundRequest):
    """What Self-Probe (and the REFINE/ANSWER decision) sees, besides the round."""

    attempt: Attempt | None
    previous_probes: list[str]
    max_probes: int
    rewrite: bool = False


@dataclass(kw_only=True)
class RefineResult(RoundOutcome):
    """Self-Probe output: the new probes, besides the round's outcome."""

    probes: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class UpdateRequest(RoundRequest):
    """MiA's UPDATE inputs (q_t, σ_t, P_t, E_t, H_t): besides the round, σ_t and the
    candidates H_t."""

    signature: list[SignatureItem]
    candidates: list[SignatureItem]
    k: int = 5
    rewrite: bool = True


@dataclass(kw_only=True)
class UpdateResult(RoundOutcome):
    """MiA's UPDATE outputs: (d_t, q_{t+1}, σ_{t+1}, E_{t+1})."""

    signature_ids: list[str] | None = None
    """Chosen units (from σ_t ∪ H_t); None keeps the candidates' own ranking."""
    notes: list[tuple[str, list[str]]] = field(default_factory=list)
    """Grounded evidence notes with the unit ids they cite."""


class Reasoner(Protocol):
    """The roles the QA graph needs; :mod:`offline` and :mod:`llm` implement them."""

    name: str

    def encode(self, req: EncodeRequest, *, usage: Usage) -> EncodeResult:
        """Mem-Encode each group (and Mem-Fuse the history with the new cues when asked)."""
        ...

    def fuse(self, question: str, units: list[EvidenceNote], *, usage: Usage) -> str:
        """Mem-Fuse: one cue integrating the given units' cues towards the question."""
        ...

    def answer(self, req: AnswerRequest, *, usage: Usage) -> Attempt:
        """Try-Answer (the attempt's `round` is filled by the node)."""
        ...

    def refine(self, req: RefineRequest, *, usage: Usage) -> RefineResult:
        """Self-Probe: new probes (entities first, never repeating), decision, rewrite."""
        ...

    def update(self, req: UpdateRequest, *, usage: Usage) -> UpdateResult:
        """MiA UPDATE: decision, next query, signature, evidence notes."""
        ...
