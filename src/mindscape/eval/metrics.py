"""Scoring functions for the benchmark: answer matching, retrieval recall, bootstrap CIs.

Every function here is pure (no I/O, no global state) and works on plain Python values,
so it can be unit-tested on hand-made cases.

Answer metrics
    `normalize_answer` is the SQuAD normalisation (from :mod:`mindscape.answers`). `exact_match`, `token_f1` and `rouge_l`
    compare a prediction with one or more references and take the **max over references**
    (NarrativeQA and FairytaleQA ship two references per question).
    `rouge_l` is `rouge-score`'s ROUGE-L (the library the papers' evaluations use: its LCS,
    precision and recall) over the same SQuAD-normalised tokens as `token_f1`: the library is
    given `normalized_tokens` as its tokenizer. Its own tokenizer would keep the articles,
    split words at punctuation instead of deleting it ("well-to-do" -> 3 tokens) and drop
    every non-ASCII letter; `tests/unit/test_metrics.py` measures that difference on real
    answers. `token_f1` stays written here: no packaged SQuAD F1 fits (the `evaluate`
    library's "squad" metric downloads its script at run time, `torchmetrics`' drops only
    ASCII punctuation and scores batches), and it is a few lines of the official script.

Choice and claim metrics
    `choice_accuracy` and `claim_correct` read an answer with :mod:`mindscape.answers`
    (`parse_choice`: "B", "(B)", "[B]", "B) text", "Answer: B", or the option text;
    `parse_claim`: a leading true/false verdict), the same reader the reasoners use. `nocha_pair_accuracy` scores NoCha claim
    pairs: a pair counts only if every claim of that pair is correct.

Retrieval metrics
    `recall_at_k` and `hit_at_k` compare ranked retrieved character spans with gold evidence
    spans. Spans are half-open `[start, end)`: spans that only touch do not overlap.

Confidence intervals
    `bootstrap_ci` is a seeded percentile bootstrap of the mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from numbers import Integral
from typing import Any

import numpy as np

from mindscape.answers import (
    as_references,
    letter_index,
    normalize_answer,
    normalized_tokens,
    parse_choice,
    parse_claim,
)
from mindscape.answers import token_f1 as token_f1  # scored where answers are read; re-exported

Span = tuple[int, int]
"""A half-open character interval `[start, end)`."""


# --------------------------------------------------------------------------- normalisation


# --------------------------------------------------------------------------- open QA


def exact_match(pred: str, refs: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised reference, else 0.0.

    No references gives 0.0.
    """
    pred_norm = normalize_answer(pred)
    return max(
        (float(pred_norm == normalize_answer(ref)) for ref in as_references(refs)), default=0.0
    )


class _SquadTokens:
    """The tokenizer handed to `rouge-score`: SQuAD-normalised whitespace tokens."""

    def tokenize(self, text: str) -> list[str]:
        return normalized_tokens(text)


