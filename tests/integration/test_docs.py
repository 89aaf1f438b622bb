"""The documentation, tested: README.md and every docs/*.md page.

Every ```bash and ```python block of every page runs, unless marked. Markers are HTML comments
on the line right before what they mark (GitHub does not render them); they are named
``readme-test`` in every page:

* ``<!-- readme-test: syntax-only (WHY) -->``: the block under it is only checked, with
  ``bash -n`` or ``compile()``; WHY says why it cannot run in a test: a paid API key, a
  long-running server, a large download or minutes of work.
* ``<!-- readme-test: needs-bench (WHY) -->``: the block runs when the bench exists
  (``$MINDSCAPE_BENCH``, by default ``../shared/bench`` beside the checkout) and refers to it as
  ``bench/...``; it is skipped, after its syntax check, when there is none: the only skip this
  file allows.
* ``<!-- readme-test: options (SUBCOMMAND) -->``: the markdown table under it lists, in its first
  column, exactly the long options (``--name``, ``--help`` aside) of ``mindscape SUBCOMMAND``
  (``ask``, ``model install``...) as the CLI's parser defines them.
* ``<!-- readme-test: figures -->``: every decimal number (``0.53``, ``-1.2``, ``+3.4``) in the
  text under it occurs verbatim in docs/results.md (link targets aside). The text under it runs
  to the first blank line that is not followed by a list item (``-``, ``*``, ``+``, ``1.``) or an
  indented line (two spaces), or up to a fence or a heading: a paragraph, a list, a paragraph
  and the list it introduces, or a table.
* ``mermaid`` and ``code-map`` label the blocks the checks below read: every mermaid block is
  what the code draws (README.md has exactly one), and the one code map (a text block, in one
  page) names only paths that exist, from the repository root.

Unmarked blocks run, page by page (README.md first, then docs/*.md by name) and in page order,
in one temporary directory that a module fixture prepares like a user's working directory:

* ``my_book.txt``: a copy of the bundled story (``src/mindscape/data/cinderella.txt``);
* ``.venv``: a link to this checkout's virtual environment (for ``. .venv/bin/activate``),
  whose ``bin`` also leads ``PATH``;
* ``bench``: a link to the bench, when there is one;
* ``runs/book``: the story indexed once by the fixture (``mindscape index my_book.txt --store
  runs/book --quiet``), so a block that asks the store runs alone (``-k``) or in any order.

Test ids name the page, the section and the block: ``usage-ask-2-bash``.

Environment: ``HF_HUB_OFFLINE=1``, ``LANGSMITH_TRACING=false``, ``LANGGRAPH_CLI_NO_ANALYTICS=1``,
``ANONYMIZED_TELEMETRY=False`` and ``MINDSCAPE_LLM_BACKEND=extractive``: the snippets answer with
the deterministic extractive reasoner instead of the local model, which would spend minutes per
question on two cores (tests/live/ drives the local model).

Bash blocks run in a child ``bash -e -o pipefail``. Python blocks run in this process, each as
a fresh module, with the temporary directory as working directory, so the embedder loads once
for the fixture and every block (a child interpreter would load it again, ~15 s each).

Besides: every ``mindscape`` command in a bash block (syntax-only ones included) parses with the
CLI's own parser; every ``MINDSCAPE_*`` variable a page names is read in src/ or benchmarks/; every link and
image resolves from the linking page's directory to a path inside the repository, and its
``#anchor`` to a heading of the target page (GitHub's slugs); the first bash block of
README.md's section headed "Install" is ``make demo`` and ``make test``; README.md has at most
250 lines and a bash block that starts with a ``mindscape`` command by line 80; every fence has
a known language (bash, python, mermaid, text, json) and every marker a known kind and what it
needs under it. Failures name ``page:line``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.conftest import BENCH, REPO, STORY

pytestmark = pytest.mark.integration

README = Path("README.md")
RESULTS = Path("docs") / "results.md"
FILES = [README, *sorted(p.relative_to(REPO) for p in (REPO / "docs").glob("*.md"))]
"""The pages, relative to the repository root."""
ENV = {
    "HF_HUB_OFFLINE": "1",
    "LANGSMITH_TRACING": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "MINDSCAPE_LLM_BACKEND": "extractive",
}
RUNNABLE = ("bash", "python")
LANGUAGES = {*RUNNABLE, "mermaid", "text", "json"}
UNDER = {
    "syntax-only": "a fence",
    "needs-bench": "a fence",
    "mermaid": "a fence",
    "code-map": "a fence",
    "options": "a table",
    "figures": "text",
}
"""Each marker kind and what it needs on the line under it."""
MARKED_LANGUAGE = {"mermaid": "mermaid", "code-map": "text"}
"""The fence language of the blocks these kinds mark."""
BLOCK_TIMEOUT_S = 600
README_MAX_LINES = 250
FIRST_COMMAND_BY_LINE = 80

MARKER = re.compile(r"^<!--\s*readme-test:\s*([\w-]+)\s*(?:\((.*)\))?\s*-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")


@dataclass(frozen=True)
class Block:
    """A fenced block of a page."""

    file: Path
    """The page, relative to the repository root."""
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

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def read_lines(file: Path) -> list[str]:
    return (REPO / file).read_text(encoding="utf-8").splitlines()


def markers(lines: list[str]) -> list[tuple[int, str, str]]:
    """(0-based line, kind, reason) of every marker."""
    return [
        (i, m.group(1), (m.group(2) or "").strip())
        for i, line in enumerate(lines)
        if (m := MARKER.match(line))
    ]


def blocks(file: Path, lines: list[str] | None = None) -> list[Block]:
    """Every fenced block of a page, with the marker right above it and the heading it is
    under."""
    lines = read_lines(file) if lines is None else lines
    out, section, i = [], "", 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            if heading := HEADING.match(lines[i]):
                section = heading.group(2)
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        assert end < len(lines), f"{file}:{i + 1}: unclosed fence"
        marker = MARKER.match(lines[i - 1]) if i else None
        out.append(
            Block(
                file=file,
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


def all_blocks() -> list[Block]:
    return [b for file in FILES for b in blocks(file)]


def prose(lines: list[str]) -> list[tuple[int, str]]:
    """(0-based line, line) of every line outside fenced blocks, fences left out."""
    out, inside = [], False
    for i, line in enumerate(lines):
        if inside:
            inside = line.rstrip() != "```"
        elif FENCE.match(line):
            inside = True
        else:
            out.append((i, line))
    return out


def runnable_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.lang in RUNNABLE]


def block_params() -> list[object]:
    """The runnable blocks as test parameters, named `page-section-N-lang` (N counts per
    section of a page)."""
    params: list[object] = []
    seen: dict[str, int] = {}
    for b in runnable_blocks():
        name = f"{b.file.stem}-{b.slug or 'top'}"
        seen[name] = seen.get(name, 0) + 1
        params.append(pytest.param(b, id=f"{name}-{seen[name]}-{b.lang}"))
    return params


# ---- the markup itself ----------------------------------------------------------------------


def has_under(kind: str, below: str) -> bool:
    """Whether the line under a marker of this kind holds what the kind marks."""
    need = UNDER[kind]
    if need == "a fence":
        return below.startswith("```")
    if need == "a table":
        return below.startswith("|")
    return bool(below.strip())


def block_problems(b: Block) -> list[str]:
    """What is wrong with a block's fence and marker."""
    if b.lang not in LANGUAGES:
        return [f"{b.where}: fence language {b.lang!r} unknown (a plain block is ```text)"]
    if b.kind in ("syntax-only", "needs-bench"):
        if b.lang not in RUNNABLE:
            return [f"{b.where}: {b.kind} on a {b.lang} block"]
        if not b.reason:
            return [f"{b.where}: say why in `{b.kind} (WHY)`"]
    if b.kind in MARKED_LANGUAGE and b.lang != MARKED_LANGUAGE[b.kind]:
        return [f"{b.where}: {b.kind} on a {b.lang} block"]
    return []


