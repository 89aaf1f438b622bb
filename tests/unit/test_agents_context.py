"""Context resolution, presets, state reducers and input checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from langgraph.runtime import Runtime

from mindscape.context import Context
from mindscape.presets import PRESET_NAMES, PRESETS, get_preset
from mindscape.run import ctx_of, retrieval_settings, signature_params
from mindscape.state import add_unique, add_units, canonical_task, merge_evidence


def _item(uid: str, score: float, round_: int = 1) -> dict:
    return {"unit_id": uid, "score": score, "round": round_, "text": uid}


def test_presets_cover_the_seven_systems() -> None:
    assert PRESET_NAMES == (
        "naive",
        "raptor",
        "mom",
        "mia-rag",
        "mia-agent",
        "comorag",
        "mindscape",
    )
    for name in PRESET_NAMES:
        assert PRESETS[name].reproduces
        ctx = Context(preset=name).resolved()
        assert ctx.max_rounds and ctx.budgets is not None
        assert set(ctx.budgets) == {"veridical", "semantic", "episodic", "outline"}
    with pytest.raises(ValueError, match="unknown preset"):
        get_preset("nope")
    with pytest.raises(ValueError, match="unknown preset"):
        Context(preset="nope")


def test_paper_behaviour_of_presets() -> None:
    r = {n: Context(preset=n).resolved() for n in PRESET_NAMES}
    assert all(r[n].max_rounds == 1 for n in ("naive", "raptor", "mom", "mia-rag"))
    assert (
        r["comorag"].max_rounds == 5
        and r["comorag"].encode == "per-layer"
        and r["comorag"].max_probes == 3
    )
    assert r["comorag"].signature == "none" and r["comorag"].alpha == 0.0
    assert r["mia-rag"].signature == "coverage" and r["mia-rag"].alpha == 0.5
    assert r["mia-agent"].signature == "first-k" and r["mia-agent"].signature_update == "llm"
    assert r["mia-agent"].answer_policy == "on-decision" and r["mia-agent"].query_rewrite
    assert r["raptor"].collapse and r["mom"].chunk_mode == "late-fusion"
    assert r["mindscape"].encode == "batched" and r["mindscape"].budget_scope == "round"


def test_presets_list_only_how_they_differ_from_the_defaults() -> None:
    """Each preset entry is a preset-decided field set to something other than its default;
    the default preset is the defaults themselves."""
    from mindscape.context import preset_defaults

    defaults = preset_defaults()
    for name in PRESET_NAMES:
        for key, value in PRESETS[name].values.items():
            assert key in defaults, (name, key)  # a plain field would be ignored
            assert value != defaults[key], (name, key)
    assert PRESETS["mindscape"].values == {}
    ctx = Context().resolved()
    assert all(getattr(ctx, key) == value for key, value in defaults.items())


def test_explicit_beats_preset_beats_default() -> None:
    ctx = Context(preset="naive", max_rounds=3, budgets={"episodic": 500}).resolved()
    assert ctx.max_rounds == 3
    assert ctx.budgets == {"veridical": 2000, "semantic": 0, "episodic": 500, "outline": 0}
    assert Context(preset="comorag", query_rewrite=True).resolved().query_rewrite is True
    assert Context().resolved().preset == "mindscape"


def test_store_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINDSCAPE_STORE", "/from/env")
    assert Context().resolved().store == "/from/env"
    assert Context(store="/explicit").resolved().store == "/explicit"
    monkeypatch.delenv("MINDSCAPE_STORE")
    assert Context().resolved().store is None


def test_ctx_of_accepts_every_entry_mode() -> None:
    assert ctx_of(Runtime(context=Context(preset="naive"))).preset == "naive"
    assert ctx_of(Runtime(context={"preset": "comorag", "unknown": 1})).max_probes == 3
    assert ctx_of(Runtime(context=None)).preset == "mindscape"
    assert ctx_of(Runtime(context=object())).preset == "mindscape"  # a foreign parent's context
    assert ctx_of(None).preset == "mindscape"


def test_context_validation() -> None:
    with pytest.raises(ValueError, match="alpha"):
        Context(alpha=1.5)
    with pytest.raises(ValueError, match="layers"):
        Context(budgets={"bogus": 1})
    with pytest.raises(ValueError, match="max_probes"):
        Context(max_probes=4)


def test_merge_evidence_dedupes_and_keeps_best_score() -> None:
    merged = merge_evidence(
        [_item("a", 0.5), _item("b", 0.4)], [_item("a", 0.9, 2), _item("c", 0.1, 2)]
    )
    assert [i["unit_id"] for i in merged] == ["a", "b", "c"]
    assert merged[0]["score"] == 0.9 and merged[0]["round"] == 1  # first round it was seen
    assert merge_evidence(None, None) == []


def test_add_units_replaces_same_unit() -> None:
    u = {"probe": "p", "layer": "veridical", "evidence_ids": ["a"], "cue": "old", "round": 1}
    v = {**u, "cue": "new", "round": 2}
    w = {**u, "layer": "episodic"}
    assert [x["cue"] for x in add_units([u], [v, w])] == ["new", "old"]


def test_add_unique_ignores_case_space_and_punctuation() -> None:
    assert add_unique(["Who is Mara?"], ["who is  mara", "Tobin", "tobin."]) == [
        "Who is Mara?",
        "Tobin",
    ]


def test_canonical_task() -> None:
    assert canonical_task(None) == "open"
    assert canonical_task(None, ["a", "b"]) == "multiple-choice"
    assert canonical_task("claim_verification") == "claim"
    assert canonical_task("MC") == "multiple-choice"
    with pytest.raises(ValueError, match="unknown task"):
        canonical_task("poem")


# ---------------------------------------------------------------- deps


def test_deps_are_lazy_and_injected_objects_win(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mindscape.deps import Deps
    from mindscape.errors import StoreError
    from tests.fakes import FakeRetriever, ScriptedChatModel

    monkeypatch.delenv("MINDSCAPE_LLM_BACKEND", raising=False)
    monkeypatch.delenv("MINDSCAPE_LOCAL_MODEL", raising=False)
    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path))  # no local model installed here
    d = Deps()
    assert d.embedder is None and d.store is None and d.chat is None  # nothing built yet
    with pytest.raises(StoreError, match="MINDSCAPE_STORE"):
        d.get_store(Context().resolved())
    from mindscape.memory.retrieval.protocol import MemoryRetriever
    from mindscape.memory.retrieval.retriever import Retriever

    r = FakeRetriever()
    assert isinstance(r, MemoryRetriever) and issubclass(Retriever, MemoryRetriever)
    assert not isinstance(object(), MemoryRetriever)
    injected = Deps(retriever=r, embedder=r.embedder)
    assert injected.get_retriever(Context(store="/ignored").resolved()) is r
    assert injected.backend(Context().resolved()) == "extractive"
    assert Deps(chat=ScriptedChatModel()).backend(Context().resolved()) == "llm"
    assert (
        Deps(chat=ScriptedChatModel()).backend(Context(backend="extractive").resolved())
        == "extractive"
    )
    monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "openai")
    assert Deps().backend(Context().resolved()) == "llm"


def test_a_run_is_resolved_once_and_every_node_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mindscape.deps import Deps
    from mindscape.graphs.qa import build_qa_graph
    from tests.fakes import FakeRetriever

    r = FakeRetriever()
    deps = Deps(retriever=r, embedder=r.embedder)
    resolved: list[Context] = []
    real = Deps._resolve

    def counting(self: Deps, ctx: Context):  # type: ignore[no-untyped-def]
        resolved.append(ctx)
        return real(self, ctx)

    monkeypatch.setattr(Deps, "_resolve", counting)
    ctx = Context(preset="mindscape", backend="extractive", max_rounds=3)
    app = build_qa_graph(deps).compile()
    out = app.invoke({"question": "Where did Tobin hide the gold?"}, context=ctx)
    assert out["rounds"] >= 1 and len(resolved) == 1  # five nodes, every round: one resolve
    run = deps.run(ctx)
    assert run.ctx.signature_k == resolved[0].signature_k and run.retriever is r
    assert deps.run(Runtime(context=ctx)) is run  # a node's runtime finds the same run
    assert deps.run(Context(preset="naive", backend="extractive")) is not run
    assert deps.run(None) is not deps.run(None)  # no context: the defaults, never kept


def test_series_scope_reaches_the_retriever() -> None:
    from mindscape.agents._common import doc_scope

    assert doc_scope({"question": "q", "doc_ids": ["a", "b"], "doc_id": "c"}) == {"a", "b"}
    assert doc_scope({"question": "q", "doc_id": "c"}) == {"c"}
    assert doc_scope({"question": "q"}) is None


@pytest.mark.parametrize(
    "field,value",
    [("chunk_mode", "dens"), ("backend", "offline"), ("encode", "batch"), ("gate", "series")],
)
def test_every_literal_field_is_validated(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{field} must be one of"):
        Context(**{field: value})


def test_input_keys_follow_the_input_schema() -> None:
    from mindscape.graphs import embed, qa
    from mindscape.state import INPUT_KEYS, QAInput

    assert (
        INPUT_KEYS
        == tuple(QAInput.__annotations__)
        == ("question", "doc_id", "doc_ids", "task", "options")
    )
    assert qa.INPUT_KEYS is embed.INPUT_KEYS is INPUT_KEYS


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_retrieval_and_signature_settings_come_from_the_resolved_context(name: str) -> None:
    from mindscape.context import preset_defaults

    ctx = Context(preset=name, hybrid_weight=0.2, k0=30, activation="hybrid").resolved()
    values = preset_defaults() | PRESETS[name].values
    rs = retrieval_settings(ctx, {"veridical": 100})
    assert rs.chunk_mode == values["chunk_mode"] and rs.alpha == values["alpha"]
    assert rs.narrative_order == values["narrative_order"] and rs.hybrid_weight == 0.2
    assert rs.budgets == {"veridical": 100} and retrieval_settings(ctx).budgets == ctx.budgets
    assert retrieval_settings(ctx, {}, signed=False).alpha == 0.0
    sp = signature_params(ctx)
    assert sp.activation == "hybrid" and sp.k0 == 30
    assert rs.signature_params == sp  # the α gate's activation is the run's
    with pytest.raises(ValueError, match="unset"):
        retrieval_settings(Context(preset=name), {})


def test_the_local_model_caps_the_token_budget() -> None:
    from mindscape.agents.budget import spent_budget
    from mindscape.deps import Deps
    from mindscape.llm import LLMSettings
    from tests.fakes import ScriptedChatModel

    def budget(backend: str, **ctx: object) -> int | None:
        d = Deps(chat=ScriptedChatModel(), llm_settings=LLMSettings(backend=backend))  # type: ignore[arg-type]
        return d.token_budget(Context(**ctx).resolved())  # type: ignore[arg-type]

    assert budget("local") == 3000 and budget("openai") == 8000
    assert budget("local", local_max_tokens=None) == 8000
    assert budget("local", max_tokens=2000) == 2000
    assert budget("local", preset="comorag", local_max_tokens=50_000) == 50_000
    assert (
        Deps(llm_settings=LLMSettings(backend="local")).token_budget(
            Context(backend="extractive").resolved()
        )
        == 8000
    )  # no model answers: no cap
    ctx = Context().resolved()  # max_tokens 8000
    state = {"question": "q", "rounds": 1, "tokens_in": 1400, "tokens_out": 100}
    assert spent_budget(state, ctx) is None  # another 1.5K round fits 8000
    assert spent_budget({**state, "token_budget": 3000}, ctx) is None  # 1.5K + 1.5K = 3000
    assert spent_budget({**state, "tokens_in": 1600, "token_budget": 3000}, ctx) == "tokens"
    assert spent_budget({**state, "tokens_in": 10**6, "token_budget": None}, ctx) is None


def test_every_default_is_written_once() -> None:
    """The retriever's standalone defaults are the Context's, through the one mapping; a
    preset-decided field's default is the one in its metadata."""
    from mindscape.context import preset_defaults
    from mindscape.run import default_params, default_settings

    ctx = Context().resolved()
    assert default_settings() == retrieval_settings(ctx)
    assert default_params() == signature_params(ctx)
    assert default_settings(top_n=7).top_n == 7
    defaults = preset_defaults()
    assert {f.name for f in dataclasses.fields(Context) if f.default is None} - {
        "store",  # None reads MINDSCAPE_STORE
        "llm_roles",  # None: the backend decides (run.run_roles)
    } == set(defaults)  # every preset-decided field has a default
    ctx = Context(preset="naive").resolved()  # naive leaves max_tokens to the default
    assert "max_tokens" not in PRESETS["naive"].values
    assert ctx.max_tokens == defaults["max_tokens"]


