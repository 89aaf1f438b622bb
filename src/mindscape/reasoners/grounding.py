"""Grounding checks for LLM answers: is the quote in the passages, does it carry the answer?

A small model's self-reported confidence says little (the 1.5B local model answered "The
sisters" with confidence 0.9 from passages that lacked the answer). So the answer prompt asks
for the sentence that answers the question, copied from the passages, and the confidence of
an attempt is set here from two checks the reasoner can make itself:

* **quote match**: the best fuzzy partial match of the quote against any passage
  (rapidfuzz ``partial_ratio`` on normalised text, 0..1); a quote under 12 characters
  counts as no quote;
* **answer support**: for open questions, the share of the answer's content words found in
  the quote (or, failing that, in the passages), words counted as in
  :func:`mindscape.reasoners.text.content_words`, with a shared prefix counting as found
  (see ``_related``);
* **quote relevance**: the quote must be about the question: the passage it was copied from
  shares a content word with the question (a shared 4-letter prefix counts: "helped" /
  "help"). The passage, not the sentence: an answering sentence often does not repeat the
  question ("Then two white pigeons came in…" answers "Who helped Cinderella pick the
  lentils?"; its passage speaks of the lentils). The question's names count only when it has
  no other content word, since a name ties a passage to the character, not to what is asked:
  the 1.5B model quoted "…and the king's son followed her…" to answer that question, a real
  quote that carried its answer, from a passage about the ball.

The levels (:data:`GROUNDED` and below) are ordered so that only a grounded attempt reaches
the default acceptance threshold (0.5); :data:`QUOTED` marks an attempt whose quote is real
but whose answer the checks cannot tie to it (Self-Probe may still decide to answer).
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz

from mindscape.reasoners.text import content_words
from mindscape.reasoners.text import names as text_names

GROUNDED = 0.9
"""Model says sufficient, the quote is in a passage and carries the answer."""
QUOTED = 0.45
"""Model says sufficient and the quote is in a passage, but the answer is not tied to it, or
the quote is not about the question."""
UNGROUNDED = 0.3
"""Model says sufficient but its quote is not in the passages."""
INSUFFICIENT = 0.2
"""Model says the passages do not settle the question."""

QUOTE_MATCH = 0.85
"""Quote match at or above which the quote counts as found."""
ANSWER_SUPPORT = 0.5
"""Answer support at or above which the answer counts as tied to the evidence."""
MIN_QUOTE_CHARS = 12

_WORD = re.compile(r"[a-z0-9]+")


def normalise(text: str) -> str:
    """Lower case, words only, single spaces."""
    return " ".join(_WORD.findall(text.lower()))


def _match_scores(quote: str, passages: list[str]) -> list[float] | None:
    """Partial fuzzy match (0..1) of ``quote`` inside each passage; None for no quote."""
    q = normalise(quote)
    if len(q) < MIN_QUOTE_CHARS:
        return None
    return [fuzz.partial_ratio(q, normalise(p)) / 100.0 for p in passages]


def _best(scores: list[float]) -> int:
    """Index of the best score (the first of equals)."""
    return max(range(len(scores)), key=scores.__getitem__)


def quote_match(quote: str, passages: list[str]) -> float:
    """Best partial fuzzy match (0..1) of ``quote`` inside any passage; 0 for no quote."""
    scores = _match_scores(quote, passages)
    return max(scores, default=0.0) if scores is not None else 0.0


def _related(word: str, vocabulary: set[str]) -> bool:
    """``word`` is in ``vocabulary``, or a word there shares its first letters (at least four,
    and all of the shorter word's up to five): "helped" / "help", "pigeons" / "pigeon"."""
    for v in vocabulary:
        n = min(len(word), len(v), 5)
        if word == v or (n >= 4 and word[:n] == v[:n]):
            return True
    return False


related = _related
"""Public name of the shared-prefix word match (the answer verifier uses it too)."""


def source_passage(quote: str, passages: list[str]) -> str:
    """The passage ``quote`` was copied from (the best partial match), or "" without one."""
    scores = _match_scores(quote, passages)
    return passages[_best(scores)] if scores else ""


def quote_relevant(question: str, quote: str, passages: list[str] | None = None) -> bool:
    """Whether the quote, with the passage it comes from, shares a content word with
    ``question`` (its names only when the question has no other content word; a question
    without content words passes)."""
    return _about(question, f"{quote} {source_passage(quote, passages)}" if passages else quote)


def _about(question: str, text: str) -> bool:
    """Whether ``text`` shares a content word with ``question`` (see :func:`quote_relevant`)."""
    names = {w for name in text_names(question) for w in content_words(name)}
    words = (content_words(question) - names) or content_words(question)
    if not words:
        return True  # nothing to check against ("Where?")
    in_text = content_words(text)
    return any(_related(w, in_text) for w in words)


def answer_support(answer: str, quote: str, passages: list[str]) -> float:
    """Share (0..1) of the answer's content words found in the quote, else in the passages."""
    words = content_words(answer)
    if not words:
        return 0.0
    in_quote = content_words(quote)
    in_passages = {w for p in passages for w in content_words(p)}
    hits = sum(
        1.0 if _related(w, in_quote) else 0.5 if _related(w, in_passages) else 0.0 for w in words
    )
    return hits / len(words)


def grounded_confidence(
    *,
    sufficient: bool,
    quote: str,
    answer: str,
    passages: list[str],
    open_task: bool,
    question: str = "",
) -> float:
    """The attempt's confidence from the checks above (see the module docstring); without a
    ``question`` the relevance check is skipped."""
    if not sufficient:
        return INSUFFICIENT
    scores = _match_scores(quote, passages)  # once: the match and the source passage
    if not scores or max(scores) < QUOTE_MATCH:
        return UNGROUNDED
    if open_task and answer_support(answer, quote, passages) < ANSWER_SUPPORT:
        return QUOTED
    if question and not _about(question, f"{quote} {passages[_best(scores)]}"):
        return QUOTED
    return GROUNDED
