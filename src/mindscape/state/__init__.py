"""The QA graph's state: what goes in, what comes out, and what the loop carries between.

Three TypedDicts (data-enrichment's pattern):

* :class:`QAInput`: the public contract (question, document or series, task, options);
* :class:`QAOutput`: the public result (answer, confidence, evidence, signature, trace with
  the books touched and the quote (:mod:`mindscape.trace`), cost);
* :class:`QAState`: both plus the loop's internals, with reducers next to the fields.

Everything in the state is plain JSON data (dicts, lists, strings, numbers), so it
checkpoints, streams and shows in LangGraph Studio as is. The ``*Dict`` types document
the shapes of the items; they are not enforced at runtime.

Per-question reset: ``init_signature`` writes :class:`langgraph.types.Overwrite` values into
every reducer field, so a second question on the same thread starts from a clean slate.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, get_args

from typing_extensions import NotRequired, TypedDict

from mindscape.state.trace_shapes import (
    BookStrip,
    Decision,
    Grounding,
    QuotePin,
    StripChapter,
    StripSession,
    TracePassage,
    TraceSession,
    TraceStep,
    TraceUnit,
)

__all__ = [
    "COUNTERS",
    "DECISIONS",
    "INPUT_KEYS",
    "TASK_ALIASES",
    "Attempt",
    "BookStrip",
    "BudgetName",
    "Decision",
    "EvidenceItem",
    "EvidenceNote",
    "Grounding",
    "ProbeHits",
    "QAInput",
    "QAOutput",
    "QAState",
    "QuotePin",
    "SignatureItem",
    "SignatureUpdate",
    "StripChapter",
    "StripSession",
    "Task",
    "TracePassage",
    "TraceSession",
    "TraceStep",
    "TraceUnit",
    "UpdateNote",
    "add_unique",
    "add_units",
    "answer_step",
    "as_decision",
    "canonical_task",
    "merge_evidence",
    "norm_probe",
]

Task = Literal["open", "multiple-choice", "claim"]

BudgetName = Literal["rounds", "llm_calls", "tokens"]
"""A budget that can run out: ``Context.max_rounds``, ``max_llm_calls``, the token budget."""

DECISIONS: tuple[Decision, ...] = get_args(Decision)


def as_decision(value: str | None) -> Decision | None:
    """A reasoner's decision as state data: ANSWER, REFINE or STOP, else None (no decision)."""
    return next((d for d in DECISIONS if d == value), None)


#: Task names the input accepts for each canonical task (bench names included).
TASK_ALIASES: dict[str, Task] = {
    "open": "open",
    "open_qa": "open",
    "qa": "open",
    "multiple-choice": "multiple-choice",
    "multiple_choice": "multiple-choice",
    "mc": "multiple-choice",
    "claim": "claim",
    "claim_verification": "claim",
    "verify": "claim",
}


def canonical_task(task: str | None, options: list[str] | None = None) -> Task:
    """The canonical task for an input: an alias, or guessed from the options when unset."""
    if task:
        try:
            return TASK_ALIASES[task.strip().lower()]
        except KeyError:
            known = ", ".join(sorted(set(TASK_ALIASES.values())))
            raise ValueError(f"unknown task {task!r} (use one of: {known})") from None
    return "multiple-choice" if options else "open"


# --------------------------------------------------------------------------- item shapes


class EvidenceItem(TypedDict):
    """One retrieved unit of one layer, with the scores that ranked it."""

    unit_id: str
    """Stable id of the unit (`<doc>:c3`, `<doc>:e1`, ...)."""
    layer: str
    """veridical | semantic | episodic | outline."""
    doc_id: str
    chunk_ids: list[str]
    """The source chunks the unit is anchored to."""
    text: str
    score: float
    """The fused score it was ranked by."""
    score_query: float
    score_signature: float
    tokens: int
    round: int
    """The round that retrieved it (1-based)."""
    probe: str
    """The query or probe that retrieved it."""


class ProbeHits(TypedDict):
    """What one probe retrieved from one layer in the current round."""

    probe: str
    layer: str
    items: list[EvidenceItem]


class EvidenceNote(TypedDict):
    """One note of the evidence memory: ComoRAG's memory unit `(probe, layer, evidence ids,
    cue)` (layer "fusion" for Mem-Fuse, "notes" for MiA's UPDATE notes). Not to be confused with
    the index (:mod:`mindscape.memory`), which the notes are written about."""

    probe: str
    layer: str
    evidence_ids: list[str]
    """Unit ids of the evidence the cue was read from."""
    cue: str
    """What the evidence adds towards the answer (the Comprehension Agent's key findings)."""
    round: int


class SignatureItem(TypedDict):
    """One session summary in the signature σ."""

    unit_id: str
    text: str
    chunk_ids: list[str]
    gains: NotRequired[dict[str, float]]
    rank: NotRequired[int]


