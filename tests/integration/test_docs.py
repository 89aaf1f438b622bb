"""The README, tested: every ```bash and ```python block in README.md runs, unless marked.

Markers are HTML comments on the line right before a fence (GitHub does not render them):

* ``<!-- readme-test: syntax-only (WHY) -->``: the block is only checked, with ``bash -n`` or
  ``compile()``; WHY says why it cannot run in a test: a paid API key, a long-running server, a
  large download or minutes of work.
* ``<!-- readme-test: needs-bench (WHY) -->``: the block runs when ``../shared/bench`` exists
  (``$MINDSCAPE_BENCH``), and is skipped, after its syntax check, when it does not: the only
  skip this file allows.
* ``mermaid``, ``results`` and ``code-map`` label what the other checks read (the graph drawing,
  the results table, the code map).

Unmarked blocks run in README order in one temporary directory that a module fixture prepares
like a user's working directory:

* ``my_book.txt``: a copy of the bundled story (``src/mindscape/data/cinderella.txt``);
* ``.venv``: a link to this checkout's virtual environment (for ``. .venv/bin/activate``),
  whose ``bin`` also leads ``PATH``;
* ``../shared/bench``: a link to the bench, when there is one;
* ``runs/book``: the story indexed once by the fixture (``mindscape index my_book.txt --store
  runs/book --quiet``), so a block that asks the store runs alone (``-k``) or in any order.

Environment: ``HF_HUB_OFFLINE=1``, ``LANGSMITH_TRACING=false``, ``LANGGRAPH_CLI_NO_ANALYTICS=1``,
``ANONYMIZED_TELEMETRY=False`` and ``MINDSCAPE_LLM_BACKEND=extractive``: the snippets answer with
the deterministic extractive reasoner instead of the local model, which would spend minutes per
question on two cores (tests/live/ drives the local model).

Bash blocks run in a child ``bash -e -o pipefail``. Python blocks run in this process, each as
a fresh module, with the temporary directory as working directory, so the embedder loads once
for the fixture and every block (a child interpreter would load it again, ~15 s each).

Besides running them: every ``mindscape`` command in a bash block (syntax-only ones included)
parses with the CLI's own parser; every ``MINDSCAPE_*`` variable the README names is read in
src/; the mermaid block equals what the code draws; the results table matches docs/results.md;
every path in the code map exists; every relative link inside the repository resolves; every
fence has a known language and every marker a known kind and something under it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import BENCH, REPO, STORY

pytestmark = pytest.mark.integration

README = REPO / "README.md"
RESULTS = REPO / "docs" / "results.md"
ENV = {
    "HF_HUB_OFFLINE": "1",
    "LANGSMITH_TRACING": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "MINDSCAPE_LLM_BACKEND": "extractive",
}
RUNNABLE = ("bash", "python")
LANGUAGES = {*RUNNABLE, "mermaid", "text"}
KINDS = {"syntax-only", "needs-bench", "mermaid", "results", "code-map"}
BLOCK_TIMEOUT_S = 600

MARKER = re.compile(r"^<!--\s*readme-test:\s*([\w-]+)\s*(?:\((.*)\))?\s*-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    """A fenced block of the README."""

    lang: str
    code: str
    line: int
    """1-based line of the opening fence."""
    kind: str | None
    """The marker's kind on the line above, if any."""
    reason: str
    section: str

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")


def readme_lines() -> list[str]:
    return README.read_text(encoding="utf-8").splitlines()


def markers(lines: list[str]) -> list[tuple[int, str, str]]:
    """(0-based line, kind, reason) of every marker."""
    return [
        (i, m.group(1), (m.group(2) or "").strip())
        for i, line in enumerate(lines)
        if (m := MARKER.match(line))
    ]


def blocks(lines: list[str] | None = None) -> list[Block]:
    """Every fenced block, with the marker right above it and the heading it is under."""
    lines = readme_lines() if lines is None else lines
    out, section, i = [], "", 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            if lines[i].startswith("#"):
                section = lines[i].lstrip("#").strip()
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        assert end < len(lines), f"README.md:{i + 1}: unclosed fence"
        marker = MARKER.match(lines[i - 1]) if i else None
        out.append(
            Block(
                lang=fence.group(1),
                code="\n".join(lines[i + 1 : end]) + "\n",
                line=i + 1,
                kind=marker.group(1) if marker else None,
                reason=(marker.group(2) or "").strip() if marker else "",
                section=section,
            )
        )
        i = end + 1
    return out


def runnable_blocks() -> list[Block]:
    return [b for b in blocks() if b.lang in RUNNABLE]


