"""Which layer a question is read from: a session summary, or the sentence windows only.

A detail question ("What did the father bring back?") is answered by a sentence, and the local
reader reads the two best windows around the best sentences. A question about the plot ("Why
does Sandoz decide to get married?", "What happens to Theodore's family?") is answered by no
single sentence; a session summary (the episodic layer) may state it. The router decides
between the two from the question alone:

* a **small trained classifier** (scikit-learn: TF-IDF word and bigram features, logistic
  regression with balanced class weights), trained on FairytaleQA train questions, whose
  annotators marked each one ``local`` (answered by one passage) or ``summary`` (needs several
  parts of the story); the feature kind was chosen on FairytaleQA dev (model card:
  ``mindscape/data/router/README.md``; ``make router`` retrains it);
* its own decision (probability ≥ 0.5 with balanced class weights) routes; nothing is tuned
  on the benchmark questions.

A routed question reads the retrieved session summary that ranks first, then the single best
window (see :meth:`mindscape.reasoners.llm.LLMReasoner.answer`); an unrouted one reads the two
best windows, as before.

The router ships as plain JSON (``model.json``: the vectorizer's settings, its vocabulary and
idf weights, the regression's coefficients), rebuilt at load time as scikit-learn's own
``TfidfVectorizer`` (so a question is tokenised exactly as in training) and a dot product:
no pickle, and the same probabilities under any scikit-learn that mindscape allows. Files that
cannot be loaded are a :class:`~mindscape.reasoners.rankers.ModelFileError`, one line naming
``make router``: never a quiet switch to reading windows only.
"""

from __future__ import annotations

import json
import math
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from mindscape.reasoners.rankers import ModelFiles, one_line

ROUTER_DIR = Path(__file__).resolve().parent.parent / "data" / "router"
"""Where the shipped layer router lives (model, sha256 manifest, model card)."""
MODEL_FILE = "model.json"
THRESHOLD = 0.5
"""The classifier's own decision boundary (balanced class weights): not tuned."""
VECTORIZER_PARAMS = (
    "analyzer", "binary", "lowercase", "ngram_range", "norm", "smooth_idf", "strip_accents",
    "sublinear_tf", "token_pattern", "use_idf",
)  # fmt: skip
"""The ``TfidfVectorizer`` settings the JSON keeps (what ``transform`` depends on, given the
vocabulary and idf weights)."""
ROUTER_FILES = ModelFiles(
    "the layer router",
    "run `make router`, or read without routing (--read-summaries off)",
    "json: TfidfVectorizer vocabulary and idf, LogisticRegression coefficients",
)


class LayerRouter:
    """``P(summary | question)``: a logistic regression over the question's TF-IDF vector."""

    def __init__(self, vectorizer: Any, coef: np.ndarray, intercept: float) -> None:
        self.vectorizer = vectorizer
        """A ``TfidfVectorizer`` with the trained vocabulary and idf weights."""
        self.coef = coef
        self.intercept = intercept

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LayerRouter:
        """The router from :meth:`to_json`'s dict (a ``ValueError``/``KeyError``/``TypeError``
        when it is not one)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        params = {k: data["vectorizer"][k] for k in VECTORIZER_PARAMS}
        params["ngram_range"] = tuple(params["ngram_range"])
        terms = [str(t) for t in data["vocabulary"]]
        idf = np.asarray(data["idf"], dtype=np.float64)
        coef = np.asarray(data["coef"], dtype=np.float64)
        if not (len(terms) == len(set(terms)) == len(idf) == len(coef)) or not terms:
            raise ValueError("vocabulary, idf and coef differ in length")
        if data["classes"] != [0, 1]:
            raise ValueError(f"classes {data['classes']}, not [0, 1] (1: summary)")
        vectorizer = TfidfVectorizer(**params, vocabulary={t: i for i, t in enumerate(terms)})
        vectorizer.idf_ = idf
        return cls(vectorizer, coef, float(data["intercept"]))

    @staticmethod
    def to_json(pipeline: Any) -> dict[str, Any]:
        """A fitted ``make_pipeline(TfidfVectorizer(...), LogisticRegression(...))`` (two
        classes) as plain data: the vectorizer's settings, vocabulary (in column order) and
        idf weights, the regression's coefficients and intercept."""
        vectorizer, regression = (step for _, step in pipeline.steps)
        vocab = vectorizer.vocabulary_
        settings = vectorizer.get_params()
        return {
            "vectorizer": {k: settings[k] for k in VECTORIZER_PARAMS},
            "vocabulary": sorted(vocab, key=vocab.__getitem__),
            "idf": [float(x) for x in vectorizer.idf_],
            "coef": [float(x) for x in regression.coef_[0]],
            "intercept": float(regression.intercept_[0]),
            "classes": [int(c) for c in regression.classes_],
        }

    @classmethod
    def load(cls, path: Path) -> LayerRouter:
        """The router in ``path``, written by ``make router``, after its manifest's checks: a
        :class:`~mindscape.reasoners.rankers.ModelFileError` when it cannot be loaded."""
        raw = ROUTER_FILES.read(path)
        try:
            router = cls.from_json(json.loads(raw))
            router.summary_share("What happens at the end?")
        except Exception as exc:  # a file that is not the router's JSON, in any way
            raise ROUTER_FILES.error(
                path, f"{MODEL_FILE} is not a router ({one_line(exc)})"
            ) from exc
        return router

    def summary_share(self, question: str) -> float:
        """How likely the question needs more than one passage (0–1)."""
        z = float((self.vectorizer.transform([question]) @ self.coef)[0]) + self.intercept
        return 1.0 / (1.0 + math.exp(-z))

    def wants_summary(self, question: str) -> bool:
        """Whether the question is read from a session summary first."""
        return self.summary_share(question) >= THRESHOLD


_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _load(path: Path) -> LayerRouter:
    return LayerRouter.load(path)


def load_router(path: Path | None = None) -> LayerRouter:
    """The shipped router (loaded once per process). Files that cannot be loaded raise
    :class:`~mindscape.reasoners.rankers.ModelFileError`, one line naming ``make router``;
    a failure is not remembered."""
    with _LOCK:
        return _load(path or ROUTER_DIR)
