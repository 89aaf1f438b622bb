"""Reading an answer: the option a multiple-choice answer picks, the verdict a claim answer gives.

One module for the reasoners (which turn a model's text into a canonical answer: a letter,
``TRUE`` or ``FALSE``) and the metrics (which score whatever was predicted), so that an answer
is read the same way where it is made and where it is scored; and the token F1 between two
answers (SQuAD's), which the metrics report and the answer verifier reads as a feature.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from numbers import Integral
from typing import Any

__all__ = [
    "LETTERS",
    "as_references",
    "letter_index",
    "normalize_answer",
    "normalized_tokens",
    "parse_choice",
    "parse_claim",
    "token_f1",
]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = frozenset(string.punctuation)

_LETTER_ONLY = re.compile(r"^[(\[]?\s*([A-Za-z])\s*[)\].:]?$")
_BRACKETED_PREFIX = re.compile(r"^[(\[]\s*([A-Za-z])\s*[)\]]")
_LETTER_PREFIX = re.compile(r"^([A-Z])[).:](?:\s|$)")
# Only the keyword is case-insensitive: the letter must be a capital, so that
# "the answer is a dog" is not read as option A.
_ANSWER_IS = re.compile(
    r"\b(?i:answer|option|choice)\s*(?i:is)?\s*[:\-]?\s*[(\[]?\s*([A-Z])\s*(?:[)\].:,]|\s|$)"
)

_TRUE = ("true", "yes", "supported", "correct")
_FALSE = ("false", "no", "not supported", "not true", "unsupported", "refuted", "incorrect")
_VERDICT = re.compile(
    r"^(?P<word>" + "|".join(sorted(map(re.escape, _TRUE + _FALSE), key=len, reverse=True)) + r")"
    r"(?:$|[^a-z])"
)
_STRIP = string.whitespace + string.punctuation


def _is_punctuation(char: str) -> bool:
    """ASCII punctuation (as in SQuAD) plus any Unicode punctuation (curly quotes, dashes)."""
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and the articles a/an/the, collapse spaces.

    One small extension of the official SQuAD script: Unicode punctuation (curly quotes,
    em dashes, ...) is dropped too, not only `string.punctuation`. As in SQuAD, punctuation
    is deleted, not replaced by a space ("well-to-do" -> "welltodo").
    """
    text = text.lower()
    text = "".join(ch for ch in text if not _is_punctuation(ch))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def letter_index(letter: str, n_options: int | None) -> int | None:
    """'A' -> 0, 'b' -> 1, ...; None if the letter is past the last option."""
    index = ord(letter.upper()) - ord("A")
    if n_options is not None and not 0 <= index < n_options:
        return None
    return index


def parse_choice(pred: str | int | None, options: Sequence[str] | None = None) -> int | None:
    """The 0-based option a multiple-choice answer picks, or None.

    Tried in this order (the first that matches wins):

    1. an int is the index itself;
    2. the option's own text (after SQuAD normalisation), first, so that an option such as
       "A dog barks" is not read as letter A;
    3. a bare letter, bracketed or not: "B", "b", "(B)", "[B]", "B.", "B)";
    4. a bracketed letter at the start: "(B) text", "[B] text";
    5. a capital letter with ")", "." or ":" at the start: "B) text", "B. text";
    6. "answer is B", "Answer: (B)", "option C";
    7. the text of exactly one option inside the answer ("I think the brass key").

    A letter past the last option gives None.
    """
    n_options = len(options) if options else None
    if pred is None or isinstance(pred, bool):
        return None
    if isinstance(pred, Integral):
        index = int(pred)
        return index if n_options is None or 0 <= index < n_options else None
    text = str(pred).strip()
    if not text:
        return None
    norm = normalize_answer(text)
    if options:
        for index, option in enumerate(options):
            if norm and normalize_answer(option) == norm:
                return index
    for pattern in (_LETTER_ONLY, _BRACKETED_PREFIX, _LETTER_PREFIX, _ANSWER_IS):
        match = pattern.search(text)
        if match:
            return letter_index(match.group(1), n_options)
    if options and norm:
        inside = [i for i, o in enumerate(options) if (n := normalize_answer(o)) and n in norm]
        if len(inside) == 1:
            return inside[0]
    return None


def parse_claim(pred: Any) -> bool | None:
    """The verdict of a claim answer: True, False, or None when it gives none.

    A bool is itself. A text gives a verdict when it opens with one, in any case and with any
    surrounding punctuation: true / yes / supported / correct, or false / no / not supported /
    not true / unsupported / refuted / incorrect, followed by the end or a non-letter ("True.",
    "(FALSE)", "**yes**", "False, the key was silver"). "maybe", "nothing" or "" give None.
    """
    if isinstance(pred, bool):
        return pred
    if not isinstance(pred, str):
        return None
    match = _VERDICT.match(pred.strip(_STRIP).lower())
    if not match:
        return None
    return match.group("word") in _TRUE


# --------------------------------------------------------------------------- token scoring


def normalized_tokens(text: str) -> list[str]:
    """The whitespace tokens of `normalize_answer(text)`."""
    return normalize_answer(text).split()


def as_references(refs: str | Iterable[str]) -> list[str]:
    """Accept one reference string or an iterable of them."""
    if isinstance(refs, str):
        return [refs]
    return [str(ref) for ref in refs]


def _f1_from_overlap(overlap: int, n_pred: int, n_ref: int, beta: float = 1.0) -> float:
    """F-measure from an overlap count and the two lengths (0.0 when there is no overlap)."""
    if overlap == 0:
        return 0.0
    precision = overlap / n_pred
    recall = overlap / n_ref
    beta2 = beta * beta
    return (1 + beta2) * precision * recall / (recall + beta2 * precision)


def _token_f1_single(pred_tokens: list[str], ref_tokens: list[str]) -> float:
    """SQuAD token F1 for one reference. If either side is empty: 1.0 only if both are."""
    if not pred_tokens or not ref_tokens:
        return float(pred_tokens == ref_tokens)
    overlap = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    return _f1_from_overlap(overlap, len(pred_tokens), len(ref_tokens))


def token_f1(pred: str, refs: str | Iterable[str]) -> float:
    """SQuAD bag-of-tokens F1 between prediction and references, max over references.

    No references gives 0.0.
    """
    pred_tokens = normalized_tokens(pred)
    return max(
        (_token_f1_single(pred_tokens, normalized_tokens(ref)) for ref in as_references(refs)),
        default=0.0,
    )
