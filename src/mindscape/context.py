"""Run-time settings of the QA graph: every knob, JSON-serialisable, no clients or models.

Precedence for every field: **explicit value > preset > default**. Fields whose default is
``None`` are the ones presets decide (see :mod:`mindscape.presets`); :meth:`Context.resolved`
fills them, from the preset or else from the default in the field's metadata (``_p``), which
is the default preset's (``mindscape``) value: each default is written once, here, and a
preset lists only how it differs. The store path follows explicit > ``MINDSCAPE_STORE`` > none.

Nodes read a run's settings resolved once, through :func:`mindscape.run.ctx_of` (a
``Runtime`` whose context is a :class:`Context`, a dict, or anything else: a foreign parent
graph's context gives the defaults), so the graph works as a script, in Studio and as a subgraph.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import Any, Literal, get_args, get_origin, get_type_hints

from mindscape.memory.types import LAYERS
from mindscape.presets import PRESET_NAMES, get_preset

LLM_ROLES: tuple[str, ...] = ("answer", "probe", "encode", "fuse", "update")
"""The query-time roles an LLM can play (``Context.llm_roles``)."""

LOCAL_LLM_ROLES: tuple[str, ...] = ("answer", "update")
"""The roles the local model plays by default. Its Self-Probe calls (~800 input tokens) came
back with the question re-worded as the probe, and its Mem-Encode cues (~1,600–2,100 tokens)
invented links the passages do not make; the extractive probes (names from the evidence) and
cues (the best sentences) cost no call. At ~40–100 prompt tokens/s that is 10–50 s a call."""

_RANGES: dict[str, tuple[float, float]] = {
    "region_doc_weight": (0, 1),
    "alpha": (0, 1),
    "max_probes": (0, 3),
    "reader_samples": (0, 8),
}
"""The numeric fields with bounds (both included); None passes."""


def _d(description: str) -> dict[str, Any]:
    return {"description": description}


def _p(default: Any, description: str) -> dict[str, Any]:
    """Metadata of a preset-decided field: its doc and the value used when the preset is silent."""
    return {"description": description, "preset_default": default}


@dataclass(kw_only=True)
class Context:
    """Every knob of a QA run. ``None`` means "the preset decides"."""

    # ---- what to run
    preset: str = field(default="mindscape", metadata=_d(f"One of: {', '.join(PRESET_NAMES)}."))
    store: str | None = field(
        default=None,
        metadata=_d("Path of the mindscape store; None reads MINDSCAPE_STORE."),
    )
    backend: Literal["auto", "extractive", "llm"] = field(
        default="auto",
        metadata=_d(
            "Reasoner behind the LLM roles: extractive (deterministic), llm, or auto (llm when "
            "the deps have a chat model, the local model is installed, or "
            "MINDSCAPE_LLM_BACKEND names a model backend; deps.choose_backend decides)."
        ),
    )

    # ---- the signature (MiA)
    signature: Literal["coverage", "first-k", "none"] | None = field(
        default=None,
        metadata=_p("coverage", "Initial signature: coverage-aware greedy, First-K, or none."),
    )
    signature_k: int = field(default=5, metadata=_d("K: most session summaries in σ."))
    k0: int = field(default=50, metadata=_d("K0: query-only candidate chunks that activate σ."))
    lambda_q: float = field(default=1.0, metadata=_d("λQ: weight of query relevance."))
    lambda_c: float = field(default=1.0, metadata=_d("λC: weight of candidate coverage."))
    lambda_d: float = field(default=0.1, metadata=_d("λD: weight of the redundancy penalty."))
    alpha: float | None = field(
        default=None, metadata=_p(0.5, "α in s = (1-α)·s(q,c) + α·s(σ,c); 0 = query only.")
    )
    signature_mode: Literal["mean", "max", "joined", "members", "window", "region"] | None = field(
        default=None,
        metadata=_p(
            "region",
            "How σ scores a unit, s(σ,u): mean | max | joined (summary vectors or text), members "
            "(best member chunk), window (inside σ's windows), region (window + document share).",
        ),
    )
    region_doc_weight: float = field(
        default=1.0,
        metadata=_d(
            "ρ of the region mode: (1-ρ)·(inside σ's windows) + ρ·(σ's share of the unit's "
            "document). 1 makes σ a document router (chosen on dev, docs/retrieval.md)."
        ),
    )
    activation: Literal["dense", "hybrid"] | None = field(
        default=None,
        metadata=_p("hybrid", "The query-only view (E1) that activates σ: dense, or BM25+dense."),
    )
    signature_relevance: Literal["summary", "chunks", "mean"] = field(
        default="chunks",
        metadata=_d("rel(q,s) of a session: its summary, its best candidate chunk, or both."),
    )
    signature_match: Literal["summary", "members", "window"] = field(
        default="members",
        metadata=_d("Coverage match m(s,c): via the summary, the member chunks, or the window."),
    )
    signature_update: Literal["none", "reselect", "llm"] | None = field(
        default=None,
        metadata=_p(
            "reselect",
            "σ update per round: none (static), reselect (greedy with the evidence-augmented "
            "query), llm (MiA UPDATE call; offline backend falls back to reselect).",
        ),
    )

    # ---- retrieval
    budgets: dict[str, int] | None = field(
        default=None,
        metadata=_p(
            {"veridical": 2000, "semantic": 1000, "episodic": 1000, "outline": 500},
            "Token budget per layer {veridical, semantic, episodic, outline}; 0 turns a layer "
            "off. A partial dict overrides only the layers it names (the preset's others stay).",
        ),
    )
    budget_scope: Literal["probe", "round"] | None = field(
        default=None,
        metadata=_p("round", "Budgets per probe (ComoRAG) or shared by all probes of a round."),
    )
    top_n: int = field(default=50, metadata=_d("Candidates per layer before budget packing."))
    chunk_mode: Literal["auto", "dense", "hybrid", "late-fusion"] | None = field(
        default=None,
        metadata=_p(
            "auto",
            "Veridical layer: dense | hybrid (BM25+dense) | late-fusion (MoM) | auto: hybrid "
            "when the question's scope spans several documents (a library, a series), dense "
            "within one book (docs/retrieval.md).",
        ),
    )
    hybrid_weight: float = field(
        default=0.3, metadata=_d("BM25 weight in hybrid chunk ranking and activation.")
    )
    gate: Literal["none", "doc"] = field(
        default="doc",
        metadata=_d("Scale α down when the query's activation spreads over several documents."),
    )
    narrative_order: bool | None = field(
        default=None,
        metadata=_p(
            False, "Return veridical/episodic hits in source order (ComoRAG) instead of by score."
        ),
    )
    collapse: bool | None = field(
        default=None,
        metadata=_p(False, "RAPTOR collapsed tree: rank all layers together by score."),
    )
    collapse_budget: int = field(
        default=3500, metadata=_d("Token budget of the collapsed ranking.")
    )

    # ---- the loop and its budgets
    max_rounds: int | None = field(default=None, metadata=_p(5, "Most retrieval rounds."))
    max_llm_calls: int = field(
        default=100, metadata=_d("Stop refining once this many LLM calls were made.")
    )
    max_tokens: int | None = field(
        default=None,
        metadata=_p(
            8000,
            "Token budget of a question (LLM tokens in+out): refining stops once another round "
            "like the average one so far would pass it (8000; comorag: 300000).",
        ),
    )
    local_max_tokens: int | None = field(
        default=3000,
        metadata=_d(
            "Cap on max_tokens when the local model answers: about five focused rounds, ~30 s at "
            "100 prompt tokens/s (two idle cores). None: no cap."
        ),
    )
    max_probes: int | None = field(
        default=None, metadata=_p(3, "Self-Probe: most new probes per round (≤3).")
    )
    query_rewrite: bool | None = field(
        default=None,
        metadata=_p(False, "Let refinement rewrite the retrieval query (hurts multi-hop)."),
    )
    encode: Literal["none", "per-layer", "batched", "notes"] | None = field(
        default=None,
        metadata=_p(
            "batched",
            "Mem-Encode: none, one call per probe and layer (ComoRAG), one batched call, or "
            "the UPDATE call's evidence notes (MiA).",
        ),
    )
    fuse: bool | None = field(
        default=None, metadata=_p(True, "Mem-Fuse the most related part of the pool.")
    )
    defer_encode: bool | None = field(
        default=None,
        metadata=_p(
            True,
            "Skip Mem-Encode in round 1 and encode that evidence with round 2's (one call fewer; "
            "no encode call at all when the first attempt answers).",
        ),
    )
    fuse_fraction: float = field(
        default=0.5, metadata=_d("Share of the pool fused (ComoRAG: top 50%).")
    )
    confidence_threshold: float = field(
        default=0.5, metadata=_d("A sufficient attempt with at least this confidence is accepted.")
    )
    certainty: bool = field(
        default=True,
        metadata=_d("Cap an answer's confidence by its tokens' mean probability (unsure: refine)."),
    )
    answer_policy: Literal["every-round", "on-decision"] | None = field(
        default=None,
        metadata=_p(
            "every-round",
            "Try an answer every round, or only when UPDATE decides ANSWER / at the last round.",
        ),
    )
    answer_with_signature: bool | None = field(
        default=None, metadata=_p(False, "The answerer sees σ.")
    )
    answer_with_evidence: bool | None = field(
        default=None, metadata=_p(True, "The answerer sees the evidence memory (cues, fused cue).")
    )
    answer_budget: int = field(
        default=6000,
        metadata=_d("Tokens of passages handed to the answerer (before llm_passage_tokens)."),
    )
    llm_passage_tokens: int | None = field(
        default=None,
        metadata=_p(
            1000,
            "Tokens of passages in one LLM prompt (answer, update; split among encode blocks; "
            "half for Self-Probe): the main input cost with a small local model (1000; "
            "comorag: 6000). Raise it for a large endpoint.",
        ),
    )
    focus_tokens: int | None = field(
        default=None,
        metadata=_p(
            600,
            "An LLM answerer reads a focused set of at most this many tokens: the retrieved "
            "chunks' best sentences with their neighbours, in story order; a refining round "
            "reads a new set from its probes' evidence. 0 reads whole chunks packed into "
            "llm_passage_tokens (600; comorag: 0).",
        ),
    )
    mc_scoring: Literal["generate", "logprob"] = field(
        default="generate",
        metadata=_d(
            "Multiple choice with the local model's plain prompt: read the generated letter, or "
            "take the letter the first token most likely is (log-probabilities, one token)."
        ),
    )
    focus_window: int = field(default=2, metadata=_d("Focused reading: sentences either side."))
    evidence_ranker: Literal["learned", "fused"] = field(
        default="learned",
        metadata=_d(
            "What orders the focused reader's sentences of open questions: the learned ranker "
            "(trained on FairytaleQA train; missing or damaged files are an error naming "
            "`make ranker`, never a quiet switch to fused) or the fused ranking (cosine, BM25 "
            "and chunk rank by reciprocal rank fusion)."
        ),
    )
    read_summaries: Literal["off", "routed", "always"] = field(
        default="off",
        metadata=_d(
            "The local model reads a retrieved session summary, then its best window, instead "
            "of its two best windows: never, when the layer router (trained on FairytaleQA "
            "train) says an open question needs it, or always (presets with the episodic "
            "layer only). Off: no dev run has shown either to help."
        ),
    )
    reader: Literal["plain", "demos"] = field(
        default="plain",
        metadata=_d(
            "How the local model is asked: the plain prompt, or the plain prompt after three "
            "worked examples from FairytaleQA train in its system message (cached by "
            "llama.cpp: input tokens, not seconds). On FairytaleQA dev the examples help the "
            "reader given the gold evidence, not the pipeline reading its windows."
        ),
    )
    verifier: bool = field(
        default=False,
        metadata=_d(
            "A plain open answer's confidence is the answer verifier's P(right) (trained on "
            "the local model's answers to FairytaleQA train by `make verifier`; shipped), which "
            "the loop refines on and picks the round by; off: the checks' level capped by the "
            "reader's token probability. Default: off (on 175 FairytaleQA dev questions it "
            "scored no better than the capped certainty, at twice the input tokens and "
            "seconds); it was trained on the local model's answers."
        ),
    )
    reader_samples: int = field(
        default=3,
        metadata=_d(
            "With the verifier: answers sampled over the reader's cached prompt, whose "
            "agreement with its answer the verifier reads (output tokens only)."
        ),
    )
    focus_windows: int = field(
        default=2,
        metadata=_d(
            "The local model reads only this many focused windows, the best first (0: all of "
            "them, in story order): as right as all of them on dev, for fewer input tokens."
        ),
    )
    refine_window: float = field(
        default=1.5,
        metadata=_d(
            "A refining round's answer window, as a multiple of llm_passage_tokens: the "
            "question's round-1 passages first, then the round's new evidence."
        ),
    )
    llm_roles: list[str] | None = field(
        default=None,
        metadata=_d(
            "Query-time roles the LLM plays (answer, probe, encode, fuse, update); the others "
            "are extractive. Default: every role with an endpoint; answer and update with the "
            "local model, whose probes and cues cost 800-2100 input tokens a call and add "
            "little (see docs/agent.md)."
        ),
    )
    evidence_out: int = field(default=8, metadata=_d("Evidence items returned with the answer."))
    llm_concurrency: int = field(
        default=4, metadata=_d("Parallel LLM calls for per-layer encoding.")
    )

    # ---- offline reasoner calibration (MiniLM cosines)
    open_threshold: float = field(
        default=0.75,
        metadata=_d(
            "Offline open QA: best sentence score that counts as sufficient (FairytaleQA dev, "
            "MiniLM: the top ~40% of questions, whose top sentence is gold evidence ~70% of the time)."
        ),
    )
    claim_threshold: float = field(
        default=0.55, metadata=_d("Offline claims: support score above which a claim is TRUE.")
    )
    mc_margin: float = field(
        default=0.02,
        metadata=_d("Offline multiple choice: score margin that counts as sufficient."),
    )
    offline_span: bool = field(
        default=True,
        metadata=_d("Offline open QA answers with a short span, not the whole sentence."),
    )

    def __post_init__(self) -> None:
        get_preset(self.preset)  # raises on an unknown name
        for name, allowed in _literal_fields().items():
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise ValueError(
                    f"{name} must be one of {', '.join(map(str, allowed))}; got {value!r}"
                )
        for name, (low, high) in _RANGES.items():
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
        if self.budgets is not None:
            unknown = set(self.budgets) - set(LAYERS)
            if unknown:
                raise ValueError(f"unknown layers in budgets: {sorted(unknown)}")
        if self.llm_roles is not None:
            roles = sorted(set(self.llm_roles) - set(LLM_ROLES))
            if roles:
                raise ValueError(
                    f"llm_roles must be among {', '.join(LLM_ROLES)}; got {', '.join(roles)}"
                )

    # ---- resolution
    def resolved(self) -> Context:
        """A copy with every ``None`` filled: explicit > preset > default; store from env."""
        preset = get_preset(self.preset).values
        defaults = preset_defaults()
        values: dict[str, Any] = {}
        for f in fields(self):
            own = getattr(self, f.name)
            if f.name == "budgets":
                base = dict(preset.get("budgets", defaults["budgets"]))
                base.update(own or {})
                values["budgets"] = {layer: int(base.get(layer, 0)) for layer in LAYERS}
            elif own is None and f.name in defaults:
                values[f.name] = preset.get(f.name, defaults[f.name])
            elif own is None and f.name in preset:
                values[f.name] = preset[f.name]
        if self.store is None:
            values["store"] = env_store()
        return replace(self, **values)

    @classmethod
    def from_preset(cls, preset: str, **overrides: Any) -> Context:
        """A Context for `preset` with explicit overrides (None values are ignored)."""
        return cls(preset=preset, **{k: v for k, v in overrides.items() if v is not None})

    def as_dict(self) -> dict[str, Any]:
        """Plain-data view (what Studio shows)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEMO_STORE = ".mindscape/demo-store"
"""Where ``mindscape demo`` indexes the bundled story (apart from the store `index` and `ask`
use by default); the chat graph's book when no store is set."""


def env_store() -> str | None:
    """The store named by ``MINDSCAPE_STORE`` (an empty value counts as unset): the one
    place that reads it."""
    return os.environ.get("MINDSCAPE_STORE") or None


@cache
def _literal_fields() -> dict[str, tuple[Any, ...]]:
    """The allowed values of each ``Literal`` field (``None`` aside)."""
    hints = get_type_hints(Context)
    out: dict[str, tuple[Any, ...]] = {}
    for name, hint in hints.items():
        args = get_args(hint) if get_origin(hint) is not Literal else (hint,)
        literals = [a for a in args if get_origin(a) is Literal]
        if literals:
            out[name] = tuple(v for lit in literals for v in get_args(lit))
    return out


@cache
def preset_defaults() -> dict[str, Any]:
    """The value of each preset-decided field when its preset leaves it out (from the fields'
    metadata: each default is written once, beside its field)."""
    return {
        f.name: f.metadata["preset_default"]
        for f in fields(Context)
        if "preset_default" in f.metadata
    }
