"""Where mindscape keeps model files, and what its model installers share.

A leaf (it imports nothing from mindscape): the embedders (:mod:`mindscape.embeddings`,
:mod:`mindscape.embeddings.gemma`), the local model (:mod:`mindscape.models.local`) and the local
server (:mod:`mindscape.models.server`) all keep their files under :func:`cache_root`.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["cache_root", "file_sha256", "progress_bar"]


def cache_root() -> Path:
    """Where mindscape keeps extracted model weights (`MINDSCAPE_CACHE`, else ~/.cache/mindscape)."""
    root = os.environ.get("MINDSCAPE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "mindscape"
    )
    return Path(root)


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def progress_bar(show: bool, total: int, desc: str, unit: str) -> Any:
    """A tqdm bar on stderr (with its ETA), or a silent stand-in."""
    from tqdm import tqdm

    return tqdm(
        total=total, desc=desc, unit=unit, unit_scale=unit == "B", disable=not show, file=sys.stderr
    )