def block_params() -> list[object]:
    """The runnable blocks as test parameters, named `section-N-lang` (N counts per section)."""
    params: list[object] = []
    seen: dict[str, int] = {}
    for b in runnable_blocks():
        seen[b.slug] = seen.get(b.slug, 0) + 1
        params.append(pytest.param(b, id=f"{b.slug}-{seen[b.slug]}-{b.lang}"))
    return params


# ---- the markup itself ----------------------------------------------------------------------


def test_every_fence_and_marker_is_known() -> None:
    lines = readme_lines()
    for b in blocks(lines):
        assert b.lang in LANGUAGES, f"README.md:{b.line}: fence language {b.lang!r} unknown"
        if b.kind in ("syntax-only", "needs-bench"):
            assert b.lang in RUNNABLE, f"README.md:{b.line}: {b.kind} on a {b.lang} block"
            assert b.reason, f"README.md:{b.line}: say why in `{b.kind} (WHY)`"
    for i, kind, _ in markers(lines):
        assert kind in KINDS, f"README.md:{i + 1}: unknown marker kind {kind!r}"
        below = lines[i + 1] if i + 1 < len(lines) else ""
        assert below.startswith(("```", "|")), f"README.md:{i + 1}: marker with nothing under it"
    runs = [b for b in runnable_blocks() if b.kind is None]
    assert {b.lang for b in runs} == set(RUNNABLE), "no runnable bash or python block found"


def test_the_two_set_up_commands() -> None:
    setup = [b for b in blocks() if b.section == "Set-up: two commands" and b.lang == "bash"]
    assert len(setup) == 1
    commands = [line.split("#")[0].strip() for line in setup[0].code.splitlines()]
    assert commands == ["make demo", "make test"]


# ---- the blocks -----------------------------------------------------------------------------


def venv_dir() -> Path:
    """The venv `. .venv/bin/activate` should find: the checkout's, else the running one."""
    local = REPO / ".venv"
    return local if (local / "bin" / "activate").is_file() else Path(sys.prefix)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's working directory: the story as my_book.txt, already indexed into runs/book."""
    root = tmp_path_factory.mktemp("readme")
    work = root / "project"
    work.mkdir()
    shutil.copyfile(STORY, work / "my_book.txt")
    (work / ".venv").symlink_to(venv_dir(), target_is_directory=True)
    if BENCH.is_dir():
        (root / "shared").mkdir()
        (root / "shared" / "bench").symlink_to(BENCH.resolve(), target_is_directory=True)
    from mindscape.cli import main

    with pytest.MonkeyPatch.context() as mp:
        for key, value in ENV.items():
            mp.setenv(key, value)
        mp.chdir(work)
        assert main(["index", "my_book.txt", "--store", "runs/book", "--quiet"]) == 0
    return work


def check_syntax(block: Block) -> None:
    if block.lang == "python":
        compile(block.code, f"README.md:{block.line}", "exec")
        return
    done = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
    assert done.returncode == 0, f"README.md:{block.line}: bash -n: {done.stderr}"


def run_bash(block: Block, cwd: Path) -> None:
    env = {**os.environ, **ENV}
    env["PATH"] = f"{venv_dir() / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail"],
        input=block.code,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"README.md:{block.line}: exit {done.returncode}\n--- stdout\n{done.stdout[-4000:]}"
        f"\n--- stderr\n{done.stderr[-4000:]}"
    )


