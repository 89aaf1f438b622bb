"""The fixture bench under ``tests/bench``: the bench layout (``../shared/bench/README.md``) with
one dataset, ``comorag_cinderella``, made from the bundled public-domain story
(``src/mindscape/data/cinderella.txt``) and the demo's questions (``demo.json``) that the real
bench's ``comorag_cinderella`` set asks, with the same ids, references and origin. CI has no
real bench; with this one the eval and index kill-and-resume tests, the ROUGE-L recompute and
the demo judge's bench check run there too. When the real bench is present,
``tests/unit/test_fixture_bench.py`` checks that the fixture's rows are its rows.

    python -m tests.fixture_bench      # rewrite tests/bench from the bundled files

The per-question rows of one extractive eval of it are committed beside it
(``tests/bench/runs/cinderella-extractive``): their ROUGE-L is recomputed from the references.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURE_BENCH = REPO / "tests" / "bench"
DATA = REPO / "src" / "mindscape" / "data"
DATASET = "comorag_cinderella"
DOC_ID = "comorag-cinderella"
ORIGIN = "github:EternityJune25/ComoRAG@a4f84337094a023bc48e70c3f89cc969536c08a0:dataset/cinderella"
"""Where the real bench took the story and its questions (the sample shipped with ComoRAG)."""


def documents() -> list[dict[str, Any]]:
    text = (DATA / "cinderella.txt").read_text(encoding="utf-8")
    return [
        {
            "doc_id": DOC_ID,
            "dataset": DATASET,
            "split": "dev",
            "title": "Cinderella (Grimm)",
            "author": None,
            "source": f"{ORIGIN}/cinderella_1/cinderella.txt",
            "license": "Repository MIT; Grimm's tale (Project Gutenberg translation) is public "
            "domain.",
            "n_chars": len(text),
            "n_words": len(text.split()),
            "approx_tokens": round(len(text) / 4.2),
            "meta": {
                "note": "toy smoke-test sample shipped with the ComoRAG code; not a benchmark"
            },
            "text": text,
        }
    ]


def questions() -> list[dict[str, Any]]:
    """The demo questions with the bench's answers (those ComoRAG's sample asks), in order."""
    demo = json.loads((DATA / "demo.json").read_text(encoding="utf-8"))
    asked = [q for q in demo["questions"] if q.get("answers")]
    return [
        {
            "qid": f"{DOC_ID}-q{i:02d}",
            "dataset": DATASET,
            "split": "dev",
            "doc_id": DOC_ID,
            "task": "open_qa",
            "question": q["question"],
            "answers": q["answers"],
            "options": None,
            "answer_index": None,
            "label": None,
            "evidence": None,
            "qtype": None,
            "meta": {"source": f"{ORIGIN}/cinderella_1/qas.jsonl"},
        }
        for i, q in enumerate(asked, 1)
    ]


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def files() -> dict[str, str]:
    """The fixture bench's files, by path under ``tests/bench``."""
    docs, qs = jsonl(documents()), jsonl(questions())
    tokens = documents()[0]["approx_tokens"]
    manifest = {
        "version": "bench-v1",
        "note": "a fixture made by tests/fixture_bench.py, not the bench",
        "datasets": {
            DATASET: {
                "splits": {
                    "dev": {
                        "documents": 1,
                        "questions": len(questions()),
                        "approx_tokens_total": tokens,
                        "approx_tokens_min": tokens,
                        "approx_tokens_median": tokens,
                        "approx_tokens_max": tokens,
                    }
                },
                "files": {
                    name: {
                        "bytes": len(body.encode()),
                        "sha256": hashlib.sha256(body.encode()).hexdigest(),
                    }
                    for name, body in (("documents.jsonl", docs), ("questions.jsonl", qs))
                },
                "tasks": ["open_qa"],
            }
        },
    }
    return {
        "manifest.json": json.dumps(manifest, indent=2) + "\n",
        f"{DATASET}/documents.jsonl": docs,
        f"{DATASET}/questions.jsonl": qs,
    }


def main() -> None:
    for name, body in files().items():
        path = FIXTURE_BENCH / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        print(path.relative_to(REPO))


if __name__ == "__main__":
    main()
