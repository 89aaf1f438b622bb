"""Triples per chunk (HippoRAG-style knowledge): (subject, relation, object), LLM backend only.

They are stored in each chunk's metadata (``meta["triples"]``).
"""

from __future__ import annotations

from typing import Any

from mindscape import prompts
from mindscape.indexing.document import DocText
from mindscape.indexing.embed_cache import Bar
from mindscape.prompts import triples as triples_prompt

__all__ = [
    "chunk_triples",
]


def chunk_triples(doc: DocText, llm: Any, *, bar: Bar) -> dict[int, list[list[str]]]:
    """Chunk index → its triples (at most 12 asked for per chunk)."""
    out: dict[int, list[list[str]]] = {}
    for i in bar(range(len(doc.chunks)), f"{doc.doc_id} · triples"):
        prompt = prompts.render(
            triples_prompt.USER, passage=prompts.as_data(doc.chunks[i].text), max_triples=12
        )
        data = llm.complete_json(prompt, system=triples_prompt.SYSTEM, role="index_triples")
        raw = data.get("triples", []) if isinstance(data, dict) else data
        out[i] = [[str(x) for x in t[:3]] for t in raw or [] if isinstance(t, list) and len(t) >= 3]
    return out
