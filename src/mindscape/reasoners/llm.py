"""The LLM reasoner: every role as a prompt from :mod:`mindscape.prompts`.

Calls go through :class:`mindscape.llm.LLM` (structured output where the model supports it,
tolerant JSON extraction and one re-ask otherwise, retries with backoff, every call and
token counted into the ledger the node passes in). If a model's answer stays unusable after
the re-ask, that one role falls back to the offline reasoner for that call, and the attempt
is marked ``llm->offline``: a weak local model degrades the answer, never the run.

This module holds the roles: each asks the fallback when the model does not play it, fills
its prompt (:mod:`~mindscape.reasoners.prompting`), asks for its reply schema
(:mod:`~mindscape.reasoners.schemas`) and reads the reply, grounding included
(:mod:`~mindscape.reasoners.replies`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from langchain_core.language_models import BaseChatModel

from mindscape.answers import LETTERS
from mindscape.context import LLM_ROLES
from mindscape.llm import LLM, LLMOutputError, LLMSettings, TextCache, Usage
from mindscape.llm.logprobs import mean_probability
from mindscape.llm.retry import is_request_error
from mindscape.prompts import fuse as fuse_prompt
from mindscape.prompts.answer import PLAIN_SYSTEM
from mindscape.reasoners import focus, grounding
from mindscape.reasoners.base import (
    AnswerRequest,
    EncodeRequest,
    EncodeResult,
    RefineRequest,
    RefineResult,
    UpdateRequest,
    UpdateResult,
)
from mindscape.reasoners.demos import demo_system, load_demos
from mindscape.reasoners.layer_router import load_router
from mindscape.reasoners.offline import OfflineReasoner
from mindscape.reasoners.prompting import (
    focus_query,
    in_order,
    render_answer,
    render_encode,
    render_fuse,
    render_plain,
    render_probe,
    render_update,
)
from mindscape.reasoners.rankers import FusedRanker, Ranker
from mindscape.reasoners.replies import (
    block_cues,
    grounded_attempt,
    is_closed,
    letter_choice,
    letter_masses,
    option_margin,
    parse_plain,
    plain_reply,
    refine_result,
    update_result,
    verdict_masses,
)
from mindscape.reasoners.schemas import (
    ANSWER,
    ENCODE,
    MAX_OUTPUT_TOKENS,
    PLAIN_MAX_TOKENS,
    PROBE,
    UPDATE,
    JsonRole,
    Out,
)
from mindscape.reasoners.verifier import Reading, Verifier
from mindscape.state import Attempt, EvidenceItem, EvidenceNote
from mindscape.tokens import default_counter

logger = logging.getLogger(__name__)

SAMPLE_TEMPERATURE = 0.8
"""The temperature of the answers sampled for the verifier's agreement feature."""


