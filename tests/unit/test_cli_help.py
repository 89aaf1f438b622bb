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


def test_quiet_silences_notices_while_its_command_runs(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    """Notices (log warnings, e.g. the backend fallback) are dropped under --quiet, and the
    logger's level is put back after the command."""
    import logging

    import mindscape.commands.index as index_cmd

    def noisy(args):  # noqa: ANN001, ANN202
        logging.getLogger("mindscape.deps").warning("falling back to extractive")
        return 0

    monkeypatch.setattr(index_cmd, "run_inspect", noisy)
    level = logging.getLogger("mindscape").level
    assert main(["inspect", "--store", "unused", "--quiet"]) == 0
    assert "falling back to extractive" not in caplog.messages
    assert logging.getLogger("mindscape").level == level
    assert main(["inspect", "--store", "unused"]) == 0
    assert "falling back to extractive" in caplog.messages


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
