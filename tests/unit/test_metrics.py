"""Unit tests for mindscape.eval.metrics, on hand-made cases with hand-computed answers, and
ROUGE-L against `rouge-score` on real answers (the committed per-question results)."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import pytest
from rouge_score import rouge_scorer

from mindscape.eval.metrics import (
    bootstrap_ci,
    choice_accuracy,
    claim_correct,
    exact_match,
    hit_at_k,
    nocha_pair_accuracy,
    normalize_answer,
    parse_choice,
    parse_claim,
    recall_at_k,
    rouge_l,
    spans_overlap,
    token_f1,
)
from tests.conftest import BENCH, FIXTURE_BENCH

# --------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Cat, sat!", "cat sat"),
        ("  An   apple\ta day ", "apple day"),
        ("a well-to-do farmer", "welltodo farmer"),
        ("“Theatre” — yes…", "theatre yes"),
        ("Thereafter", "thereafter"),  # articles are removed as whole words only
        ("", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


# --------------------------------------------------------------------------- open QA


def test_exact_match_takes_max_over_references() -> None:
    assert exact_match("Teacher.", ["She was a teacher", "teacher"]) == 1.0
    assert exact_match("a teacher", "The teacher!") == 1.0
    assert exact_match("teacher", ["She was a teacher"]) == 0.0
    assert exact_match("anything", []) == 0.0


def test_token_f1_hand_computed() -> None:
    # pred {she, was, teacher}, ref {teacher}: P = 1/3, R = 1, F1 = 0.5
    assert token_f1("She was a teacher", "Teacher.") == pytest.approx(0.5)
    # max over refs: second ref matches exactly
    assert token_f1("She was a teacher", ["Teacher.", "she was the teacher"]) == 1.0
    # repeated tokens are counted with multiplicity: pred (x x y), ref (x y y): overlap 2
    assert token_f1("x x y", "x y y") == pytest.approx(2 / 3)
    assert token_f1("dog", "cat") == 0.0


def test_token_f1_empty_sides() -> None:
    assert token_f1("", "") == 1.0
    assert token_f1("the", "a") == 1.0  # both normalise to nothing
    assert token_f1("", "cat") == 0.0
    assert token_f1("cat", "") == 0.0
    assert token_f1("cat", []) == 0.0


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def committed_rows() -> list[dict]:
    """Every per-question row of the committed results (docs/results/**/*.jsonl)."""
    return [
        json.loads(line)
        for path in sorted(RESULTS.glob("**/*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def real_answer_pairs() -> list[tuple[str, str]]:
    """Pairs of different answers the systems gave to the same question (real answers: names,
    phrases, sentences, punctuation, articles)."""
    by_qid: dict[str, set[str]] = {}
    for row in committed_rows():
        if row.get("answer") and row.get("qid"):
            by_qid.setdefault(row["qid"], set()).add(row["answer"])
    return [
        pair for answers in by_qid.values() for pair in itertools.combinations(sorted(answers), 2)
    ]


def test_rouge_l_is_rouge_score_on_squad_normalised_text() -> None:
    """On hundreds of real answer pairs, rouge_l is what `rouge-score`'s own pipeline gives for
    the SQuAD-normalised texts (where that pipeline's tokenizer splits them as we do: ASCII)."""
    library = rouge_scorer.RougeScorer(["rougeL"])
    pairs = real_answer_pairs()
    checked = 0
    for pred, ref in pairs:
        p, r = normalize_answer(pred), normalize_answer(ref)
        if not (re.fullmatch(r"[a-z0-9 ]+", p) and re.fullmatch(r"[a-z0-9 ]+", r)):
            continue
        want = library.score(r, p)["rougeL"].fmeasure
        assert rouge_l(pred, ref) == pytest.approx(want, abs=1e-12), (pred, ref)
        assert rouge_l(ref, pred) == pytest.approx(library.score(p, r)["rougeL"].fmeasure)
        checked += 1
    assert checked >= 500 and checked >= 0.9 * len(pairs)


def test_rouge_l_tokens_are_squad_not_rouge_scores_own() -> None:
    """Where the two tokenisations differ, rouge_l follows the documented SQuAD normalisation
    (the same tokens as token F1): articles dropped, punctuation deleted, any script kept."""
    library = rouge_scorer.RougeScorer(["rougeL"])
    # articles: rouge-score counts "the" as a matching token
    assert rouge_l("the mill", "the river") == 0.0
    assert library.score("the river", "the mill")["rougeL"].fmeasure == 0.5
    # a name in another script: rouge-score drops every non-ASCII letter, so it scores 0
    assert rouge_l("Мария", "Мария") == 1.0
    assert library.score("Мария", "Мария")["rougeL"].fmeasure == 0.0
    # punctuation is deleted, not a split: "sled-dog" is one token, as in token F1
    assert rouge_l("Sled-dog", "sled dog") == token_f1("Sled-dog", "sled dog") == 0.0


def test_committed_rouge_l_recomputes_exactly() -> None:
    """The rouge_l of every committed per-question row on a dev split is recomputed exactly from
    its answer and the bench's references: the rows of the fixture bench's extractive run
    (tests/bench/runs, so CI checks it), and docs/results' rows where the real bench is here."""
    refs: dict[str, list[str]] = {}
    for bench in (FIXTURE_BENCH, BENCH):
        for path in sorted(bench.glob("*/questions.jsonl")):
            for line in path.read_text().splitlines():
                q = json.loads(line)
                if q.get("split") == "dev":
                    refs[q["qid"]] = q.get("answers") or []
    fixture_rows = [
        json.loads(line)
        for path in sorted((FIXTURE_BENCH / "runs").glob("**/*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    rows = [
        r
        for r in committed_rows() + fixture_rows
        if r.get("qid") in refs and (r.get("metrics") or {}).get("rouge_l") is not None
    ]
    assert len([r for r in rows if r in fixture_rows]) == 6  # 3 questions x 2 presets, in CI too
    for r in rows:
        assert rouge_l(r.get("answer") or "", refs[r["qid"]]) == r["metrics"]["rouge_l"], r["qid"]


def test_rouge_l_hand_computed() -> None:
    # pred: cat sat on mat (4), ref: cat on mat (3); LCS = 3, P = 3/4, R = 1
    assert rouge_l("The cat sat on the mat", "a cat on a mat") == pytest.approx(2 * 0.75 / 1.75)
    # order matters for ROUGE-L but not for token F1
    assert rouge_l("mat on cat", "cat on mat") == pytest.approx(1 / 3)
    assert token_f1("mat on cat", "cat on mat") == 1.0
    # max over references
    assert rouge_l("cat on mat", ["dog", "cat on mat"]) == 1.0
    assert rouge_l("dog", []) == 0.0


def test_rouge_l_beta_weights_recall() -> None:
    # P = 1, R = 1/2: F1 = 2/3; with beta = 2: 5 * 1 * 0.5 / (0.5 + 4) = 5/9
    assert rouge_l("cat", "cat dog") == pytest.approx(2 / 3)
    assert rouge_l("cat", "cat dog", beta=2.0) == pytest.approx(5 / 9)


# --------------------------------------------------------------------------- multiple choice

OPTIONS = ["A dog barks", "Cats purr", "Birds sing", "None of them"]


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        ("B", 1),
        ("b", 1),
        ("(B)", 1),
        ("[B]", 1),
        ("B.", 1),
        (" ( C ) ", 2),
        ("B) Cats purr", 1),
        ("D. None of them", 3),
        ("(C) birds", 2),
        ("[D] none", 3),
        ("The answer is (C)", 2),
        ("Answer: D", 3),
        ("answer is B.", 1),
        ("Cats purr", 1),
        ("cats purr.", 1),
        ("A dog barks", 0),  # option text starting with "A " is the option, not a letter
        ("A", 0),
        (2, 2),
    ],
)
def test_parse_choice_accepts_common_forms(pred: str | int, expected: int) -> None:
    assert parse_choice(pred, OPTIONS) == expected


@pytest.mark.parametrize(
    "pred",
    ["E", "(F)", "the answer is a dog", "Answer is Bob", "", "   ", None, "I am not sure", 7],
)
def test_parse_choice_rejects_unreadable(pred: str | int | None) -> None:
    assert parse_choice(pred, OPTIONS) is None


def test_choice_accuracy() -> None:
    assert choice_accuracy("(B)", "B", OPTIONS) == 1.0
    assert choice_accuracy("Cats purr", "B", OPTIONS) == 1.0
    assert choice_accuracy("B) Cats purr", "B", OPTIONS) == 1.0
    assert choice_accuracy("C", "B", OPTIONS) == 0.0
    assert choice_accuracy("Birds sing", "B", OPTIONS) == 0.0
    assert choice_accuracy("no idea", "B", OPTIONS) == 0.0
    assert choice_accuracy("B", 1, OPTIONS) == 1.0  # gold as an index


def test_choice_accuracy_bad_gold_raises() -> None:
    with pytest.raises(ValueError):
        choice_accuracy("A", "E", OPTIONS)
    with pytest.raises(ValueError):
        choice_accuracy("A", "AB", OPTIONS)


# --------------------------------------------------------------------------- claims


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        ("TRUE", True),
        ("true", True),
        ("Yes", True),
        ("True.", True),
        ("**yes**", True),
        ("FALSE", False),
        ("false", False),
        ("NO", False),
        ("(False)", False),
        (True, True),
        ("maybe", None),
        ("true, because she left", True),
        ("No. She stayed", False),
        ("nothing", None),
        ("", None),
        (None, None),
        (1, None),
    ],
)
def test_parse_claim(pred: object, expected: bool | None) -> None:
    assert parse_claim(pred) is expected


