"""The sha256 manifest of a trained artefact: written and read here, once for all of them.

Every model mindscape ships (the learned ranker, the layer router, the answer verifier, the
reader's LoRA adapter) sits in a folder beside a ``manifest.json`` that names the sha256 of
its file(s) with what it was trained on. Each artefact keeps its own fields (which, and in
which order, is its trainer's choice); the file's format is one: JSON with a one-space indent
and a final newline, written by :func:`write_manifest` (:func:`write_artefact` writes a
one-file artefact and its manifest together, the digest from the bytes written). Readers load
it with :func:`read_manifest` and check a file against a recorded digest with :func:`matches`.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from mindscape.models.cache import file_sha256

__all__ = [
    "MANIFEST",
    "bytes_sha256",
    "matches",
    "read_manifest",
    "write_artefact",
    "write_manifest",
]

MANIFEST = "manifest.json"
"""The manifest's file name in an artefact's folder."""


def bytes_sha256(raw: bytes) -> str:
    """The sha256 (hex) of bytes about to be written as an artefact's file."""
    return hashlib.sha256(raw).hexdigest()


def write_manifest(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write ``folder/manifest.json``: `manifest`'s fields in their order, one-space indent,
    a final newline. Returns `manifest`."""
    (Path(folder) / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def write_artefact(folder: Path, name: str, raw: bytes, fields: dict[str, Any]) -> dict[str, Any]:
    """Write a one-file artefact: `raw` as ``folder/name`` and its manifest, `fields` then
    ``created`` (today) and ``sha256`` (``{name: digest of raw}``). Returns the manifest."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(raw)
    created = time.strftime("%Y-%m-%d")
    return write_manifest(
        folder, {**fields, "created": created, "sha256": {name: bytes_sha256(raw)}}
    )


def read_manifest(folder: Path) -> Any:
    """``folder/manifest.json`` as JSON (OSError when it cannot be read, ValueError when it is
    not JSON); the caller checks its fields."""
    return json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))


def matches(path: Path, sha256: object) -> bool:
    """Whether the file at `path` has the recorded `sha256` (read in blocks)."""
    return file_sha256(Path(path)) == sha256
