"""The offline reasoner: deterministic, extractive implementations of every LLM role.

It is the default backend and a real baseline, not a mock. Everything is scored with the
store's embedder (sentence vectors mostly come from the index cache, see
:mod:`mindscape.reasoners.sentence_vectors`) plus a small lexical term:

* **Mem-Encode**: a cue is the evidence sentences most similar to "question + probe".
* **Mem-Fuse**: the pool's cue sentences most similar to the question.
* **Try-Answer**:
  - open QA: the best evidence sentence by ``cos(q, s) + β·overlap(q, s)``, cut to a short
    span by the question's type (a name for *who*, a place for *where*, ...);
  - multiple choice: each option scored by the best ``cos(q + option, s)`` over the top
    evidence sentences plus the option's word overlap with them; the top option wins;
  - claims: TRUE when the best support ``cos(claim, s)`` clears a calibrated threshold.
  Confidence comes from the similarity (open QA), the margin between the two best options
  (multiple choice) or the distance to the threshold (claims); "sufficient" is the same
  test, so it drives REFINE/ANSWER.
* **Self-Probe**: capitalised names from the most relevant evidence that are neither in the
  question nor probed before, best first (entities first, never repeating).
* **UPDATE**: keeps the re-selected signature the node computed; the query rewrite is an
  expansion of the question with the new names.
"""

from __future__ import annotations

import numpy as np

from mindscape.answers import LETTERS
from mindscape.llm import Usage
from mindscape.reasoners.base import (
    AnswerRequest,
    EncodeRequest,
    EncodeResult,
    RefineRequest,
    RefineResult,
    UpdateRequest,
    UpdateResult,
)
from mindscape.reasoners.sentence_vectors import Sentence, SentenceVectors
from mindscape.reasoners.text import content_words, names, overlap, short_span, words
from mindscape.state import Attempt, EvidenceItem, EvidenceNote, norm_probe

LEXICAL_WEIGHT = 0.15
"""β: weight of the question-word overlap added to the cosine."""
SUMMARY_PENALTY = 0.02
"""Subtracted from sentences of summaries, so source text wins near-ties."""
CUE_SENTENCES = 3
FUSED_SENTENCES = 4
MC_TOP_SENTENCES = 40


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


