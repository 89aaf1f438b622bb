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

:func:`load_ranker` turns a Context's ``evidence_ranker`` into a ranker. The learned ranker
ships as ONNX (``model.onnx``: the trees, float64 splits and leaf values, run by onnxruntime,
so it scores the same whatever scikit-learn is installed, or none). Files that cannot be
loaded (missing, damaged, not the format this version reads) are a :class:`ModelFileError`,
one line naming ``make ranker``: never a quiet switch to the fused ranking.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mindscape.errors import MindscapeError
from mindscape.memory.scoring import BM25Index
from mindscape.models.manifest import MANIFEST, matches, read_manifest
from mindscape.reasoners.text import content_words

RRF_K = 60
"""The usual reciprocal-rank-fusion constant."""
RANKER_DIR = Path(__file__).resolve().parent.parent / "data" / "ranker"
"""Where the shipped learned ranker lives (model, sha256 manifest, model card)."""
MODEL_FILE = "model.onnx"
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


N_FEATURES = 13 + len(WH_WORDS) + 3
"""Columns of :func:`features`."""


class ModelFileError(MindscapeError):
    """A shipped model (the learned ranker, the layer router) that cannot be loaded: files
    missing, damaged, not matching their sha256, or not in the format this version reads.
    Its message is one line naming the command that rebuilds it; the CLI prints it and exits
    with 2."""


def one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


@dataclass(frozen=True)
class ModelFiles:
    """A shipped model's folder as mindscape reads it: a ``manifest.json`` whose ``sha256``
    lists one model file, in the format named by its ``format``."""

    what: str
    """The model, as the error names it."""
    fix: str
    """What the user can do, as the error says it (the command that rebuilds it first)."""
    format: str
    """The manifest's ``format`` this version reads; a folder in another one is an error."""

    def error(self, path: Path, problem: str) -> ModelFileError:
        """The one-line error for the folder `path`."""
        return ModelFileError(f"{self.what} in {path} cannot be loaded: {problem}; {self.fix}")

    def check(self, path: Path) -> dict[str, Any]:
        """The manifest in `path`, after checking every file it lists against its sha256 and
        its format."""
        manifest = path / MANIFEST
        if not manifest.is_file():
            raise self.error(path, f"no {MANIFEST}")
        try:
            meta = dict(read_manifest(path))
            files = list(dict(meta["sha256"]).items())
        except (ValueError, KeyError, TypeError) as exc:
            raise self.error(path, f"{MANIFEST} is damaged ({one_line(exc)})") from None
        for name, digest in files:
            f = path / name
            if not f.is_file():
                raise self.error(path, f"{name} is missing")
            if not matches(f, digest):
                raise self.error(path, f"{name} does not match its sha256")
        if meta.get("format") != self.format or len(files) != 1:
            found = meta.get("format") or ", ".join(name for name, _ in files) or "no file"
            raise self.error(path, f"it is not in the format this version reads ({found})")
        return meta

    def read(self, path: Path) -> bytes:
        """The model file's bytes, after :meth:`check`."""
        meta = self.check(path)
        return (path / next(iter(meta["sha256"]))).read_bytes()


RANKER_FILES = ModelFiles(
    "the learned evidence ranker",
    "run `make ranker`, or choose the fused ranker (--evidence-ranker fused)",
    "onnx: ai.onnx.ml TreeEnsemble (opset 5), float64",
)


class TreeEnsemble:
    """Regression trees saved as ONNX (one ``ai.onnx.ml`` ``TreeEnsemble`` node with float64
    splits and leaf values, plus the baseline), scored by onnxruntime on one thread: the same
    sums as the scikit-learn model they were exported from (``make ranker``), to ~1e-15."""

    def __init__(self, raw: bytes) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        opts.log_severity_level = 3  # errors only: a bad file is reported by its exception
        self.session = ort.InferenceSession(raw, opts, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name

    def predict(self, x: np.ndarray) -> np.ndarray:
        """One score per row of `x`."""
        out = self.session.run(None, {self.input: np.asarray(x, dtype=np.float64)})[0]
        return np.asarray(out, dtype=np.float64).reshape(-1)


class LearnedRanker:
    """Gradient-boosted trees (fitted as scikit-learn's ``HistGradientBoostingRegressor``,
    shipped as ONNX) over :func:`features`, fitted on FairytaleQA train stories to score the
    sentence that answers above the sentences about the same people. A few milliseconds for
    60 candidates."""

    name = "learned"

    def __init__(self, model: Any) -> None:
        self.model = model
        """Anything with ``predict(rows) -> scores``: a :class:`TreeEnsemble` when loaded."""

    @classmethod
    def load(cls, path: Path) -> LearnedRanker:
        """The model in ``path``, written by ``make ranker``, after its manifest's checks
        (:meth:`ModelFiles.check`): a :class:`ModelFileError` when it cannot be loaded."""
        raw = RANKER_FILES.read(path)
        try:
            model = TreeEnsemble(raw)
            model.predict(np.zeros((1, N_FEATURES)))  # the graph takes our features
        except Exception as exc:  # onnxruntime raises its own types for a bad graph
            raise RANKER_FILES.error(path, f"onnxruntime cannot run it ({one_line(exc)})") from exc
        return cls(model)

    def scores(self, question: str, cands: Sequence[Candidate]) -> list[float]:
        if not cands:
            return []
        return [float(x) for x in self.model.predict(features(question, cands))]


_LOADED: dict[str, Ranker] = {}
_LOAD_LOCK = threading.Lock()


def load_ranker(name: str, path: Path | None = None) -> Ranker:
    """The ranker called `name` (``fused`` or ``learned``), loaded once per process.

    A learned ranker that cannot be loaded (files missing, a sha256 mismatch, another format,
    a graph onnxruntime cannot run) raises :class:`ModelFileError`, one line naming
    ``make ranker``: the fused ranking is never used in its place. A failure is not
    remembered: the next call tries again.
    """
    if name == "fused":
        return FusedRanker()
    if name != "learned":
        raise ValueError(f"unknown evidence ranker {name!r} (known: {', '.join(RANKER_NAMES)})")
    where = path or RANKER_DIR
    key = str(where)
    with _LOAD_LOCK:
        if key not in _LOADED:
            _LOADED[key] = LearnedRanker.load(where)
        return _LOADED[key]
