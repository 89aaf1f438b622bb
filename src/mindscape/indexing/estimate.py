"""What an index or an eval would cost, before spending it: LLM calls, tokens and seconds.

Nothing here calls a model or writes a store. The index estimate chunks each document (the
real, streamed chunker), lays out its windows and sections exactly as the indexer does and
renders every index prompt's fixed part, so episodic, outline and triple calls are counted
exactly and their input tokens to within the passages' trimming. Only the semantic tree is
approximate: its clusters come from the embeddings, so its calls are taken as one per
:data:`CHUNKS_PER_CLUSTER` chunks (the ratio measured on bench books and the bundled story)
and its input as every chunk read once more. With N MoM paths (``mom_paths``) each section's
outline call is made N times, and choosing among them costs the evaluator's reads, counted as
``mom_score`` calls and prompt tokens: per candidate, one break question per pair of adjacent
atomic chunks and one perplexity read per chunk, with a chunk per outline item asked for (the
section split evenly among them; about 4 characters a token for the break question's excerpts).
Only the parts the LLM writes (``llm_parts``, as :attr:`IndexConfig.llm_parts`) are counted;
``mom_score`` goes with ``outline``.

The eval estimate counts the answer prompt of one round (passages at the run's passage budget
plus the fixed prompt) and the number of rounds the preset allows under its call and token
budgets: `naive` makes exactly one call, the loop presets between one round and their budget.

Seconds assume the local model's speed on this machine (``MINDSCAPE_PROMPT_TPS``, default
:data:`PROMPT_TPS` prompt tokens per second; ``MINDSCAPE_OUTPUT_TPS``, default
:data:`OUTPUT_TPS` generated tokens per second); an endpoint is usually far faster.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mindscape import prompts
from mindscape.indexing.chunking import Chunk, iter_chunks
from mindscape.indexing.document import SUMMARY_PASSAGE_TOKENS, DocText, summary_words
from mindscape.indexing.indexer import IndexConfig
from mindscape.indexing.mom.outline import SECTION_TOKENS, Section
from mindscape.indexing.mom.paths import BREAK_CHARS
from mindscape.indexing.outline import max_items, sections
from mindscape.indexing.summarize import SentenceBank
from mindscape.indexing.windows import windows
from mindscape.prompts import answer as answer_prompt
from mindscape.prompts import mom as mom_prompt
from mindscape.prompts import outline as outline_prompt
from mindscape.prompts import summarize as summary_prompt
from mindscape.prompts import triples as triples_prompt
from mindscape.tokens import TokenCounter, default_counter

__all__ = [
    "CHUNKS_PER_CLUSTER",
    "CORE_TOKENS",
    "OUTLINE_OUT_PER_ITEM",
    "OUTPUT_TPS",
    "OUT_PER_CALL",
    "PROMPT_TPS",
    "SAMPLED_OUT_FACTOR",
    "TRIPLES_OUT",
    "Cost",
    "answer_round_tokens",
    "config_cost",
    "eval_cost",
    "round_calls",
]

PROMPT_TPS = 37.0
"""Prompt tokens per second of the local 1.5B model on this project's 2-core machines."""
OUTPUT_TPS = 6.0
"""Generated tokens per second of the local model there."""
CHUNKS_PER_CLUSTER = 10.0
"""Chunks per semantic-tree summary, all levels together (bench books: 12.4; the story: 8.5)."""
TRIPLES_OUT = 150
"""Output tokens of one triples call (up to 12 short triples as JSON)."""
OUTLINE_OUT_PER_ITEM = 160
"""Output tokens of one outline item of the greedy path (title, core content, one anchor):
the local model wrote 158 a section on a dev story (FairytaleQA ftqa-black-arts, one item a
section), its cores often whole sentences quoted from the text."""
CORE_TOKENS = 60
"""Tokens of one outline item's core content, as the evaluator's perplexity read sees it."""
SAMPLED_OUT_FACTOR = 1.9
"""A sampled MoM path's output over the greedy path's (temperature 0.7, top-p 0.9): 299
tokens a section against 158 on the same story."""
OUT_PER_CALL = 100
"""Output tokens of one query-time call (the answer JSON; roles cap theirs at 200–500)."""


@dataclass
class Cost:
    """LLM calls and tokens, by part."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    parts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, part: str, calls: int, tokens_in: int, tokens_out: int) -> None:
        """Count `calls` calls of one part."""
        self.calls += calls
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        row = self.parts.setdefault(part, {"calls": 0, "tokens_in": 0, "tokens_out": 0})
        row["calls"] += calls
        row["tokens_in"] += tokens_in
        row["tokens_out"] += tokens_out

    def seconds(self) -> float:
        """Seconds at the local model's speed (see the module docstring)."""
        ptps = float(os.environ.get("MINDSCAPE_PROMPT_TPS") or PROMPT_TPS)
        otps = float(os.environ.get("MINDSCAPE_OUTPUT_TPS") or OUTPUT_TPS)
        return self.tokens_in / ptps + self.tokens_out / otps

    def as_dict(self) -> dict[str, Any]:
        """The figures, seconds included."""
        return {**asdict(self), "seconds_local": round(self.seconds(), 1)}


