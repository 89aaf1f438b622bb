"""Presets: the same graph configured to reproduce each source system.

A preset is a set of :class:`~mindscape.context.Context` values, written as how it differs
from the Context's defaults (which are the ``mindscape`` preset's, so that one lists nothing).
A Context field left at ``None`` takes the preset's value, else the default in the field's
metadata; a field set explicitly wins over both (explicit > preset > default). Side-by-side
evaluation runs one graph with different presets.

LLM calls per round (an LLM endpoint playing every role, P probes per refinement round, 3
layers; the local model plays only answer and update, see ``Context.llm_roles``):

========== ============================================ =========================================
preset     round 1                                      each refinement round
========== ============================================ =========================================
naive      1 answer                                     (single shot)
raptor     1 answer                                     (single shot)
mom        1 answer                                     (single shot)
mia-rag    1 answer                                     (single shot)
mia-agent  1 UPDATE (+1 answer when it decides)         1 UPDATE (+1 answer on ANSWER/last round)
comorag    3 encode + 1 answer (+1 probe)               3·P encode + 1 fuse + 1 answer (+1 probe)
mindscape  1 answer (+1 probe)                           1 encode+fuse + 1 answer (+1 probe)
========== ============================================ =========================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Preset:
    """A named configuration of the QA graph and the paper behaviour it reproduces."""

    name: str
    reproduces: str
    """The system and the behaviour this preset reproduces."""
    values: dict[str, Any] = field(default_factory=dict)
    """How this preset differs from the Context's defaults: values of preset-decided fields
    (those left out take the defaults)."""


_CHUNKS_ONLY = {"veridical": 2000, "semantic": 0, "episodic": 0, "outline": 0}
_REPRODUCTION: dict[str, Any] = {
    "activation": "dense",
    "chunk_mode": "dense",
    "budget_scope": "probe",
    "defer_encode": False,
}
"""How every reproduction differs from mindscape: dense retrieval, budgets per probe, and
Mem-Encode from round 1."""
_SINGLE_SHOT: dict[str, Any] = {
    **_REPRODUCTION,
    "budgets": _CHUNKS_ONLY,
    "max_rounds": 1,
    "max_probes": 0,
    "encode": "none",
    "fuse": False,
    "signature_update": "none",
    "answer_with_evidence": False,
}
"""One retrieval over the chunks and one answer call."""
_NO_SIGNATURE: dict[str, Any] = {"signature": "none", "alpha": 0.0}

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "naive",
            "Naive dense RAG: query-only top chunks (veridical layer) packed into a token "
            "budget, one answer call. The baseline every paper compares against.",
            {**_SINGLE_SHOT, **_NO_SIGNATURE},
        ),
        Preset(
            "raptor",
            "RAPTOR's collapsed tree (Sarthi et al., 2024): chunks and every level of the "
            "cluster-summary tree scored together by query cosine, best first until 3500 "
            "tokens; one answer call.",
            {
                **_SINGLE_SHOT,
                **_NO_SIGNATURE,
                "budgets": {"veridical": 3500, "semantic": 3500, "episodic": 0, "outline": 0},
                "collapse": True,
            },
        ),
        Preset(
            "mom",
            "MoM (Zhao et al., 2025): three-layer retrieval with late fusion: outline, core "
            "content and atomic chunks retrieved separately, outline/core hits mapped to their "
            "chunks, deduplicated and fused by rank; one answer call.",
            {**_SINGLE_SHOT, **_NO_SIGNATURE, "chunk_mode": "late-fusion"},
        ),
        Preset(
            "mia-rag",
            "MiA-Signature static RAG mode: a coverage-aware submodular signature σ0 over "
            "session summaries, signature-conditioned chunk retrieval "
            "s = (1-α)·s(q,c) + α·s(σ,c) with α = 0.5, and a generator that also sees σ.",
            {**_SINGLE_SHOT, "signature_mode": "mean", "answer_with_signature": True},
        ),
        Preset(
            "mia-agent",
            "MiA-Agent: First-K signature init, then per round one UPDATE call over "
            "(query, signature, new passages, evidence notes, candidate summaries) giving "
            "(decision, next query, signature, evidence); query rewrite on; the generator "
            "answers once the agent decides ANSWER (or the budget ends), seeing chunks, "
            "signature and evidence.",
            {
                **_REPRODUCTION,
                "budgets": _CHUNKS_ONLY,
                "signature": "first-k",
                "signature_mode": "mean",
                "signature_update": "llm",
                "max_probes": 0,
                "encode": "notes",
                "fuse": False,
                "query_rewrite": True,
                "answer_policy": "on-decision",
                "answer_with_signature": True,
            },
        ),
        Preset(
            "comorag",
            "ComoRAG (Wang et al., 2025): tri-layer retrieval (veridical, semantic, episodic; "
            "2000 tokens each, per probe), Mem-Encode one call per probe and layer, Mem-Fuse "
            "of the most related half of the pool, Try-Answer with an explicit failure signal, "
            "Self-Probe of up to 3 entity-first probes; at most 5 cycles.",
            {
                **_REPRODUCTION,
                **_NO_SIGNATURE,
                "budgets": {"veridical": 2000, "semantic": 2000, "episodic": 2000, "outline": 0},
                "narrative_order": True,
                "signature_update": "none",
                "encode": "per-layer",
                "max_tokens": 300_000,
                "llm_passage_tokens": 6000,
                "focus_tokens": 0,
            },
        ),
        Preset(
            "mindscape",
            "All of it: coverage-aware signature, signature-conditioned tri-layer retrieval "
            "(plus the MoM outline layer) with one token budget per layer per round, the "
            "signature re-selected with the evidence each round, one batched Mem-Encode + "
            "Mem-Fuse call per refinement round (round 1's evidence is encoded with round 2's, so "
            "a first attempt that answers costs one call), Try-Answer, and Self-Probe with the "
            "REFINE/ANSWER decision in one call. σ steers retrieval; the answerer reads "
            "passages and the evidence memory, not σ (in a 1000-token prompt σ displaced "
            "evidence; see docs/agent.md). Its values are the Context's defaults.",
        ),
    ]
}

PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)


def get_preset(name: str) -> Preset:
    """The preset called `name`; a ValueError lists the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r} (known: {', '.join(PRESET_NAMES)})") from None
