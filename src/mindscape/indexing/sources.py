"""Reading documents to index: .txt/.md files, folders of them, and bench `documents.jsonl` files.

Everything is read and checked before a store is touched. A problem with one book (a missing,
empty, binary or malformed file or line) is that book's: :func:`load_sources` collects it as a
:class:`SourceProblem` when asked to, so a library run indexes the other books, and raises
`InputError` with a one-line message otherwise. A file that is not UTF-8 is decoded as cp1252
(a superset of Latin-1 for printable text) with a warning. A folder stands for the .txt, .md
and .jsonl files below it, in path order (hidden files and folders left out).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from mindscape.errors import InputError

__all__ = [
    "TEXT_SUFFIXES",
    "SourceDoc",
    "SourceProblem",
    "decode_text",
    "expand",
    "load_sources",
    "read_jsonl",
    "read_text_file",
    "slug",
]

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text", ""}


@dataclass
class SourceDoc:
    """A document ready to index."""

    doc_id: str
    text: str
    title: str | None = None
    origin: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass
class SourceProblem:
    """One book that cannot be indexed: where it is and why (a one-line message)."""

    origin: str
    message: str


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


def read_jsonl(
    path: Path, doc_ids: set[str] | None = None, problems: list[SourceProblem] | None = None
) -> list[SourceDoc]:
    """Documents of a bench-style `documents.jsonl` (`doc_id`, `text`, optional `title`).
    A bad line raises `InputError`, or with `problems` is added there and skipped."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    text, warnings = decode_text(path.read_bytes(), str(path))
    docs: list[SourceDoc] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = _jsonl_doc(line, f"{path}:{n}", doc_ids)
        except InputError as exc:
            if problems is None:
                raise
            problems.append(SourceProblem(f"{path}:{n}", str(exc)))
            continue
        if doc is not None:
            doc.warnings.extend(warnings)
            docs.append(doc)
    return docs


def _jsonl_doc(line: str, origin: str, doc_ids: set[str] | None) -> SourceDoc | None:
    """One line of a documents.jsonl as a document (None: filtered out by `doc_ids`)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{origin}: not valid JSON ({exc.msg})") from None
    if not isinstance(row, dict) or not isinstance(row.get("text"), str) or "doc_id" not in row:
        raise InputError(f"{origin}: a document needs 'doc_id' and 'text'")
    if doc_ids is not None and str(row["doc_id"]) not in doc_ids:
        return None
    if not row["text"].strip():
        raise InputError(f"{origin}: document {row['doc_id']} has empty text")
    return SourceDoc(str(row["doc_id"]), row["text"], row.get("title"), origin)


def expand(paths: list[str | Path]) -> list[Path]:
    """The files named, each folder replaced by its .txt/.md/.jsonl files in path order."""
    files: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            files.append(p)
            continue
        found = sorted(
            f
            for f in p.rglob("*")
            if f.is_file()
            and f.suffix.lower() in {*TEXT_SUFFIXES, ".jsonl"} - {""}
            and not any(part.startswith(".") for part in f.relative_to(p).parts)
        )
        if not found:
            raise InputError(f"{p}: a folder with no .txt, .md or .jsonl files")
        files.extend(found)
    return files


def _read_file(
    p: Path, wanted: set[str] | None, problems: list[SourceProblem] | None
) -> list[SourceDoc]:
    """The documents of one input file (a problem raises `InputError`, or with `problems`
    is added there)."""
    try:
        if p.suffix.lower() == ".jsonl":
            return read_jsonl(p, wanted, problems)
        if p.suffix.lower() in TEXT_SUFFIXES or not p.exists():
            return [read_text_file(p)]
        raise InputError(f"{p}: unsupported file type {p.suffix!r} (use .txt, .md or .jsonl)")
    except InputError as exc:
        if problems is None:
            raise
        problems.append(SourceProblem(str(p), str(exc)))
        return []


def load_sources(
    paths: list[str | Path],
    doc_ids: list[str] | None = None,
    problems: list[SourceProblem] | None = None,
) -> list[SourceDoc]:
    """All documents named on a command line (folders expanded); `doc_ids` filters `.jsonl`
    files.

    A missing, empty, binary or malformed book raises `InputError` before anything is indexed,
    or, when a `problems` list is given, is added to it and left out. Either way it raises
    when a requested doc id is in none of the files, when two documents share an id, or when
    no document is left (then with the first problem's message, if any).
    """
    if not paths:
        raise InputError("no input files given")
    wanted = set(doc_ids) if doc_ids else None
    docs: list[SourceDoc] = []
    for p in expand(paths):
        docs.extend(_read_file(p, wanted, problems))
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
        if problems:
            raise InputError(problems[0].message)
        raise InputError("the inputs hold no documents")
    return docs
