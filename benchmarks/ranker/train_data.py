"""What a train folder holds, as the manifests of the models trained on it say it
(``make ranker``, ``make router``): counted from the questions trained on, never restated."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

DATASET = "fairytaleqa"
LICENCE = "Apache-2.0"


def folder_version(train: Path) -> str:
    """The train folder's version (``version`` in its ``manifest.json``), else its name."""
    try:
        return str(json.loads((train / "manifest.json").read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return train.resolve().name


def trained_on(train: Path, doc_ids: Sequence[str]) -> str:
    """The manifest's ``trained_on`` for a model fitted on questions of these documents (one
    doc id per question), e.g. ``FairytaleQA train-v1 (92 stories, 3,324 questions),
    Apache-2.0``."""
    stories = len(set(doc_ids))
    return (
        f"FairytaleQA {folder_version(train)} ({stories:,} stories, {len(doc_ids):,} "
        f"questions), {LICENCE}"
    )