def _fixed(counter: TokenCounter, system: str, template: str, **values: object) -> int:
    """Tokens of a prompt's fixed part: system message and template without its passages."""
    return counter.count(system) + counter.count(prompts.render(template, **values))


@dataclass(frozen=True)
class _Fixed:
    """Tokens of the index prompts' fixed parts: what each call reads besides its passages."""

    session: int
    cluster: int
    triples: int
    brk: int
    core: int

    @classmethod
    def count(cls, counter: TokenCounter, summary_tokens: int) -> _Fixed:
        """The fixed parts as `counter` counts them, summaries of `summary_tokens`."""
        words = summary_words(summary_tokens)
        return cls(
            session=_fixed(
                counter, summary_prompt.SYSTEM, summary_prompt.SESSION, passages="", max_words=words
            ),
            cluster=_fixed(
                counter, summary_prompt.SYSTEM, summary_prompt.CLUSTER, passages="", max_words=words
            ),
            triples=_fixed(
                counter, triples_prompt.SYSTEM, triples_prompt.USER, passage="", max_triples=12
            ),
            brk=counter.count(prompts.render(mom_prompt.BREAK, first="", second="")),
            core=counter.count(prompts.render(mom_prompt.CORE, core="")),
        )


def config_cost(
    docs: Iterable[tuple[str, str]], config: IndexConfig, counter: TokenCounter | None = None
) -> tuple[Cost, dict[str, int]]:
    """The LLM cost of indexing `(doc_id, text)` pairs with `config` (its chunking, windows,
    summaries, sections, triples, MoM paths and the parts an LLM writes, ``llm_parts``), and
    what the index would hold (chunks, tokens, sessions, outline sections)."""
    parts = config.llm_parts
    counter = counter or default_counter()
    cost, shape = Cost(), {"documents": 0, "tokens": 0, "chunks": 0, "sessions": 0, "sections": 0}
    fixed = _Fixed.count(counter, config.summary_tokens)
    for doc_id, text in docs:
        chunks = list(iter_chunks(text, counter, config.chunk_size, config.chunk_overlap))
        n = len(chunks)
        toks = [c.tokens for c in chunks]
        shape["documents"] += 1
        shape["chunks"] += n
        shape["tokens"] += counter.count_long(text)
        wins = windows(n, config.window)
        shape["sessions"] += len(wins)
        _summaries_cost(cost, parts, toks, wins, fixed, config)
        doc = _layout_doc(doc_id, text, chunks)
        for sec in sections(
            doc, window=config.window, max_section_chunks=config.max_section_chunks
        ):
            idx = doc.chunks_in(sec.start, sec.end)
            if not idx:
                continue  # the outline builder skips a section without chunks
            shape["sections"] += 1
            if "outline" in parts:
                _section_cost(cost, counter, text, sec, len(idx), config.mom_paths, fixed)
        if config.triples and "triples" in parts:
            cost.add("triples", n, n * fixed.triples + sum(toks), n * TRIPLES_OUT)
    return cost, shape


def _layout_doc(doc_id: str, text: str, chunks: list[Chunk]) -> DocText:
    """The document as the outline's sections see it (its chunks; no sentences needed)."""
    bank = SentenceBank([], np.zeros(0, np.int64), np.zeros((0, 1), np.float32))
    return DocText(doc_id, text, chunks, [f"{doc_id}:c{c.index}" for c in chunks], [], bank)


def _summaries_cost(
    cost: Cost,
    parts: Collection[str],
    toks: list[int],
    wins: list[range],
    fixed: _Fixed,
    config: IndexConfig,
) -> None:
    """Count one document's episodic (a call per session) and semantic summaries (a call per
    cluster, :data:`CHUNKS_PER_CLUSTER` chunks to a cluster); a summary reads at most
    ``config.summary_input_tokens`` of its passages when that is set."""
    summary_tokens = config.summary_tokens
    most = config.summary_input_tokens or SUMMARY_PASSAGE_TOKENS
    if "episodic" in parts:
        cost.add(
            "episodic",
            len(wins),
            sum(fixed.session + min(most, sum(toks[i] for i in w)) for w in wins),
            len(wins) * summary_tokens,
        )
    n = len(toks)
    clusters = max(1, round(n / CHUNKS_PER_CLUSTER)) if n > 2 else 1
    if "semantic" in parts:
        cost.add(
            "semantic",
            clusters,
            clusters * fixed.cluster
            + min(sum(toks), clusters * (config.summary_input_tokens or sum(toks)))
            + (clusters - 1) * summary_tokens,
            clusters * summary_tokens,
        )


