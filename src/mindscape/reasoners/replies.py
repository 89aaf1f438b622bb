"""Reading the LLM roles' replies: a plain answer's words, an option letter from first-token
log-probabilities, a closed answer's option margin, the grounded attempt (its confidence
from :mod:`mindscape.reasoners.grounding`, not from the model), and the cues, probes and
UPDATE notes kept from a JSON reply."""

from __future__ import annotations

import math
import re

from mindscape.answers import LETTERS, parse_choice, parse_claim
from mindscape.memory.sentence_split import split_sentences
from mindscape.prompts import answer as answer_prompt
from mindscape.reasoners import grounding
from mindscape.reasoners.base import (
    AnswerRequest,
    RefineRequest,
    RefineResult,
    UpdateRequest,
    UpdateResult,
)
from mindscape.reasoners.schemas import AnswerOut, EncodeOut, ProbeOut, UpdateOut
from mindscape.state import Attempt, EvidenceItem, norm_probe

_REFUSALS = (
    answer_prompt.NOT_STATED,
    "not mentioned",
    "does not say",
    "does not mention",
    "does not state",
)
_LEAD = re.compile(r"^\s*(?:the\s+)?answer\s*(?:is)?\s*[:\-]\s*", re.IGNORECASE)
_CLOSED_TASKS = ("multiple-choice", "claim")


def parse_plain(reply: str) -> tuple[str, bool]:
    """A plain reply as ``(answer, stated)``: its first non-empty line without an "Answer:"
    lead, quotes or a closing full stop; ``stated`` is False for a "not stated" reply."""
    line = next((ln for ln in reply.splitlines() if ln.strip()), "")
    answer = _LEAD.sub("", line).strip().strip("\"'`*").rstrip(".").strip()
    low = answer.lower()
    stated = bool(answer) and not any(r in low for r in _REFUSALS)
    return answer, stated


def letter_masses(logprobs: dict[str, float], n_options: int) -> list[float]:
    """The probability a first token gives each option's letter (tokens such as " B" or "B."
    count for B)."""
    mass = [0.0] * n_options
    for token, logprob in logprobs.items():
        letter = token.strip().rstrip(".):").upper()
        if len(letter) == 1 and letter in LETTERS[:n_options]:
            mass[LETTERS.index(letter)] += math.exp(logprob)
    return mass


def letter_choice(logprobs: dict[str, float], n_options: int) -> tuple[int, float] | None:
    """The option whose letter a first token most likely is, with its share of the letters'
    probability (tokens such as " B" or "B." count for B); None when no letter is among them."""
    mass = letter_masses(logprobs, n_options)
    total = sum(mass)
    if total <= 0.0:
        return None
    best = max(range(n_options), key=mass.__getitem__)
    return best, mass[best] / total


VERDICTS = ("true", "false")
"""A claim's two answers, in the order :func:`verdict_masses` gives their probability."""


def verdict_masses(logprobs: dict[str, float]) -> list[float]:
    """The probability a first token gives TRUE and FALSE: a token counts for a verdict when,
    stripped and in lower case, it begins that word ("TRUE", " True", "FAL" of "FALSE")."""
    mass = [0.0, 0.0]
    for token, logprob in logprobs.items():
        word = token.strip().rstrip(".):").lower()
        for n, verdict in enumerate(VERDICTS):
            if word and verdict.startswith(word):
                mass[n] += math.exp(logprob)
    return mass


def option_margin(masses: list[float], chosen: int | None) -> float:
    """A closed answer's confidence from the reader's first-token probabilities of the
    options: the chosen option's share of the options' probability minus the best other
    option's share, 0..1 (for TRUE/FALSE, ``2·sigmoid(log-probability margin) − 1``). An even
    choice scores 0, a sure one 1; 0 when no option's token is among the first token's
    likeliest (the reply opened with something else) or the chosen one is not the likeliest."""
    total = sum(masses)
    if chosen is None or total <= 0.0:
        return 0.0
    others = [m for n, m in enumerate(masses) if n != chosen]
    return max(0.0, (masses[chosen] - max(others, default=0.0)) / total)


def supporting_sentence(target: str, passages: list[EvidenceItem]) -> str:
    """The sentence of the passages that best carries ``target``'s content words ("" when
    none carries any): the quote the grounding checks tie a plain answer to."""
    best, best_share = "", 0.0
    for p in passages:
        text = p["text"]
        for a, b in split_sentences(text):
            share = grounding.answer_support(target, text[a:b], [])
            if share > best_share:
                best, best_share = text[a:b], share
    return best


def plain_reply(reply: str, req: AnswerRequest, shown: list[EvidenceItem]) -> AnswerOut:
    """A plain reply read as the JSON answer would be: the answer, whether it is stated, and
    as its quote the sentence that best carries what it asserts (the chosen option's text,
    the claim, or the answer itself)."""
    answer, stated = parse_plain(reply)
    target = answer
    if req.task == "multiple-choice" and req.options:
        choice = parse_choice(answer, req.options)
        target = req.options[choice] if choice is not None else answer
    elif req.task == "claim":
        target = req.question
    return AnswerOut(quote=supporting_sentence(target, shown), answer=answer, sufficient=stated)


