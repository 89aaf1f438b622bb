"""Evidence rankers: which candidate sentences the focused reader reads first.

The focused reader (:mod:`mindscape.reasoners.focus`) reads the windows around the best
candidate sentences of the retrieved chunks, and the local model reads only the two best
windows, so the order of ~60 candidates decides the answer. A ranker scores them:

* :class:`FusedRanker` (``fused``): reciprocal rank fusion of the chunk's retrieval rank,
  BM25 over the candidates and the MiniLM cosine to the question. No training, no weights.
* :class:`LearnedRanker` (``learned``): gradient-boosted trees over cheap features of each
  candidate and its neighbours (the fused ranking's signals among them), trained on
  FairytaleQA train stories to put the sentence that answers first (model card:
  ``mindscape/data/ranker/README.md``; ``make ranker`` retrains it). A MiniLM
  cross-encoder was measured against it and lost (the model card says by how much).

:func:`load_ranker` turns a Context's ``evidence_ranker`` into a ranker. A learned ranker
whose files are missing or damaged is reported in one warning line and the fused ranking
is used instead (the attempt records which ranker ordered what it read).
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mindscape.memory.retrieval.ranking import BM25Index
from mindscape.reasoners.text import content_words

logger = logging.getLogger(__name__)

RRF_K = 60
"""The usual reciprocal-rank-fusion constant."""
RANKER_DIR = Path(__file__).resolve().parent.parent / "data" / "ranker"
"""Where the shipped learned ranker lives (model, sha256 manifest, model card)."""
MANIFEST = "manifest.json"
MODEL_FILE = "model.pkl"
RANKER_NAMES = ("fused", "learned")


@dataclass(frozen=True)
class Candidate:
    """One focus candidate: a sentence of a retrieved chunk, with its place in the story."""

    text: str
    chunk_rank: int
    """Retrieval rank of its chunk among the hits (0 = the best chunk)."""
    before: tuple[str, ...] = ()
    """Up to two sentences just before it in the story, in order."""
    after: tuple[str, ...] = ()
    """Up to two sentences just after it."""
    cosine: float | None = None
    """Cosine to the question (MiniLM sentence vectors), when the reader has an embedder."""
    doc_id: str = ""
    start: int = -1
    """Character offset in its document (-1 when unknown)."""
    end: int = -1


class Ranker(Protocol):
    """Scores focus candidates for a question: higher reads first."""

    name: str

    def scores(self, question: str, cands: Sequence[Candidate]) -> list[float]:
        """One score per candidate."""
        ...


class FusedRanker:
    """Reciprocal rank fusion (``Σ 1/(60 + rank)``) of the chunk's retrieval rank (shared by
    its sentences), the BM25 rank (sentences sharing a term with the question only) and the
    cosine rank (when the candidates carry cosines). Nothing to tune."""

    name = "fused"

    def scores(self, question: str, cands: Sequence[Candidate]) -> list[float]:
        if not cands:
            return []
        return self.fuse(cands, BM25Index([c.text for c in cands]).scores(question))

    @staticmethod
    def fuse(cands: Sequence[Candidate], bm25: np.ndarray) -> list[float]:
        """The fused scores, given the candidates' BM25 scores for the question."""
        score = [1.0 / (RRF_K + 1 + c.chunk_rank) for c in cands]
        votes = [[i for i in np.argsort(-bm25, kind="stable") if bm25[i] > 0]]
        if all(c.cosine is not None for c in cands):
            cos = np.asarray([c.cosine for c in cands], dtype=np.float64)
            votes.append(list(np.argsort(-cos, kind="stable")))
        for order in votes:
            for rank, i in enumerate(order, start=1):
                score[int(i)] += 1.0 / (RRF_K + rank)
        return score


_NAME = re.compile(r"\b[A-Z][a-z]+\b")
WH_WORDS = ("who", "what", "why", "how", "where", "when", "which")


def _ranks(values: np.ndarray) -> np.ndarray:
    """1 for the largest value, 2 for the next, ... (ties in their order)."""
    order = np.argsort(-values, kind="stable")
    out = np.empty(len(values))
    out[order] = np.arange(1, len(values) + 1)
    return out


