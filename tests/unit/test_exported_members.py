"""The public names of `mindscape`: each is listed, importable, defined where it says, and
importing the package itself stays light."""

from __future__ import annotations

import subprocess
import sys

import mindscape


def test_all_names_resolve_to_their_module() -> None:
    for name in mindscape.__all__:
        value = getattr(mindscape, name)
        module = getattr(value, "__module__", None)
        if module is not None and not name.isupper():
            assert module.startswith(mindscape._EXPORTS[name]), name


def test_exported_names_are_the_curated_ones() -> None:
    assert set(mindscape.__all__) == {
        "Context", "Deps", "build_qa_graph", "answer_question", "qa_subgraph", "make_qa_node",
        "make_qa_tool", "PRESETS", "PRESET_NAMES", "LLM", "LLMSettings", "Usage", "Indexer",
        "IndexConfig", "MemoryStore", "Retriever", "load_embedder", "MindscapeError",
    }  # fmt: skip


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        mindscape.nope  # noqa: B018
    except AttributeError as exc:
        assert "nope" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_package_import_loads_nothing_heavy() -> None:
    code = (
        "import sys, mindscape; "
        "heavy = [m for m in ('torch', 'chromadb', 'langgraph', 'openai') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