def _support(shown: list[EvidenceItem], out: AnswerOut) -> list[str]:
    """The passages the quote comes from, then those the model cited; the first three read
    when there are none."""
    quoted = [
        p["unit_id"]
        for p in shown
        if grounding.quote_match(out.quote, [p["text"]]) >= grounding.QUOTE_MATCH
    ]
    ids = {p["unit_id"] for p in shown}
    cited = [i for i in out.evidence_ids if i in ids]
    return list(dict.fromkeys([*quoted, *cited])) or [p["unit_id"] for p in shown[:3]]


def is_closed(req: AnswerRequest) -> bool:
    """Whether the answer is an option letter (multiple choice with options) or a claim's
    TRUE or FALSE: a closed answer, whose confidence is the reader's option margin."""
    return (req.task == "multiple-choice" and bool(req.options)) or req.task == "claim"


def grounded_attempt(
    req: AnswerRequest, shown: list[EvidenceItem], out: AnswerOut, *, reasoner: str
) -> Attempt:
    """The attempt of a reply, with its confidence from the grounding checks, not the
    model's: a multiple-choice answer becomes its letter and a claim TRUE or FALSE (neither
    is sufficient when it cannot be read)."""
    answer = " ".join(out.answer.split())
    sufficient = out.sufficient and bool(answer) and answer not in {"*", "-"}
    choice = None
    if req.task == "multiple-choice" and req.options:
        choice = parse_choice(answer, req.options)
        answer = LETTERS[choice] if choice is not None else answer
        sufficient = sufficient and choice is not None
    elif req.task == "claim":
        verdict = parse_claim(answer)
        answer = answer if verdict is None else ("TRUE" if verdict else "FALSE")
        sufficient = sufficient and verdict is not None
    open_task = req.task not in _CLOSED_TASKS
    confidence = grounding.grounded_confidence(
        sufficient=sufficient,
        quote=out.quote,
        answer=answer,
        passages=[p["text"] for p in shown],
        open_task=open_task,
        question=req.question if open_task else "",
    )
    return Attempt(
        round=0,
        answer=answer,
        sufficient=sufficient,
        confidence=confidence,
        support=_support(shown, out),
        choice=choice,
        reasoner=reasoner,
        read=[p["unit_id"] for p in shown],
        quote=" ".join(out.quote.split()),
    )


def block_cues(out: EncodeOut, n_blocks: int) -> list[str]:
    """The findings for blocks ``b1`` … ``b<n_blocks>``, "" where the reply has none; when
    the reply gives one finding per block without usable ids, they are taken in order."""
    by_block = {c.block.strip(): c.findings.strip() for c in out.cues}
    cues = [by_block.get(f"b{n + 1}", "") for n in range(n_blocks)]
    if len(out.cues) == n_blocks and not any(cues):  # ids missing: take them in order
        cues = [c.findings.strip() for c in out.cues]
    return cues


def _next_query(text: str, rewrite: bool) -> str | None:
    """The rewritten query of a reply, when the request asked for one and it is not empty."""
    return (text.strip() if rewrite else "") or None


def refine_result(out: ProbeOut, req: RefineRequest) -> RefineResult:
    """Self-Probe's reply: its new probes (neither the question nor an earlier probe,
    compared by :func:`~mindscape.state.norm_probe`), at most ``req.max_probes``."""
    seen = {norm_probe(p) for p in [*req.previous_probes, req.question]}
    probes: list[str] = []
    for p in out.probes:
        key = norm_probe(str(p))
        if key and key not in seen:
            seen.add(key)
            probes.append(" ".join(str(p).split()))
    return RefineResult(
        decision=out.decision,
        probes=probes[: req.max_probes],
        next_query=_next_query(out.next_query, req.rewrite),
        reason=out.reason,
    )


def update_result(out: UpdateOut, req: UpdateRequest) -> UpdateResult:
    """UPDATE's reply: signature ids among σ_t and the candidates (at most ``req.k``), and the
    non-empty notes, each citing only passages of the request."""
    known = {s["unit_id"] for s in [*req.signature, *req.candidates]}
    chosen = [i for i in dict.fromkeys(out.signature) if i in known][: req.k]
    passage_ids = {p["unit_id"] for p in req.passages}
    notes = [
        (" ".join(n.note.split()), [i for i in n.ids if i in passage_ids])
        for n in out.evidence
        if n.note.strip()
    ]
    return UpdateResult(
        decision=out.decision,
        next_query=_next_query(out.next_query, req.rewrite),
        signature_ids=chosen or None,
        notes=notes,
        reason=out.reason,
    )