def features(question: str, cands: Sequence[Candidate]) -> np.ndarray:
    """One row per candidate: what the fused ranking knows (chunk rank, BM25 and cosine, as
    values and ranks, the fused score), the same signals of the sentences just before it (in
    a story the answer tends to follow the sentence that matches the question), its place
    among the candidates, its length, the question's names and content words it shares,
    quotes and "because", and the question's wh-word."""
    n = len(cands)
    bm25 = np.asarray(BM25Index([c.text for c in cands]).scores(question), dtype=float)
    cos = np.asarray([c.cosine or 0.0 for c in cands], dtype=float)
    fused = np.asarray(FusedRanker.fuse(cands, bm25))
    by_text = {c.text: i for i, c in enumerate(cands)}
    qwords = content_words(question)
    names = {w.lower() for w in _NAME.findall(question)[1:]}
    first = question.strip().split()[0].lower() if question.strip() else ""
    order = np.argsort([c.start for c in cands], kind="stable")
    position = np.empty(n)
    position[order] = np.arange(n) / max(1, n - 1)
    rows = []
    for i, c in enumerate(cands):
        prev = [by_text[t] for t in c.before if t in by_text]
        rows.append(
            [
                c.chunk_rank,
                bm25[i],
                bm25[i] / (bm25.max() or 1.0),
                cos[i],
                fused[i],
                max((bm25[p] for p in prev), default=0.0),
                max((cos[p] for p in prev), default=0.0),
                position[i],
                len(c.text.split()),
                len(content_words(c.text) & qwords) / max(1, len(qwords)),
                len(names & {w.lower() for w in _NAME.findall(c.text)}),
                float('"' in c.text or "\u201c" in c.text),
                float(" because " in c.text),
                *[float(first == w) for w in WH_WORDS],
            ]  # fmt: skip
        )
    ranks = np.stack([_ranks(bm25), _ranks(cos), _ranks(fused)], axis=1)
    return np.hstack([np.asarray(rows, dtype=float), ranks])


class LearnedRanker:
    """Gradient-boosted trees (scikit-learn's ``HistGradientBoostingRegressor``) over
    :func:`features`, fitted on FairytaleQA train stories to score the sentence that answers
    above the sentences about the same people. A few milliseconds for 60 candidates."""

    name = "learned"

    def __init__(self, model: Any) -> None:
        self.model = model

    @classmethod
    def load(cls, path: Path) -> LearnedRanker:
        """The model in ``path``, written by ``make ranker`` (see :func:`load_model`)."""
        return cls(load_model(path, "the learned ranker", "make ranker"))

    def scores(self, question: str, cands: Sequence[Candidate]) -> list[float]:
        if not cands:
            return []
        return [float(x) for x in self.model.predict(features(question, cands))]


class RankerFileError(RuntimeError):
    """The learned ranker's files are missing or do not match their sha256."""


def check_files(path: Path, fix: str = "make ranker") -> dict[str, Any]:
    """A shipped model's manifest, after checking every file it lists against its sha256;
    `fix` is the command that rebuilds it, named in the error."""
    manifest = path / MANIFEST
    if not manifest.is_file():
        raise RankerFileError(f"no model at {path} (run `{fix}` to train one)")
    try:
        meta = json.loads(manifest.read_text())
        files: dict[str, str] = meta["sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise RankerFileError(f"{manifest} is damaged ({exc}); run `{fix}`") from None
    for name, digest in files.items():
        f = path / name
        if not f.is_file():
            raise RankerFileError(f"{path} lacks {name} (run `{fix}`)")
        if hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            raise RankerFileError(f"{path / name} does not match its sha256 (run `{fix}`)")
    return meta


def load_model(path: Path, what: str, fix: str) -> Any:
    """The pickled scikit-learn model ``path/model.pkl``, after :func:`check_files` and only
    with the scikit-learn version that wrote it (a pickle runs code when loaded); `what`
    names it and `fix` is the command that rebuilds it, in the error."""
    import sklearn

    meta = check_files(path, fix=fix)
    need = meta.get("sklearn")
    if need and need != sklearn.__version__:
        raise RankerFileError(
            f"{what} was saved with scikit-learn {need}, this is {sklearn.__version__} "
            f"(run `{fix}`)"
        )
    with (path / MODEL_FILE).open("rb") as f:
        return pickle.load(f)  # noqa: S301 - our own file, checked by its sha256


_LOADED: dict[str, Ranker] = {}
_LOAD_LOCK = threading.Lock()


def load_ranker(name: str, path: Path | None = None) -> Ranker:
    """The ranker called `name` (``fused`` or ``learned``), loaded once per process.

    A learned ranker that cannot be loaded (files missing, a sha256 mismatch, weights that do
    not load) logs one warning line naming ``make ranker`` and returns the fused ranker,
    whose ``name`` then says so wherever the run reports its ranker.
    """
    if name == "fused":
        return FusedRanker()
    if name != "learned":
        raise ValueError(f"unknown evidence ranker {name!r} (known: {', '.join(RANKER_NAMES)})")
    where = path or RANKER_DIR
    key = str(where)
    with _LOAD_LOCK:
        if key not in _LOADED:
            try:
                _LOADED[key] = LearnedRanker.load(where)
            except Exception as exc:  # any failure to load: say so once, read fused
                reason = exc if isinstance(exc, RankerFileError) else f"cannot load it: {exc}"
                logger.warning("learned evidence ranker unavailable: %s; using fused", reason)
                _LOADED[key] = FusedRanker()
        return _LOADED[key]
