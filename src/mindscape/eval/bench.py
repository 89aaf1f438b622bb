"""Loaders for the benchmark data in the bench layout (see docs/evaluation.md).

Layout::

    <bench>/manifest.json               datasets, splits and counts
    <bench>/<dataset>/documents.jsonl   one document per line (full text inline)
    <bench>/<dataset>/questions.jsonl   one question per line (with gold answers)

A `BenchQuestion` holds the gold answers and annotator metadata, which a system must never
see. Give a system only `system_view(question)` (and `system_document_view(document)` for
the text); both keep an explicit allow-list of fields, so new gold fields can't leak.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindscape.errors import MindscapeError

BENCH_ENV_VAR = "MINDSCAPE_BENCH"
"""Environment variable that points at the bench directory."""

SPLITS: tuple[str, ...] = ("dev", "test")
"""Splits used in the bench (the split is by document)."""

GOLD_FIELDS: frozenset[str] = frozenset({"answers", "label", "answer_index", "evidence"})
"""Top-level question fields that carry the gold answer; never shown to a system."""

ANNOTATOR_META_FIELDS: frozenset[str] = frozenset(
    {
        "summary",  # narrativeqa_lit documents: the Wikipedia plot summary
        "false_claim_explanation",  # nocha_sample: why the false claim is false
        "real_world_fact_label",  # sfiction_leval: the truth outside the story
        "alternative_answers",  # fairytaleqa: extra reference answers
        "is_question_modified",  # narrativeqa_lit: LiteraryQA edit flags
        "is_answer_modified",
        "pair_index",  # nocha_sample: which claims form a true/false pair
        "explicit_or_implicit",  # fairytaleqa: annotator labels of the answer
        "local_or_summary",
    }
)
"""Annotator metadata (in `meta` of questions or documents); never shown to a system.

`system_view` uses an allow-list, so these are listed for documentation and for the
no-leak test, not for filtering.
"""

SYSTEM_VIEW_FIELDS: tuple[str, ...] = ("qid", "doc_id", "task", "question", "options")
"""The only question fields a system may see."""

TASK_NAMES: dict[str, str] = {
    "open_qa": "open",
    "multiple_choice": "multiple-choice",
    "claim_verification": "claim",
}
"""Bench task name -> the system's task name."""


class BenchError(MindscapeError):
    """A problem with the bench data: missing directory, unknown dataset or split."""


@dataclass(frozen=True)
class BenchDocument:
    """One document (book or story) of a bench dataset."""

    doc_id: str
    """Unique across the bench, prefixed with the dataset (`nqa-…`, `nocha-…`)."""
    dataset: str
    """The dataset directory name."""
    split: str
    """"dev" or "test"; every question of the document has this split."""
    title: str | None
    """The title, where known."""
    text: str
    """The full document text."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Per-dataset extras; may hold annotator fields (e.g. `summary`)."""
    author: str | None = None
    """The author, where known."""
    approx_tokens: int | None = None
    """About the cl100k token count (n_chars / 4.2)."""
    source: str | None = None
    """Where the text came from: `github:<owner>/<repo>@<commit>:<path>`."""


@dataclass(frozen=True)
class BenchQuestion:
    """One question (or claim) with its gold answers. Use `system_view` before showing it."""

    qid: str
    """Unique question id."""
    dataset: str
    """The dataset directory name."""
    split: str
    """"dev" or "test" (the document's split)."""
    doc_id: str
    """The document the question is about."""
    task: str
    """Bench task: open_qa, multiple_choice or claim_verification."""
    question: str
    """The question text, or the claim to verify."""
    options: list[str] | None
    """MC options in order A, B, C, D; claims: ["TRUE", "FALSE"]; open QA: None."""
    answers: list[str]
    """Gold: reference answers (open QA), the gold option text (MC), ["TRUE"]/["FALSE"]."""
    label: str | bool | None
    """Gold: MC letter, or the claim's truth value."""
    answer_index: int | None
    """Gold: index of the gold option in `options`."""
    evidence: list[dict[str, Any]] | None
    """Gold evidence: [{section_id, char_start, char_end, text}] into the document's text."""
    qtype: str | None
    """Question category, where the dataset has one."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Extras; may hold annotator metadata (see ANNOTATOR_META_FIELDS)."""

    @property
    def pair_index(self) -> Any:
        """NoCha claim-pair index (None outside nocha_sample)."""
        return self.meta.get("pair_index")


# --------------------------------------------------------------------------- paths