@cache
def _rouge_l_scorer() -> Any:
    """`rouge-score`'s ROUGE-L scorer over SQuAD tokens (imported on first use: it loads nltk)."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_SquadTokens())


def _rouge_l_single(pred: str, ref: str, beta: float) -> float:
    """ROUGE-L F-measure for one reference. If either side has no token: 1.0 only if both
    have none (`rouge-score` would give 0.0 for two empty answers)."""
    pred_tokens, ref_tokens = normalized_tokens(pred), normalized_tokens(ref)
    if not pred_tokens or not ref_tokens:
        return float(pred_tokens == ref_tokens)
    score = _rouge_l_scorer().score(ref, pred)["rougeL"]
    if beta == 1.0:
        return float(score.fmeasure)
    p, r = score.precision, score.recall
    if p == 0 or r == 0:
        return 0.0
    beta2 = beta * beta
    return float((1 + beta2) * p * r / (r + beta2 * p))


def rouge_l(pred: str, refs: str | Iterable[str], beta: float = 1.0) -> float:
    """ROUGE-L F-measure over SQuAD-normalised tokens, max over references (`rouge-score`).

    precision = LCS / len(pred), recall = LCS / len(ref),
    F = (1 + beta^2) * P * R / (R + beta^2 * P). `beta=1.0` (the default) is the plain F1
    that `rouge-score` reports; the original NarrativeQA scripts used beta=1.2.
    No references gives 0.0.
    """
    return max((_rouge_l_single(pred, ref, beta) for ref in as_references(refs)), default=0.0)


# --------------------------------------------------------------------------- multiple choice


def _gold_index(gold: str | int, n_options: int | None) -> int:
    """The gold option as an index: a letter ("B") or an int index."""
    if isinstance(gold, Integral) and not isinstance(gold, bool):
        return int(gold)
    letter = str(gold).strip().strip("()[]").strip()
    if len(letter) != 1 or not letter.isalpha():
        raise ValueError(f"gold must be a single option letter or an index, got {gold!r}")
    index = letter_index(letter, n_options)
    if index is None:
        raise ValueError(f"gold letter {gold!r} is past the last of {n_options} options")
    return index


def choice_accuracy(
    pred: str | int | None, gold_letter: str | int, options: Sequence[str] | None = None
) -> float:
    """1.0 if the prediction picks the gold option, else 0.0 (unreadable answers score 0.0).

    `pred` may be a letter in any of the forms `parse_choice` accepts, or the option text.
    `gold_letter` is the gold letter ("B") or its 0-based index.
    """
    gold = _gold_index(gold_letter, len(options) if options else None)
    return float(parse_choice(pred, options) == gold)


# --------------------------------------------------------------------------- claims


def _gold_claim(gold: Any) -> bool:
    """The gold verdict from a bool, "TRUE"/"FALSE", or a one-item list such as ["TRUE"]."""
    if isinstance(gold, (list, tuple)) and len(gold) == 1:
        gold = gold[0]
    verdict = parse_claim(gold)
    if verdict is None:
        raise ValueError(f"gold claim label must be true/false, got {gold!r}")
    return verdict


def claim_correct(pred: Any, gold: Any) -> bool:
    """True if the prediction reads as the gold verdict; unreadable predictions are wrong."""
    verdict = parse_claim(pred)
    return verdict is not None and verdict == _gold_claim(gold)


def nocha_pair_accuracy(records: Iterable[Mapping[str, Any]]) -> tuple[float, int]:
    """NoCha pair accuracy: the share of pairs whose claims are *all* judged correctly.

    Each record needs `pair_index` and `correct` (bool). Returns `(accuracy, n_pairs)`;
    with no records the accuracy is NaN and `n_pairs` is 0. Pair indices are compared as
    given, so score one dataset at a time.
    """
    outcomes = pair_outcomes(records)
    if not outcomes:
        return math.nan, 0
    return sum(outcomes.values()) / len(outcomes), len(outcomes)


def pair_outcomes(records: Iterable[Mapping[str, Any]]) -> dict[Any, bool]:
    """Map each `pair_index` to True if every claim of that pair is correct."""
    outcomes: dict[Any, bool] = {}
    for record in records:
        pair = record["pair_index"]
        outcomes[pair] = outcomes.get(pair, True) and bool(record["correct"])
    return outcomes


# --------------------------------------------------------------------------- retrieval


def _is_span(item: Any) -> bool:
    """A single span: (start, end) of two ints, or a mapping with char_start/char_end."""
    if isinstance(item, Mapping):
        return "char_start" in item and "char_end" in item
    return (
        isinstance(item, Sequence)
        and not isinstance(item, str)
        and len(item) == 2
        and all(isinstance(x, Integral) and not isinstance(x, bool) for x in item)
    )


def _as_span(item: Any) -> Span:
    """Turn (start, end) or {"char_start", "char_end"} into a `(start, end)` tuple."""
    if isinstance(item, Mapping):
        return int(item["char_start"]), int(item["char_end"])
    start, end = item
    return int(start), int(end)


def _item_spans(item: Any) -> list[Span]:
    """The spans one retrieved item covers: a single span or a list of spans."""
    if _is_span(item):
        return [_as_span(item)]
    return [_as_span(span) for span in item]


def spans_overlap(a: Span, b: Span) -> bool:
    """Half-open overlap: they share at least one character. Touching or empty spans don't."""
    return a[0] < a[1] and b[0] < b[1] and a[0] < b[1] and b[0] < a[1]


def _gold_hits(retrieved: Sequence[Any], gold_spans: Sequence[Any], k: int) -> list[bool]:
    """For each gold span: is it overlapped by any of the top-k retrieved items?"""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not gold_spans:
        raise ValueError("gold_spans is empty: recall is undefined for a question without evidence")
    top_spans = [span for item in list(retrieved)[:k] for span in _item_spans(item)]
    gold = [_as_span(span) for span in gold_spans]
    return [any(spans_overlap(g, r) for r in top_spans) for g in gold]


def recall_at_k(retrieved_spans: Sequence[Any], gold_spans: Sequence[Any], k: int) -> float:
    """Fraction of gold spans overlapped by at least one of the top-k retrieved items.

    Definition used here (gold-span recall): with G the gold spans and R_k the spans of the
    first k retrieved items, recall@k = |{g in G : g overlaps some r in R_k}| / |G|.

    * `retrieved_spans` is ranked, best first. Each item is a span `(char_start, char_end)`
      or a list of spans (one retrieved unit, e.g. a summary, may cover several chunks).
    * `gold_spans` is a list of `(start, end)` or evidence dicts with `char_start`/`char_end`.
    * Intervals are half-open `[start, end)`: (0, 10) and (10, 20) touch but do not overlap.
    * Fewer than k retrieved items is fine (all are used). Empty gold raises ValueError.
    """
    hits = _gold_hits(retrieved_spans, gold_spans, k)
    return sum(hits) / len(hits)


def hit_at_k(retrieved_spans: Sequence[Any], gold_spans: Sequence[Any], k: int) -> float:
    """1.0 if any gold span is overlapped by one of the top-k retrieved items, else 0.0.

    Same inputs and overlap rule as `recall_at_k`.
    """
    return float(any(_gold_hits(retrieved_spans, gold_spans, k)))


# --------------------------------------------------------------------------- bootstrap


def bootstrap_ci(
    values: Iterable[float], n_resamples: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap confidence interval `(mean, low, high)`.

    Resamples `values` with replacement `n_resamples` times (numpy Generator seeded with
    `seed`, so the result is deterministic) and takes the alpha/2 and 1-alpha/2 quantiles
    of the resampled means. No values gives (nan, nan, nan); one value v gives (v, v, v).
    """
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(data.mean())
    if data.size == 1:
        return mean, mean, mean
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, data.size, size=(n_resamples, data.size))
    resampled_means = data[indices].mean(axis=1)
    low, high = np.quantile(resampled_means, [alpha / 2, 1 - alpha / 2])
    return mean, float(low), float(high)
