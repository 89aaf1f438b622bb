"""`mindscape ask`: answer a question about an indexed book with the QA agent.

    mindscape ask "QUESTION" --store DIR [--doc ID] [--task open|multiple-choice|claim]
                  [--option TEXT ...] [--preset NAME] [--json] [--stream] [--map FILE]

`--json` prints one object (answer, confidence, rounds, evidence with chunk ids and text,
signature, LLM calls, tokens and fallbacks, the backend that answered, the decision trace
round by round, the books the question touched and the answer's quote: :mod:`mindscape.trace`).
When the ``auto`` backend fell back to the extractive reasoner, one line on stderr says why,
``--quiet`` or not. `--map FILE` draws that
trace as a map (SVG, PNG or HTML: :mod:`mindscape.trace.reading_map`). On a terminal, `ask` shows
the step it is in (retrieving, reading round N, refining) on stderr as it goes; `--stream`
shows the agent's progress events instead (on stderr; with `--json`, as JSON lines on stdout
before the result).
Errors a user can fix print one line on stderr and exit with 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from mindscape.commands.common import (
    add_command,
    add_context_option,
    add_model_options,
    add_quiet_option,
    add_store_option,
    context_values,
    report_error,
    settings_from_args,
)
from mindscape.errors import MindscapeError, StoreError
from mindscape.presets import PRESET_NAMES
from mindscape.state import QAInput, answer_step
from mindscape.trace import step_of

if TYPE_CHECKING:
    from mindscape.graphs.ask import OnEvent
    from mindscape.memory.store import MemoryStore

TASKS = ("open", "multiple-choice", "claim")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `ask` on the CLI's subparsers."""
    p = add_command(sub, "ask", run)
    p.add_argument("question", help="the question (or, with --task claim, the claim)")
    add_store_option(p)
    p.add_argument(
        "--doc",
        action="append",
        default=None,
        metavar="ID",
        help="document to search (repeat for a series); default: every document",
    )
    p.add_argument(
        "--task",
        choices=TASKS,
        default=None,
        help="default: multiple-choice when options are given, else open",
    )
    p.add_argument(
        "--option",
        action="append",
        default=None,
        metavar="TEXT",
        help="a multiple-choice option (repeat, in order A, B, C, ...)",
    )
    add_context_option(p, "preset", choices=PRESET_NAMES)
    add_context_option(p, "max_rounds", type=int)
    add_context_option(p, "max_llm_calls", type=int)
    add_context_option(p, "evidence_ranker")
    add_context_option(p, "read_summaries")
    add_context_option(p, "reader")
    add_context_option(p, "verifier", action=argparse.BooleanOptionalAction)
    add_context_option(p, "chunk_mode")
    add_context_option(p, "query_rewrite", "--rewrite", action=argparse.BooleanOptionalAction)
    add_context_option(
        p, "llm_roles", metavar="ROLES", type=_roles, help="comma-separated, e.g. answer,update."
    )
    add_model_options(p)
    _add_output_options(p)
    add_quiet_option(p)
    return p


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """`ask`'s options for what it prints and where the run goes: --json, --stream, --map,
    --thread, --no-warm."""
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--stream", action="store_true", help="show progress events as they happen")
    p.add_argument(
        "--map",
        metavar="FILE",
        default=None,
        help="draw where the answer came from (the book's sessions, the question's activation, "
        "the signature, the passages read each round, the quote) into FILE: .svg, .png or .html",
    )
    p.add_argument(
        "--thread",
        metavar="ID",
        default=None,
        help="keep the run in the store's thread file under ID (`mindscape threads` lists "
        "them): a run stopped mid-question resumes from its last finished node when asked "
        "again on the same thread",
    )
    p.add_argument(
        "--no-warm",
        action="store_true",
        help="answer in this process, without the warm process that keeps the models loaded "
        "between asks (`mindscape serve`; also MINDSCAPE_WARM=0)",
    )


def _roles(text: str) -> list[str] | None:
    """`--llm-roles`: the comma-separated roles (none given: the default)."""
    return [r.strip() for r in text.split(",") if r.strip()] or None


def result_json(out: dict[str, Any]) -> dict[str, Any]:
    """The `--json` object for a QA output."""
    return {
        "answer": out.get("answer", ""),
        "confidence": out.get("confidence", 0.0),
        "sufficient": out.get("sufficient", False),
        "task": out.get("task"),
        "preset": out.get("preset"),
        "rounds": out.get("rounds", 0),
        "llm_calls": out.get("llm_calls", 0),
        "tokens_in": out.get("tokens_in", 0),
        "tokens_out": out.get("tokens_out", 0),
        "llm_fallbacks": out.get("llm_fallbacks", 0),
        "backend": out.get("backend"),
        "backend_notice": out.get("backend_notice"),
        "stop_reason": out.get("stop_reason", ""),
        "answer_round": out.get("answer_round", 0),
        "evidence": [
            {
                k: e.get(k)
                for k in ("unit_id", "layer", "doc_id", "chunk_ids", "text", "score", "round")
            }
            for e in out.get("evidence") or []
        ],
        "signature": [
            {"unit_id": s["unit_id"], "chunk_ids": s["chunk_ids"], "text": s["text"]}
            for s in out.get("signature") or []
        ],
        "trace": out.get("trace") or [],
        "books": out.get("books") or [],
        "quote": out.get("quote"),
    }


