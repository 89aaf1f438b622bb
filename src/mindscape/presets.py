"""Presets: the same graph configured to reproduce each source system.

A preset is a set of :class:`~mindscape.context.Context` values. A Context field left at
``None`` takes the preset's value; a field set explicitly wins over the preset
(explicit > preset > default). Side-by-side evaluation runs one graph with different presets.

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
    """Context values (fields left out take the Context's own defaults)."""


_SINGLE_SHOT: dict[str, Any] = {
    "max_rounds": 1,
    "max_probes": 0,
    "encode": "none",
    "fuse": False,
    "defer_encode": False,
    "signature_update": "none",
    "query_rewrite": False,
    "answer_policy": "every-round",
    "budget_scope": "probe",
    "collapse": False,
}

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "naive",
            "Naive dense RAG: query-only top chunks (veridical layer) packed into a token "
            "budget, one answer call. The baseline every paper compares against.",
            {
                "activation": "dense",
                "narrative_order": False,
                **_SINGLE_SHOT,
                "signature": "none",
                "alpha": 0.0,
                "budgets": {"veridical": 2000, "semantic": 0, "episodic": 0, "outline": 0},
                "chunk_mode": "dense",
                "answer_with_signature": False,
                "answer_with_evidence": False,
            },
        ),
        Preset(
            "raptor",
            "RAPTOR's collapsed tree (Sarthi et al., 2024): chunks and every level of the "
            "cluster-summary tree scored together by query cosine, best first until 3500 "
            "tokens; one answer call.",
            {
                "activation": "dense",
                "narrative_order": False,
                **_SINGLE_SHOT,
                "signature": "none",
                "alpha": 0.0,
                "budgets": {"veridical": 3500, "semantic": 3500, "episodic": 0, "outline": 0},
                "collapse": True,
                "collapse_budget": 3500,
                "chunk_mode": "dense",
                "answer_with_signature": False,
                "answer_with_evidence": False,
            },
        ),
        Preset(
            "mom",
            "MoM (Zhao et al., 2025): three-layer retrieval with late fusion: outline, core "
            "content and atomic chunks retrieved separately, outline/core hits mapped to their "
            "chunks, deduplicated and fused by rank; one answer call.",
            {
                "activation": "dense",
                "narrative_order": False,
                **_SINGLE_SHOT,
                "signature": "none",
                "alpha": 0.0,
                "budgets": {"veridical": 2000, "semantic": 0, "episodic": 0, "outline": 0},
                "chunk_mode": "late-fusion",
                "answer_with_signature": False,
                "answer_with_evidence": False,
            },
        ),
        Preset(
            "mia-rag",
            "MiA-Signature static RAG mode: a coverage-aware submodular signature σ0 over "
            "session summaries, signature-conditioned chunk retrieval "
            "s = (1-α)·s(q,c) + α·s(σ,c) with α = 0.5, and a generator that also sees σ.",
            {
                "signature_mode": "mean",
                "activation": "dense",
                "narrative_order": False,
                **_SINGLE_SHOT,
                "signature": "coverage",
                "alpha": 0.5,
                "budgets": {"veridical": 2000, "semantic": 0, "episodic": 0, "outline": 0},
                "chunk_mode": "dense",
                "answer_with_signature": True,
                "answer_with_evidence": False,
            },
        ),
        Preset(
            "mia-agent",
            "MiA-Agent: First-K signature init, then per round one UPDATE call over "
            "(query, signature, new passages, evidence notes, candidate summaries) giving "
            "(decision, next query, signature, evidence); query rewrite on; the generator "
            "answers once the agent decides ANSWER (or the budget ends), seeing chunks, "
            "signature and evidence.",
            {
                "signature_mode": "mean",
                "activation": "dense",
                "narrative_order": False,
                "signature": "first-k",
                "alpha": 0.5,
                "signature_update": "llm",
                "budgets": {"veridical": 2000, "semantic": 0, "episodic": 0, "outline": 0},
                "budget_scope": "probe",
                "chunk_mode": "dense",
                "collapse": False,
                "max_rounds": 5,
                "max_probes": 0,
                "encode": "notes",
                "fuse": False,
                "defer_encode": False,
                "query_rewrite": True,
                "answer_policy": "on-decision",
                "answer_with_signature": True,
                "answer_with_evidence": True,
            },
        ),
        Preset(
            "comorag",
            "ComoRAG (Wang et al., 2025): tri-layer retrieval (veridical, semantic, episodic; "
            "2000 tokens each, per probe), Mem-Encode one call per probe and layer, Mem-Fuse "
            "of the most related half of the pool, Try-Answer with an explicit failure signal, "
            "Self-Probe of up to 3 entity-first probes; at most 5 cycles.",
            {
                "activation": "dense",
                "narrative_order": True,
                "signature": "none",
                "alpha": 0.0,
                "signature_update": "none",
                "budgets": {"veridical": 2000, "semantic": 2000, "episodic": 2000, "outline": 0},
                "budget_scope": "probe",
                "chunk_mode": "dense",
                "collapse": False,
                "max_rounds": 5,
                "max_probes": 3,
                "encode": "per-layer",
                "fuse": True,
                "defer_encode": False,
                "query_rewrite": False,
                "answer_policy": "every-round",
                "answer_with_signature": False,
                "answer_with_evidence": True,
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
            "evidence; see docs/agent.md).",
            {
                "signature_mode": "region",
                "activation": "hybrid",
                "narrative_order": False,
                "signature": "coverage",
                "alpha": 0.5,
                "signature_update": "reselect",
                "budgets": {"veridical": 2000, "semantic": 1000, "episodic": 1000, "outline": 500},
                "budget_scope": "round",
                "chunk_mode": "hybrid",
                "collapse": False,
                "max_rounds": 5,
                "max_probes": 3,
                "encode": "batched",
                "fuse": True,
                "defer_encode": True,
                "query_rewrite": False,
                "answer_policy": "every-round",
                "answer_with_signature": False,
                "answer_with_evidence": True,
            },
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
