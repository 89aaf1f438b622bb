"""Train the local reader's LoRA adapter on FairytaleQA train (``make reader-adapter``).

    python benchmarks/reader/adapter.py examples --train ../shared/train
    python benchmarks/reader/adapter.py train --train ../shared/train --max-examples 152
    python benchmarks/reader/adapter.py export --train ../shared/train --out src/mindscape/data/reader_adapter

1. **examples**: a fixed random sample of the train folder's open questions (``--questions``,
   ``--seed``), each asked through the real QA graph's first round (preset ``naive``) with a
   stand-in chat model, so the reader's prompt is caught exactly as the pipeline renders it:
   the same system text, the same user text, the windows the learned ranker picks. Where
   those windows miss the gold section (FairytaleQA's annotated evidence), the gold section
   takes the place of a window (the last one, or the first, drawn with the question's id):
   the adapter learns to read the passages it will read, with the answer among them. The
   target is the first reference answer. Cached as JSON lines in the model cache; a rerun
   goes on where it stopped.
2. **train**: :func:`mindscape.models.lora.train` over those examples in their fixed order,
   up to ``--max-examples`` in all: checkpoints in the model cache, a progress bar with its
   ETA; a killed run started again goes on from its last checkpoint (no example twice), and
   a later call with a larger ``--max-examples`` continues the same run.
3. **export**: the run's adapter converted to llama.cpp's LoRA GGUF (llama.cpp's own
   converter) into ``--out`` with its sha256 manifest (:mod:`mindscape.models.adapter`).

Only the train folder is trained on; FairytaleQA dev chooses (``reader/bench.py --adapter``);
test is reported once.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import bench_questions, log
from benchmarks.evidence.focus_recall import NotStatedChat, holds_answer
from benchmarks.ranker.train_data import DATASET, trained_on
from benchmarks.reader.ceiling import gold_passages
from mindscape.models import lora
from mindscape.models.cache import cache_root
from mindscape.reasoners.text import content_words
from mindscape.state import EvidenceItem

PRESET = "naive"
"""The graph whose first-round reading the examples copy: one retrieval round, the reader's
plain prompt over the learned ranker's windows."""


def examples_path(args: argparse.Namespace) -> Path:
    return cache_root() / "reader-adapter" / f"examples-q{args.questions}-s{args.seed}.jsonl"


def covers(shown: list[EvidenceItem], gold: list[EvidenceItem], answers: list[str]) -> bool:
    """Whether the shown passages already hold the gold evidence: a reference answer's
    content words (60%), or most of a gold section's content words."""
    text = " ".join(p["text"] for p in shown)
    if holds_answer(text, answers):
        return True
    have = content_words(text)
    return any((w := content_words(g["text"])) and len(w & have) >= 0.8 * len(w) for g in gold)


def with_gold(q: Any, shown: list[EvidenceItem]) -> tuple[list[EvidenceItem], bool]:
    """``shown`` with the gold section in place of one window when they miss it (which one
    drawn with the question's id); ``(passages, gold_added)``."""
    gold = gold_passages(q)
    if not gold or covers(shown, gold, q.answers):
        return shown, False
    if not shown:
        return gold, True
    out = list(shown)
    slot = random.Random(q.qid).randrange(len(out))
    out[slot : slot + 1] = gold
    return out, True


def capture(questions: list[Any], settings: Any) -> Any:
    """Yield ``(question, system, request, shown)`` for each question's first reading, as the
    local reader would be asked (the chat model is a stand-in that reads nothing)."""
    from mindscape.deps import Deps
    from mindscape.eval.bench import system_view
    from mindscape.eval.runner import store_dir
    from mindscape.graphs.qa import answer_question
    from mindscape.llm import LLMSettings
    from mindscape.reasoners.llm import LLMReasoner

    got: list[tuple[str, Any, list[EvidenceItem]]] = []
    real = LLMReasoner.plain_answer

    def recording(self: LLMReasoner, req: Any, shown: list[EvidenceItem], usage: Any) -> Any:
        got.append((self.plain_system, req, list(shown)))
        return real(self, req, shown, usage)

    deps = Deps(chat=NotStatedChat(), llm_settings=LLMSettings(backend="local"))
    LLMReasoner.plain_answer = recording  # type: ignore[method-assign]
    try:
        for q in questions:
            got.clear()
            answer_question(
                system_view(q), preset=PRESET, store=str(store_dir(settings, q.doc_id)),
                deps=deps, max_rounds=1,
            )  # fmt: skip
            if got:
                yield (q, *got[0])
    finally:
        LLMReasoner.plain_answer = real  # type: ignore[method-assign]