class Attempt(TypedDict):
    """One answer attempt."""

    round: int
    answer: str
    """Open QA: a short span; multiple choice: a letter; claims: TRUE or FALSE; may be a guess."""
    sufficient: bool
    """False is the explicit "not enough evidence" outcome."""
    confidence: float
    """0..1; with `sufficient` it drives REFINE/ANSWER."""
    grounding: NotRequired[Grounding]
    """How the answer is tied to the passages (set by `try_answer`); Self-Probe's ANSWER
    counts only for a sufficient attempt whose quote was found."""
    certainty: NotRequired[float]
    """The reader's own confidence in its words, 0..1: the geometric-mean probability of its
    output tokens (a plain answer where the endpoint returns log-probabilities). `try_answer`
    caps `confidence` with it, so an unsure small reader refines instead of answering."""
    support: list[str]
    """Unit ids the answer rests on."""
    rationale: NotRequired[str]
    choice: NotRequired[int | None]
    """Multiple choice: the chosen option's index."""
    reasoner: NotRequired[str]
    """offline | llm | llm->offline (the LLM's output was unusable)."""
    read: NotRequired[list[str]]
    """Unit ids of the passages the answerer read (after its own token budget)."""
    passages: NotRequired[list[str]]
    """The focused passages an LLM answerer read, word for word (empty without focus)."""
    ranker: NotRequired[str]
    """Which evidence ranker ordered the focused passages (``learned`` or ``fused``)."""
    summary: NotRequired[str]
    """The session summary (episodic unit id) the local reader read before its best window,
    when it read one (``Context.read_summaries``)."""
    quote: NotRequired[str]
    """The words the answer rests on: an LLM reply's quote (a plain reply's: the passage
    sentence nearest its answer), the extractive answer's sentence. Observation only: the
    map's pin (:mod:`mindscape.trace`)."""


class UpdateNote(TypedDict):
    """A grounded evidence note of MiA's UPDATE (it becomes an :class:`EvidenceNote`)."""

    cue: str
    evidence_ids: list[str]
    """Unit ids of the passages the note cites."""


class SignatureUpdate(TypedDict, total=False):
    """What `signature_update` passes on (MiA's UPDATE): empty when σ was not updated."""

    decision: Decision | None
    """UPDATE's ANSWER or REFINE; None: no decision (re-selection, or the extractive reasoner)."""
    next_query: str | None
    """The rewritten query q_{t+1}; None keeps the current one."""
    notes: list[UpdateNote]
    """Grounded evidence notes (`encode="notes"` keeps them in the evidence memory)."""
    reason: str


# --------------------------------------------------------------------------- reducers


def merge_evidence(
    left: list[EvidenceItem] | None, right: list[EvidenceItem] | None
) -> list[EvidenceItem]:
    """Union by unit id in first-seen order; a repeat keeps the item with the higher score."""
    out: dict[str, EvidenceItem] = {}
    for item in [*(left or []), *(right or [])]:
        uid = item["unit_id"]
        if uid not in out or item.get("score", 0.0) > out[uid].get("score", 0.0):
            out[uid] = item if uid not in out else {**item, "round": out[uid]["round"]}
    return list(out.values())


def add_units(
    left: list[EvidenceNote] | None, right: list[EvidenceNote] | None
) -> list[EvidenceNote]:
    """Append evidence notes; a note with the same (probe, layer, evidence ids) replaces the old one."""
    out: dict[tuple[str, str, tuple[str, ...]], EvidenceNote] = {}
    for unit in [*(left or []), *(right or [])]:
        out[(unit["probe"], unit["layer"], tuple(unit["evidence_ids"]))] = unit
    return list(out.values())


def norm_probe(text: str) -> str:
    """The comparison form of a probe: lower case, single spaces, no end punctuation."""
    return " ".join(text.lower().split()).strip(" ?.!")


def add_unique(left: list[str] | None, right: list[str] | None) -> list[str]:
    """Append strings that are new up to case, spacing and end punctuation."""
    out = list(left or [])
    seen = {norm_probe(p) for p in out}
    for p in right or []:
        key = norm_probe(p)
        if key and key not in seen:
            seen.add(key)
            out.append(p)
    return out


# --------------------------------------------------------------------------- schemas


class QAInput(TypedDict):
    """A question about an indexed book (or a series of books)."""

    question: str
    """The question, or the claim to verify."""
    doc_id: NotRequired[str | None]
    """The document to search; None searches every document in the store."""
    doc_ids: NotRequired[list[str] | None]
    """A series: several documents searched as one (overrides `doc_id`)."""
    task: NotRequired[str | None]
    """open | multiple-choice | claim (bench names accepted); default: multiple-choice if options, else open."""
    options: NotRequired[list[str] | None]
    """Multiple-choice options, in letter order A, B, C, ..."""


INPUT_KEYS: tuple[str, ...] = tuple(QAInput.__annotations__)
"""The keys of a question (derived from :class:`QAInput`)."""