def resolve_bench_dir(bench_dir: str | os.PathLike[str] | None = None) -> Path:
    """The bench directory: `bench_dir`, else `$MINDSCAPE_BENCH`. Raises BenchError if missing."""
    if bench_dir is None:
        bench_dir = os.environ.get(BENCH_ENV_VAR)
        if not bench_dir:
            raise BenchError(f"no bench directory given and ${BENCH_ENV_VAR} is not set")
    path = Path(bench_dir)
    if not path.is_dir():
        raise BenchError(f"bench directory not found: {path}")
    return path


def read_manifest(bench_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed `manifest.json` of the bench directory."""
    path = resolve_bench_dir(bench_dir) / "manifest.json"
    if not path.is_file():
        raise BenchError(f"manifest.json not found in bench directory {path.parent}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BenchError(f"manifest.json is not valid JSON: {path} ({exc.msg})") from exc


def list_datasets(bench_dir: str | os.PathLike[str]) -> list[str]:
    """Dataset names listed in the bench's manifest.json, in manifest order."""
    return list(read_manifest(bench_dir).get("datasets", {}))


def dataset_splits(bench_dir: str | os.PathLike[str], dataset: str) -> list[str]:
    """The splits the manifest lists for a dataset (BenchError for an unknown dataset)."""
    datasets = read_manifest(bench_dir).get("datasets", {})
    if dataset not in datasets:
        known = ", ".join(datasets) or "none"
        raise BenchError(f"unknown dataset {dataset!r} (known: {known})")
    return list(datasets[dataset].get("splits", {})) or list(SPLITS)


def _dataset_file(
    bench_dir: str | os.PathLike[str], dataset: str, split: str | None, name: str
) -> Path:
    """Check dataset and split against the manifest and return the dataset's jsonl file."""
    splits = dataset_splits(bench_dir, dataset)
    if split is not None and split not in splits:
        raise BenchError(
            f"unknown split {split!r} for dataset {dataset!r} (known: {', '.join(splits)})"
        )
    path = Path(bench_dir) / dataset / name
    if not path.is_file():
        raise BenchError(f"{name} not found for dataset {dataset!r}: {path}")
    return path


def _iter_jsonl(path: Path, dataset: str) -> Iterator[dict[str, Any]]:
    """Stream the JSON objects of a jsonl file, one line at a time (blank lines skipped).

    Each row gets ``dataset`` (the folder's name) where it has none, and ``_where`` (the
    file and line) for the loaders' errors.
    """
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BenchError(f"bad JSON at {path}:{line_no} ({exc.msg})") from exc
            if not isinstance(row, dict):
                raise BenchError(f"{path}:{line_no}: expected a JSON object per line")
            yield {"dataset": dataset, **row, "_where": f"{path}:{line_no}"}


def _require(row: Mapping[str, Any], fields: tuple[str, ...]) -> None:
    """A clear error for a row without one of `fields` (the bench layout's required ones)."""
    missing = [f for f in fields if row.get(f) is None]
    if missing:
        raise BenchError(
            f"{row['_where']}: missing {', '.join(missing)} "
            f"(a row needs {', '.join(fields)}; see docs/evaluation.md)"
        )


# --------------------------------------------------------------------------- loaders

DOCUMENT_FIELDS: tuple[str, ...] = ("doc_id", "split", "text")
"""The fields every documents.jsonl row must have (`dataset` defaults to the folder's name)."""

QUESTION_FIELDS: tuple[str, ...] = ("qid", "split", "doc_id", "task", "question")
"""The fields every questions.jsonl row must have."""


def _document_from_row(row: Mapping[str, Any]) -> BenchDocument:
    """Build a BenchDocument from one documents.jsonl row (checked by the loader)."""
    return BenchDocument(
        doc_id=row["doc_id"],
        dataset=row["dataset"],
        split=row["split"],
        title=row.get("title"),
        text=row["text"],
        meta=dict(row.get("meta") or {}),
        author=row.get("author"),
        approx_tokens=row.get("approx_tokens"),
        source=row.get("source"),
    )


def _question_from_row(row: Mapping[str, Any]) -> BenchQuestion:
    """Build a BenchQuestion from one questions.jsonl row (checked by the loader)."""
    return BenchQuestion(
        qid=row["qid"],
        dataset=row["dataset"],
        split=row["split"],
        doc_id=row["doc_id"],
        task=row["task"],
        question=row["question"],
        options=list(row["options"]) if row.get("options") is not None else None,
        answers=list(row.get("answers") or []),
        label=row.get("label"),
        answer_index=row.get("answer_index"),
        evidence=row.get("evidence"),
        qtype=row.get("qtype"),
        meta=dict(row.get("meta") or {}),
    )


def documents_key(docs: Iterable[BenchDocument]) -> str:
    """A short hash of documents' ids and texts, the cache key of a store that pools them: a
    bench folder whose dataset has the same name but other stories gets another store."""
    from mindscape.memory.cache import content_key

    ordered = sorted(docs, key=lambda d: d.doc_id)
    return content_key(*(part for d in ordered for part in (d.doc_id, d.text)))[:10]


def load_documents(
    bench_dir: str | os.PathLike[str],
    dataset: str,
    split: str | None = None,
    doc_ids: Iterable[str] | None = None,
) -> list[BenchDocument]:
    """Load the documents of a dataset, keeping only the given split and/or doc ids.

    The file is streamed line by line, and reading stops early once every requested
    doc id has been found. Unknown doc ids are simply absent from the result.
    """
    path = _dataset_file(resolve_bench_dir(bench_dir), dataset, split, "documents.jsonl")
    wanted = set(doc_ids) if doc_ids is not None else None
    documents: list[BenchDocument] = []
    for row in _iter_jsonl(path, dataset):
        _require(row, DOCUMENT_FIELDS)  # before the filters, which would skip it silently
        if split is not None and row["split"] != split:
            continue
        if wanted is not None and row["doc_id"] not in wanted:
            continue
        documents.append(_document_from_row(row))
        if wanted is not None and len(documents) == len(wanted):
            break
    return documents


def load_questions(
    bench_dir: str | os.PathLike[str],
    dataset: str,
    split: str | None = None,
    limit: int | None = None,
    doc_ids: Iterable[str] | None = None,
    per_doc: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[BenchQuestion]:
    """Load the questions of a dataset in file order, optionally by split and/or doc ids.

    `per_doc` keeps each document's first that many questions, so that a `limit` spreads over
    several books rather than taking the first book's; `limit` then keeps at most that many
    questions (after filtering). `sample` keeps a random sample of that many of the filtered
    questions, fixed by `seed` and kept in file order (before `limit`).
    """
    if sample is not None:
        if sample < 0:
            raise BenchError(f"sample must be >= 0, got {sample}")
        pool = load_questions(bench_dir, dataset, split, None, doc_ids, per_doc)
        rows = sorted(random.Random(seed).sample(range(len(pool)), min(sample, len(pool))))
        return [pool[i] for i in rows][:limit]
    path = _dataset_file(resolve_bench_dir(bench_dir), dataset, split, "questions.jsonl")
    for name, value in (("limit", limit), ("per_doc", per_doc)):
        if value is not None and value < 0:
            raise BenchError(f"{name} must be >= 0, got {value}")
    wanted = set(doc_ids) if doc_ids is not None else None
    questions: list[BenchQuestion] = []
    taken: dict[str, int] = {}
    for row in _iter_jsonl(path, dataset):
        if limit is not None and len(questions) >= limit:
            break
        _require(row, QUESTION_FIELDS)  # before the filters, which would skip it silently
        if split is not None and row["split"] != split:
            continue
        if wanted is not None and row["doc_id"] not in wanted:
            continue
        doc = str(row["doc_id"])
        if per_doc is not None and taken.get(doc, 0) >= per_doc:
            continue
        taken[doc] = taken.get(doc, 0) + 1
        questions.append(_question_from_row(row))
    return questions


# --------------------------------------------------------------------------- views


def task_of(question: BenchQuestion | Mapping[str, Any] | str) -> str:
    """The system's task name (open, multiple-choice, claim) for a question or a bench task."""
    if isinstance(question, str):
        bench_task = question
    elif isinstance(question, Mapping):
        bench_task = question["task"]
    else:
        bench_task = question.task
    try:
        return TASK_NAMES[bench_task]
    except KeyError:
        raise BenchError(
            f"unknown bench task {bench_task!r} (known: {', '.join(TASK_NAMES)})"
        ) from None


def system_view(question: BenchQuestion) -> dict[str, Any]:
    """What a system may see of a question: qid, doc_id, task, question text and options.

    `task` is the system's task name (see `task_of`). Gold fields (`answers`, `label`,
    `answer_index`, `evidence`), `qtype` and all of `meta` are left out.
    """
    return {
        "qid": question.qid,
        "doc_id": question.doc_id,
        "task": task_of(question),
        "question": question.question,
        "options": list(question.options) if question.options is not None else None,
    }


def system_document_view(document: BenchDocument) -> dict[str, Any]:
    """What a system may see of a document: doc_id, title and text (no `meta`, no summary)."""
    return {"doc_id": document.doc_id, "title": document.title, "text": document.text}


def gold_spans(question: BenchQuestion) -> list[tuple[int, int]]:
    """The gold evidence of a question as `(char_start, char_end)` spans (empty if none)."""
    return [(int(ev["char_start"]), int(ev["char_end"])) for ev in question.evidence or []]