def test_an_injected_chat_model_without_local_settings_is_not_capped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cap and the roles follow the same rule: an injected chat model is the local model
    only when the deps' settings say so, whatever the environment names."""
    from mindscape.context import LLM_ROLES
    from mindscape.deps import Deps
    from tests.fakes import FakeRetriever, ScriptedChatModel

    monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "local")
    r = FakeRetriever()
    d = Deps(retriever=r, embedder=r.embedder, chat=ScriptedChatModel())
    ctx = Context().resolved()
    assert not d.answers_locally(ctx) and d.token_budget(ctx) == 8000
    assert d.reasoner(ctx).roles == frozenset(LLM_ROLES)  # type: ignore[attr-defined]


def test_one_rule_chooses_what_answers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`choose_backend` decides from the run's backend, the LLM settings and an injected chat
    model; `extractive` resolves nothing, `llm` asks for the model even when none resolves."""
    from mindscape.context import LLM_ROLES, LOCAL_LLM_ROLES
    from mindscape.deps import choose_backend
    from mindscape.llm import LLMSettings
    from mindscape.run import run_roles, token_budget

    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path))  # no local model installed here
    monkeypatch.delenv("MINDSCAPE_LOCAL_MODEL", raising=False)
    auto = LLMSettings(backend="auto")
    local = LLMSettings(backend="local")
    off = choose_backend("extractive", auto)
    assert off.reasoner == "extractive" and off.settings is auto and not off.local
    fallback = choose_backend("auto", auto)
    assert fallback.reasoner == "extractive" and fallback.settings.backend == "extractive"  # type: ignore[union-attr]
    assert fallback.notice and "answering extractively" in fallback.notice
    assert choose_backend("llm", auto).reasoner == "llm"  # building the chat model fails later
    assert choose_backend("auto", local).local
    assert choose_backend("auto", LLMSettings(backend="openai")).reasoner == "llm"
    injected = choose_backend("auto", auto, chat=True)
    assert injected.reasoner == "llm" and injected.settings is auto and not injected.local
    assert choose_backend("auto", local, chat=True).local
    assert choose_backend("auto", None, chat=True).settings is None
    assert run_roles(None, local=True) == list(LOCAL_LLM_ROLES)
    assert run_roles(None, local=False) == list(LLM_ROLES)
    assert run_roles(["probe"], local=True) == ["probe"]
    assert token_budget(8000, 3000, local=True) == 3000
    assert token_budget(8000, 3000, local=False) == 8000
    assert token_budget(None, 3000, local=True) == 3000
    assert token_budget(8000, None, local=True) == 8000


def test_every_auto_run_that_fell_back_carries_the_notice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The notice is kept: a later run on the same deps (the warm process's next question)
    still says why it answers extractively; a run that asked for extractive says nothing."""
    from mindscape.context import Context
    from mindscape.deps import Deps
    from mindscape.llm import LLMSettings

    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path))  # no local model installed here
    monkeypatch.delenv("MINDSCAPE_LOCAL_MODEL", raising=False)
    d = Deps(llm_settings=LLMSettings(backend="auto"))
    first, second = d.choice(Context()), d.choice(Context())
    assert first.reasoner == second.reasoner == "extractive"
    assert first.notice and second.notice == first.notice
    assert d.choice(Context(backend="extractive")).notice is None