def _section_cost(
    cost: Cost,
    counter: TokenCounter,
    text: str,
    sec: Section,
    n_chunks: int,
    mom_paths: int,
    fixed: _Fixed,
) -> None:
    """Count one outline section: its `mom_paths` outline calls and, with more than one path,
    the evaluator's reads that choose among them (``mom_score``)."""
    items = max_items(n_chunks)
    body = min(SECTION_TOKENS, counter.count(text[sec.start : sec.end]))
    prompt = _fixed(
        counter,
        outline_prompt.SYSTEM,
        outline_prompt.USER,
        title=sec.title,
        section="",
        max_items=items,
    )
    cost.add(
        "outline",
        mom_paths,
        mom_paths * (prompt + body),
        round(OUTLINE_OUT_PER_ITEM * items * (1 + SAMPLED_OUT_FACTOR * (mom_paths - 1))),
    )
    if mom_paths > 1:
        per_chunk = body // items
        excerpt = min(per_chunk, BREAK_CHARS // 4)
        breaks = (items - 1) * (fixed.brk + 2 * excerpt)
        reads = items * (fixed.core + CORE_TOKENS + per_chunk)
        cost.add(
            "mom_score",
            mom_paths * (2 * items - 1),
            mom_paths * (breaks + reads),
            mom_paths * (items - 1),
        )


def answer_round_tokens(
    question: str,
    options: list[str] | None,
    passage_tokens: int,
    counter: TokenCounter,
    *,
    plain: bool = False,
) -> int:
    """Input tokens of one answer call: the fixed prompt (the plain one the local model gets,
    or the JSON one), the question and its options, and passages filling the budget."""
    system, user = (
        (answer_prompt.PLAIN_SYSTEM, answer_prompt.PLAIN_USER + answer_prompt.PLAIN_OPEN)
        if plain
        else (answer_prompt.SYSTEM, answer_prompt.USER)
    )
    fixed = counter.count(system) + counter.count(user)
    asked = counter.count(question) + sum(counter.count(o) + 2 for o in options or [])
    return fixed + asked + passage_tokens


def round_calls(ctx: Any, roles: Iterable[str]) -> tuple[int, int]:
    """LLM calls of a preset's first round and of each refinement round, given the roles the
    LLM plays (the table in :mod:`mindscape.presets`)."""
    roles = set(roles)
    probes = ctx.max_probes or 0
    answer = 1 if "answer" in roles else 0
    probe = 1 if "probe" in roles and probes and (ctx.max_rounds or 1) > 1 else 0
    update = 1 if "update" in roles and ctx.signature_update == "llm" else 0
    first = answer + probe + update
    later = answer + probe + update
    if "encode" in roles and ctx.encode == "per-layer":
        first += 3  # one Mem-Encode per layer for the question
        later += 3 * max(1, probes)  # and for each probe
    elif "encode" in roles and ctx.encode in ("batched", "notes"):
        later += 1  # one batched call per refinement round (round 1's evidence deferred)
    if "fuse" in roles and ctx.fuse:
        later += 1
    return first, later


def eval_cost(
    questions: Iterable[tuple[str, list[str] | None]], preset: str, *, local: bool
) -> tuple[Cost, Cost]:
    """The least and the most a preset's answers to `questions` cost: one round each, and
    every round the preset's round, call and token budgets allow. Each call is taken to read
    about as much as one answer call (the focused set, else the passage budget, sets both)."""
    from mindscape.context import Context
    from mindscape.run import run_roles, token_budget

    ctx = Context.from_preset(preset).resolved()
    first, later = round_calls(ctx, run_roles(ctx.llm_roles, local=local))
    counter = default_counter()
    cap = token_budget(ctx.max_tokens, ctx.local_max_tokens, local=local)
    least, most = Cost(), Cost()
    for question, options in questions:
        passages = int(ctx.focus_tokens or ctx.llm_passage_tokens or 0)  # focused reading first
        one = answer_round_tokens(question, options, passages, counter, plain=local)
        calls, rounds = first, 1
        while rounds < (ctx.max_rounds or 1) and calls + later <= ctx.max_llm_calls:
            if cap and (calls + later) * (one + OUT_PER_CALL) > cap:
                break
            calls, rounds = calls + later, rounds + 1
        least.add(preset, first, first * one, first * OUT_PER_CALL)
        most.add(preset, calls, calls * one, calls * OUT_PER_CALL)
    return least, most