def marker_problems(file: Path, lines: list[str]) -> list[str]:
    """What is wrong with a page's markers: an unknown kind, nothing fitting under one."""
    out = []
    for i, kind, reason in markers(lines):
        where = f"{file}:{i + 1}"
        if kind not in UNDER:
            out.append(f"{where}: unknown marker kind {kind!r}")
            continue
        if kind == "options" and not reason:
            out.append(f"{where}: name the subcommand in `options (SUBCOMMAND)`")
        below = lines[i + 1] if i + 1 < len(lines) else ""
        if not has_under(kind, below):
            out.append(f"{where}: a `{kind}` marker needs {UNDER[kind]} on the line under it")
    return out


def test_every_fence_and_marker_is_known() -> None:
    problems = []
    for file in FILES:
        lines = read_lines(file)
        problems += [p for b in blocks(file, lines) for p in block_problems(b)]
        problems += marker_problems(file, lines)
    assert not problems, "\n".join(problems)
    runs = [b for b in runnable_blocks() if b.kind is None]
    assert {b.lang for b in runs} == set(RUNNABLE), "no runnable bash or python block found"


# ---- the blocks -----------------------------------------------------------------------------


def venv_dir() -> Path:
    """The venv `. .venv/bin/activate` should find: the checkout's, else the running one."""
    local = REPO / ".venv"
    return local if (local / "bin" / "activate").is_file() else Path(sys.prefix)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's working directory: the story as my_book.txt, already indexed into runs/book,
    and the bench as bench/ when there is one."""
    work = tmp_path_factory.mktemp("docs")
    shutil.copyfile(STORY, work / "my_book.txt")
    (work / ".venv").symlink_to(venv_dir(), target_is_directory=True)
    if BENCH.is_dir():
        (work / "bench").symlink_to(BENCH.resolve(), target_is_directory=True)
    from mindscape.cli import main

    with pytest.MonkeyPatch.context() as mp:
        for key, value in ENV.items():
            mp.setenv(key, value)
        mp.chdir(work)
        assert main(["index", "my_book.txt", "--store", "runs/book", "--quiet"]) == 0
    return work


def check_syntax(block: Block) -> None:
    if block.lang == "python":
        compile(block.code, block.where, "exec")
        return
    done = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
    assert done.returncode == 0, f"{block.where}: bash -n: {done.stderr}"


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
        f"{block.where}: exit {done.returncode}\n--- stdout\n{done.stdout[-4000:]}"
        f"\n--- stderr\n{done.stderr[-4000:]}"
    )


def run_python(block: Block, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a block as a module of its own (classes it defines resolve their annotations)."""
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(cwd)
    name = re.sub(r"\W", "_", f"docs_block_{block.file.stem}_{block.line}")
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(block.code, block.where, "exec"), module.__dict__)


