"""Every command says how to use it: `--help` ends with examples, `--quiet` exists, and the
commands whose output is data offer `--json`."""

from __future__ import annotations

import argparse

import pytest

from mindscape.cli import build_parser, main

DATA_COMMANDS = {
    "index",
    "inspect",
    "ask",
    "eval",
    "demo",
    "model status",
    "model serve",
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
    assert set(COMMANDS) == DATA_COMMANDS | {"model install"}


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


def test_the_top_level_help_has_examples(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "examples:" in capsys.readouterr().out


def test_quiet_silences_warnings_but_not_errors(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
):
    import logging

    from mindscape.commands.common import warn

    logger = logging.getLogger("mindscape")
    level = logger.level
    try:
        warn("decoded as cp1252")
        assert "mindscape: warning: decoded as cp1252" in caplog.messages
        rc = main(["ask", "Who?", "--store", "/nonexistent/store", "--quiet"])
        assert rc == 2 and "error" in capsys.readouterr().err  # errors still show
        caplog.clear()
        warn("decoded as cp1252")  # --quiet raised the level: no record at all
        assert caplog.messages == []
    finally:
        logger.setLevel(level)
