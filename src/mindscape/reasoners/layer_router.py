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
best windows, as before. Files that are missing or damaged log one warning and route nothing.
"""

from __future__ import annotations

import logging
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from mindscape.reasoners.rankers import load_model

logger = logging.getLogger(__name__)

ROUTER_DIR = Path(__file__).resolve().parent.parent / "data" / "router"
"""Where the shipped layer router lives (model, sha256 manifest, model card)."""
THRESHOLD = 0.5
"""The classifier's own decision boundary (balanced class weights): not tuned."""


class LayerRouter:
    """``P(summary | question)`` from the trained scikit-learn pipeline."""

    def __init__(self, model: Any) -> None:
        self.model = model

    @classmethod
    def load(cls, path: Path) -> LayerRouter:
        """The pipeline in ``path``, written by ``make router`` (see
        :func:`~mindscape.reasoners.rankers.load_model`)."""
        return cls(load_model(path, "the layer router", "make router"))

    def summary_share(self, question: str) -> float:
        """How likely the question needs more than one passage (0–1)."""
        return float(self.model.predict_proba([question])[0][1])

    def wants_summary(self, question: str) -> bool:
        """Whether the question is read from a session summary first."""
        return self.summary_share(question) >= THRESHOLD


_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _load(path: Path) -> LayerRouter | None:
    try:
        return LayerRouter.load(path)
    except Exception as exc:  # any failure to load: say so once, route nothing
        logger.warning("layer router unavailable (%s); questions read windows only", exc)
        return None


def load_router(path: Path | None = None) -> LayerRouter | None:
    """The shipped router (loaded once per process), or None when it cannot be loaded."""
    with _LOCK:
        return _load(path or ROUTER_DIR)
