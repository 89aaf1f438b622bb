"""An index LLM summary has an output cap: a model that does not stop is cut off."""

from __future__ import annotations

from typing import Any

from mindscape.indexing.document import SUMMARY_OUTPUT_FACTOR, Summarizer
from mindscape.tokens import default_counter


class RecordingLLM:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def complete(self, prompt: str, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        return "  The miller's daughter   spins straw into gold.  "


def test_an_llm_summary_is_capped_at_twice_its_budget() -> None:
    llm = RecordingLLM()
    summarize = Summarizer(None, llm, default_counter(), budget=160)  # type: ignore[arg-type]
    text, ids = summarize([3, 4], ["The miller boasted.", "The king listened."], "{passages}")
    assert text == "The miller's daughter spins straw into gold." and ids == [3, 4]
    assert llm.calls == [
        {"system": llm.calls[0]["system"], "role": "index_summary", "max_tokens": 320}
    ]
    assert SUMMARY_OUTPUT_FACTOR * 160 == 320