def render_text(out: dict[str, Any]) -> str:
    """A human-readable answer with its evidence."""
    lines = [
        f"Answer: {out.get('answer', '')}",
        f"  confidence {out.get('confidence', 0.0):.2f} · {'sufficient' if out.get('sufficient') else 'insufficient'}"
        f" · {out.get('rounds', 0)} round(s) · {out.get('llm_calls', 0)} LLM call(s)"
        f"{fallbacks_note(out)} · stop: {out.get('stop_reason', '')}"
        f" · answered by: {out.get('backend') or '?'}",
        "Evidence:",
    ]
    for e in out.get("evidence") or []:
        text = " ".join(e["text"].split())
        lines.append(
            f"  [{e['layer']} {', '.join(e['chunk_ids'][:3])}{'…' if len(e['chunk_ids']) > 3 else ''}] {text[:200]}"
        )
    read = read_passages(out)
    if read:
        lines.append(f"Read by the answer (round {out.get('answer_round', 0)}{ordered_by(out)}):")
        lines.extend(f"  · {clip(p, 200)}" for p in read)
    books = Counter(e["doc_id"] for e in out.get("evidence") or [] if e.get("doc_id"))
    if books:
        lines.append("Books: " + ", ".join(f"{b} ({n})" for b, n in books.most_common()))
    if out.get("signature"):
        lines.append("Signature: " + ", ".join(s["unit_id"] for s in out["signature"]))
    return "\n".join(lines)


def backend_line(out: dict[str, Any]) -> str | None:
    """The line that says ``auto`` fell back to the extractive reasoner (None when it did
    not): printed on stderr, ``--quiet`` or not, since the answer is then no model's."""
    notice = out.get("backend_notice")
    return f"mindscape: {notice}" if notice else None


def fallbacks_note(out: dict[str, Any]) -> str:
    """``" (1 LLM fallback: ...)"`` when a model reply stayed unusable and the extractive
    reasoner answered in its place, or filled in what a reply left out, so the answer is not
    taken for the model's; else nothing."""
    n = int(out.get("llm_fallbacks") or 0)
    if not n:
        return ""
    return f" ({n} LLM fallback{'s' if n > 1 else ''}: the extractive reasoner stood in)"


def ordered_by(out: dict[str, Any]) -> str:
    """``", ordered by the learned ranker"`` when the answer's round recorded its evidence
    ranker, else nothing."""
    step = answer_step(out)
    ranker = step.get("ranker") if step else None
    return f", ordered by the {ranker} ranker" if ranker else ""


def read_passages(out: dict[str, Any]) -> list[str]:
    """The focused passages the answer's own attempt read, word for word (empty when the
    answerer read whole passages: the extractive reasoner, ``focus_tokens=0``)."""
    step = answer_step(out)
    return list(step.get("passages") or []) if step else []