def build_examples(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The training examples as rows (cached; a rerun reads what is done and adds the rest):
    an :class:`~mindscape.models.lora.Example`'s fields, the story, whether the gold section
    was put in and how many windows the ranker chose."""
    from mindscape.reasoners.prompting import render_plain

    path = examples_path(args)
    done = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            done[row["qid"]] = row
    ns = argparse.Namespace(bench=args.train, dataset=DATASET, split="train", stores=args.stores)
    questions, settings = bench_questions(ns, sample=args.questions, seed=args.seed)
    questions = [q for q in questions if q.task == "open_qa" and q.answers]
    todo = [q for q in questions if q.qid not in done]
    if todo:
        log(f"capturing the reader's prompt for {len(todo)} of {len(questions)} train questions")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            for n, (q, system, req, shown) in enumerate(capture(todo, settings), 1):
                passages, added = with_gold(q, shown)
                row = {
                    **asdict(lora.Example(q.qid, system, render_plain(req, passages), q.answers[0])),
                    "doc_id": q.doc_id, "gold_added": added, "windows": len(shown),
                }  # fmt: skip
                f.write(json.dumps(row) + "\n")
                f.flush()
                done[q.qid] = row
                if n % 50 == 0:
                    log(f"  {n}/{len(todo)}")
    rows = [done[q.qid] for q in questions if q.qid in done]
    added = sum(r["gold_added"] for r in rows)
    log(f"{len(rows)} examples ({added} with the gold section put in) in {path}")
    return rows


def examples_of(rows: list[dict[str, Any]]) -> list[lora.Example]:
    return [lora.Example(r["qid"], r["system"], r["user"], r["answer"]) for r in rows]


def settings_of(args: argparse.Namespace) -> lora.LoraSettings:
    return lora.LoraSettings(
        rank=args.rank, alpha=2 * args.rank, layers=args.layers, lr=args.lr, seed=args.seed,
        accumulate=args.accumulate, threads=args.threads,
    )  # fmt: skip


def run_folder(args: argparse.Namespace, examples: list[lora.Example]) -> Path:
    from mindscape.models.local import MODEL_SHA256

    return lora.default_run_dir(lora.run_key(settings_of(args), examples, MODEL_SHA256))


def train(args: argparse.Namespace) -> None:
    from mindscape.models.local import require_model

    examples = examples_of(build_examples(args))
    folder = run_folder(args, examples)
    log(f"run folder {folder}")
    model, tokenizer = lora.load_base(require_model(None), threads=args.threads)
    _, result = lora.train(
        model, tokenizer, examples, settings_of(args), folder, max_examples=args.max_examples
    )
    log(
        f"{result.examples_seen} examples seen ({result.resumed_from} before this call), "
        f"{result.steps} optimizer steps, {result.seconds / 3600:.2f} h this call"
    )


def export(args: argparse.Namespace) -> None:
    from peft import set_peft_model_state_dict

    from mindscape.models import adapter
    from mindscape.models.local import MODEL_SHA256, require_model

    rows = build_examples(args)
    folder = run_folder(args, examples_of(rows))
    state = lora.Checkpoints(folder).load()
    if state is None:
        sys.exit(f"reader/adapter.py: no checkpoint in {folder}: run `train` first")
    model, _ = lora.load_base(require_model(None), threads=args.threads)
    peft_model = lora.with_adapter(model, settings_of(args))
    set_peft_model_state_dict(peft_model, state["adapter"])
    out = Path(args.out)
    gguf = lora.convert_to_gguf(peft_model, out / adapter.ADAPTER_FILE)
    order = lora.order(len(rows), settings_of(args).seed)[: state["seen"]]
    info = json.loads((folder / "run.json").read_text())
    adapter.write_manifest(
        out,
        base_sha256=MODEL_SHA256,
        provenance=trained_on(Path(args.train), [rows[i]["doc_id"] for i in order]),
        training={**info, "examples_file": examples_path(args).name},
    )
    log(f"wrote {gguf} ({gguf.stat().st_size:,} bytes) from {state['seen']} examples")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["examples", "train", "export"])
    p.add_argument("--train", default="../shared/train")
    p.add_argument("--stores", default="/tmp/ms_bench/reader-adapter")
    p.add_argument("--questions", type=int, default=800, help="train questions drawn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-examples", type=int, default=None)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--layers", type=int, default=8, help="top decoder layers adapted (0: all)")
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--accumulate", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="src/mindscape/data/reader_adapter")
    args = p.parse_args()
    {"examples": build_examples, "train": train, "export": export}[args.action](args)


if __name__ == "__main__":
    main()
