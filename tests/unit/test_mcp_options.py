"""`mindscape mcp` hands `ask` the model options it was started with, each of them."""

from __future__ import annotations

from mindscape.cli import build_parser
from mindscape.commands.mcp import book_tools, model_flags
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


def test_no_warm_keeps_asks_in_the_server_process() -> None:
    assert _tools().warm and not _tools("--no-warm").warm