@pytest.mark.parametrize("block", block_params())
def test_block(block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_syntax(block)
    if block.kind == "syntax-only":
        return
    if block.kind == "needs-bench" and not BENCH.is_dir():
        pytest.skip(f"no bench at {BENCH} (CI may not have one) for {block.where}")
    if block.lang == "bash":
        run_bash(block, workdir)
    else:
        run_python(block, workdir, monkeypatch)


# ---- commands, options and variables --------------------------------------------------------

ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = {";", "&&", "||", "|", "&"}


def commands(code: str) -> list[list[str]]:
    """The words of every command in a bash block, leading VAR=value assignments dropped."""
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
            if words:
                out.append(words)
            words = []
    return out


def mindscape_commands(code: str) -> list[list[str]]:
    """The argument lists of every `mindscape ...` command in a bash block."""
    return [words[1:] for words in commands(code) if words[0] == "mindscape"]


def first_command(code: str) -> list[str]:
    """The words of a bash block's first command ([] for none)."""
    return next(iter(commands(code)), [])


def test_every_mindscape_command_parses() -> None:
    from mindscape.cli import build_parser

    seen, problems = 0, []
    for b in all_blocks():
        if b.lang != "bash":
            continue
        for argv in mindscape_commands(b.code):
            seen += 1
            try:
                build_parser().parse_args(argv)
            except SystemExit as exc:
                problems.append(f"{b.where}: `mindscape {shlex.join(argv)}` does not parse ({exc})")
    assert not problems, "\n".join(problems)
    assert seen >= 10, "found too few mindscape commands: is the parser above broken?"


def table_rows(lines: list[str], start: int) -> list[list[str]]:
    """The cells of the markdown table starting at `start` (its separator row dropped; an
    escaped `\\|` stays inside its cell)."""
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())]
        cells = cells[1:-1] if len(cells) > 2 and not cells[-1] else cells[1:]
        if not all(re.fullmatch(r":?-+:?", c) for c in cells):
            rows.append(cells)
    return rows


OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def parser_options(parser: argparse.ArgumentParser, words: list[str]) -> set[str]:
    """The long option strings of the subcommand `words` of `parser` (``--help`` left out);
    KeyError names a word that is no subcommand."""
    for word in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            raise KeyError(word)
        parser = subs[0].choices[word]
    options = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    return options - {"--help"}


