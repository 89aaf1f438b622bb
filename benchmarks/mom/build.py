"""The methods and the memories `mom/recall.py` compares, and how the memories are built.

The methods (a)–(d) name a retrieval preset and the memory it reads; the memories are one
offline store and two the index LLM writes the outline of (one candidate per section, or N
chosen by the evaluator). `Builder` indexes the chosen stories into them story by story and
keeps each LLM story's index cost beside its store (:data:`COSTS_FILE`, read by `mom/costs.py`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import cache_root, config_tag, index_llm_id, llm_namespace, log
from mindscape.indexing.indexer import LLM_PARTS, IndexConfig

DATASET = "fairytaleqa"
COSTS_FILE = "mom_recall_costs.json"
"""Per-story index costs, kept in each LLM store's directory."""


@dataclasses.dataclass(frozen=True)
class Method:
    """One row of the table: a retrieval preset over one of the memories."""

    name: str
    label: str
    preset: str
    """``naive`` (dense chunks) or ``mom`` (late fusion)."""
    memory: str
    """The store it reads: ``offline``, ``single`` or ``selected``."""


def methods(paths: int = 3, k: int = 60) -> list[Method]:
    """(a)–(d), in table order."""
    return [
        Method("naive", "(a) naive dense chunks", "naive", "offline"),
        Method("mom-offline", "(b) MoM late fusion, offline outline", "mom", "offline"),
        Method("mom-single", "(c) MoM late fusion, single LLM memory (N=1)", "mom", "single"),
        Method(
            "mom-selected",
            f"(d) MoM late fusion, selected memory (N={paths}, k={k})",
            "mom",
            "selected",
        ),
    ]


PAIRS: tuple[tuple[str, str], ...] = (
    ("mom-selected", "mom-single"),
    ("mom-selected", "mom-offline"),
    ("mom-selected", "naive"),
)
"""The paired differences reported: (d − c) and (d − b), the issue's target, and (d − a)."""


def letters(rows: Sequence[Method]) -> dict[str, str]:
    """Each method's table letter, ``(a)`` to ``(d)``, by its name."""
    return {m.name: m.label.split()[0] for m in rows}


# --------------------------------------------------------------------------- memories


class CountingEvaluator:
    """An evaluator that counts the reads it passes on (below the store's score cache, so
    only real model reads count). Its ``model_id`` is the wrapped one's, so cached scores are
    shared with ``mindscape index``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id: str = getattr(inner, "model_id", type(inner).__name__)
        self.reads = {"break": 0, "perplexity": 0}

    def yes_probability(self, question: str) -> float | None:
        self.reads["break"] += 1
        return self.inner.yes_probability(question)

    def perplexity(self, context: str, target: str) -> float:
        self.reads["perplexity"] += 1
        return self.inner.perplexity(context, target)


@dataclasses.dataclass
class Memory:
    """One store of the benchmark and how its stories are built."""

    kind: str
    """``offline``, ``single`` or ``selected``."""
    config: IndexConfig
    llm_id: str
    """The index LLM's model id ("offline" without one)."""
    path: Path
    emb_id: str
    store: Any = None
    indexer: Any = None
    costs: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """What the indexer checks a story's record against."""
        return self.config.fingerprint(self.emb_id, self.llm_id)

    def load_costs(self) -> None:
        f = self.path / COSTS_FILE
        self.costs = json.loads(f.read_text()) if f.exists() else {}

    def save_costs(self) -> None:
        f = self.path / COSTS_FILE
        tmp = f.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.costs, indent=1, sort_keys=True))
        tmp.replace(f)


def store_name(split: str, kind: str, config: IndexConfig, llm_id: str) -> str:
    """The cache directory of one memory: by split, kind, index config and LLM (the
    selection's k left out: another k re-indexes in place from the caches)."""
    tag_config = dataclasses.replace(config, mom_k=IndexConfig.mom_k)
    return f"{DATASET}-{split}-mom-{kind}-{config_tag(tag_config, llm_id)}"


def llm_parts(args: argparse.Namespace) -> tuple[str, ...]:
    """The parts the index LLM writes in (c) and (d): the outline (and the triples with
    ``--triples``), or with ``--all-llm-parts`` every part (triples still only with
    ``--triples``)."""
    if args.all_llm_parts:
        return LLM_PARTS
    return ("outline", "triples") if args.triples else ("outline",)


def written_parts(config: IndexConfig) -> list[str]:
    """The parts the LLM writes under `config` (triples only when they are extracted)."""
    return [p for p in config.llm_parts if p != "triples" or config.triples]


def index_configs(args: argparse.Namespace) -> dict[str, IndexConfig]:
    """The index config of each memory."""
    base = IndexConfig(triples=args.triples, llm_parts=llm_parts(args))
    return {
        "offline": IndexConfig(),
        "single": dataclasses.replace(base, mom_paths=1),
        "selected": dataclasses.replace(base, mom_paths=args.mom_paths, mom_k=args.mom_k),
    }