def test_claim_correct() -> None:
    assert claim_correct("true", True)
    assert claim_correct("Yes", "TRUE")
    assert claim_correct("no", ["FALSE"])
    assert not claim_correct("false", True)
    assert not claim_correct("unknown", False)  # unreadable is wrong, whatever the gold
    assert not claim_correct("", True)
    with pytest.raises(ValueError):
        claim_correct("true", "maybe")


def test_nocha_pair_accuracy_needs_every_claim_of_a_pair() -> None:
    records = [
        {"pair_index": 1, "correct": True},
        {"pair_index": 1, "correct": True},
        {"pair_index": 2, "correct": True},
        {"pair_index": 2, "correct": False},
        {"pair_index": 3, "correct": False},
        {"pair_index": 3, "correct": False},
        {"pair_index": 4, "correct": True},
        {"pair_index": 4, "correct": True},
    ]
    assert nocha_pair_accuracy(records) == (0.5, 4)
    # per-claim accuracy would be 5/8; pair accuracy is stricter
    accuracy, n_pairs = nocha_pair_accuracy(records[:4])
    assert (accuracy, n_pairs) == (0.5, 2)


def test_nocha_pair_accuracy_empty() -> None:
    accuracy, n_pairs = nocha_pair_accuracy([])
    assert math.isnan(accuracy)
    assert n_pairs == 0


