"""The shipped reader adapter with the real local model: llama.cpp loads it and answers with it.

Each test starts the model's server with the adapter through the same path a run takes
(``LLMSettings.reader_adapter``), so a file the server cannot load fails here, not in a run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mindscape.errors import ModelError
from mindscape.llm import LLM, LLMSettings, make_chat_model
from mindscape.models import adapter
from mindscape.prompts import answer as answer_prompt
from tests.conftest import require, require_local_model

pytestmark = [pytest.mark.local_model, pytest.mark.integration]

PASSAGE = (
    "Passage from the story:\n<passages>\nTomas had a small brown dog called Biscuit. One "
    "winter night a thief crept into the bakery. Biscuit barked so loudly that the thief "
    "dropped the box and ran into the snow.\n</passages>\n\nQuestion: Why did the thief run "
    "away?\nUse only the passage. Reply with a short answer of a few words."
)


def ask(settings: LLMSettings) -> str:
    llm = LLM(make_chat_model(settings), settings=settings)
    return llm.complete(PASSAGE, system=answer_prompt.PLAIN_SYSTEM, role="answer", max_tokens=48)


def test_the_shipped_adapter_loads_and_the_reader_answers_with_it() -> None:
    require_local_model()
    folder = adapter.shipped_folder()
    require(
        (folder / adapter.ADAPTER_FILE).is_file(), "no shipped reader adapter", "reader-adapter"
    )
    from mindscape.models.local import MODEL_SHA256

    assert adapter.check_adapter(folder, MODEL_SHA256) == folder / adapter.ADAPTER_FILE
    adapted = ask(LLMSettings(backend="local", reader_adapter="shipped"))
    base = ask(LLMSettings(backend="local", reader_adapter="none"))
    assert "bark" in adapted.lower() and "bark" in base.lower()


def test_a_damaged_shipped_adapter_stops_the_run_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_local_model()
    folder = adapter.shipped_folder()
    require(
        (folder / adapter.ADAPTER_FILE).is_file(), "no shipped reader adapter", "reader-adapter"
    )
    copy = tmp_path / "reader_adapter"
    shutil.copytree(folder, copy)
    data = bytearray((copy / adapter.ADAPTER_FILE).read_bytes())
    data[-1] ^= 0xFF
    (copy / adapter.ADAPTER_FILE).write_bytes(bytes(data))
    monkeypatch.setattr(adapter, "shipped_folder", lambda: copy)
    with pytest.raises(ModelError, match="make reader-adapter") as err:
        make_chat_model(LLMSettings(backend="local", reader_adapter="shipped"))
    assert "\n" not in str(err.value)
