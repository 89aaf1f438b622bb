"""The MoM outline layer (Zhao et al., 2025): outline items with their core content and chunks.

Sections come from the text's headings (CHAPTER, BOOK, Roman numerals…; a long section is
split into parts of at most ``max_section_chunks`` chunks), else one per episodic window.
Offline, each section is one item whose core content is an extractive summary. With an LLM,
each section yields items with a title, core content and atomic chunks written as
``head…[MASK]…tail`` anchors, resolved exactly (then fuzzily) in the section text
(:func:`mindscape.indexing.mom.outline.resolve_anchor`); the items partition the section, each
covering the chunks from its first anchor to the next item's (:func:`item_regions`), or
the whole section when none of its anchors resolved. With ``paths`` > 1 each section gets
that many candidate memories (greedy, then sampled) and an evaluator model chooses one
(:mod:`mindscape.indexing.mom.paths`); its scores are kept in the units' ``meta["mom"]``.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from mindscape import prompts
from mindscape.indexing.document import DocText
from mindscape.indexing.embed_cache import Bar
from mindscape.indexing.mom.outline import SECTION_TOKENS, Section, detect_sections, resolve_anchor
from mindscape.indexing.mom.paths import AtomicChunk, Evaluator, choose, path_clients
from mindscape.indexing.summarize import extractive_summary
from mindscape.indexing.windows import windows
from mindscape.llm.output import LLMOutputError
from mindscape.memory.types import Unit
from mindscape.prompts import outline as outline_prompt
from mindscape.tokens import TokenCounter

__all__ = [
    "OUTLINE_MAX_TOKENS",
    "Item",
    "atomic_chunks",
    "item_regions",
    "llm_items",
    "max_items",
    "outline_units",
    "path_items",
    "section_memory",
    "sections",
]

logger = logging.getLogger(__name__)


class Item(NamedTuple):
    """One outline item an LLM wrote for a section."""

    title: str
    core: str
    covered: list[int]
    """The chunks of its region of the section (:func:`item_regions`)."""
    spans: list[tuple[int, int]]
    """Its atomic chunks, as resolved character spans of the document."""


def outline_units(
    doc: DocText,
    llm: Any,
    counter: TokenCounter,
    *,
    window: int,
    max_section_chunks: int,
    core_tokens: int,
    bar: Bar,
    paths: int = 1,
    evaluator: Evaluator | None = None,
    k: int = 60,
) -> list[Unit]:
    """The outline items of the document, in section order (with an LLM: `paths` candidate
    memories per section, chosen among by `evaluator` with RRF constant `k`)."""
    units: list[Unit] = []

    def add(title: str, core: str, idx: list[int], order: int, meta: dict[str, Any]) -> None:
        units.append(
            doc.unit(
                f"o{len(units)}",
                "outline",
                f"{title}: {core}" if title else core,
                idx,
                kind="section",
                order=order,
                meta={"title": title, "core": core, **meta},
            )
        )

    secs = sections(doc, window=window, max_section_chunks=max_section_chunks)
    for n, sec in enumerate(bar(secs, f"{doc.doc_id} · outline")):
        idx = doc.chunks_in(sec.start, sec.end)
        if not idx:
            continue
        if llm is None:
            picked = extractive_summary(doc.bank, doc.sents_of(idx), max_tokens=core_tokens)
            add(sec.title, doc.bank.join(picked), idx, n, {})
            continue
        items, meta = section_memory(doc, sec, idx, llm, counter, paths, evaluator, k)
        for it in items:
            add(it.title, it.core, it.covered, n, {"atomic_spans": it.spans, **meta})
    return units


def section_memory(
    doc: DocText,
    sec: Section,
    idx: list[int],
    llm: Any,
    counter: TokenCounter,
    paths: int,
    evaluator: Evaluator | None,
    k: int,
) -> tuple[list[Item], dict[str, Any]]:
    """A section's items: the one candidate, or of `paths` candidates the one `evaluator`
    chooses, with the choice for the units' metadata (``{"mom": ...}``)."""
    if paths <= 1:
        return llm_items(doc, sec, idx, llm, counter), {}
    if evaluator is None:
        raise ValueError("choosing among MoM paths needs an evaluator")
    candidates = [
        path_items(doc, sec, idx, client, counter, path)
        for path, client in enumerate(path_clients(llm, paths))
    ]
    choice = choose([atomic_chunks(doc.text, c) for c in candidates], evaluator, counter, k)
    return candidates[choice.chosen], {"mom": choice.as_meta()}