# --------------------------------------------------------------------------- retrieval


def test_spans_overlap_is_half_open() -> None:
    assert spans_overlap((0, 10), (9, 20))
    assert not spans_overlap((0, 10), (10, 20))  # touching
    assert not spans_overlap((10, 20), (0, 10))
    assert spans_overlap((0, 100), (40, 50))  # containment
    assert not spans_overlap((5, 5), (0, 10))  # empty span


def test_recall_at_k_fraction_of_gold_spans() -> None:
    gold = [(0, 100), (200, 300)]
    retrieved = [(500, 600), (250, 260), (50, 60)]
    assert recall_at_k(retrieved, gold, 1) == 0.0
    assert recall_at_k(retrieved, gold, 2) == 0.5
    assert recall_at_k(retrieved, gold, 3) == 1.0
    assert recall_at_k(retrieved, gold, 10) == 1.0  # fewer than k items is fine
    assert hit_at_k(retrieved, gold, 1) == 0.0
    assert hit_at_k(retrieved, gold, 2) == 1.0


def test_recall_at_k_touching_is_not_a_hit() -> None:
    assert recall_at_k([(100, 200)], [(0, 100)], 1) == 0.0
    assert recall_at_k([(99, 200)], [(0, 100)], 1) == 1.0


def test_recall_at_k_items_with_several_spans() -> None:
    gold = [(0, 100), (200, 300), (400, 500)]
    # the first item (e.g. a summary) covers two chunks, hitting two gold spans at once
    retrieved = [[(10, 20), (210, 220)], [(450, 460)]]
    assert recall_at_k(retrieved, gold, 1) == pytest.approx(2 / 3)
    assert recall_at_k(retrieved, gold, 2) == 1.0


def test_recall_at_k_accepts_evidence_dicts() -> None:
    gold = [{"section_id": "1", "char_start": 0, "char_end": 895, "text": "..."}]
    assert recall_at_k([(800, 900)], gold, 1) == 1.0
    assert recall_at_k([{"char_start": 895, "char_end": 990}], gold, 1) == 0.0


def test_recall_at_k_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        recall_at_k([(0, 1)], [], 1)
    with pytest.raises(ValueError):
        recall_at_k([(0, 1)], [(0, 1)], 0)


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_ci_is_deterministic_and_brackets_the_mean() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    mean, low, high = bootstrap_ci(values, seed=0)
    assert mean == pytest.approx(0.7)
    assert 0.0 <= low < mean < high <= 1.0
    assert bootstrap_ci(values, seed=0) == (mean, low, high)
    assert bootstrap_ci(values, seed=1) != (mean, low, high)


def test_bootstrap_ci_narrows_with_more_data() -> None:
    small = [0.0, 1.0] * 5
    large = [0.0, 1.0] * 500
    _, low_s, high_s = bootstrap_ci(small)
    _, low_l, high_l = bootstrap_ci(large)
    assert high_l - low_l < high_s - low_s
    # for n = 1000 Bernoulli(0.5) the 95% CI half-width is about 1.96 * 0.5 / sqrt(1000)
    assert (high_l - low_l) / 2 == pytest.approx(1.96 * 0.5 / math.sqrt(1000), rel=0.15)


def test_bootstrap_ci_edge_cases() -> None:
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    assert bootstrap_ci([0.25]) == (0.25, 0.25, 0.25)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError):
        bootstrap_ci([0.0, 1.0], alpha=1.5)