def run_python(block: Block, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a block as a module of its own (classes it defines resolve their annotations)."""
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(cwd)
    module = types.ModuleType(f"readme_block_{block.line}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(block.code, f"README.md:{block.line}", "exec"), module.__dict__)


@pytest.mark.parametrize("block", block_params())
def test_block(block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_syntax(block)
    if block.kind == "syntax-only":
        return
    if block.kind == "needs-bench" and not BENCH.is_dir():
        pytest.skip(f"no bench at {BENCH} (CI may not have ../shared/bench)")
    if block.lang == "bash":
        run_bash(block, workdir)
    else:
        run_python(block, workdir, monkeypatch)


# ---- commands and variables named in blocks ----------------------------------------------

ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = {";", "&&", "||", "|", "&"}


def mindscape_commands(code: str) -> list[list[str]]:
    """The argument lists of every `mindscape ...` command in a bash block."""
    out: list[list[str]] = []
    for line in code.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for word in [*lexer, ";"]:
            if word not in SEPARATORS:
                words.append(word)
                continue
            while words and ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words and words[0] == "mindscape":
                out.append(words[1:])
            words = []
    return out


def test_every_mindscape_command_parses() -> None:
    from mindscape.cli import build_parser

    seen = 0
    for b in blocks():
        if b.lang != "bash":
            continue
        for argv in mindscape_commands(b.code):
            seen += 1
            try:
                build_parser().parse_args(argv)
            except SystemExit as exc:
                pytest.fail(
                    f"README.md:{b.line}: `mindscape {shlex.join(argv)}` does not parse ({exc})"
                )
    assert seen >= 10, "found too few mindscape commands: is the parser above broken?"


def test_every_variable_named_is_read_by_the_code() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "src").rglob("*.py"))
    named = set(re.findall(r"\bMINDSCAPE_[A-Z0-9_]+", README.read_text(encoding="utf-8")))
    assert named, "the README names no MINDSCAPE_* variable"
    missing = sorted(v for v in named if v not in source)
    assert not missing, f"the README names variables the code never reads: {missing}"


# ---- the graph, the results, the code map, the links ---------------------------------------


def test_mermaid_block_is_what_the_code_draws() -> None:
    from mindscape.graphs.qa import build_qa_graph

    drawn = [b for b in blocks() if b.lang == "mermaid"]
    assert len(drawn) == 1 and drawn[0].kind == "mermaid"
    assert drawn[0].code == build_qa_graph().compile().get_graph().draw_mermaid(), (
        "the README's graph is out of date: paste build_qa_graph().compile().get_graph()"
        ".draw_mermaid() into its mermaid block"
    )


def table_rows(lines: list[str], start: int) -> list[list[str]]:
    """The cells of the markdown table starting at `start` (its separator row dropped)."""
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not all(re.fullmatch(r":?-+:?", c) for c in cells):
            rows.append(cells)
    return rows


def results_tables() -> dict[tuple[str, str], list[list[str]]]:
    """docs/results.md's offline part (the README's table reports it): (dataset, split) → its
    first table."""
    lines = RESULTS.read_text(encoding="utf-8").split("\n## Local model")[0].splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r"^### (\S+) · (dev|test)\b", line)
        if m:
            first = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("|"))
            out[(m.group(1), m.group(2))] = table_rows(lines, first)
    return out


def test_results_table_matches_docs_results() -> None:
    lines = readme_lines()
    at = [i for i, kind, _ in markers(lines) if kind == "results"]
    assert len(at) == 1
    header, *rows = table_rows(lines, at[0] + 1)
    assert header[:3] == ["dataset · split", "metric", "n"] and rows
    presets = header[3:]
    docs = results_tables()
    for row in rows:
        dataset, split = (part.strip() for part in row[0].split("·"))
        assert (dataset, split) in docs, f"docs/results.md has no section {row[0]}"
        doc_header, *doc_rows = docs[(dataset, split)]
        by_preset = {r[0]: r for r in doc_rows}
        col, n_col = doc_header.index(row[1]), doc_header.index("n")
        for preset, value in zip(presets, row[3:], strict=True):
            figure = by_preset[preset][col].split()[0]
            assert value == figure, f"{row[0]} {row[1]} {preset}: README {value}, docs {figure}"
            assert row[2] == by_preset[preset][n_col], f"{row[0]} {preset}: n differs"


PATH_TOKEN = re.compile(
    r"(?<![\w./-])([\w.-]+(?:/[\w.-]+)*(?:/|\.(?:py|txt|json|md|ipynb)))(?![\w/])"
)


def code_map_paths() -> list[tuple[str, Path]]:
    """(the token, the path it names) for every path in the code map.

    A line at column 0 starts with a path from the repository root (`src/mindscape/` makes it
    the root of the lines under it); a line indented by two starts with a path under that root;
    deeper lines continue the entry above. Other paths on a line are inside the entry's folder
    (the root, for a file entry).
    """
    code = [b for b in blocks() if b.kind == "code-map"]
    assert len(code) == 1 and code[0].lang == "text"
    root, folder, out = REPO, REPO, []
    for line in code[0].code.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        tokens = PATH_TOKEN.findall(line)
        if indent <= 2:
            first = line.split()[0]
            assert tokens and tokens[0] == first, f"code map entry without a path: {line!r}"
            base = REPO if indent == 0 else root
            entry = base / first
            out.append((first, entry))
            if indent == 0 and first == "src/mindscape/":
                root = entry
            folder = entry if first.endswith("/") else base
            tokens = tokens[1:]
        out.extend((t, folder / t) for t in tokens)
    return out


def test_code_map_paths_exist() -> None:
    paths = code_map_paths()
    assert len(paths) > 60, "the code map parser found too few paths"
    missing = [token for token, path in paths if not path.exists()]
    assert not missing, f"the code map names paths that do not exist: {missing}"


def test_relative_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (REPO / target.split("#")[0]).resolve()
        if path.is_relative_to(REPO):
            assert path.exists(), f"README links to {target}, which does not exist"