class OfflineReasoner:
    """Extractive reasoner on an embedder. Thresholds are MiniLM cosines; their values live in
    Context (:func:`mindscape.run.offline_reasoner` builds a run's)."""

    name = "offline"

    def __init__(
        self,
        vectors: SentenceVectors,
        *,
        open_threshold: float,
        claim_threshold: float,
        mc_margin: float,
        span: bool,
    ) -> None:
        self.vectors = vectors
        self.open_threshold = open_threshold
        self.claim_threshold = claim_threshold
        self.mc_margin = mc_margin
        self.span = span

    # ------------------------------------------------------------------ scoring
    def _rank(
        self, query: str, items: list[EvidenceItem], qvec: np.ndarray | None = None
    ) -> tuple[list[Sentence], np.ndarray]:
        """Evidence sentences best first, with their scores (`qvec` overrides the query's vector)."""
        sents, mat = self.vectors.of_items(items)
        if not sents:
            return [], np.zeros(0)
        qwords = content_words(query)
        scores = mat @ (self.vectors.query(query) if qvec is None else qvec)
        scores = scores + LEXICAL_WEIGHT * np.array([overlap(qwords, s.text) for s in sents])
        scores = scores - SUMMARY_PENALTY * np.array([s.layer != "veridical" for s in sents])
        order = np.argsort(-scores, kind="stable")
        return [sents[i] for i in order], scores[order]

    def _rank_texts(self, query: str, texts: list[str]) -> tuple[list[str], np.ndarray]:
        texts = list(dict.fromkeys(t for t in texts if t.strip()))
        if not texts:
            return [], np.zeros(0)
        qwords = content_words(query)
        scores = self.vectors.texts(texts) @ self.vectors.query(query)
        scores = scores + LEXICAL_WEIGHT * np.array([overlap(qwords, t) for t in texts])
        order = np.argsort(-scores, kind="stable")
        return [texts[i] for i in order], scores[order]

    # ------------------------------------------------------------------ roles
    def encode(self, req: EncodeRequest, *, usage: Usage) -> EncodeResult:
        question = req.question
        cues = []
        for g in req.groups:
            focus = self._focus(question, g.probe)
            ranked, _ = self._rank(f"{question} {g.probe}", g.items, focus)
            cues.append(" ".join(s.text for s in ranked[:CUE_SENTENCES]))
        fused = None
        if req.fuses:
            new = [
                EvidenceNote(probe=g.probe, layer=g.layer, evidence_ids=[], cue=c, round=0)
                for g, c in zip(req.groups, cues, strict=True)
            ]
            fused = self.fuse(question, [*req.history, *new], usage=usage)
        return EncodeResult(cues=cues, fused=fused)

    def _focus(self, question: str, probe: str) -> np.ndarray:
        """The vector of "question + probe" from the two (cached) query vectors."""
        q = self.vectors.query(question)
        if norm_probe(probe) == norm_probe(question):
            return q
        v = q + self.vectors.query(probe)
        return v / (np.linalg.norm(v) or 1.0)

    def fuse(self, question: str, units: list[EvidenceNote], *, usage: Usage) -> str:
        from mindscape.memory.sentence_split import split_sentences

        texts = [u["cue"][s:e] for u in units for s, e in split_sentences(u["cue"])]
        ranked, _ = self._rank_texts(question, texts)
        return " ".join(ranked[:FUSED_SENTENCES])

    def answer(self, req: AnswerRequest, *, usage: Usage) -> Attempt:
        if req.task == "multiple-choice" and req.options:
            return self._choice(req)
        if req.task == "claim":
            return self._claim(req)
        return self._open(req)

    def _support(self, ranked: list[Sentence], n: int = 3) -> list[str]:
        return list(dict.fromkeys(s.unit_id for s in ranked[:n]))

    def _open(self, req: AnswerRequest) -> Attempt:
        ranked, scores = self._rank(req.question, req.passages)
        if not ranked:
            return Attempt(
                round=0,
                answer="",
                sufficient=False,
                confidence=0.0,
                support=[],
                rationale="no evidence",
                reasoner=self.name,
            )
        best = ranked[0].text
        s1 = float(scores[0])
        s2 = float(scores[1]) if len(scores) > 1 else s1 - 0.1
        answer = short_span(best, req.question) if self.span else best
        confidence = _clip(0.5 + (s1 - self.open_threshold) / 0.3 + 0.5 * (s1 - s2))
        return Attempt(
            round=0,
            answer=answer,
            sufficient=s1 >= self.open_threshold,
            confidence=round(confidence, 4),
            support=self._support(ranked),
            rationale=best,
            reasoner=self.name,
        )

    def _choice(self, req: AnswerRequest) -> Attempt:
        ranked, _ = self._rank(req.question, req.passages)
        top = ranked[:MC_TOP_SENTENCES]
        if not top:
            return Attempt(
                round=0,
                answer=LETTERS[0],
                sufficient=False,
                confidence=0.0,
                support=[],
                choice=0,
                rationale="no evidence",
                reasoner=self.name,
            )
        sent_vecs = self.vectors.texts([s.text for s in top])
        opt_vecs = self.vectors.texts([f"{req.question} {o}" for o in req.options])
        sims = opt_vecs @ sent_vecs.T  # (options, sentences)
        evidence_words = content_words(" ".join(s.text for s in top))
        qwords = content_words(req.question)
        lexical = []
        for o in req.options:
            ow = content_words(o) - qwords
            lexical.append(len(ow & evidence_words) / len(ow) if ow else 0.0)
        scores = sims.max(axis=1) + 0.1 * np.asarray(lexical)
        order = np.argsort(-scores, kind="stable")
        best = int(order[0])
        margin = float(scores[best] - scores[order[1]]) if len(order) > 1 else 1.0
        best_sent = top[int(np.argmax(sims[best]))]
        return Attempt(
            round=0,
            answer=LETTERS[best],
            sufficient=margin >= self.mc_margin,
            confidence=round(_clip(0.5 + margin / (4 * self.mc_margin)), 4)
            if self.mc_margin
            else 1.0,
            support=list(dict.fromkeys([best_sent.unit_id, *self._support(top)])),
            choice=best,
            rationale=best_sent.text,
            reasoner=self.name,
        )

    def _claim(self, req: AnswerRequest) -> Attempt:
        ranked, scores = self._rank(req.question, req.passages)
        support = float(scores[0]) if len(scores) else 0.0
        gap = support - self.claim_threshold
        return Attempt(
            round=0,
            answer="TRUE" if gap >= 0 else "FALSE",
            sufficient=abs(gap) >= 0.05,
            confidence=round(_clip(0.5 + abs(gap) / 0.2), 4),
            support=self._support(ranked),
            rationale=ranked[0].text if ranked else "no evidence",
            reasoner=self.name,
        )

    def refine(self, req: RefineRequest, *, usage: Usage) -> RefineResult:
        probes = self.entities(req.question, req.passages, req.previous_probes, req.max_probes)
        keywords = " ".join(sorted(content_words(req.question)))
        texts = [f"{name} {keywords}".strip() for name in probes]
        next_query = None
        if req.rewrite and probes:
            next_query = f"{req.question} {' '.join(probes)}"
        reason = f"probing {', '.join(probes)}" if probes else "no new entities to probe"
        return RefineResult(decision=None, probes=texts, next_query=next_query, reason=reason)

    def entities(
        self, question: str, passages: list[EvidenceItem], previous: list[str], limit: int
    ) -> list[str]:
        """Names from the evidence, weighted by how relevant their sentences are, new ones only."""
        if limit <= 0:
            return []
        ranked, scores = self._rank(question, passages)
        qwords = content_words(question)
        probed = {w for p in previous for w in words(p)}
        weight: dict[str, float] = {}
        first: dict[str, int] = {}
        surface: dict[str, str] = {}
        for n, (sent, score) in enumerate(zip(ranked[:40], scores[:40], strict=False)):
            for name in names(sent.text):
                key = name.lower()
                if content_words(name) & qwords or set(words(name)) <= probed:
                    continue
                weight[key] = weight.get(key, 0.0) + max(float(score), 0.0)
                first.setdefault(key, n)
                surface.setdefault(key, name)
        keys = sorted(weight, key=lambda k: (-weight[k], first[k], k))
        return [surface[k] for k in keys[:limit]]

    def update(self, req: UpdateRequest, *, usage: Usage) -> UpdateResult:
        next_query = None
        if req.rewrite:
            new = self.entities(req.question, req.passages, [req.query], 2)
            next_query = f"{req.question} {' '.join(new)}" if new else None
        ids = [c["unit_id"] for c in req.candidates[: req.k]]
        return UpdateResult(
            decision=None,
            next_query=next_query,
            signature_ids=ids or None,
            reason="re-selected with the evidence-augmented query",
        )
