"""Reading documents to index: .txt/.md files and bench `documents.jsonl` files.

Everything is read and checked before a store is touched, so a bad input leaves the store as
it was. Problems raise `InputError` with a one-line message; a file that is not UTF-8 is
decoded as cp1252 (a superset of Latin-1 for printable text) with a warning.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from mindscape.errors import InputError

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text", ""}


@dataclass
class SourceDoc:
    """A document ready to index."""

    doc_id: str
    text: str
    title: str | None = None
    origin: str = ""
    warnings: list[str] = field(default_factory=list)


def slug(name: str) -> str:
    """A doc id from a file name: lower case letters, digits and dashes."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "doc"


def decode_text(data: bytes, origin: str) -> tuple[str, list[str]]:
    """Text of a file's bytes: UTF-8, else cp1252 (with a warning). Binary data raises."""
    if b"\x00" in data[:8192]:
        raise InputError(f"{origin}: looks like a binary file, not text")
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError:
        pass
    text = data.decode("cp1252", errors="replace")
    controls = sum(1 for ch in text[:8192] if ord(ch) < 32 and ch not in "\n\r\t\f")
    if controls > 0.01 * min(len(text), 8192) or text.count("\ufffd") > 0.01 * len(text):
        raise InputError(f"{origin}: looks like a binary file, not text")
    return text, [f"{origin}: not valid UTF-8; decoded as cp1252/Latin-1"]


def read_text_file(path: Path) -> SourceDoc:
    """A .txt/.md file as one document (doc id from the file name)."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a file")
    text, warnings = decode_text(path.read_bytes(), str(path))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise InputError(f"{path}: empty file, nothing to index")
    return SourceDoc(slug(path.stem), text, title=path.stem, origin=str(path), warnings=warnings)


def read_jsonl(path: Path, doc_ids: set[str] | None = None) -> list[SourceDoc]:
    """Documents of a bench-style `documents.jsonl` (`doc_id`, `text`, optional `title`)."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    text, warnings = decode_text(path.read_bytes(), str(path))
    docs: list[SourceDoc] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str) or "doc_id" not in row:
            raise InputError(f"{path}:{n}: a document needs 'doc_id' and 'text'")
        if doc_ids is not None and str(row["doc_id"]) not in doc_ids:
            continue
        if not row["text"].strip():
            raise InputError(f"{path}:{n}: document {row['doc_id']} has empty text")
        docs.append(
            SourceDoc(
                str(row["doc_id"]), row["text"], row.get("title"), f"{path}:{n}", list(warnings)
            )
        )
    return docs


def load_sources(paths: list[str | Path], doc_ids: list[str] | None = None) -> list[SourceDoc]:
    """All documents named on a command line; `doc_ids` filters `.jsonl` files.

    Raises `InputError` before anything is indexed when a file is missing, empty, binary or
    malformed, when a requested doc id is in none of the files, or when two documents share an id.
    """
    if not paths:
        raise InputError("no input files given")
    wanted = set(doc_ids) if doc_ids else None
    docs: list[SourceDoc] = []
    for p in map(Path, paths):
        if p.suffix.lower() == ".jsonl":
            docs.extend(read_jsonl(p, wanted))
        elif p.suffix.lower() in TEXT_SUFFIXES or not p.exists():
            docs.append(read_text_file(p))
        else:
            raise InputError(f"{p}: unsupported file type {p.suffix!r} (use .txt, .md or .jsonl)")
    if wanted:
        missing = wanted - {d.doc_id for d in docs}
        if missing:
            raise InputError(f"doc id not found in the inputs: {', '.join(sorted(missing))}")
    seen: set[str] = set()
    for d in docs:
        if d.doc_id in seen:
            raise InputError(f"two input documents share the doc id {d.doc_id!r}")
        seen.add(d.doc_id)
    if not docs:
        raise InputError("the inputs hold no documents")
    return docs
