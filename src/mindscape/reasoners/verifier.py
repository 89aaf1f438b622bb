"""The answer verifier: the probability that a local-model answer is right, from its reading.

The 1.5B reader's token probability alone says little about which of a run's rounds read
right: its certainty is high on a fluent wrong name and rounds tie. The verifier reads more of
the same reading, all of it already in hand (no extra model call beyond the samples the
reader draws over its cached prompt):

* how sure the reader was: the mean, lowest and first of its answer tokens' log-probabilities;
* whether it says the same when asked again: the mean token F1 of the greedy answer with
  answers sampled at temperature 0.8 over the same prompt (``reader_samples``);
* whether the answer comes from the passage: the share of its content words found there;
* whether it only restates the question: the share of its content words found in the
  question ("Why did Harold embezzle?" answered "Harold embezzled from the factory");
* its length and the question's wh-word.

A logistic regression over these, trained on the local model's own answers to FairytaleQA
train questions, reading either a gold section or another section of the same story
(``benchmarks/reader/train_verifier.py``; ``make verifier``), gives P(the answer's token F1 ≥ 0.5).
It is stored as plain JSON (the scaler's means and scales, the coefficients), so it loads the
same under any scikit-learn version or none; the model card is ``data/verifier/README.md``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mindscape.answers import token_f1
from mindscape.errors import MindscapeError
from mindscape.models.manifest import bytes_sha256, read_manifest
from mindscape.reasoners.grounding import related
from mindscape.reasoners.text import content_words, wh_word

VERIFIER_DIR = Path(__file__).resolve().parent.parent / "data" / "verifier"
MODEL_FILE = "model.json"

WH = ("who", "what", "why", "how", "where", "when")
"""The wh-words with a feature of their own (the rest share "wh_other")."""


@dataclass(frozen=True)
class Reading:
    """What the verifier reads of one answer."""

    question: str
    answer: str
    passage: str
    logprobs: tuple[float, ...]
    """The greedy answer's output tokens' log-probabilities."""
    samples: tuple[str, ...] = ()
    """Answers sampled over the same prompt."""


def _share(words: set[str], text: str) -> float:
    """The share of `words` found in `text`, a shared prefix counting ("picked" / "pick")."""
    vocabulary = content_words(text)
    return sum(related(w, vocabulary) for w in words) / len(words) if words else 0.0


def _f1(a: str, b: str) -> float:
    return token_f1(a, [b])


def features(r: Reading) -> dict[str, float]:
    """The verifier's features of a reading (see the module docstring)."""
    lp = list(r.logprobs) or [0.0]
    words = content_words(r.answer)
    wh = wh_word(r.question).split(" ")[0]
    out = {
        "mean_logprob": sum(lp) / len(lp),
        "min_logprob": min(lp),
        "first_logprob": lp[0],
        "answer_words": math.log1p(len(r.answer.split())),
        "in_passage": _share(words, r.passage),
        "in_question": _share(words, r.question),
        "no_content": float(not words),
        "agreement": (
            sum(_f1(r.answer, s) for s in r.samples) / len(r.samples) if r.samples else 1.0
        ),
    }
    for w in WH:
        out[f"wh_{w}"] = float(wh == w)
    out["wh_other"] = float(wh not in WH)
    return out


@dataclass(frozen=True)
class Verifier:
    """A logistic regression over standardised :func:`features`."""

    names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    samples: int
    """How many sampled answers its agreement feature was trained with."""

    def probability(self, reading: Reading) -> float:
        """P(the answer is right) for `reading`."""
        f = features(reading)
        z = self.intercept + sum(
            c * (f[n] - m) / s
            for n, m, s, c in zip(self.names, self.mean, self.scale, self.coef, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z))

    def to_json(self) -> dict[str, object]:
        return {
            "features": list(self.names),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "samples": self.samples,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Verifier:
        names = tuple(str(n) for n in data["features"])  # type: ignore[attr-defined]
        unknown = set(names) - set(features(Reading("", "", "", ())))
        if unknown:
            raise ValueError(f"unknown features {sorted(unknown)}")
        return cls(
            names=names,
            mean=tuple(float(x) for x in data["mean"]),  # type: ignore[attr-defined]
            scale=tuple(float(x) for x in data["scale"]),  # type: ignore[attr-defined]
            coef=tuple(float(x) for x in data["coef"]),  # type: ignore[attr-defined]
            intercept=float(data["intercept"]),  # type: ignore[arg-type]
            samples=int(data.get("samples", 0)),  # type: ignore[call-overload]
        )


class VerifierError(MindscapeError):
    """The shipped verifier cannot be loaded (missing, damaged, or not the file its manifest
    names)."""


@cache
def load_verifier(folder: Path = VERIFIER_DIR) -> Verifier:
    """The shipped verifier, checked against its manifest's sha256; a file that cannot be
    loaded is a :class:`VerifierError` naming ``make verifier``."""
    try:
        manifest = read_manifest(folder)
        raw = (folder / MODEL_FILE).read_bytes()
        if bytes_sha256(raw) != manifest["sha256"]:
            raise ValueError("its sha256 differs from the manifest's")
        return Verifier.from_json(json.loads(raw))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VerifierError(
            f"the answer verifier in {folder} cannot be loaded ({exc}); `make verifier` retrains it"
        ) from exc
