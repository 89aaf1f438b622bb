"""The LLM roles' prompts, filled from their requests.

The blocks first: passages, evidence notes, session summaries and an earlier attempt as
delimited text (document text only through :func:`mindscape.prompts.as_data`), cut to a
token budget, and the answer prompt's task rules and options. Then one ``render_*`` per
role, filling its template from :mod:`mindscape.prompts` with those blocks; ``passage_tokens``
is the reasoner's passage budget (see :class:`~mindscape.reasoners.llm.LLMReasoner`).
"""

from __future__ import annotations

from mindscape import prompts
from mindscape.answers import LETTERS
from mindscape.llm import approx_tokens
from mindscape.memory.retrieval.ranking import pack_budget
from mindscape.prompts import answer as answer_prompt
from mindscape.prompts import encode as encode_prompt
from mindscape.prompts import fuse as fuse_prompt
from mindscape.prompts import probe as probe_prompt
from mindscape.prompts import update as update_prompt
from mindscape.reasoners.base import AnswerRequest, EncodeRequest, RefineRequest, UpdateRequest
from mindscape.state import Attempt, EvidenceItem, EvidenceNote, SignatureItem

NONE_TEXT = "(none)"
"""What an empty block reads as."""
FUSE_MAX_WORDS = 200
"""The longest Mem-Fuse cue the fuse prompt asks for, in words."""


def format_passages(items: list[EvidenceItem]) -> str:
    """Evidence items as delimited blocks with their ids."""
    if not items:
        return NONE_TEXT
    return "\n".join(
        prompts.render(
            encode_prompt.PASSAGE,
            unit_id=i["unit_id"],
            text=prompts.as_data(" ".join(i["text"].split())),
        )
        for i in items
    )


def top_passages(items: list[EvidenceItem], budget: int) -> list[EvidenceItem]:
    """The best-scoring items that fit `budget` tokens, best first."""
    return pack_budget(sorted(items, key=lambda i: -i["score"]), lambda i: int(i["tokens"]), budget)


def within(items: list[EvidenceItem], budget: int) -> list[EvidenceItem]:
    """The best-scoring items that fit `budget` tokens, kept in their given order."""
    keep = {id(i) for i in top_passages(items, budget)}
    return [i for i in items if id(i) in keep]


def in_order(items: list[EvidenceItem], budget: int) -> list[EvidenceItem]:
    """The items, in their (priority) order, while they fit `budget` tokens."""
    return pack_budget(items, lambda i: int(i["tokens"]), budget)


def format_notes(units: list[EvidenceNote], fused: str = "", budget: int | None = None) -> str:
    """Memory units as lines, with the fused cue last; with `budget` (approximate tokens),
    the latest lines that fit, the fused cue first among them."""
    lines = [
        prompts.as_data(f"- [{u['layer']}] {u['probe']}: {u['cue']}") for u in units if u.get("cue")
    ]
    if fused:
        lines.append(prompts.as_data(f"- [synthesis] {fused}"))
    if budget is not None:
        kept: list[str] = []
        for line in reversed(lines):
            if approx_tokens("\n".join([line, *kept])) > budget:
                break
            kept.insert(0, line)
        lines = kept
    return "\n".join(lines) or NONE_TEXT


def format_summaries(items: list[SignatureItem], budget: int | None = None) -> str:
    """Session summaries as delimited blocks with their ids; with `budget` (approximate
    tokens), the first ones that fit (σ's order: the most useful first), and at least the
    first, cut to the budget."""
    if not items:
        return NONE_TEXT
    texts = [" ".join(s["text"].split()) for s in items]
    if budget is not None:
        used = [approx_tokens(t) + 12 for t in texts]  # + the block's tags and id
        keep = next((k for k in range(1, len(texts)) if sum(used[: k + 1]) > budget), len(texts))
        texts = texts[:keep]
        texts[0] = texts[0][: max(40, 4 * (budget - 12))]
    return "\n".join(
        prompts.render(update_prompt.ITEM, unit_id=s["unit_id"], text=prompts.as_data(t))
        for s, t in zip(items, texts, strict=False)
    )


def format_attempt(attempt: Attempt | None) -> str:
    """One line describing an answer attempt."""
    if attempt is None:
        return "no attempt yet"
    verdict = "sufficient" if attempt["sufficient"] else "NOT enough evidence"
    return (
        f"{attempt['answer'] or '(no answer)'} ({verdict}, confidence {attempt['confidence']:.2f})"
    )


_RULES = {  # task → (the JSON prompt's rules, the plain prompt's rules)
    "multiple-choice": (answer_prompt.CHOICE_RULES, answer_prompt.PLAIN_CHOICE),
    "claim": (answer_prompt.CLAIM_RULES, answer_prompt.PLAIN_CLAIM),
}


def task_rules(task: str, *, plain: bool = False) -> str:
    """The answer prompt's rules for the task; with `plain`, the plain prompt's."""
    json_rules, plain_rules = _RULES.get(task, (answer_prompt.OPEN_RULES, answer_prompt.PLAIN_OPEN))
    return plain_rules if plain else json_rules


