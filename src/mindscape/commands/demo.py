"""`mindscape demo`: index the bundled story offline and answer a few questions about it.

Answers come from the local model when it is installed (``make demo`` installs it), else
from the extractive reasoner; every answer shows the reference answer, whether it is right,
what the answerer read (the focused passages; the top evidence for the extractive reasoner),
LLM calls, input tokens and seconds. An answer counts as right (:func:`is_right`) when it
names one of the reference's key words (``accept`` in ``data/demo.json``) and says nothing the
story's answer does not: each of its content words is found in the question, a reference
answer or the story's answering sentences (``evidence``), and it negates nothing the
references do not. The key words are chosen so that the judge is consistent: every reference
answer of a question (the demo's own and the bench's, ``answers``) names one of them, and
answers with the right words but the wrong meaning are judged wrong, which
tests/unit/test_demo_judge.py checks.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from importlib import resources
from typing import Any

from mindscape.commands.ask import clip, ordered_by, read_passages
from mindscape.commands.common import (
    add_command,
    add_context_option,
    add_model_options,
    add_quiet_option,
    context_values,
    settings_from_args,
)
from mindscape.context import DEMO_STORE
from mindscape.presets import PRESET_NAMES


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `demo`."""
    p = add_command(sub, "demo", run)
    p.add_argument(
        "--store",
        default=None,
        help=f"store directory (default: {DEMO_STORE}; $MINDSCAPE_STORE is not read)",
    )
    add_model_options(p)
    add_quiet_option(p)
    p.add_argument("--json", action="store_true", help="one JSON object per answer (JSON lines)")
    add_context_option(p, "preset", choices=PRESET_NAMES)
    p.add_argument(
        "--top", type=int, default=3, help="passages shown per question (default %(default)s)"
    )


_NEGATION = re.compile(r"\b(?:not|no|never|nobody|none|nothing|neither|nor|without)\b|n't\b")


def negates(text: str) -> bool:
    """Whether ``text`` says no ("not", "never", "didn't", ...)."""
    return bool(_NEGATION.search(text.lower()))


def is_right(answer: str, item: dict[str, Any]) -> bool:
    """Whether ``answer`` is right for the demo question ``item``.

    It must name one of the reference's key words (``accept``: word starts, any case), and
    say nothing the story's answer does not: every content word of the answer is found in
    the question, a reference answer or the story's answering sentences (``evidence``; a
    shared start of four letters counts: "married" / "marry"), and it does not negate unless
    a reference does. The key word alone let "The prince married Cinderella" pass for the
    grave question (the reference: the father married again): the words a near miss adds
    (the prince) are not the story's answer. The judge errs towards wrong: a right answer
    worded away from the story ("took" for "had taken") is judged wrong.
    """
    from mindscape.reasoners.text import content_words

    low = answer.lower()
    if not any(re.search(rf"\b{re.escape(word.lower())}", low) for word in item["accept"]):
        return False
    references = [item["reference"], *item.get("answers", [])]
    if negates(answer) and not any(negates(r) for r in references):
        return False
    told = " ".join([item["question"], *references, *item.get("evidence", [])])
    known = content_words(told)
    return all(any(_same_word(word, k) for k in known) for word in content_words(answer))


def _same_word(a: str, b: str) -> bool:
    """The same word, or two words of four letters or more that start with the same four."""
    return a == b or (min(len(a), len(b)) >= 4 and a[:4] == b[:4])


def run(args: argparse.Namespace) -> int:
    """Index the bundled story and query it, fully offline.

    Index the bundled Cinderella story (cached after the first run) and answer four
    questions about it, with the local model when installed, else extractively.

    Examples:
        mindscape demo
        mindscape demo --llm extractive --json --quiet
    """
    from mindscape.commands.ask import result_json
    from mindscape.deps import Deps
    from mindscape.embeddings import load_embedder
    from mindscape.graphs.qa import answer_question

    spec = json.loads((resources.files("mindscape") / "data" / "demo.json").read_text())
    path = args.store or DEMO_STORE
    embedder = load_embedder(args.embedder)
    header = _index_story(spec, path, embedder, progress=not args.quiet)
    deps = Deps(embedder=embedder, llm_settings=settings_from_args(args))
    settings = deps.settings()
    if deps.backend_notice:  # not a log notice: --quiet does not hide it
        print(f"mindscape: {deps.backend_notice}", file=sys.stderr)
    if not args.json:
        print(header)
        print(
            f"answering with: {settings.backend}"
            + (f" ({settings.model_name()})" if settings.backend != "extractive" else "")
        )
    total, right, tokens = 0.0, 0, 0
    for item in spec["questions"]:
        question = {"question": item["question"], "doc_id": spec["doc_id"]}
        t0 = time.perf_counter()
        out = answer_question(question, store=path, deps=deps, **context_values(args))
        seconds = time.perf_counter() - t0
        ok = is_right(out["answer"], item)
        total, right, tokens = total + seconds, right + ok, tokens + out.get("tokens_in", 0)
        if args.json:
            row = {"question": item["question"], **result_json(out), "seconds": seconds}
            print(json.dumps({**row, "reference": item["reference"], "right": ok}))
        else:
            _print_answer(item, out, ok, seconds, top=args.top)
    if not args.json:
        n = len(spec["questions"])
        print(
            f"\n{right} of {n} right; {total:.0f}s ({total / n:.1f}s per question), "
            f"{tokens / n:.0f} input tokens per question"
        )
    return 0


def _index_story(spec: dict[str, Any], path: str, embedder: Any, *, progress: bool) -> str:
    """Index the bundled story into the store at `path` (skipped when it is there); the two
    lines that describe it."""
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    text = (resources.files("mindscape") / "data" / spec["file"]).read_text()
    store = MemoryStore(path)
    report = Indexer(store, embedder, progress=progress).index(
        spec["doc_id"], text, title=spec["title"]
    )
    state = "already indexed" if report.skipped else f"indexed in {report.seconds:.1f}s"
    layers = store.summary()["layers"]
    store.close()
    return (
        f"{spec['title']}: {report.tokens} tokens, {state}\n"
        + "layers: "
        + ", ".join(f"{k} {v}" for k, v in layers.items())
    )


def _print_answer(
    item: dict[str, Any], out: dict[str, Any], ok: bool, seconds: float, *, top: int
) -> None:
    """One answer with its reference, cost and `top` passages."""
    print(f"\nQ: {item['question']}")
    print(f"A: {out['answer']}   [{'right' if ok else 'wrong'}]")
    print(f"   reference: {item['reference']}")
    print(
        f"   rounds {out['rounds']}, confidence {out.get('confidence', 0):.2f}, "
        f"LLM calls {out['llm_calls']}, input tokens {out.get('tokens_in', 0)}, {seconds:.1f}s"
    )
    read = read_passages(out)
    if read:  # an LLM answerer read focused passages: show those, not the retrieved chunks
        plural = "s" if len(read) != 1 else ""
        print(f"   read ({len(read)} passage{plural}{ordered_by(out)}):")
        for passage in read[:top]:
            print(f"   · {clip(passage, 200)}")
        return
    for ev in (out.get("evidence") or [])[:top]:
        print(f"   [{ev['layer']} {', '.join(ev['chunk_ids'][:3])}] {clip(ev['text'], 200)}")
