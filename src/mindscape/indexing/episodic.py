"""The episodic layer (ComoRAG): one summary per window of W consecutive chunks.

Windows partition the chunks in source order (shorter windows for short texts, see
:func:`mindscape.indexing.windows.windows`); each chunk records the window it belongs to.
"""

from __future__ import annotations

from mindscape.indexing.document import DocText, Summarizer
from mindscape.indexing.embed_cache import Bar
from mindscape.indexing.windows import windows
from mindscape.memory.types import Unit
from mindscape.prompts import summarize as summary_prompt

__all__ = [
    "episodic_units",
]


def episodic_units(
    doc: DocText, summarize: Summarizer, *, window: int, bar: Bar
) -> tuple[list[Unit], dict[int, str]]:
    """The session units, and the window id of every chunk (chunk index → unit id)."""
    units: list[Unit] = []
    window_of: dict[int, str] = {}
    for w, rng in enumerate(bar(windows(len(doc.chunks), window), f"{doc.doc_id} · episodic")):
        idx = list(rng)
        text, _ = summarize(
            doc.sents_of(idx),
            [doc.chunks[i].text for i in idx],
            summary_prompt.SESSION,
        )
        unit = doc.unit(
            f"e{w}",
            "episodic",
            text,
            idx,
            kind="session",
            order=w,
            meta={"chunk_range": [idx[0], idx[-1]]},
        )
        for i in idx:
            window_of[i] = unit.id
        units.append(unit)
    return units, window_of
