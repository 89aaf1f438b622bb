"""The replies the LLM roles ask for: one pydantic schema per JSON role, each role's output
cap (:data:`MAX_OUTPUT_TOKENS`, :data:`PLAIN_MAX_TOKENS`), and per JSON role what the LLM
reasoner asks with (:class:`JsonRole`: :data:`ENCODE`, :data:`ANSWER`, :data:`PROBE`,
:data:`UPDATE`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, field_validator

from mindscape.prompts import answer as answer_prompt
from mindscape.prompts import encode as encode_prompt
from mindscape.prompts import probe as probe_prompt
from mindscape.prompts import update as update_prompt

PLAIN_MAX_TOKENS = 48
"""Output cap of a plain answer: a few words (a small model may otherwise explain at length)."""

MAX_OUTPUT_TOKENS = {"answer": 200, "probe": 200, "encode": 500, "fuse": 350, "update": 500}
"""Output cap per role, in tokens: each role writes only what it needs."""


def _decision(value: Any) -> str:
    text = str(value or "").strip().upper()
    return "ANSWER" if text.startswith("ANSWER") else "REFINE"


class CueOut(BaseModel):
    """Findings for one evidence block."""

    block: str = ""
    findings: str = ""


class EncodeOut(BaseModel):
    """Mem-Encode (+ Mem-Fuse) output."""

    cues: list[CueOut] = Field(default_factory=list)
    fused: str = ""


class AnswerOut(BaseModel):
    """Try-Answer output: the quote that answers, the answer, and whether it is settled.

    ``evidence_ids`` is accepted when a model volunteers it; a volunteered confidence is
    ignored: the attempt's confidence comes from :mod:`mindscape.reasoners.grounding`.
    """

    quote: str = ""
    answer: str = ""
    sufficient: bool = True
    evidence_ids: list[str] = Field(default_factory=list)

    @classmethod
    def grammar_schema(cls) -> dict[str, Any]:
        """The JSON schema the model is constrained to: three keys, in this order."""
        return {
            "type": "object",
            "properties": {
                "quote": {"type": "string"},
                "answer": {"type": "string"},
                "sufficient": {"type": "boolean"},
            },
            "required": ["quote", "answer", "sufficient"],
        }

    @field_validator("quote", "answer", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else str(v)


class ProbeOut(BaseModel):
    """Self-Probe + decision output."""

    decision: str = "REFINE"
    probes: list[str] = Field(default_factory=list)
    next_query: str = ""
    reason: str = ""

    @field_validator("decision", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> str:
        return _decision(v)


class NoteOut(BaseModel):
    """One grounded evidence note."""

    note: str
    ids: list[str] = Field(default_factory=list)


class UpdateOut(BaseModel):
    """MiA UPDATE output."""

    decision: str = "REFINE"
    next_query: str = ""
    signature: list[str] = Field(default_factory=list)
    evidence: list[NoteOut] = Field(default_factory=list)
    reason: str = ""

    @field_validator("decision", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> str:
        return _decision(v)


Out = TypeVar("Out", bound=BaseModel)


@dataclass(frozen=True)
class JsonRole(Generic[Out]):
    """A role that replies in JSON: its name (in the usage ledger and the logs), its system
    prompt, its reply schema, and what the LLM reasoner does `instead` (the fallback's way,
    for the log) when the reply stays unusable."""

    name: str
    system: str
    schema: type[Out]
    instead: str


ENCODE = JsonRole("encode", encode_prompt.SYSTEM, EncodeOut, "using extractive cues")
ANSWER = JsonRole("answer", answer_prompt.SYSTEM, AnswerOut, "answering extractively")
PROBE = JsonRole("probe", probe_prompt.SYSTEM, ProbeOut, "probing extractively")
UPDATE = JsonRole("update", update_prompt.SYSTEM, UpdateOut, "re-selecting the signature")
