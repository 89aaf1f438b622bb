"""The LLM reasoner: every role as a prompt from :mod:`mindscape.prompts`.

Calls go through :class:`mindscape.llm.LLM` (structured output where the model supports it,
tolerant JSON extraction and one re-ask otherwise, retries with backoff, every call and
token counted into the ledger the node passes in). If a model's answer stays unusable after
the re-ask, that one role falls back to the offline reasoner for that call, and the attempt
is marked ``llm->offline``: a weak local model degrades the answer, never the run.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field, field_validator

from mindscape import prompts
from mindscape.answers import LETTERS, parse_choice, parse_claim
from mindscape.llm import LLM, LLMOutputError, LLMSettings, TextCache, Usage, approx_tokens
from mindscape.llm.client import is_request_error
from mindscape.memory.sentence_split import split_sentences
from mindscape.prompts import answer as answer_prompt
from mindscape.prompts import encode as encode_prompt
from mindscape.prompts import fuse as fuse_prompt
from mindscape.prompts import probe as probe_prompt
from mindscape.prompts import update as update_prompt
from mindscape.reasoners import focus, grounding
from mindscape.reasoners.base import (
    LLM_ROLES,
    AnswerRequest,
    EncodeGroup,
    EncodeResult,
    RefineRequest,
    RefineResult,
    UpdateRequest,
    UpdateResult,
)
from mindscape.reasoners.offline import OfflineReasoner
from mindscape.state import Attempt, EvidenceItem, EvidenceNote, SignatureItem, norm_probe
from mindscape.tokens import default_counter

logger = logging.getLogger(__name__)

FUSE_MAX_WORDS = 200
NONE_TEXT = "(none)"
PLAIN_MAX_TOKENS = 48
"""Output cap of a plain answer: a few words (a small model may otherwise explain at length)."""

MAX_OUTPUT_TOKENS = {"answer": 200, "probe": 200, "encode": 500, "fuse": 350, "update": 500}
"""Output cap per role, in tokens: each role writes only what it needs."""

# --------------------------------------------------------------------------- output schemas


def _decision(value: Any) -> str:
    text = str(value or "").strip().upper()
    return "ANSWER" if text.startswith("ANSWER") else "REFINE"


class CueOut(BaseModel):
    """Findings for one evidence block."""

    block: str = ""
    findings: str = ""


class EncodeOut(BaseModel):
    """Mem-Encode (+ Mem-Fuse) output."""

    cues: list[CueOut] = Field(default_factory=list)
    fused: str = ""


class AnswerOut(BaseModel):
    """Try-Answer output: the quote that answers, the answer, and whether it is settled.

    ``evidence_ids`` is accepted when a model volunteers it; a volunteered confidence is
    ignored: the attempt's confidence comes from :mod:`mindscape.reasoners.grounding`.
    """

    quote: str = ""
    answer: str = ""
    sufficient: bool = True
    evidence_ids: list[str] = Field(default_factory=list)

    @classmethod
    def grammar_schema(cls) -> dict[str, Any]:
        """The JSON schema the model is constrained to: three keys, in this order."""
        return {
            "type": "object",
            "properties": {
                "quote": {"type": "string"},
                "answer": {"type": "string"},
                "sufficient": {"type": "boolean"},
            },
            "required": ["quote", "answer", "sufficient"],
        }

    @field_validator("quote", mode="before")
    @classmethod
    def _quote(cls, v: Any) -> str:
        return "" if v is None else str(v)

    @field_validator("answer", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else str(v)


class ProbeOut(BaseModel):
    """Self-Probe + decision output."""

    decision: str = "REFINE"
    probes: list[str] = Field(default_factory=list)
    next_query: str = ""
    reason: str = ""

    @field_validator("decision", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> str:
        return _decision(v)


class NoteOut(BaseModel):
    """One grounded evidence note."""

    note: str
    ids: list[str] = Field(default_factory=list)


class UpdateOut(BaseModel):
    """MiA UPDATE output."""

    decision: str = "REFINE"
    next_query: str = ""
    signature: list[str] = Field(default_factory=list)
    evidence: list[NoteOut] = Field(default_factory=list)
    reason: str = ""

    @field_validator("decision", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> str:
        return _decision(v)


# --------------------------------------------------------------------------- formatting


def format_passages(items: list[EvidenceItem]) -> str:
    """Evidence items as delimited blocks with their ids."""
    if not items:
        return NONE_TEXT
    return "\n".join(
        prompts.render(
            encode_prompt.PASSAGE,
            unit_id=i["unit_id"],
            text=prompts.as_data(" ".join(i["text"].split())),
        )
        for i in items
    )


def top_passages(items: list[EvidenceItem], budget: int) -> list[EvidenceItem]:
    """The best-scoring items that fit `budget` tokens, best first."""
    from mindscape.memory.ranking import pack_budget

    return pack_budget(sorted(items, key=lambda i: -i["score"]), lambda i: int(i["tokens"]), budget)


def within(items: list[EvidenceItem], budget: int) -> list[EvidenceItem]:
    """The best-scoring items that fit `budget` tokens, kept in their given order."""
    keep = {id(i) for i in top_passages(items, budget)}
    return [i for i in items if id(i) in keep]


def in_order(items: list[EvidenceItem], budget: int) -> list[EvidenceItem]:
    """The items, in their (priority) order, while they fit `budget` tokens."""
    from mindscape.memory.ranking import pack_budget

    return pack_budget(items, lambda i: int(i["tokens"]), budget)


def format_notes(units: list[EvidenceNote], fused: str = "", budget: int | None = None) -> str:
    """Memory units as lines, with the fused cue last; with `budget` (approximate tokens),
    the latest lines that fit, the fused cue first among them."""
    lines = [
        prompts.as_data(f"- [{u['layer']}] {u['probe']}: {u['cue']}") for u in units if u.get("cue")
    ]
    if fused:
        lines.append(prompts.as_data(f"- [synthesis] {fused}"))
    if budget is not None:
        kept: list[str] = []
        for line in reversed(lines):
            if approx_tokens("\n".join([line, *kept])) > budget:
                break
            kept.insert(0, line)
        lines = kept
    return "\n".join(lines) or NONE_TEXT


def format_summaries(items: list[SignatureItem], budget: int | None = None) -> str:
    """Session summaries as delimited blocks with their ids; with `budget` (approximate
    tokens), the first ones that fit (σ's order: the most useful first), and at least the
    first, cut to the budget."""
    if not items:
        return NONE_TEXT
    texts = [" ".join(s["text"].split()) for s in items]
    if budget is not None:
        used = [approx_tokens(t) + 12 for t in texts]  # + the block's tags and id
        keep = next((k for k in range(1, len(texts)) if sum(used[: k + 1]) > budget), len(texts))
        texts = texts[:keep]
        texts[0] = texts[0][: max(40, 4 * (budget - 12))]
    return "\n".join(
        prompts.render(update_prompt.ITEM, unit_id=s["unit_id"], text=prompts.as_data(t))
        for s, t in zip(items, texts, strict=False)
    )


def format_attempt(attempt: Attempt | None) -> str:
    """One line describing an answer attempt."""
    if attempt is None:
        return "no attempt yet"
    verdict = "sufficient" if attempt["sufficient"] else "NOT enough evidence"
    return (
        f"{attempt['answer'] or '(no answer)'} ({verdict}, confidence {attempt['confidence']:.2f})"
    )


def _rules(task: str) -> str:
    """The JSON prompt's task rules."""
    return {
        "multiple-choice": answer_prompt.CHOICE_RULES,
        "claim": answer_prompt.CLAIM_RULES,
    }.get(task, answer_prompt.OPEN_RULES)


def _options_block(req: AnswerRequest) -> str:
    """The lettered options of a multiple-choice question ("" otherwise)."""
    if req.task != "multiple-choice" or not req.options:
        return ""
    lines = [
        prompts.render(answer_prompt.OPTION, letter=LETTERS[i], text=prompts.as_data(o))
        for i, o in enumerate(req.options)
    ]
    return "Options:\n" + "\n".join(lines) + "\n"


def focus_query(req: AnswerRequest) -> str:
    """What the focused set is chosen for: the question, with the options of a multiple-choice
    question (its question alone is often vague: "Why did the author ...?")."""
    if req.task == "multiple-choice" and req.options:
        return " ".join([req.question, *req.options])
    return req.question


_REFUSALS = (
    answer_prompt.NOT_STATED,
    "not mentioned",
    "does not say",
    "does not mention",
    "does not state",
)
_LEAD = re.compile(r"^\s*(?:the\s+)?answer\s*(?:is)?\s*[:\-]\s*", re.IGNORECASE)


def parse_plain(reply: str) -> tuple[str, bool]:
    """A plain reply as ``(answer, stated)``: its first non-empty line without an "Answer:"
    lead, quotes or a closing full stop; ``stated`` is False for a "not stated" reply."""
    line = next((ln for ln in reply.splitlines() if ln.strip()), "")
    answer = _LEAD.sub("", line).strip().strip("\"'`*").rstrip(".").strip()
    low = answer.lower()
    stated = bool(answer) and not any(r in low for r in _REFUSALS)
    return answer, stated


def letter_choice(logprobs: dict[str, float], n_options: int) -> tuple[int, float] | None:
    """The option whose letter a first token most likely is, with its share of the letters'
    probability (tokens such as " B" or "B." count for B); None when no letter is among them."""
    mass = [0.0] * n_options
    for token, logprob in logprobs.items():
        letter = token.strip().rstrip(".):").upper()
        if len(letter) == 1 and letter in LETTERS[:n_options]:
            mass[LETTERS.index(letter)] += math.exp(logprob)
    total = sum(mass)
    if total <= 0.0:
        return None
    best = max(range(n_options), key=mass.__getitem__)
    return best, mass[best] / total


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


# --------------------------------------------------------------------------- the reasoner


class LLMReasoner:
    """Prompts over a chat model; the offline reasoner is the per-call fallback.

    ``shared`` is a dict that outlives one reasoner (the Deps keep one): when the endpoint
    rejects structured output, the switch to text parsing is remembered there.
    """

    name = "llm"

    def __init__(
        self,
        chat: BaseChatModel,
        fallback: OfflineReasoner,
        *,
        settings: LLMSettings | None = None,
        cache: TextCache | None = None,
        shared: dict[str, Any] | None = None,
        passage_tokens: int = 1000,
        roles: list[str] | tuple[str, ...] = LLM_ROLES,
        option_scoring: bool = False,
    ) -> None:
        self.chat = chat
        self.roles = frozenset(roles)
        """The roles this model plays; the fallback (extractive) reasoner plays the others."""
        self.fallback = fallback
        self.passage_tokens = passage_tokens
        """Tokens of passages in one prompt (answer, update; split among encode's blocks,
        half for Self-Probe): the main input cost of every call."""
        self.shared = shared if shared is not None else {}
        self.settings = self.shared.get("llm_settings") or settings or LLMSettings(backend="openai")
        self.cache = cache
        self.option_scoring = option_scoring
        """Multiple choice with the plain prompt: pick the option whose letter the reply's
        first token most likely is (one output token, from the endpoint's log-probabilities)
        instead of reading the generated reply."""

    def _llm(self, usage: Usage) -> LLM:
        return LLM(self.chat, settings=self.settings, cache=self.cache, usage=usage)

    def _json(
        self, usage: Usage, prompt: str, system: str, schema: type[BaseModel], role: str
    ) -> Any:
        llm = self._llm(usage)
        try:
            return llm.complete_json(
                prompt,
                system=system,
                schema=schema,
                role=role,
                max_tokens=MAX_OUTPUT_TOKENS.get(role),
            )
        except Exception as exc:
            if isinstance(exc, LLMOutputError) or not is_request_error(exc):
                raise
            # the endpoint refused the request (e.g. a prompt over its context size)
            raise LLMOutputError(f"{role}: request refused: {exc}") from exc
        finally:
            if llm.structured == "off" and self.settings.structured == "auto":
                # the endpoint rejected structured output once: parse text from now on
                self.settings = replace(self.settings, structured="off")
                self.shared["llm_settings"] = self.settings

    # ---- roles
    def encode(
        self,
        question: str,
        groups: list[EncodeGroup],
        history: list[EvidenceNote],
        *,
        fuse: bool,
        usage: Usage,
    ) -> EncodeResult:
        if not groups:
            return EncodeResult(cues=[])
        if "encode" not in self.roles:
            return self.fallback.encode(question, groups, history, fuse=fuse, usage=usage)
        share = max(200, self.passage_tokens // len(groups))
        blocks = "\n\n".join(
            prompts.render(
                encode_prompt.BLOCK,
                block_id=f"b{n + 1}",
                layer=g.layer,
                probe=g.probe.replace('"', "'"),
                passages=format_passages(within(g.items, share)),
            )
            for n, g in enumerate(groups)
        )
        do_fuse = fuse and bool(history)
        prompt = prompts.render(
            encode_prompt.USER,
            question=question,
            blocks=blocks,
            memory=format_notes(history),
            fuse_rule=encode_prompt.FUSE_RULE if do_fuse else encode_prompt.NO_FUSE_RULE,
        )
        try:
            out: EncodeOut = self._json(usage, prompt, encode_prompt.SYSTEM, EncodeOut, "encode")
        except LLMOutputError:
            logger.warning("encode: unusable model output; using extractive cues")
            return self.fallback.encode(question, groups, history, fuse=fuse, usage=usage)
        by_block = {c.block.strip(): c.findings.strip() for c in out.cues}
        cues = [by_block.get(f"b{n + 1}", "") for n in range(len(groups))]
        if len(out.cues) == len(groups) and not any(cues):  # ids missing: take them in order
            cues = [c.findings.strip() for c in out.cues]
        missing = [n for n, c in enumerate(cues) if not c]
        if missing:
            extra = self.fallback.encode(
                question, [groups[n] for n in missing], [], fuse=False, usage=usage
            )
            for n, cue in zip(missing, extra.cues, strict=True):
                cues[n] = cue
        return EncodeResult(cues=cues, fused=(out.fused.strip() or None) if do_fuse else None)

    def fuse(self, question: str, units: list[EvidenceNote], *, usage: Usage) -> str:
        if "fuse" not in self.roles:
            return self.fallback.fuse(question, units, usage=usage)
        notes = "\n".join(
            prompts.render(
                fuse_prompt.NOTE, probe=u["probe"], layer=u["layer"], cue=prompts.as_data(u["cue"])
            )
            for u in units
        )
        prompt = prompts.render(
            fuse_prompt.USER, question=question, notes=notes or NONE_TEXT, max_words=FUSE_MAX_WORDS
        )
        return " ".join(
            self._llm(usage).complete(prompt, system=fuse_prompt.SYSTEM, role="fuse").split()
        )

    def answer(self, req: AnswerRequest, *, usage: Usage) -> Attempt:
        if "answer" not in self.roles:
            return self.fallback.answer(req, usage=usage)
        focused = self._focus(req) if req.focus_tokens else []
        if self.settings.backend == "local":  # a small model: one focused passage, plain words
            shown = focused or in_order(req.passages, max(200, req.focus_tokens or 600))
            return self.plain_answer(req, shown, usage)
        signature_block = (
            prompts.render(
                answer_prompt.SIGNATURE_BLOCK,
                signature=format_summaries(req.signature, budget=self.passage_tokens // 4),
            )
            if req.signature
            else ""
        )
        memory_block = (
            prompts.render(
                answer_prompt.MEMORY_BLOCK,
                memory=format_notes(req.notes, req.fused, budget=self.passage_tokens // 4),
            )
            if req.notes or req.fused
            else ""
        )
        # the passage budget covers everything read: σ and memory a quarter each at most, so
        # passages keep at least half of it; a refining round may widen the window
        window = req.passage_tokens or self.passage_tokens
        shown = focused or in_order(
            req.passages, max(200, window - approx_tokens(signature_block + memory_block))
        )
        prompt = prompts.render(
            answer_prompt.USER,
            signature_block=signature_block,
            memory_block=memory_block,
            passages=format_passages(shown),
            task_rules=_rules(req.task),
            question=req.question,
            options_block=_options_block(req),
        )
        try:
            out: AnswerOut = self._json(usage, prompt, answer_prompt.SYSTEM, AnswerOut, "answer")
        except LLMOutputError:
            logger.warning("answer: unusable model output; answering extractively")
            attempt = self.fallback.answer(req, usage=usage)
            return Attempt(**{**attempt, "reasoner": "llm->offline"})
        attempt = self._attempt(req.question, req.task, req.options, shown, out)
        if focused:
            attempt["passages"] = [p["text"] for p in focused]
        return attempt

    def _focus(self, req: AnswerRequest) -> list[EvidenceItem]:
        """The focused passage set for this attempt (see :mod:`mindscape.reasoners.focus`)."""
        vectors = self.fallback.vectors
        store = vectors.store
        hits = [p for p in req.passages if p["layer"] == "veridical"]
        vectors.prefetch(hits)

        def cosines(query: str, texts: list[str]) -> Any:
            return vectors.texts(texts) @ vectors.query(query)

        return focus.focus(
            focus_query(req),
            hits,
            budget=req.focus_tokens,
            window=req.focus_window,
            chunks=focus.ViewChunks(store.view("veridical")) if store is not None else None,
            embed=cosines,
            count=default_counter().count,
            seen=req.seen,
        )

    def plain_answer(self, req: AnswerRequest, shown: list[EvidenceItem], usage: Usage) -> Attempt:
        """Ask in plain words (no JSON) and ground the reply against the passages read."""
        rules = {
            "multiple-choice": answer_prompt.PLAIN_CHOICE,
            "claim": answer_prompt.PLAIN_CLAIM,
        }.get(req.task, answer_prompt.PLAIN_OPEN)
        prompt = prompts.render(
            answer_prompt.PLAIN_USER,
            passages="\n\n".join(prompts.as_data(p["text"]) for p in shown) or NONE_TEXT,
            question=req.question,
            options_block=_options_block(req),
            rules=rules,
        )
        llm = self._llm(usage)
        scored = None
        if self.option_scoring and req.task == "multiple-choice" and req.options:
            top = llm.first_token_logprobs(prompt, system=answer_prompt.PLAIN_SYSTEM, role="answer")
            scored = letter_choice(top, len(req.options))
        reply = (
            LETTERS[scored[0]]
            if scored is not None
            else llm.complete(
                prompt,
                system=answer_prompt.PLAIN_SYSTEM,
                role="answer",
                max_tokens=PLAIN_MAX_TOKENS,
            )
        )
        answer, stated = parse_plain(reply)
        target = answer
        if req.task == "multiple-choice" and req.options:
            choice = parse_choice(answer, req.options)
            target = req.options[choice] if choice is not None else answer
        elif req.task == "claim":
            target = req.question
        out = AnswerOut(quote=supporting_sentence(target, shown), answer=answer, sufficient=stated)
        attempt = self._attempt(req.question, req.task, req.options, shown, out)
        attempt["passages"] = [p["text"] for p in shown]
        return attempt

    def _attempt(
        self,
        question: str,
        task: str,
        options: list[str],
        shown: list[EvidenceItem],
        out: AnswerOut,
    ) -> Attempt:
        """The attempt, with its confidence from the grounding checks, not the model's."""
        texts = [p["text"] for p in shown]
        quoted = [
            p["unit_id"]
            for p in shown
            if grounding.quote_match(out.quote, [p["text"]]) >= grounding.QUOTE_MATCH
        ]
        ids = {p["unit_id"] for p in shown}
        cited = [i for i in out.evidence_ids if i in ids]
        support = list(dict.fromkeys([*quoted, *cited])) or [p["unit_id"] for p in shown[:3]]
        answer = " ".join(out.answer.split())
        sufficient = out.sufficient and bool(answer) and answer not in {"*", "-"}
        choice = None
        if task == "multiple-choice" and options:
            choice = parse_choice(answer, options)
            answer = LETTERS[choice] if choice is not None else answer
            sufficient = sufficient and choice is not None
        elif task == "claim":
            verdict = parse_claim(answer)
            answer = answer if verdict is None else ("TRUE" if verdict else "FALSE")
            sufficient = sufficient and verdict is not None
        confidence = grounding.grounded_confidence(
            sufficient=sufficient,
            quote=out.quote,
            answer=answer,
            passages=texts,
            open_task=task not in ("multiple-choice", "claim"),
            question=question if task not in ("multiple-choice", "claim") else "",
        )
        return Attempt(
            round=0,
            answer=answer,
            sufficient=sufficient,
            confidence=confidence,
            support=support,
            choice=choice,
            reasoner=self.name,
            read=[p["unit_id"] for p in shown],
        )

    def refine(self, req: RefineRequest, *, usage: Usage) -> RefineResult:
        if "probe" not in self.roles:
            return self.fallback.refine(req, usage=usage)
        prompt = prompts.render(
            probe_prompt.USER,
            question=req.question,
            query=req.query,
            attempt=format_attempt(req.attempt),
            passages=format_passages(top_passages(req.passages, self.passage_tokens // 2)),
            memory=format_notes(req.notes),
            previous="\n".join(f"- {p}" for p in req.previous_probes) or NONE_TEXT,
            max_probes=req.max_probes,
            rewrite_rule=probe_prompt.REWRITE_RULE if req.rewrite else probe_prompt.NO_REWRITE_RULE,
        )
        try:
            out: ProbeOut = self._json(usage, prompt, probe_prompt.SYSTEM, ProbeOut, "probe")
        except LLMOutputError:
            logger.warning("probe: unusable model output; probing extractively")
            return self.fallback.refine(req, usage=usage)
        seen = {norm_probe(p) for p in [*req.previous_probes, req.question]}
        probes: list[str] = []
        for p in out.probes:
            key = norm_probe(str(p))
            if key and key not in seen:
                seen.add(key)
                probes.append(" ".join(str(p).split()))
        next_query = out.next_query.strip() if req.rewrite else ""
        return RefineResult(
            decision=out.decision,
            probes=probes[: req.max_probes],
            next_query=next_query or None,
            reason=out.reason,
        )

    def update(self, req: UpdateRequest, *, usage: Usage) -> UpdateResult:
        if "update" not in self.roles:
            return self.fallback.update(req, usage=usage)
        prompt = prompts.render(
            update_prompt.USER,
            question=req.question,
            query=req.query,
            signature=format_summaries(req.signature),
            candidates=format_summaries(req.candidates),
            passages=format_passages(in_order(req.passages, self.passage_tokens)),
            memory=format_notes(req.notes),
            k=req.k,
            rewrite_rule=update_prompt.REWRITE_RULE
            if req.rewrite
            else update_prompt.NO_REWRITE_RULE,
        )
        try:
            out: UpdateOut = self._json(usage, prompt, update_prompt.SYSTEM, UpdateOut, "update")
        except LLMOutputError:
            logger.warning("update: unusable model output; re-selecting the signature")
            return self.fallback.update(req, usage=usage)
        known = {s["unit_id"] for s in [*req.signature, *req.candidates]}
        chosen = [i for i in dict.fromkeys(out.signature) if i in known][: req.k]
        passage_ids = {p["unit_id"] for p in req.passages}
        notes = [
            (" ".join(n.note.split()), [i for i in n.ids if i in passage_ids])
            for n in out.evidence
            if n.note.strip()
        ]
        next_query = out.next_query.strip() if req.rewrite else ""
        return UpdateResult(
            decision=out.decision,
            next_query=next_query or None,
            signature_ids=chosen or None,
            notes=notes,
            reason=out.reason,
        )