def options_block(req: AnswerRequest) -> str:
    """The lettered options of a multiple-choice question ("" otherwise)."""
    if req.task != "multiple-choice" or not req.options:
        return ""
    lines = [
        prompts.render(answer_prompt.OPTION, letter=LETTERS[i], text=prompts.as_data(o))
        for i, o in enumerate(req.options)
    ]
    return "Options:\n" + "\n".join(lines) + "\n"


def focus_query(req: AnswerRequest) -> str:
    """What the focused set is chosen for: the question, with the options of a multiple-choice
    question (its question alone is often vague: "Why did the author ...?")."""
    if req.task == "multiple-choice" and req.options:
        return " ".join([req.question, *req.options])
    return req.question


# --------------------------------------------------------------------------- role prompts


def render_encode(req: EncodeRequest, passage_tokens: int) -> str:
    """Mem-Encode's prompt: one block per group (ids ``b1``, ``b2``, ...), each with an equal
    share of the passage budget (at least 200 tokens), and the fuse rule when it fuses."""
    share = max(200, passage_tokens // len(req.groups))
    blocks = "\n\n".join(
        prompts.render(
            encode_prompt.BLOCK,
            block_id=f"b{n + 1}",
            layer=g.layer,
            probe=g.probe.replace('"', "'"),
            passages=format_passages(within(g.items, share)),
        )
        for n, g in enumerate(req.groups)
    )
    return prompts.render(
        encode_prompt.USER,
        question=req.question,
        blocks=blocks,
        memory=format_notes(req.history),
        fuse_rule=encode_prompt.FUSE_RULE if req.fuses else encode_prompt.NO_FUSE_RULE,
    )


def render_fuse(question: str, units: list[EvidenceNote]) -> str:
    """Mem-Fuse's prompt: the units' findings, one line each."""
    notes = "\n".join(
        prompts.render(
            fuse_prompt.NOTE, probe=u["probe"], layer=u["layer"], cue=prompts.as_data(u["cue"])
        )
        for u in units
    )
    return prompts.render(
        fuse_prompt.USER, question=question, notes=notes or NONE_TEXT, max_words=FUSE_MAX_WORDS
    )


def render_answer(
    req: AnswerRequest, focused: list[EvidenceItem], passage_tokens: int
) -> tuple[str, list[EvidenceItem]]:
    """Try-Answer's JSON prompt and the passages it shows: the focused set, else the
    passages in order within the window (the request's, else `passage_tokens`) less what σ
    and the memory take (a quarter of `passage_tokens` each at most), and 200 at least."""
    signature_block = (
        prompts.render(
            answer_prompt.SIGNATURE_BLOCK,
            signature=format_summaries(req.signature, budget=passage_tokens // 4),
        )
        if req.signature
        else ""
    )
    memory_block = (
        prompts.render(
            answer_prompt.MEMORY_BLOCK,
            memory=format_notes(req.notes, req.fused, budget=passage_tokens // 4),
        )
        if req.notes or req.fused
        else ""
    )
    # the passage budget covers everything read: σ and memory a quarter each at most, so
    # passages keep at least half of it; a refining round may widen the window
    window = req.passage_tokens or passage_tokens
    shown = focused or in_order(
        req.passages, max(200, window - approx_tokens(signature_block + memory_block))
    )
    prompt = prompts.render(
        answer_prompt.USER,
        signature_block=signature_block,
        memory_block=memory_block,
        passages=format_passages(shown),
        task_rules=task_rules(req.task),
        question=req.question,
        options_block=options_block(req),
    )
    return prompt, shown


def render_plain(req: AnswerRequest, shown: list[EvidenceItem]) -> str:
    """Try-Answer's plain prompt (no JSON, for a small model) over the passages `shown`."""
    return prompts.render(
        answer_prompt.PLAIN_USER,
        passages="\n\n".join(prompts.as_data(p["text"]) for p in shown) or NONE_TEXT,
        question=req.question,
        options_block=options_block(req),
        rules=task_rules(req.task, plain=True),
    )


def render_probe(req: RefineRequest, passage_tokens: int) -> str:
    """Self-Probe's prompt: the best passages within half the passage budget, the memory,
    the probes made so far and the latest attempt."""
    return prompts.render(
        probe_prompt.USER,
        question=req.question,
        query=req.query,
        attempt=format_attempt(req.attempt),
        passages=format_passages(top_passages(req.passages, passage_tokens // 2)),
        memory=format_notes(req.notes),
        previous="\n".join(f"- {p}" for p in req.previous_probes) or NONE_TEXT,
        max_probes=req.max_probes,
        rewrite_rule=probe_prompt.REWRITE_RULE if req.rewrite else probe_prompt.NO_REWRITE_RULE,
    )


def render_update(req: UpdateRequest, passage_tokens: int) -> str:
    """UPDATE's prompt: σ_t, the candidates, the passages in order within the passage
    budget and the memory."""
    return prompts.render(
        update_prompt.USER,
        question=req.question,
        query=req.query,
        signature=format_summaries(req.signature),
        candidates=format_summaries(req.candidates),
        passages=format_passages(in_order(req.passages, passage_tokens)),
        memory=format_notes(req.notes),
        k=req.k,
        rewrite_rule=update_prompt.REWRITE_RULE if req.rewrite else update_prompt.NO_REWRITE_RULE,
    )
