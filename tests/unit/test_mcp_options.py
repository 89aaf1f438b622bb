"""`mindscape mcp` hands `ask` the model options it was started with, each of them."""

from __future__ import annotations

import argparse

from mindscape.cli import build_parser
from mindscape.commands.common import add_llm_options
from mindscape.commands.mcp import MODEL_OPTIONS, book_tools, model_flags
from mindscape.serve.mcp import BookTools


def _tools(*argv: str) -> BookTools:
    return book_tools(build_parser().parse_args(["mcp", "--store", "runs/book", *argv]))


def test_an_ask_carries_every_model_option_mcp_was_given() -> None:
    tools = _tools(
        "--llm", "local", "--local-model", "/m/q.gguf", "--reader-adapter", "shipped",
        "--embedder", "minilm",
    )  # fmt: skip
    asked = tools.ask_args("Who is Tobin?", ["tale"], "naive")
    assert (asked.llm, asked.local_model, asked.reader_adapter) == ("local", "/m/q.gguf", "shipped")
    assert (asked.embedder, asked.preset, asked.doc) == ("minilm", "naive", ["tale"])
    assert asked.question == "Who is Tobin?" and asked.store == "runs/book"


def test_options_not_given_stay_unset_for_ask_to_resolve() -> None:
    asked = _tools("--model", "qwen", "--base-url", "http://127.0.0.1:9/v1").ask_args(
        "Q?", [], None
    )
    assert (asked.model, asked.base_url) == ("qwen", "http://127.0.0.1:9/v1")
    assert asked.llm is None and asked.reader_adapter is None and asked.local_model is None
    assert model_flags(build_parser().parse_args(["mcp"])) == ()


def test_mcp_passes_on_every_option_of_add_llm_options() -> None:
    """MODEL_OPTIONS lists what ``add_llm_options`` defines: an option added there reaches ask."""
    parser = argparse.ArgumentParser()
    add_llm_options(parser)
    assert {a.dest for a in parser._actions} - {"help"} == set(MODEL_OPTIONS)


def test_no_warm_keeps_asks_in_the_server_process() -> None:
    assert _tools().warm and not _tools("--no-warm").warm
