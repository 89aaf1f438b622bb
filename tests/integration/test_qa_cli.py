"""`mindscape ask`: --json, --stream, presets, and one-line errors with exit code 2."""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mindscape.commands import ask
from tests.integration.conftest import QA_DOC

pytestmark = pytest.mark.integration

Q = "What did the father bring back for cinderella?"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mindscape")
    sub = parser.add_subparsers(dest="command")
    ask.add_parser(sub)
    return parser.parse_args(["ask", *argv])


def test_ask_json(qa_store: Path, qa_deps: object, capsys: pytest.CaptureFixture[str]) -> None:
    rc = ask.run(
        parse(
            Q,
            "--store",
            str(qa_store),
            "--doc",
            QA_DOC,
            "--preset",
            "naive",
            "--json",
            "--llm",
            "extractive",
        )
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert (
        out["answer"] and out["rounds"] == 1 and out["llm_calls"] == 0 and out["preset"] == "naive"
    )
    assert out["evidence"] and all(e["chunk_ids"] and e["text"] for e in out["evidence"])
    assert isinstance(out["signature"], list) and out["trace"]


def test_ask_names_the_backend_and_an_auto_fallback_even_quiet(
    qa_store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`ask` says what answered (`backend` in --json, "answered by" in the text); when the
    `auto` backend finds no local model, one line on stderr says it answered extractively,
    and --quiet does not hide it (a log notice did)."""
    from mindscape.cli import main

    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path / "cache"))  # no local model here
    monkeypatch.delenv("MINDSCAPE_LOCAL_MODEL", raising=False)
    monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "auto")
    argv = [Q, "--store", str(qa_store), "--doc", QA_DOC, "--preset", "naive", "--no-warm"]
    assert main(["ask", *argv, "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["backend"] == "extractive" and "answering extractively" in out["backend_notice"]
    assert captured.err.startswith("mindscape: ") and "answering extractively" in captured.err
    assert main(["ask", *argv, "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "answered by: extractive" in captured.out and "answering extractively" in captured.err
    # asked for the extractive reasoner: named, no fallback line
    assert main(["ask", *argv, "--json", "--llm", "extractive"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["backend"] == "extractive" and out["backend_notice"] is None
    assert "answering extractively" not in captured.err


def test_ask_multiple_choice_text_output(
    qa_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = ask.run(
        parse(
            Q,
            "--store",
            str(qa_store),
            "--option",
            "pearls",
            "--option",
            "a hazel branch",
            "--preset",
            "mia-rag",
            "--llm",
            "extractive",
        )
    )
    text = capsys.readouterr().out
    assert rc == 0 and text.startswith("Answer: ") and "Evidence:" in text and "Signature:" in text


def test_ask_stream_json_lines(qa_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = ask.run(
        parse(
            Q,
            "--store",
            str(qa_store),
            "--json",
            "--stream",
            "--preset",
            "mindscape",
            "--max-rounds",
            "2",
            "--llm",
            "extractive",
        )
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and len(lines) > 3
    progress = [json.loads(line)["progress"]["event"] for line in lines[:-1]]
    assert progress[0] == "signature" and "decision" in progress
    final = json.loads(lines[-1])
    assert final["answer"] and final["rounds"] in (1, 2)


def test_ask_stream_text_goes_to_stderr(qa_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = ask.run(
        parse(Q, "--store", str(qa_store), "--stream", "--preset", "naive", "--llm", "extractive")
    )
    captured = capsys.readouterr()
    assert rc == 0 and captured.out.startswith("Answer: ") and "· retrieve" in captured.err


@pytest.mark.parametrize("ext", ["svg", "png", "html"])
def test_ask_map_writes_the_map_a_mark_per_passage_read_and_the_pin(
    qa_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], ext: str
) -> None:
    path = tmp_path / f"map.{ext}"
    argv = [Q, "--store", str(qa_store), "--json", "--llm", "extractive", "--map", str(path)]
    rc = ask.run(parse(*argv))
    captured = capsys.readouterr()
    out = json.loads(captured.out)  # --json's stdout stays one object
    assert rc == 0 and f"map: {path}" in captured.err
    read = [p for s in out["trace"] for p in s["read_passages"]]
    assert read and out["books"][0]["doc_id"] == QA_DOC and out["quote"]["text"]
    if ext == "png":
        from matplotlib.image import imread

        assert imread(path).shape[1] > 1000
        return
    text = path.read_text(encoding="utf-8")
    svg = text[text.index("<svg") : text.index("</svg>") + 6]
    root = ET.fromstring(svg)
    groups = [g.get("id", "") for g in root.iter("{http://www.w3.org/2000/svg}g")]
    assert sum(g.startswith("mark-") for g in groups) == len(read)
    assert groups.count("pin") == 1
    if ext == "html":
        assert text.count("<li ") == len(read) and "<blockquote>" in text


def test_ask_map_with_an_unknown_format_is_one_line_before_asking(
    qa_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = ask.run(parse(Q, "--store", str(qa_store), "--map", str(tmp_path / "map.pdf")))
    err = capsys.readouterr().err
    assert rc == 2 and ".svg, .png, .html" in err and len(err.strip().splitlines()) == 1


def test_ask_shows_its_steps_on_a_terminal_on_stderr(
    qa_store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ask, "show_steps", lambda args: True)  # stderr as a terminal
    rc = ask.run(parse(Q, "--store", str(qa_store), "--json", "--llm", "extractive"))
    captured = capsys.readouterr()
    assert rc == 0 and json.loads(captured.out)["answer"]
    steps = [line for line in captured.err.splitlines() if line.startswith("· ")]
    assert steps[:3] == [
        "· activating the signature",
        "· retrieving (round 1)",
        "· reading round 1",
    ]
    assert steps[-1] == "· answering"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--store", "{missing}"], "no mindscape store"),
        (["--store", "{store}", "--doc", "nosuchbook"], "unknown document 'nosuchbook'"),
        (["--store", "{store}", "--task", "multiple-choice"], "needs --option"),
    ],
)
def test_errors_are_one_line_exit_2(
    qa_store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    argv = [a.format(missing=tmp_path / "none", store=qa_store) for a in argv]
    rc = ask.run(parse(Q, *argv, "--llm", "extractive"))
    err = capsys.readouterr().err
    assert (
        rc == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    )
    assert not (tmp_path / "none").exists()


def test_registered_in_the_cli(qa_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mindscape.cli import main

    rc = main(
        ["ask", Q, "--store", str(qa_store), "--preset", "naive", "--json", "--llm", "extractive"]
    )
    assert rc == 0 and json.loads(capsys.readouterr().out)["answer"]


def test_demo_json_quiet_prints_only_answers(tmp_path, capsys):
    """`demo --json --quiet`: one JSON object per question on stdout, no bars or notices."""
    import json as _json

    from mindscape.cli import main as cli_main

    rc = cli_main(
        ["demo", "--llm", "extractive", "--json", "--quiet", "--store", str(tmp_path / "s")]
    )
    captured = capsys.readouterr()
    rows = [_json.loads(line) for line in captured.out.splitlines()]
    assert rc == 0 and len(rows) == 4
    assert all(r["answer"] and r["question"].endswith("?") for r in rows)
    assert captured.err == ""