def clip(text: str, n: int) -> str:
    """``text`` on one line: its first ``n`` characters and, when longer, its last ``n // 2``
    (a focused passage's answer is often near its end)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= n + n // 2 + 5 else f"{flat[:n]} … {flat[-(n // 2) :]}"


def _event_line(event: dict[str, Any]) -> str:
    name = event.get("event", "?")
    long = ("event", "books", "step", "quote")  # the map's data: too long (--json has it)
    rest = " ".join(f"{k}={v}" for k, v in event.items() if k not in long)
    return f"· {name} {rest}"


def show_steps(args: argparse.Namespace) -> bool:
    """Whether `ask` shows the step it is in on the terminal (stderr is one, not --quiet)."""
    return not args.quiet and not args.stream and sys.stderr.isatty()


def run(args: argparse.Namespace) -> int:
    """Answer a question about an indexed book.

    Answer a question with the LangGraph agent: signature, tri-layer retrieval, evidence
    memory, and refinement until it can answer or a budget runs out. A user error prints one
    line on stderr and exits with 2.

    The answer comes from the warm process (`mindscape serve`), which keeps the embedder,
    the store and the local model loaded between asks; the first ask starts it. When it
    cannot answer, one line says why and this process answers (the same answer).

    Examples:
        mindscape ask "Who finds the glass slipper?" --store runs/book
        mindscape ask "Who wins?" --option "the prince" --option "the sisters" --json
        mindscape ask "The sisters are kind." --task claim --preset naive --llm extractive
        mindscape ask "Who finds the glass slipper?" --store runs/book --thread t1
        mindscape ask "Who finds the glass slipper?" --store runs/book --no-warm
        mindscape ask "Who finds the glass slipper?" --store runs/book --map map.html
    """
    from mindscape.serve.warm.client import answer

    try:
        if args.map:
            from mindscape.trace.reading_map import check_format

            check_format(args.map)
        out = answer(args, answer_here)  # the warm process's answer, else this process's
    except (MindscapeError, ValueError) as exc:
        return report_error(exc, args)
    line = backend_line(out)
    if line:  # not a log notice: --quiet does not hide it
        sys.stderr.write(line + "\n")
    sys.stdout.write(
        (json.dumps(result_json(out), ensure_ascii=False) if args.json else render_text(out)) + "\n"
    )
    if args.map:
        from mindscape.trace.reading_map import write_map

        try:
            written = write_map(result_json(out), args.map)
        except MindscapeError as exc:
            return report_error(exc, args)
        if not args.quiet:
            sys.stderr.write(f"map: {written}\n")
    return 0


def _checked_store(args: argparse.Namespace) -> MemoryStore:
    """The store of the request, opened and checked against it (StoreError/ValueError)."""
    from mindscape.deps import open_store

    if not args.store:
        raise StoreError("no store given: pass --store DIR or set MINDSCAPE_STORE")
    store = open_store(args.store)
    known = {d["doc_id"] for d in store.documents()}
    if not known:
        raise StoreError(
            f"the store at {args.store} holds no finished document (run `mindscape index`)"
        )
    for doc in args.doc or []:
        if doc not in known:
            raise StoreError(
                f"unknown document {doc!r} (the store has: {', '.join(sorted(known))})"
            )
    if args.task == "multiple-choice" and not args.option:
        raise ValueError("--task multiple-choice needs --option for each choice")
    from mindscape.embeddings import spec_model_id

    store.check_embedder(spec_model_id(args.embedder))
    return store


def answer_here(args: argparse.Namespace, progress: OnEvent | None = None) -> dict[str, Any]:
    """The QA output for ``ask``'s options `args`, answered in this process through
    :func:`mindscape.graphs.ask.ask` (what the warm process and the MCP tool call too);
    `progress`, when given, hears each progress event of the run as it happens (``mindscape
    mcp``), else the events show as ``--stream`` and the terminal ask. The output as a plain
    dict: what the warm process sends back as JSON."""
    from mindscape.context import Context
    from mindscape.deps import Deps
    from mindscape.graphs.ask import ask

    store = _checked_store(args)
    settings = settings_from_args(args)
    embedder = None
    if args.embedder:
        from mindscape.embeddings import load_embedder

        embedder = load_embedder(args.embedder)
    deps = Deps(store=store, embedder=embedder, llm_settings=settings)
    ctx = Context(**context_values(args), store=args.store)
    docs = args.doc or []
    question: QAInput = {
        "question": args.question,
        "doc_id": docs[0] if len(docs) == 1 else None,
        "doc_ids": docs if len(docs) > 1 else None,
        "task": args.task,
        "options": args.option,
    }
    if args.thread:
        if args.stream:
            raise ValueError("--thread and --stream: choose one")
        return dict(ask(question, ctx, deps, thread=args.thread))
    return dict(ask(question, ctx, deps, on_event=progress or _shown_events(args)))


def _shown_events(args: argparse.Namespace) -> OnEvent | None:
    """What shows a run's progress events: the step it is in on a terminal (stderr), every
    event with ``--stream`` (JSON lines on stdout with ``--json``, else lines on stderr);
    None when nothing shows them."""
    steps = show_steps(args)
    if not (args.stream or steps):
        return None
    if steps:
        sys.stderr.write(f"· {step_of({'event': 'start'})}\n")

    def show(event: dict[str, Any]) -> None:
        if steps:
            step = step_of(event)
            if step:
                sys.stderr.write(f"· {step}\n")
                sys.stderr.flush()
            return
        if args.json:
            sys.stdout.write(
                json.dumps({"progress": event}, ensure_ascii=False, default=str) + "\n"
            )
        else:
            sys.stderr.write(_event_line(event) + "\n")
        (sys.stdout if args.json else sys.stderr).flush()

    return show


def parse_options(argv: list[str]) -> argparse.Namespace:
    """``ask``'s options from `argv` as the command line parses ``mindscape ask ARGV`` (without
    ``--debug``): what the MCP tool hands the warm process or :func:`answer_here`."""
    parser = argparse.ArgumentParser(prog="mindscape")
    add_parser(parser.add_subparsers(dest="command"))
    return argparse.Namespace(**vars(parser.parse_args(["ask", *argv])), debug=False)