class QAOutput(TypedDict):
    """The result of a question."""

    answer: NotRequired[str]
    """The final answer: the accepted attempt, or the best attempt when a budget ran out."""
    confidence: NotRequired[float]
    sufficient: NotRequired[bool]
    """False when even the best attempt found the evidence insufficient."""
    task: NotRequired[str | None]
    evidence: NotRequired[list[EvidenceItem]]
    """The evidence the answer rests on (its support first, then the best-scoring rest)."""
    signature: NotRequired[list[SignatureItem]]
    """The final signature σ (session summaries)."""
    trace: NotRequired[Annotated[list[TraceStep], operator.add]]
    """The decision trace, one step per round."""
    rounds: NotRequired[Annotated[int, operator.add]]
    """Retrieval rounds run."""
    llm_calls: NotRequired[Annotated[int, operator.add]]
    """LLM calls made (re-asks included)."""
    tokens_in: NotRequired[Annotated[int, operator.add]]
    tokens_out: NotRequired[Annotated[int, operator.add]]
    tokens_cached: NotRequired[Annotated[int, operator.add]]
    """Prompt tokens the model did not read again (answers sampled over a prompt it had just
    read); not in ``tokens_in`` nor in the token budget."""
    llm_fallbacks: NotRequired[Annotated[int, operator.add]]
    """Model answers that stayed malformed after one re-ask (the role's extractive fallback
    ran instead; the run goes on), and parts of usable answers the extractive reasoner filled
    in (Mem-Encode's blocks the reply left out)."""
    books: NotRequired[list[BookStrip]]
    """The books the question's activation touched, most activated first, each as the strip
    of its sessions with the activation as heat (:mod:`mindscape.trace`; the map's base)."""
    quote: NotRequired[QuotePin | None]
    """The answer's quote and where it is (None when the answer has none)."""
    stop_reason: NotRequired[str]
    """answered | rounds | llm_calls | tokens | exhausted (nothing new to try) | no surer (a
    refining round did not raise the reader's certainty)."""
    answer_round: NotRequired[int]
    """The round whose attempt gave the answer (0: no attempt)."""
    preset: NotRequired[str]
    backend: NotRequired[str]
    """What answered: ``local`` (the local model), ``openai`` (an OpenAI-compatible endpoint),
    ``llm`` (an injected chat model) or ``extractive`` (no model played the answer role). A
    model answer that fell back to the extractive reasoner for one call is counted in
    ``llm_fallbacks``."""
    backend_notice: NotRequired[str | None]
    """Why the ``auto`` backend answered extractively (no local model installed, ...); None
    when it did not fall back."""


class QAState(QAInput, QAOutput):
    """Everything the loop carries: `(query, signature, evidence memory)` and bookkeeping."""

    query: NotRequired[str]
    """The current retrieval query (the question, or its rewrite)."""
    pending_probes: NotRequired[list[str]]
    """Probes to retrieve with in the next round (Self-Probe output)."""
    probes: NotRequired[Annotated[list[str], add_unique]]
    """Every probe asked so far (never repeated)."""
    round_hits: NotRequired[list[ProbeHits]]
    """This round's retrieval, per probe and layer."""
    retrieved: NotRequired[Annotated[list[EvidenceItem], merge_evidence]]
    """Everything retrieved so far (deduplicated by unit id); excluded from later retrieval."""
    evidence_memory: NotRequired[Annotated[list[EvidenceNote], add_units]]
    """The evidence memory (ComoRAG's memory pool): notes `(probe, layer, evidence ids, cue)`."""
    fused: NotRequired[str]
    """The latest Mem-Fuse cue."""
    attempts: NotRequired[Annotated[list[Attempt], operator.add]]
    """Every answer attempt."""
    update: NotRequired[SignatureUpdate]
    """The latest signature update: decision, next_query, notes, reason (MiA's UPDATE)."""
    decision: NotRequired[Decision | None]
    """ANSWER | REFINE | STOP, written by `refine`; the router reads it."""
    over_budget: NotRequired[BudgetName | None]
    """The budget used up by what the question has spent so far, None while every budget
    lasts (:func:`mindscape.agents.budget.spent_budget`, the one place budgets are checked).
    `try_answer` writes it after its call, for `refine`; `refine` after Self-Probe's call,
    for the router."""
    token_budget: NotRequired[int | None]
    """This question's token budget (in + out): ``Context.max_tokens``, capped by
    ``Context.local_max_tokens`` when the local model answers. None: no budget."""


def answer_step(output: QAOutput | dict[str, Any]) -> TraceStep | None:
    """The trace step of the round whose attempt gave the answer (None without one): what
    that attempt read (``read``: unit ids; ``passages``: the focused text, word for word)."""
    round_ = output.get("answer_round")
    return next((s for s in output.get("trace") or [] if s.get("round") == round_), None)


COUNTERS: tuple[str, ...] = (
    "rounds",
    "llm_calls",
    "tokens_in",
    "tokens_out",
    "tokens_cached",
    "llm_fallbacks",
)
"""The additive counters of the state."""
