"""The two reasoners behind every LLM role of the QA graph.

* :class:`~mindscape.reasoners.offline.OfflineReasoner`: deterministic and extractive, on
  the embedder (cues and answers from evidence sentences by embedding similarity).
* :class:`~mindscape.reasoners.llm.LLMReasoner`: prompts from :mod:`mindscape.prompts`,
  structured output where the model has it, tolerant JSON otherwise, every call counted;
  its reply schemas are in :mod:`~mindscape.reasoners.schemas`, its evidence blocks in
  :mod:`~mindscape.reasoners.prompting`, the reading of its replies in
  :mod:`~mindscape.reasoners.replies`.

Both implement :class:`~mindscape.reasoners.base.Reasoner`; nodes never know which one runs.
"""

from mindscape.reasoners.base import (
    AnswerRequest,
    EncodeGroup,
    EncodeRequest,
    EncodeResult,
    Reasoner,
    RefineRequest,
    RefineResult,
    RoundOutcome,
    UpdateRequest,
    UpdateResult,
)

__all__ = [
    "AnswerRequest",
    "EncodeGroup",
    "EncodeRequest",
    "EncodeResult",
    "Reasoner",
    "RefineRequest",
    "RefineResult",
    "RoundOutcome",
    "UpdateRequest",
    "UpdateResult",
]