def option_problems(file: Path, lines: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """Where a page's `options` tables and the parser disagree."""
    out = []
    for i, kind, reason in markers(lines):
        if kind != "options":
            continue
        where, command = f"{file}:{i + 1}", f"`mindscape {reason}`"
        try:
            expected = parser_options(parser, reason.split())
        except KeyError as exc:
            out.append(f"{where}: {command}: {exc} is no subcommand")
            continue
        listed = {o for row in table_rows(lines, i + 1)[1:] for o in OPTION.findall(row[0])}
        if missing := sorted(expected - listed):
            out.append(f"{where}: the table lacks these options of {command}: {missing}")
        if extra := sorted(listed - expected):
            out.append(f"{where}: {command} has no {extra}")
    return out


def test_option_tables_match_the_parser() -> None:
    from mindscape.cli import build_parser

    parser = build_parser()
    problems = [p for file in FILES for p in option_problems(file, read_lines(file), parser)]
    assert not problems, "\n".join(problems)


def test_every_variable_named_is_read_by_the_code() -> None:
    code = [*(REPO / "src").rglob("*.py"), *(REPO / "benchmarks").rglob("*.py")]
    source = "\n".join(p.read_text(encoding="utf-8") for p in code)
    named = [
        (f"{file}:{i + 1}", v)
        for file in FILES
        for i, line in enumerate(read_lines(file))
        for v in re.findall(r"\bMINDSCAPE_[A-Z0-9_]+", line)
    ]
    assert named, "no page names a MINDSCAPE_* variable"
    missing = [f"{where}: {v}" for where, v in named if v not in source]
    assert not missing, "variables the code never reads:\n" + "\n".join(missing)


# ---- README.md itself -----------------------------------------------------------------------


def command_lines(code: str) -> list[str]:
    """A bash block's lines, comments stripped and blank lines dropped."""
    return [c for line in code.splitlines() if (c := line.split("#")[0].strip())]


def test_install_starts_with_the_two_set_up_commands() -> None:
    install = [b for b in blocks(README) if b.section == "Install" and b.lang == "bash"]
    assert install, f"{README}: no bash block in a section headed exactly `Install`"
    lines = command_lines(install[0].code)
    assert lines == ["make demo", "make test"], (
        f"{install[0].where}: the first block of Install runs {lines}, "
        "not ['make demo', 'make test']"
    )


def test_readme_is_at_most_250_lines() -> None:
    n = len(read_lines(README))
    assert n <= README_MAX_LINES, (
        f"{README}:{n}: {n} lines, at most {README_MAX_LINES}: move the detail into docs/"
    )


def test_readme_shows_a_mindscape_command_by_line_80() -> None:
    first = [
        b for b in blocks(README) if b.lang == "bash" and first_command(b.code)[:1] == ["mindscape"]
    ]
    assert first, f"{README}: no bash block starts with a `mindscape` command"
    assert first[0].line <= FIRST_COMMAND_BY_LINE, (
        f"{first[0].where}: the first block that starts with `mindscape` opens after line "
        f"{FIRST_COMMAND_BY_LINE}"
    )


# ---- figures --------------------------------------------------------------------------------

FIGURE = re.compile(r"(?<![\w.])[-+−]?\d+\.\d+(?!\w|\.\d)")
"""A decimal number, with its sign if any; a version (2.13.0) or a name (Qwen2.5) is none, and
a full stop after it ends the sentence."""
LINK_TARGET = re.compile(r"\]\([^)]*\)")
LIST_LINE = re.compile(r"^(\s*[-*+]\s|\s*\d+[.)]\s|  )")


def marked_text(lines: list[str], start: int) -> list[tuple[int, str]]:
    """(0-based line, line) of the text from `start`: up to the first blank line that is not
    followed by a list item or an indented line, or up to a fence or a heading."""
    out = []
    for i in range(start, len(lines)):
        line = lines[i]
        if line.startswith("```") or HEADING.match(line):
            break
        if not line.strip():
            if not LIST_LINE.match(lines[i + 1] if i + 1 < len(lines) else ""):
                break
            continue
        out.append((i, line))
    return out


def occurs(figure: str, text: str) -> bool:
    """Whether `figure` is a number of `text`, as written (3.2 is also in +3.2)."""
    return re.search(rf"(?<![\w.]){re.escape(figure)}(?!\w|\.\d)", text) is not None


def figure_problems(file: Path, lines: list[str], results: str) -> list[str]:
    """The figures of a page's `figures` text that docs/results.md does not have."""
    out = []
    for i, kind, _ in markers(lines):
        if kind != "figures":
            continue
        for j, line in marked_text(lines, i + 1):
            for figure in FIGURE.findall(LINK_TARGET.sub("]", line)):
                if not occurs(figure, results):
                    out.append(f"{file}:{j + 1}: {figure} is not in {RESULTS}")
    return out


def test_figures_are_in_docs_results() -> None:
    results = (REPO / RESULTS).read_text(encoding="utf-8")
    problems = [p for file in FILES for p in figure_problems(file, read_lines(file), results)]
    assert not problems, "\n".join(problems)


# ---- the graph, the code map, the links -----------------------------------------------------


def test_mermaid_blocks_are_what_the_code_draws() -> None:
    from mindscape.graphs.qa import build_qa_graph

    drawn = [b for b in all_blocks() if b.lang == "mermaid"]
    in_readme = [b.where for b in drawn if b.file == README]
    assert len(in_readme) == 1, f"{README}: one mermaid block expected, found {in_readme}"
    expected = build_qa_graph().compile().get_graph().draw_mermaid()
    for b in drawn:
        assert b.kind == "mermaid", f"{b.where}: mark the graph `readme-test: mermaid (...)`"
        assert b.code == expected, (
            f"{b.where}: the graph is out of date: paste build_qa_graph().compile().get_graph()"
            ".draw_mermaid() into this mermaid block"
        )


PATH_TOKEN = re.compile(
    r"(?<![\w./-])([\w.-]+(?:/[\w.-]+)*(?:/|\.(?:py|txt|json|md|ipynb)))(?![\w/])"
)


def code_map() -> Block:
    """The one code map of all the pages."""
    found = [b for b in all_blocks() if b.kind == "code-map"]
    assert len(found) == 1, f"one code-map block expected, found {[b.where for b in found]}"
    return found[0]


def code_map_paths(block: Block) -> list[tuple[str, Path]]:
    """(the token, the path it names) for every path in the code map.

    A line at column 0 starts with a path from the repository root (`src/mindscape/` makes it
    the root of the lines under it); a line indented by two starts with a path under that root;
    deeper lines continue the entry above. Other paths on a line are inside the entry's folder
    (the root, for a file entry).
    """
    root, folder, out = REPO, REPO, []
    for line in block.code.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        tokens = PATH_TOKEN.findall(line)
        if indent <= 2:
            first = line.split()[0]
            assert tokens and tokens[0] == first, (
                f"{block.where}: code map entry without a path: {line!r}"
            )
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
    block = code_map()
    paths = code_map_paths(block)
    assert len(paths) > 60, f"{block.where}: the code map parser found too few paths"
    missing = [token for token, path in paths if not path.exists()]
    assert not missing, f"{block.where}: the code map names paths that do not exist: {missing}"


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lowercased, all but letters, digits, spaces,
    hyphens and underscores removed, spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(lines: list[str]) -> set[str]:
    """The anchors of a page's headings (a repeated heading gets -1, -2...)."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose(lines):
        if heading := HEADING.match(line):
            slug = github_slug(heading.group(2))
            n = seen[slug] = seen.get(slug, -1) + 1
            out.add(f"{slug}-{n}" if n else slug)
    return out


CODE_SPAN = re.compile(r"(`+).*?\1")
LINK = re.compile(r"\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s<>]+)>?")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def links(lines: list[str]) -> list[tuple[int, str]]:
    """(1-based line, target) of every link and image outside fences and code spans, and of
    every link definition (`[name]: target`)."""
    out: list[tuple[int, str]] = []
    for i, line in prose(lines):
        text = CODE_SPAN.sub("", line)
        targets = LINK.findall(text) + DEFINITION.findall(text)
        out.extend((i + 1, t) for t in targets if not SCHEME.match(t))
    return out


def link_problem(file: Path, line: int, target: str) -> str | None:
    """What is wrong with a relative link of `file`, if anything."""
    where, (part, _, anchor) = f"{file}:{line}", target.partition("#")
    path = Path(os.path.normpath(REPO / file.parent / unquote(part))) if part else REPO / file
    if not path.is_relative_to(REPO):
        return f"{where}: {target} leaves the repository (link inside it, or to a URL)"
    if not path.exists():
        return f"{where}: {target} does not exist"
    if anchor and path.suffix == ".md" and anchor not in anchors(read_lines(path)):
        return f"{where}: {target}: {path.relative_to(REPO)} has no heading #{anchor}"
    return None


def test_relative_links_resolve() -> None:
    problems = [
        problem
        for file in FILES
        for line, target in links(read_lines(file))
        if (problem := link_problem(file, line, target))
    ]
    assert not problems, "\n".join(problems)
