"""Write into each ``<!-- from: PATHS -->`` mark of a page the keys of the values its figures
show, and turn a ``<!-- recorded: ... -->`` mark into a ``from:`` one where committed rows give
every figure of its block.

    python benchmarks/figures/figure_keys.py README.md docs/results.md ...      # rewrites the pages
    python benchmarks/figures/figure_keys.py --check docs/results.md            # says what it would do

A figure's key is the one value of the mark's sources (benchmarks/figures/committed_figures.py) that
the figure shows at its decimals, sign included (a signed figure shows a difference); where
several do, the one nearest the previous figure's key (the CI bounds after their mean), else
the first in the order the sources give them. The choice is a proposal to read, not proof of
meaning: the check then holds each figure to the one value its key names. A recorded block
becomes ``from:`` when the per-question files it names (a ``docs/results/...`` path in the
block or its command) give every one of its figures; the others stay recorded. A page whose
figures a mark's sources do not all give is left as it is and reported.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.figures import committed_figures as cf

PATH = re.compile(r"docs/results/[\w./\-]*[\w/]")


def keyed(block: cf.Block, paths: list[str]) -> list[str] | str:
    """One key per figure of `block`, or the reason there is none."""
    try:
        values = cf.figures(paths)
    except FileNotFoundError as exc:
        return str(exc)
    keys: list[str] = []
    for _, figure in block.figures:
        found = cf.candidates(figure, values)
        if not found:
            return f"{figure} is no value of {', '.join(paths)}"
        last = keys[-1].lstrip("-") if keys else ""
        keys.append(max(found, key=lambda k: len(os.path.commonprefix([k.lstrip("-"), last]))))
    return keys


def sources_named(lines: list[str], block: cf.Block, end: int) -> list[str]:
    """The committed result paths a block or its mark names (that exist)."""
    text = "\n".join(lines[block.line - 1 : end])
    found = []
    for p in dict.fromkeys(PATH.findall(text)):
        p = p.rstrip("/.")
        if (cf.REPO / p).exists():
            found.append(p)
    return found


def rewrite(page: Path) -> tuple[str, dict[str, int], list[str]]:
    lines = page.read_text(encoding="utf-8").splitlines()
    counts = {"from": 0, "keyed": 0, "recorded": 0, "converted": 0}
    notes = []
    blocks = cf.blocks(lines)
    for n, block in enumerate(blocks):
        end = blocks[n + 1].line - 1 if n + 1 < len(blocks) else len(lines)
        mark = lines[block.line - 1] if block.line else ""
        if block.kind == "from":
            counts["from"] += 1
            paths = [p.strip() for p in block.value.partition(";")[0].split(",") if p.strip()]
            keys = keyed(block, paths)
            if isinstance(keys, str):
                notes.append(f"{page.name}:{block.line}: from, not keyed: {keys}")
                continue
            lines[block.line - 1] = f"<!-- from: {', '.join(paths)}; {' '.join(keys)} -->"
            counts["keyed"] += lines[block.line - 1] != mark
        elif block.kind == "recorded" and block.figures:
            counts["recorded"] += 1
            paths = sources_named(lines, block, end)
            if not paths:
                continue
            trial = [*lines]
            trial[block.line - 1] = f"<!-- from: {', '.join(paths)} -->"
            (again,) = [b for b in cf.blocks(trial) if b.line == block.line]
            keys = keyed(again, paths)
            if isinstance(keys, str):
                notes.append(f"{page.name}:{block.line}: recorded stays: {keys}")
                continue
            lines[block.line - 1] = f"<!-- from: {', '.join(paths)}; {' '.join(keys)} -->"
            counts["converted"] += 1
    return "\n".join(lines) + "\n", counts, notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--check", action="store_true", help="report, write nothing")
    args = ap.parse_args()
    for name in args.pages:
        page = Path(name)
        text, counts, notes = rewrite(page)
        for note in notes:
            print(note, file=sys.stderr)
        print(f"{name}: {counts}")
        if not args.check:
            page.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
