"""Token log-probabilities: read from a chat reply, and from the local model in process.

A chat reply's log-probabilities (OpenAI's ``logprobs``, which llama.cpp's server also sends)
give a reply's mean token probability (:func:`mean_probability`, the reader's certainty) and
a first answer token's yes-share (:func:`yes_share`).

MoM's selection reads two things from an evaluator model: the probability that a boundary
between two chunks is a real break (one yes/no answer token) and the log-probability of every
token of a chunk given its core content (its perplexity). The llama.cpp server answers the first
(chat ``logprobs``/``top_logprobs``) but not the second reliably: with ``echo`` its prompt
log-probabilities come one position off (token i is scored under the distribution that
predicts token i+1; seen with llama-cpp-python 0.3.36). So both are computed here, in process,
by :class:`LocalScorer`: the model evaluates context + target once with every position's
logits kept, and the target's log-probabilities are read off exactly.

It loads its own copy of the GGUF (about 1.1 GB) with a small context, so keep one scorer per
process and short inputs (a chunk and its core, two chunks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

YES = ("yes", "true")
NO = ("no", "false")


def reply_logprobs(reply: Any) -> list[dict[str, Any]]:
    """The per-token log-probability records of a chat reply (OpenAI's
    ``response_metadata["logprobs"]["content"]``; empty when the endpoint sent none)."""
    meta = getattr(reply, "response_metadata", None) or {}
    return list((meta.get("logprobs") or {}).get("content") or [])


def token_logprobs(records: list[dict[str, Any]]) -> list[float]:
    """The log-probability of each output token of :func:`reply_logprobs`' records."""
    return [float(t["logprob"]) for t in records if t.get("logprob") is not None]


def first_top(records: list[dict[str, Any]]) -> dict[str, float]:
    """The first output token's likeliest alternatives (``top_logprobs``), log-probability
    by token text (empty when the endpoint sent none)."""
    first = (records or [{}])[0]
    return {str(t["token"]): float(t["logprob"]) for t in first.get("top_logprobs") or []}


def mean_probability(logprobs: list[float]) -> float | None:
    """The geometric-mean probability of tokens, ``exp(mean log p)``: the length-normalised
    sequence probability (None for no tokens)."""
    return math.exp(sum(logprobs) / len(logprobs)) if logprobs else None


def yes_share(top_logprobs: Mapping[str, float]) -> float | None:
    """P(yes) / P(yes or no) of a first answer token: the yes-mass over the yes+no mass of its
    top log-probabilities (tokens compared stripped and lower case). None when neither shows:
    the model answered something else and no share can be read, so the caller decides what
    that counts as (no silent 0.5). MoM reads a boundary's break probability this way."""
    yes = sum(math.exp(lp) for tok, lp in top_logprobs.items() if tok.strip().lower() in YES)
    no = sum(math.exp(lp) for tok, lp in top_logprobs.items() if tok.strip().lower() in NO)
    return yes / (yes + no) if yes + no > 0 else None


class LocalScorer:
    """Exact token log-probabilities from a GGUF model (llama-cpp-python, in process)."""

    def __init__(self, model_path: str | Path | None = None, *, n_ctx: int = 1024) -> None:
        from llama_cpp import Llama

        from mindscape.models.local import require_model
        from mindscape.models.server import default_threads

        path = require_model(str(model_path) if model_path else None)
        self.n_ctx = n_ctx
        self.model_id = path.name
        """The GGUF file's name (what cached scores are keyed by)."""
        self.llm: Any = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            logits_all=True,
            n_threads=default_threads(),
            seed=0,
            verbose=False,
        )

    def continuation_logprobs(self, context: str, target: str) -> list[float]:
        """log P(each token of `target` | `context` and the target's earlier tokens).

        The context is cut from the front when both would not fit the model's window."""
        ctx = self.llm.tokenize(context.encode(), add_bos=False)
        tgt = self.llm.tokenize(target.encode(), add_bos=False)[: self.n_ctx // 2]
        ctx = ctx[-(self.n_ctx - len(tgt)) :] or self.llm.tokenize(b" ", add_bos=False)
        self.llm.reset()
        self.llm.eval(ctx + tgt)
        logits = np.asarray(self.llm.scores[len(ctx) - 1 : len(ctx) + len(tgt) - 1], np.float64)
        top = logits.max(axis=1, keepdims=True)
        log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        return (logits[np.arange(len(tgt)), tgt] - log_z).tolist()

    def yes_probability(self, question: str) -> float | None:
        """P(yes) / P(yes or no) of the model's first answer token to a yes/no question; None
        when neither is among its top tokens (:func:`yes_share`)."""
        out = self.llm.create_chat_completion(
            messages=[{"role": "user", "content": question}],
            max_tokens=1,
            temperature=0.0,
            logprobs=True,
            top_logprobs=10,
        )
        content = out["choices"][0]["logprobs"]["content"][0]
        top = {t["token"]: t["logprob"] for t in content["top_logprobs"]}
        return yes_share(top)

    def perplexity(self, context: str, target: str) -> float:
        """exp(−mean log p) of `target` after `context`."""
        lps = self.continuation_logprobs(context, target)
        return math.exp(-sum(lps) / len(lps)) if lps else math.inf
