"""The llama.cpp server (``llama_cpp.server``) with log-probabilities computed for the reply only,
and greedy replies read from an empty cache.

``python -m mindscape.models.llama_server --model … --port …`` runs llama-cpp-python's
OpenAI-compatible server unchanged, except for two things; the second is :func:`fresh_greedy`.
First: to return a reply's token log-probabilities (``logprobs``), llama-cpp-python 0.3.x
turns the logits of *every* position, prompt included, into log-probabilities, then keeps the
reply's rows: for a 650-token prompt that is a log-softmax over 650 × 152K values, about 8.6 s
of an otherwise 0.7 s cached reply (profiled on this machine's 2 cores). Here the same function computes only the rows it is
asked for, so a reply with log-probabilities costs its generation plus a sort of the
vocabulary per reply token (about 0.16 s each). The values are the same.

The answerer reads a reply's log-probabilities as the reader's certainty
(:meth:`mindscape.llm.LLM.complete_scored`), option scoring and MoM's boundary probability read
the first token's: each is a cheap call with this patch and a slow one without it.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable
from typing import Any

import numpy as np


class RowsOnDemand:
    """The log-probabilities of a 2-D logits array, computed for the rows a caller slices."""

    def __init__(self, logits: np.ndarray, convert: Callable[..., np.ndarray], axis: int) -> None:
        self.logits = logits
        self.convert = convert
        self.axis = axis

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.convert(self.logits[key], axis=self.axis)

    def __len__(self) -> int:
        return len(self.logits)

    def __iter__(self) -> Any:
        return iter(self.convert(self.logits, axis=self.axis))

    def tolist(self) -> list[Any]:
        return list(self.convert(self.logits, axis=self.axis).tolist())


def patch_llama() -> None:
    """Make ``Llama.logits_to_logprobs`` lazy over the rows of a 2-D array (idempotent; a
    llama-cpp-python without that function runs unpatched, only slower with logprobs)."""
    from llama_cpp import Llama

    convert = getattr(Llama, "logits_to_logprobs", None)
    if convert is None or getattr(convert, "rows_on_demand", False):
        return

    def logits_to_logprobs(logits: Any, axis: int = -1) -> Any:
        if isinstance(logits, np.ndarray) and logits.ndim == 2 and axis in (-1, 1):
            return RowsOnDemand(logits, convert, axis)
        return convert(logits, axis=axis)

    logits_to_logprobs.rows_on_demand = True  # type: ignore[attr-defined]
    Llama.logits_to_logprobs = staticmethod(logits_to_logprobs)  # type: ignore[method-assign]


def fresh_greedy(llama: Any = None) -> None:
    """Make a greedy reply (temperature 0) start from an empty cache (idempotent).

    llama-cpp-python reuses the longest prefix a new prompt shares with what the model last
    read. That saves the prompt's time, but a prompt read partly from the cache comes out a
    few units in the last place different from the same prompt read whole, and the answer
    verifier's sampled answers turn such differences into other answers: a server that had
    read earlier questions answered the demo's question otherwise than a fresh one. So a
    greedy reply (the answer, a round's first call) is read whole, as by a fresh server, and
    only the answers sampled over it (temperature above 0) reuse the prompt just read. The
    answer to a question then does not depend on what the server read before."""
    import inspect

    if llama is None:
        from llama_cpp import Llama

        llama = Llama
    generate = llama.generate
    if getattr(generate, "fresh_greedy", False):
        return
    signature = inspect.signature(generate)

    def greedy_from_scratch(self: Any, *args: Any, **kwargs: Any) -> Any:
        call = signature.bind(self, *args, **kwargs)
        call.apply_defaults()
        if call.arguments.get("reset", True) and call.arguments.get("temp") == 0:
            self.reset()
        return generate(self, *args, **kwargs)

    greedy_from_scratch.fresh_greedy = True  # type: ignore[attr-defined]
    llama.generate = greedy_from_scratch


def main(argv: list[str]) -> None:
    """Patch, then run ``llama_cpp.server`` with ``argv`` as its arguments."""
    patch_llama()
    fresh_greedy()
    sys.argv = ["llama_cpp.server", *argv]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
