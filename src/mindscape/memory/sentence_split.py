"""Sentence spans for narrative prose.

A small rule-based splitter: it must be fast on million-token books and return exact
character spans into the source (chunk boundaries, summaries and evidence all point back to
source offsets). Sentences end at . ! ? (with closing quotes/brackets) followed by space and an
upper-case letter, digit or opening quote, or at a blank line; common abbreviations
(Mr., Mrs., Dr., St., ...) and single initials do not end a sentence.
"""

from __future__ import annotations

import re

__all__ = [
    "Span",
    "split_sentences",
]

Span = tuple[int, int]

_ABBREV = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "sr",
    "jr",
    "prof",
    "rev",
    "capt",
    "col",
    "gen",
    "lt",
    "sgt",
    "mt",
    "vs",
    "etc",
    "no",
    "vol",
    "ch",
    "fig",
    "messrs",
    "mme",
    "mlle",
    "hon",
    "esq",
    "gov",
    "pres",
    "co",
    "inc",
    "ltd",
    "viz",
    "cf",
    "ibid",
}
# A candidate end: terminal punctuation, optional closers, then whitespace.
_END = re.compile(r"""[.!?]+["'”’)\]]*(?=\s)""")
_PARA = re.compile(r"\n[ \t]*\n\s*")
_NEXT_START = re.compile(r"""\s+["'“‘(\[]*[A-Z0-9]""")


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Spans `(s, e)` of the sentences of `text[start:end]`, in order, with whitespace trimmed."""
    end = len(text) if end is None else end
    spans: list[Span] = []
    for p_start, p_end in _paragraphs(text, start, end):
        cur = p_start
        for m in _END.finditer(text, p_start, p_end):
            stop = m.end()
            if not _NEXT_START.match(text, stop, p_end) or _is_abbreviation(text, m.start(), cur):
                continue
            _add(text, cur, stop, spans)
            cur = stop
        _add(text, cur, p_end, spans)
    return spans


def _paragraphs(text: str, start: int, end: int) -> list[Span]:
    out = []
    cur = start
    for m in _PARA.finditer(text, start, end):
        out.append((cur, m.start()))
        cur = m.end()
    out.append((cur, end))
    return out


def _is_abbreviation(text: str, dot: int, floor: int) -> bool:
    """True when the '.' at `dot` closes an abbreviation or an initial (`J. Smith`)."""
    if text[dot] != ".":
        return False
    i = dot
    while i > floor and text[i - 1].isalpha():
        i -= 1
    word = text[i:dot]
    return word.lower() in _ABBREV or (len(word) == 1 and word.isupper())


def _add(text: str, s: int, e: int, spans: list[Span]) -> None:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    if e > s:
        spans.append((s, e))
