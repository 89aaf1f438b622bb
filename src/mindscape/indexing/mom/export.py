"""CoM export: each document with its chosen MoM memory and the reasoning that leads there.

MoM trains a small MemReader on triples (D, P, M): a document D, the memory M chosen for it,
and a path P, the expert's reasoning from D to M, reconstructed afterwards by the guide model
from D and M (reverse reasoning; Zhao et al., 2025). :func:`export_com` writes one record per
document of a store whose outline was built by an LLM, in the chat format that TRL's
``SFTTrainer`` and axolotl's ``chat_template`` datasets read::

    {"doc_id": "...", "messages": [
        {"role": "system", "content": MEMREADER_SYSTEM},
        {"role": "user", "content": D},
        {"role": "assistant", "content": P + "\\n\\n" + M as JSON}]}

D is the document rebuilt from its chunks, cut to ``max_doc_tokens`` (cl100k) when longer,
and M then keeps only the atomic chunks that start inside the cut. M has the outline prompt's
shape (``{"items": [{"title", "core", "chunks": [{"head", "tail"}]}]}``), each chunk's head
and tail taken from its resolved span, so they quote D exactly. P is one LLM call per
document, cached by content hash like every LLM output; records are appended as they are
made, and a rerun skips the documents the output file already holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindscape import prompts
from mindscape.indexing.mom.outline import SECTION_TOKENS
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import Unit
from mindscape.prompts import mom as mom_prompt
from mindscape.tokens import TokenCounter

__all__ = [
    "ANCHOR_WORDS",
    "MAX_DOC_TOKENS",
    "PATH_WORDS",
    "ExportReport",
    "anchor",
    "chosen_memory",
    "com_record",
    "document_text",
    "done_ids",
    "export_com",
    "reasoning_path",
]

MAX_DOC_TOKENS = SECTION_TOKENS
"""Tokens of a document a record holds at most (the outline prompt's section cap)."""
ANCHOR_WORDS = 8
"""Words of an atomic chunk's head and of its tail (the outline prompt asks for 6-10)."""
PATH_WORDS = 300
"""Length asked of the reasoning path."""


@dataclass
class ExportReport:
    """What an export did."""

    out: str
    written: list[str] = field(default_factory=list)
    """Documents written in this run."""
    already: list[str] = field(default_factory=list)
    """Documents the output file held already (skipped)."""
    no_memory: list[str] = field(default_factory=list)
    """Documents without an LLM-built outline (skipped: nothing to learn from)."""
    truncated: list[str] = field(default_factory=list)
    """Documents cut to the token cap in their record."""


def document_text(chunks: list[Unit]) -> str:
    """A document rebuilt from its chunks, each an exact slice at its character offsets (a
    gap between two chunks, whitespace the chunker skipped, becomes spaces)."""
    parts: list[str] = []
    pos = 0
    for c in sorted(chunks, key=lambda u: int(u.meta["char_start"])):
        start, end = int(c.meta["char_start"]), int(c.meta["char_end"])
        if start > pos:
            parts.append(" " * (start - pos))
            pos = start
        if end > pos:
            parts.append(c.text[pos - start :])
            pos = end
    return "".join(parts)


def anchor(span_text: str, words: int = ANCHOR_WORDS) -> dict[str, str]:
    """A chunk as the outline prompt's ``head … [MASK] … tail`` anchor."""
    w = span_text.split()
    return {"head": " ".join(w[:words]), "tail": " ".join(w[-words:])}


def chosen_memory(outline: list[Unit], text: str) -> dict[str, Any]:
    """The memory M of a document's outline units, as the outline prompt's JSON: only the
    atomic chunks that start inside `text`, and only the items that keep one."""
    items = []
    for u in sorted(outline, key=lambda u: (u.order, int(u.id.rsplit(":o", 1)[-1]))):
        spans = [(int(s), min(int(e), len(text))) for s, e in u.meta.get("atomic_spans") or []]
        chunks = [anchor(text[s:e]) for s, e in spans if s < len(text) and text[s:e].strip()]
        if chunks:
            items.append(
                {"title": u.meta.get("title", ""), "core": u.meta.get("core", ""), "chunks": chunks}
            )
    return {"items": items}


def com_record(doc_id: str, text: str, path: str, memory: dict[str, Any]) -> dict[str, Any]:
    """One chat-format training record."""
    answer = f"{path.strip()}\n\n{json.dumps(memory, ensure_ascii=False)}"
    return {
        "doc_id": doc_id,
        "messages": [
            {"role": "system", "content": mom_prompt.MEMREADER_SYSTEM},
            {"role": "user", "content": text},
            {"role": "assistant", "content": answer},
        ],
    }


def done_ids(out: Path) -> set[str]:
    """The documents `out` holds. A last line cut short by a killed run is dropped from the
    file, so the rerun writes that document again."""
    if not out.exists():
        return set()
    done, keep = set(), []
    lines = out.read_text(encoding="utf-8").splitlines()
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        done.add(str(record.get("doc_id")))
        keep.append(line)
    if len(keep) < len(lines):
        out.write_text("".join(f"{line}\n" for line in keep), encoding="utf-8")
    return done


def reasoning_path(llm: Any, text: str, memory: dict[str, Any]) -> str:
    """P: the guide model's reasoning from the document to its memory (one cached call)."""
    return str(
        llm.complete(
            prompts.render(
                mom_prompt.REVERSE_USER,
                document=prompts.as_data(text),
                memory=prompts.as_data(json.dumps(memory, indent=1, ensure_ascii=False)),
                max_words=PATH_WORDS,
            ),
            system=mom_prompt.REVERSE_SYSTEM,
            role="mom_export",
            max_tokens=2 * PATH_WORDS,
        )
    )


def export_com(
    store: MemoryStore,
    llm: Any,
    out: Path,
    counter: TokenCounter,
    *,
    max_doc_tokens: int = MAX_DOC_TOKENS,
    on_doc: Callable[[str, str], None] | None = None,
) -> ExportReport:
    """Append a CoM record for each document of `store` that `out` lacks (the reasoning path
    by `llm`); `on_doc(doc_id, what)` hears what happened to each document."""
    report = ExportReport(str(out))
    done = done_ids(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for row in store.documents():
        doc_id = str(row["doc_id"])
        outline = [] if doc_id in done else store.view("outline", {doc_id}).units
        if doc_id in done:
            report.already.append(doc_id)
            what = "already exported"
        elif not any(u.meta.get("atomic_spans") for u in outline):
            report.no_memory.append(doc_id)
            what = "skipped: its outline was not built by an LLM"
        else:
            full = document_text(store.view("veridical", {doc_id}).units)
            text = counter.truncate(full, max_doc_tokens)
            memory = chosen_memory(outline, text)
            record = com_record(doc_id, text, reasoning_path(llm, text, memory), memory)
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            report.written.append(doc_id)
            what = "written"
            if len(text) < len(full):
                report.truncated.append(doc_id)
                what += f" (the document cut to its first {max_doc_tokens} tokens)"
        if on_doc is not None:
            on_doc(doc_id, what)
    return report
