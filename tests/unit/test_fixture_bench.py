"""The fixture bench (tests/bench) is what tests/fixture_bench.py makes from the bundled story
and the demo's questions, and, where the real bench is here, its comorag_cinderella rows are the
real bench's, byte for byte in meaning."""

from __future__ import annotations

import json

import pytest

from mindscape.eval.bench import load_documents, load_questions, read_manifest
from tests import fixture_bench
from tests.conftest import BENCH, FIXTURE_BENCH


def test_the_committed_fixture_is_what_the_bundled_files_make() -> None:
    for name, body in fixture_bench.files().items():
        assert (FIXTURE_BENCH / name).read_text(encoding="utf-8") == body, (
            f"tests/bench/{name} is stale: python -m tests.fixture_bench"
        )


def test_the_fixture_reads_as_a_bench() -> None:
    assert "comorag_cinderella" in read_manifest(FIXTURE_BENCH)["datasets"]
    (doc,) = load_documents(FIXTURE_BENCH, "comorag_cinderella", "dev")
    questions = load_questions(FIXTURE_BENCH, "comorag_cinderella", "dev")
    assert doc.doc_id == "comorag-cinderella" and len(questions) == 3
    assert all(q.answers and q.doc_id == doc.doc_id for q in questions)


def test_the_fixture_rows_are_the_real_benchs() -> None:
    real = BENCH / "comorag_cinderella"
    if not real.is_dir():
        pytest.skip(f"no bench at {BENCH}")
    for name in ("documents.jsonl", "questions.jsonl"):
        rows = [
            [json.loads(x) for x in (folder / name).read_text().splitlines() if x.strip()]
            for folder in (real, FIXTURE_BENCH / "comorag_cinderella")
        ]
        assert rows[0] == rows[1], name
