"""MoM document memory: outline items, their core content, and the chunks they cover.

Offline, the outline comes from the text's own headings (CHAPTER, BOOK, PART, STAVE, ACT,
numbered or Roman-numeral lines); a text without usable headings falls back to its episodic
windows. With an LLM, each section is read by the model acting as a domain expert, which
returns outline items with core content and the atomic chunks it cut, each given as a
`head … [MASK] … tail` anchor (the first and last few words) that `resolve_anchor` finds
in the source, exactly or, failing that, fuzzily.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "SECTION_TOKENS",
    "Section",
    "Span",
    "detect_sections",
    "resolve_anchor",
]

Span = tuple[int, int]

SECTION_TOKENS = 8000
"""Tokens of a section the outline prompt reads at most (and the CoM export's cap per
document)."""

_HEADING = re.compile(
    r"""^[ \t]*(
        (?:CHAPTER|Chapter|BOOK|Book|PART|Part|STAVE|Stave|ACT|Act|SCENE|Scene|VOLUME|Volume|
           CANTO|Canto|EPILOGUE|Epilogue|PROLOGUE|Prologue)\b[^\n]{0,80}
      | [IVXLC]{1,7}\.?
      | [IVXLC]{1,7}[.:][ \t]+[A-Z][^\n]{0,70}
      | \d{1,3}\.?
    )[ \t]*$""",
    re.VERBOSE | re.MULTILINE,
)


@dataclass
class Section:
    """A titled span of the document."""

    title: str
    start: int
    end: int


def detect_sections(text: str, *, min_sections: int = 2, min_chars: int = 400) -> list[Section]:
    """Sections delimited by heading lines; [] when the text has fewer than `min_sections`.

    A heading counts only when it stands alone between blank lines. Headings
    whose section would be shorter than `min_chars` (a table of contents, a title page) are
    folded into the next section.
    """
    marks = [
        (m.start(1), " ".join(m.group(1).split()))
        for m in _HEADING.finditer(text)
        if _isolated(text, m.start(), m.end())
    ]
    sections: list[Section] = []
    for i, (pos, title) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        if end - pos < min_chars:
            continue
        sections.append(Section(title, pos, end))
    if len(sections) < min_sections:
        return []
    sections[0].start = 0  # front matter belongs to the first section
    for a, b in zip(sections, sections[1:], strict=False):
        a.end = b.start
    sections[-1].end = len(text)
    return sections


def _isolated(text: str, start: int, end: int) -> bool:
    """A heading line has a blank line (or the text's edge) above and below it."""
    above = text[max(0, start - 3) : start]
    below = text[end : end + 3]
    blank_above = start == 0 or re.search(r"\n[ \t]*\n[ \t]*$", "\n" + above) is not None
    blank_below = end >= len(text) or re.match(r"[ \t]*\n[ \t]*(\n|$)", below) is not None
    return blank_above and blank_below


def resolve_anchor(source: str, head: str, tail: str, *, min_score: float = 80.0) -> Span | None:
    """Locate a `head … tail` anchor in `source`: exact first, then fuzzy. None if not found.

    The span runs from the start of `head` to the end of the first `tail` after it.
    """
    head, tail = " ".join(head.split()), " ".join(tail.split())
    if not head:
        return None
    flat, back = _squash(source)
    s: int | None = flat.find(head)
    if s is not None and s < 0:
        s = _fuzzy_find(flat, head, 0, min_score)
    if s is None or s < 0:
        return None
    after = s + len(head)
    if tail:
        e = flat.find(tail, s)
        if e >= 0:
            after = e + len(tail)
        else:
            f = _fuzzy_find(flat, tail, s, min_score)
            if f is not None:
                after = f + len(tail)
    return back[s], back[min(after, len(back)) - 1] + 1


def _squash(text: str) -> tuple[str, list[int]]:
    """Whitespace collapsed to single spaces, with each output char's source offset."""
    out: list[str] = []
    back: list[int] = []
    space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if not space and out:
                out.append(" ")
                back.append(i)
            space = True
            continue
        out.append(ch)
        back.append(i)
        space = False
    return "".join(out), back


def _fuzzy_find(flat: str, needle: str, start: int, min_score: float) -> int | None:
    from rapidfuzz import fuzz

    hit = fuzz.partial_ratio_alignment(needle, flat[start:], score_cutoff=min_score)
    if hit is None:
        return None
    return start + hit.dest_start