def path_items(
    doc: DocText, sec: Section, idx: list[int], llm: Any, counter: TokenCounter, path: int
) -> list[Item]:
    """One path's items. A sampled path (1 and up) whose answer stays unusable after the
    re-ask is an empty candidate (it scores last); the greedy path's failure is an error."""
    try:
        return llm_items(doc, sec, idx, llm, counter)
    except LLMOutputError as exc:
        if path == 0:
            raise
        logger.warning(
            "%s, %s: MoM path %d gave no usable memory (%s)", doc.doc_id, sec.title, path, exc
        )
        return []


def atomic_chunks(text: str, items: list[Item]) -> list[AtomicChunk]:
    """A candidate's atomic chunks in memory order, each with its item's core content."""
    return [(text[s:e], it.core) for it in items for s, e in it.spans]


def sections(doc: DocText, *, window: int, max_section_chunks: int) -> list[Section]:
    """Heading sections (split when long), else one section per episodic window."""
    secs = detect_sections(doc.text)
    if not secs:
        return [
            Section(f"Part {w + 1}", doc.chunks[r[0]].char_start, doc.chunks[r[-1]].char_end)
            for w, r in enumerate(windows(len(doc.chunks), window))
        ]
    out: list[Section] = []
    for sec in secs:
        idx = doc.chunks_in(sec.start, sec.end)
        size = max_section_chunks
        if len(idx) <= size:
            out.append(sec)
            continue
        parts = -(-len(idx) // size)
        step = -(-len(idx) // parts)
        for p in range(parts):
            part = idx[p * step : (p + 1) * step]
            start = sec.start if p == 0 else doc.chunks[part[0]].char_start
            end = sec.end if p == parts - 1 else doc.chunks[part[-1]].char_end
            out.append(Section(f"{sec.title} (part {p + 1})", start, end))
    return out


OUTLINE_MAX_TOKENS = 2048
"""Output cap of one outline call: about twice the longest answer the local model gave on the
FairytaleQA stories (1,056 tokens; 158 a section on average). A sampled path that rambles on
would otherwise write until the context is full, 20 minutes and more at the local model's
speed; a capped answer that is cut short is malformed like any other (one re-ask, then an
empty candidate for a sampled path)."""


def max_items(n_chunks: int) -> int:
    """Outline items asked of a section of `n_chunks` chunks: one per 4 chunks, 1 to 8."""
    return max(1, min(8, n_chunks // 4 or 1))


def llm_items(
    doc: DocText, sec: Section, idx: list[int], llm: Any, counter: TokenCounter
) -> list[Item]:
    """MoM extraction of one section by the expert prompt, its anchors resolved."""
    section_text = doc.text[sec.start : sec.end]
    prompt = prompts.render(
        outline_prompt.USER,
        title=sec.title,
        section=prompts.as_data(counter.truncate(section_text, SECTION_TOKENS)),
        max_items=max_items(len(idx)),
    )
    data = llm.complete_json(
        prompt, system=outline_prompt.SYSTEM, role="index_outline", max_tokens=OUTLINE_MAX_TOKENS
    )
    items = data.get("items", []) if isinstance(data, dict) else data
    written: list[tuple[str, str, list[tuple[int, int]]]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        spans = []
        for anchor in item.get("chunks") or []:
            if isinstance(anchor, dict):
                span = resolve_anchor(
                    section_text, str(anchor.get("head", "")), str(anchor.get("tail", ""))
                )
                if span:
                    spans.append((span[0] + sec.start, span[1] + sec.start))
        written.append((str(item.get("title", sec.title)), str(item.get("core", "")), spans))
    regions = item_regions(sec, [spans for _, _, spans in written])
    return [
        Item(title, core, doc.chunks_in(*region) if region else idx, spans)
        for (title, core, spans), region in zip(written, regions, strict=True)
    ]


def item_regions(sec: Section, spans: list[list[tuple[int, int]]]) -> list[tuple[int, int] | None]:
    """The character region each item covers: from its first atomic chunk to the next item's
    first (the first item from the section's start, the last to its end), widened to its own
    chunks where they reach further. None for an item with no resolved chunk (it covers the
    whole section).

    MoM's atomic chunks segment the document; a small model quotes only one or two sentences
    per item, and covering just those left a third of the sections' chunks outside every
    outline unit (39 of 63 covered on four FairytaleQA test stories). The items partition
    the section instead, in the order their chunks appear."""
    starts = sorted((min(s for s, _ in sp), n) for n, sp in enumerate(spans) if sp)
    regions: list[tuple[int, int] | None] = [None] * len(spans)
    for rank, (start, n) in enumerate(starts):
        lo = sec.start if rank == 0 else start
        hi = starts[rank + 1][0] if rank + 1 < len(starts) else sec.end
        regions[n] = (lo, max([hi] + [e for _, e in spans[n]]))
    return regions