def sample_replies(llm: LLM, prompt: str, system: str, n: int) -> list[str]:
    """`n` plain replies sampled at :data:`SAMPLE_TEMPERATURE` over the same prompt (fixed
    seeds 1..n; llama.cpp reuses the cached prompt, so each costs its output tokens: its input
    tokens are counted as ``tokens_cached``)."""
    return [
        llm.sampled(cached_prompt=True, temperature=SAMPLE_TEMPERATURE, seed=k + 1).complete(
            prompt, system=system, role="answer", max_tokens=PLAIN_MAX_TOKENS
        )
        for k in range(n)
    ]


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
        passage_tokens: int,
        roles: list[str] | tuple[str, ...] = LLM_ROLES,
        option_scoring: bool = False,
        ranker: Ranker | None = None,
        reader: str = "plain",
        verifier: Verifier | None = None,
        samples: int = 0,
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
        self.plain_system = demo_system(load_demos()) if reader == "demos" else PLAIN_SYSTEM
        """The plain prompt's system message: with ``reader="demos"``, worked examples after
        it (:mod:`mindscape.reasoners.demos`)."""
        self.verifier = verifier
        """Gives a plain open answer its confidence, P(right) (:mod:`~.verifier`); without
        it the confidence is the lexical checks' level (see :meth:`_judge`)."""
        self.samples = samples
        """Answers sampled over the plain prompt for the verifier's agreement feature."""
        self.ranker = ranker or FusedRanker()
        """Orders the focused reader's candidate sentences of open questions (see
        :meth:`ranker_for`)."""

    def ranker_for(self, req: AnswerRequest) -> Ranker:
        """The ranker for this question: :attr:`ranker` for an open question, the fused
        ranking for multiple choice and claims. The learned ranker was trained to find the
        sentence that answers an open question; on QuALITY dev (multiple choice) the windows
        it picks hold the right option less often than the fused ranking's (0.054 against
        0.095, docs/results.md)."""
        return self.ranker if req.task == "open" else FusedRanker()

    def session_for(self, req: AnswerRequest) -> EvidenceItem | None:
        """The retrieved session summary this open question reads first, if any: the best
        scored episodic passage not read before, when ``req.read_summaries`` is ``always``,
        or ``routed`` and the layer router says the question needs more than one passage
        (:mod:`mindscape.reasoners.layer_router`)."""
        if req.read_summaries == "off" or req.task != "open":
            return None
        sessions = [
            p for p in req.passages if p["layer"] == "episodic" and p["text"] not in req.seen
        ]
        if not sessions:
            return None
        if req.read_summaries == "routed":
            router = load_router()
            if router is None or not router.wants_summary(req.question):
                return None
        return max(sessions, key=lambda p: p["score"])

    def _llm(self, usage: Usage) -> LLM:
        return LLM(self.chat, settings=self.settings, cache=self.cache, usage=usage)

    def _ask(self, usage: Usage, prompt: str, role: JsonRole[Out]) -> Out | None:
        """The role's JSON reply; None (logged) when the model's output stays unusable after
        the re-ask or the endpoint refuses the request, so that the caller falls back."""
        llm = self._llm(usage)
        try:
            out: Out = llm.complete_json(
                prompt,
                system=role.system,
                schema=role.schema,
                role=role.name,
                max_tokens=MAX_OUTPUT_TOKENS.get(role.name),
            )
            return out
        except Exception as exc:
            # a refused request: e.g. a prompt over the endpoint's context size
            if not isinstance(exc, LLMOutputError) and not is_request_error(exc):
                raise
            if not isinstance(exc, LLMOutputError):  # refused: a fallback all the same
                usage.add(role.name, unusable=1)
            logger.warning("%s: unusable model output; %s", role.name, role.instead)
            return None
        finally:
            if llm.structured == "off" and self.settings.structured == "auto":
                # the endpoint rejected structured output once: parse text from now on
                self.settings = replace(self.settings, structured="off")
                self.shared["llm_settings"] = self.settings

    # ---- roles
    def encode(self, req: EncodeRequest, *, usage: Usage) -> EncodeResult:
        if not req.groups:
            return EncodeResult(cues=[])
        if "encode" not in self.roles:
            return self.fallback.encode(req, usage=usage)
        out = self._ask(usage, render_encode(req, self.passage_tokens), ENCODE)
        if out is None:
            return self.fallback.encode(req, usage=usage)
        cues = block_cues(out, len(req.groups))
        missing = [n for n, c in enumerate(cues) if not c]
        if missing:  # the blocks the reply left out: extractive cues, counted as fallbacks
            usage.add(ENCODE.name, filled=len(missing))
            gaps = replace(req, groups=[req.groups[n] for n in missing], history=[], fuse=False)
            extra = self.fallback.encode(gaps, usage=usage)
            for n, cue in zip(missing, extra.cues, strict=True):
                cues[n] = cue
        return EncodeResult(cues=cues, fused=(out.fused.strip() or None) if req.fuses else None)

    def fuse(self, question: str, units: list[EvidenceNote], *, usage: Usage) -> str:
        if "fuse" not in self.roles:
            return self.fallback.fuse(question, units, usage=usage)
        prompt = render_fuse(question, units)
        return " ".join(
            self._llm(usage).complete(prompt, system=fuse_prompt.SYSTEM, role="fuse").split()
        )

    def answer(self, req: AnswerRequest, *, usage: Usage) -> Attempt:
        if "answer" not in self.roles:
            return self.fallback.answer(req, usage=usage)
        focused = self._focus(req) if req.focus_tokens else []
        if self.settings.backend == "local":  # a small model: one focused passage, plain words
            best = focus.best_windows(focused, req.focus_windows)
            session = self.session_for(req) if best else None
            if session is not None:  # the plot first, then the best sentence's window
                best = [session, *best[:1]]
            shown = best or in_order(req.passages, max(200, req.focus_tokens or 600))
            attempt = self.plain_answer(req, shown, usage)
            if best:
                attempt["ranker"] = self.ranker_for(req).name
            if session is not None:
                attempt["summary"] = session["unit_id"]
            return attempt
        prompt, shown = render_answer(req, focused, self.passage_tokens)
        out = self._ask(usage, prompt, ANSWER)
        if out is None:
            attempt = self.fallback.answer(req, usage=usage)
            return Attempt(**{**attempt, "reasoner": "llm->offline"})
        attempt = grounded_attempt(req, shown, out, reasoner=self.name)
        if focused:
            attempt["passages"] = [p["text"] for p in focused]
            attempt["ranker"] = self.ranker_for(req).name
        if attempt["sufficient"] and is_closed(req):
            self._json_margin(attempt, req, shown, usage)
        return attempt

    def _json_margin(
        self, attempt: Attempt, req: AnswerRequest, shown: list[EvidenceItem], usage: Usage
    ) -> None:
        """A closed answer read with the JSON prompt: its quote is the model's own, but the
        grounding checks skip the answer's words for closed tasks, so an option that any
        quoted sentence mentions would pass as grounded. One more call of one output token
        over the plain prompt (same passages) reads the reader's margin between the options
        (:meth:`_margin`): the JSON answer's option gets its share, so a choice the plain
        reading does not favour scores low. An endpoint that returns no log-probabilities
        cannot score it: the attempt then keeps the checks' confidence and says so in its
        grounding (unchanged, not ``margin``)."""
        top = self._llm(usage).first_token_logprobs(
            render_plain(req, shown), system=self.plain_system, role="answer"
        )
        if top:
            self._margin(attempt, req, top)

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
            ranker=self.ranker_for(req),
        )

    def plain_answer(self, req: AnswerRequest, shown: list[EvidenceItem], usage: Usage) -> Attempt:
        """Ask in plain words (no JSON) and ground the reply against the passages read; a
        closed answer's confidence is its option margin (:meth:`_margin`)."""
        prompt = render_plain(req, shown)
        llm = self._llm(usage)
        scored = None
        certainty: float | None
        closed = is_closed(req)
        choice = closed and req.task == "multiple-choice"
        top: dict[str, float] = {}
        if self.option_scoring and choice:
            top = llm.first_token_logprobs(prompt, system=self.plain_system, role="answer")
            scored = letter_choice(top, len(req.options))
        logprobs: list[float] = []
        if scored is not None:
            reply, certainty = LETTERS[scored[0]], scored[1]
        else:
            if closed:  # the first token's alternatives too: the option margin reads them
                reply, logprobs, top = llm.complete_with_first_top(
                    prompt, system=self.plain_system, role="answer", max_tokens=PLAIN_MAX_TOKENS
                )
            else:
                reply, logprobs = llm.complete_logprobs(
                    prompt, system=self.plain_system, role="answer", max_tokens=PLAIN_MAX_TOKENS
                )
            certainty = mean_probability(logprobs)
        attempt = grounded_attempt(req, shown, plain_reply(reply, req, shown), reasoner=self.name)
        attempt["passages"] = [p["text"] for p in shown]
        if certainty is not None:
            attempt["certainty"] = certainty
        if closed:
            self._margin(attempt, req, top)
        elif req.task == "open":
            self._judge(attempt, req, shown, prompt, logprobs, llm)
        return attempt

    @staticmethod
    def _margin(attempt: Attempt, req: AnswerRequest, top: dict[str, float]) -> None:
        """A plain closed answer's confidence. Its quote is only the passage sentence nearest
        the option or claim text (:func:`~.replies.plain_reply`), and closed answers skip the
        checks of the answer's words, so the grounding checks would call any option that
        shares a word with a passage sentence grounded. Its confidence is instead the reader's
        own margin between the options at its reply's first token
        (:func:`~.replies.option_margin` over the letters' or TRUE/FALSE's probability), and
        its grounding says so (``margin``). An answer that names no option stays
        insufficient."""
        if not attempt["sufficient"]:
            return
        if req.task == "claim":
            masses = verdict_masses(top)
            chosen = {"TRUE": 0, "FALSE": 1}.get(attempt["answer"])
        else:
            masses = letter_masses(top, len(req.options))
            chosen = attempt.get("choice")
        attempt["confidence"] = option_margin(masses, chosen)
        attempt["grounding"] = "margin"

    def _judge(
        self,
        attempt: Attempt,
        req: AnswerRequest,
        shown: list[EvidenceItem],
        prompt: str,
        logprobs: list[float],
        llm: LLM,
    ) -> None:
        """A plain open answer's confidence. Its quote is only the passage sentence nearest
        the answer (:func:`~.replies.plain_reply`), not the model's own, so "the quote is in
        the passages" holds by construction and the attempt is not called grounded. With a
        verifier the confidence is its P(right) (grounding ``verified``); without one it
        stays the level of the checks that can fail, the answer's words in that sentence and
        the sentence's passage about the question, which `try_answer` caps at the reader's
        token probability (grounding ``lexical``)."""
        if self.verifier is None:
            if attempt["confidence"] >= grounding.QUOTED:  # not "grounded": see above
                attempt["grounding"] = "lexical"
            return
        drawn = [
            parse_plain(r)[0] for r in sample_replies(llm, prompt, self.plain_system, self.samples)
        ]
        reading = Reading(
            question=req.question,
            answer=attempt["answer"],
            passage=" ".join(p["text"] for p in shown),
            logprobs=tuple(logprobs),
            samples=tuple(drawn),
        )
        attempt["confidence"] = self.verifier.probability(reading)
        attempt["grounding"] = "verified"

    def refine(self, req: RefineRequest, *, usage: Usage) -> RefineResult:
        if "probe" not in self.roles:
            return self.fallback.refine(req, usage=usage)
        out = self._ask(usage, render_probe(req, self.passage_tokens), PROBE)
        return self.fallback.refine(req, usage=usage) if out is None else refine_result(out, req)

    def update(self, req: UpdateRequest, *, usage: Usage) -> UpdateResult:
        if "update" not in self.roles:
            return self.fallback.update(req, usage=usage)
        out = self._ask(usage, render_update(req, self.passage_tokens), UPDATE)
        return self.fallback.update(req, usage=usage) if out is None else update_result(out, req)