class Builder:
    """Indexes the chosen stories into the three stores, story by story, loading the LLM and
    the evaluator only when some story needs them."""

    def __init__(self, args: argparse.Namespace, embedder: Any) -> None:
        from mindscape.embeddings import embedder_id

        self.args, self.embedder = args, embedder
        self.emb_id = embedder_id(embedder)
        self.llm_id = index_llm_id(args)
        self.memories: dict[str, Memory] = {}
        for kind, cfg in index_configs(args).items():
            llm_id = "offline" if kind == "offline" else self.llm_id
            path = cache_root() / store_name(args.split, kind, cfg, llm_id)
            self.memories[kind] = Memory(kind, cfg, llm_id, path, self.emb_id)
        self._llm: dict[str, Any] = {}
        self.evaluator: CountingEvaluator | None = None

    def open(self) -> None:
        from mindscape.memory.store import MemoryStore

        for m in self.memories.values():
            m.store = MemoryStore(m.path)
            m.load_costs()

    def llm_for(self, kind: str) -> Any:
        """The index LLM of a memory, its answers cached in its store (with ``--share-cache``
        the selected memory shares the single memory's client and cache)."""
        from mindscape.commands.common import llm_from_args

        key = "single" if self.args.share_cache else kind
        if key not in self._llm:
            cache = self.memories[key].store.cache
            self._llm[key] = llm_from_args(llm_namespace(self.args), cache)
            if self._llm[key] is None:
                raise SystemExit("mom/recall.py needs an index LLM: --llm local or openai")
        return self._llm[key]

    def indexer_for(self, m: Memory) -> Any:
        from mindscape.indexing.indexer import Indexer

        if m.indexer is None:
            llm = None if m.kind == "offline" else self.llm_for(m.kind)
            evaluator = None
            if m.kind == "selected" and m.config.mom_paths > 1:
                if self.evaluator is None:
                    self.evaluator = CountingEvaluator(self.local_evaluator())
                evaluator = self.evaluator
            m.indexer = Indexer(
                m.store,
                self.embedder,
                llm=llm,
                config=m.config,
                progress=False,
                evaluator=evaluator,
            )
        return m.indexer

    def local_evaluator(self) -> Any:
        from mindscape.indexing.mom.paths import default_evaluator

        if self.args.local_model:
            from mindscape.llm.logprobs import LocalScorer

            return LocalScorer(self.args.local_model)
        return default_evaluator()

    def build(self, docs: Sequence[Any]) -> None:
        """Every story into every store (the offline one first; each LLM store skips what it
        holds the same way)."""
        for n, doc in enumerate(docs, 1):
            for m in self.memories.values():
                if not holds(m, doc):
                    self.index(m, doc, f"[{n}/{len(docs)}]")

    def index(self, m: Memory, doc: Any, progress: str) -> None:
        """One story into one memory; an LLM memory records what the story cost."""
        ix = self.indexer_for(m)
        ledger = ix.llm.usage if ix.llm is not None else None
        before = ledger.by_role if ledger is not None else {}
        reads0 = dict(self.evaluator.reads) if self.evaluator else {}
        rep = ix.index(doc.doc_id, doc.text, title=doc.title)
        if rep.skipped:
            return
        log(
            f"  {m.kind}: indexed {doc.doc_id} ({rep.tokens} tokens, {rep.seconds:.1f}s) {progress}"
        )
        if m.kind == "offline":
            return
        used = usage_delta(before, ledger.by_role if ledger is not None else {})
        self.record_cost(m, doc, rep, used, reads0)

    def record_cost(
        self,
        m: Memory,
        doc: Any,
        rep: Any,
        used: dict[str, dict[str, int]],
        reads0: Mapping[str, int],
    ) -> None:
        """Keeps one story's index cost beside `m`'s store (unless its first build's stands)."""
        from mindscape.memory.cache import content_key

        h = content_key(doc.text)
        old = m.costs.get(doc.doc_id)
        if old and old.get("content_hash") == h:
            return  # another k, or a rebuild: the first build's cost stands
        reads = {}
        if m.kind == "selected" and self.evaluator is not None:
            reads = {k: v - reads0.get(k, 0) for k, v in self.evaluator.reads.items()}
        m.costs[doc.doc_id] = {
            "content_hash": h,
            "llm": used,
            "score_reads": reads,
            "seconds": round(rep.seconds, 2),
            "outline_seconds": round(rep.stage_seconds.get("outline", 0.0), 2),
            "mom_paths": m.config.mom_paths,
            "mom_k": m.config.mom_k,
            "shared_cache": bool(self.args.share_cache and m.kind == "selected"),
            "built": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        m.save_costs()


def holds(m: Memory, doc: Any) -> bool:
    """Whether `m` holds `doc` indexed as its config asks, with its vectors intact."""
    from mindscape.indexing.writer import is_current, vectors_intact

    row = m.store.cache.doc(doc.doc_id)
    return (
        row is not None
        and is_current(m.store, doc.doc_id, doc.text, m.fingerprint)
        and vectors_intact(m.store, doc.doc_id, row)
    )


def usage_delta(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Per role, what a usage ledger (``Usage.by_role``) gained between two snapshots."""
    out: dict[str, dict[str, int]] = {}
    for role, row in after.items():
        prev = before.get(role, {})
        delta = {k: int(v) - int(prev.get(k, 0)) for k, v in row.items()}
        if any(delta.values()):
            out[role] = delta
    return out
