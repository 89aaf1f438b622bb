"""Every figure of README.md and of the docs/ pages in PAGES has a source.

A figure is a decimal number (0.408, +1.2, −3.4, 98.1%, 1.1 GB: each bound of a CI too)
outside code spans, fenced blocks and HTML comments; a threshold after ≥ or ≤ is not one, nor
a version after the word "version" (``Ray version 2.60``). It is accounted for by the mark
that covers it (benchmarks/figures/committed_figures.py):

* ``<!-- from: PATHS; KEY KEY ... -->``: the mark names, in page order, the one value of the
  per-question results committed at PATHS (or of a model's manifest.json) that each figure of
  its block shows (a mean, a CI bound, a paired difference, a cost, per book or in all): the
  figure must be that value at its decimals, and a signed figure (``+1.2``, ``−0.4``) a
  difference with that sign. Whole numbers in the block's tables (token counts, better/worse
  counts) are figures too. ``python benchmarks/figures/committed_figures.py PATHS`` lists the keys;
  ``benchmarks/figures/figure_keys.py`` proposes them;
* ``<!-- generated: NAME -->``: the block is what `figures/make_results.py --figures` writes now;
* ``<!-- recorded: DATE; COMMAND; WHY -->``: a recorded measurement, with the three parts;
* ``<!-- settings: WHAT -->``: the numbers are a method's parameters (a temperature, a weight),
  not measurements.

Any other figure fails, with its page and line.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from benchmarks.figures import committed_figures as cf

REPO = Path(__file__).resolve().parents[2]
MODEL_CARDS = sorted((REPO / "src" / "mindscape" / "data").glob("*/README.md"))
PAGES = [
    REPO / "README.md",
    *(
        REPO / "docs" / f"{name}.md"
        for name in (
            "results",
            "retrieval",
            "mom",
            "evaluation",
            "usage",
            "install",
            "development",
            "glossary",
            "code",
            "agent",
        )
    ),
    *MODEL_CARDS,
]
"""README.md and docs/results.md first: the two pages with generated blocks."""


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_figure_has_a_source(page: Path) -> None:
    problems = cf.problems(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES[:2], ids=lambda p: p.name)
def test_generated_blocks_are_what_the_committed_results_give(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "<!-- generated:" in text
    assert cf.fill(text) == text, (
        f"{page.name}: a generated block is stale: python benchmarks/figures/make_results.py --figures"
    )


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_figure_without_a_mark_fails_and_code_and_thresholds_are_not_figures(
    tmp_path: Path,
) -> None:
    text = "# T\n\nF1 0.408, `weight 0.3`, F1 ≥ 0.25, Python ≥ 3.11, Qwen2.5, 2.13.0.\n"
    assert [p.split(": ", 1)[1] for p in cf.problems(page(tmp_path, text))] == [
        "0.408 has no source (from, recorded or generated)"
    ]


def test_a_version_after_the_word_version_and_numbers_under_a_settings_mark_are_not_figures(
    tmp_path: Path,
) -> None:
    text = "# T\n\nRay version 2.60, below version 5.24; Ray 2.60 is 0.5.\n"
    assert [p.split(": ", 1)[1] for p in cf.problems(page(tmp_path, text))] == [
        "2.60 has no source (from, recorded or generated)",
        "0.5 has no source (from, recorded or generated)",
    ]
    settings = "# T\n\n<!-- settings: the method's parameters -->\ntemperature 0.7, top-p 0.9\n"
    assert cf.problems(page(tmp_path, settings)) == []


def test_a_recorded_mark_needs_its_date_command_and_reason(tmp_path: Path) -> None:
    good = "# T\n\n<!-- recorded: 2026-12-04; make demo; no per-question file -->\n29.5 s\n"
    assert cf.problems(page(tmp_path, good)) == []
    bad = "# T\n\n<!-- recorded: make demo -->\n29.5 s\n"
    assert "needs 'DATE; COMMAND; WHY'" in cf.problems(page(tmp_path, bad))[0]
    terse = "# T\n\n<!-- recorded: 2026-12-04; make demo; n/a -->\n29.5 s\n"
    assert "says in words why" in cf.problems(page(tmp_path, terse))[0]


def test_no_recorded_block_is_given_whole_by_the_committed_rows_it_names() -> None:
    """What the committed rows can recompute is a from mark: a recorded block all of whose
    figures are values of the docs/results files it names (in its text or command) fails."""
    from benchmarks.figures import figure_keys

    for path in PAGES:
        _, counts, _ = figure_keys.rewrite(path)
        assert counts["converted"] == 0, f"{path.name}: run benchmarks/figures/figure_keys.py on it"


def test_figure_keys_turns_a_recomputable_recorded_block_into_a_keyed_from(tmp_path: Path) -> None:
    from benchmarks.figures import figure_keys

    src = "docs/results/novels/test"
    mark = f"<!-- recorded: 2026-12-05; mindscape eval --out {src}; said to be not kept -->"
    look = cf.test_looks(src)
    text, counts, _ = figure_keys.rewrite(page(tmp_path, f"# T\n\n{mark}\nnaive 0.232 ({look}).\n"))
    assert counts["converted"] == 1 and f"<!-- from: {src}; " in text
    assert cf.problems(page(tmp_path, text)) == []


def test_a_from_mark_holds_each_figure_to_the_one_value_its_key_names(tmp_path: Path) -> None:
    src = "docs/results/novels/test"
    pair = "test:mindscape~test:naive"
    keys = f"test:naive.f1 test:mindscape.f1 {pair}.points {pair}.points.lo {pair}.points.hi"
    look = cf.test_looks(src)
    ok = f"# T\n\n<!-- from: {src}; {keys} -->\nnaive 0.232, mindscape 0.207, −2.5 [−12.8, +7.7]; {look}.\n"
    assert cf.problems(page(tmp_path, ok)) == []
    # mindscape's 0.207 under naive's key: a value of the files, but not the one named
    swapped = ok.replace("naive 0.232, mindscape 0.207", "naive 0.207, mindscape 0.232")
    found = [p.split(": ", 1)[1] for p in cf.problems(page(tmp_path, swapped))]
    assert len(found) == 2 and found[0].startswith("0.207 is not test:naive.f1")
    # a sign is part of the figure: +2.5 is not the −2.5 its key names
    flipped = ok.replace("−2.5 [", "+2.5 [")
    found = [p.split(": ", 1)[1] for p in cf.problems(page(tmp_path, flipped))]
    assert len(found) == 1 and found[0].startswith(f"+2.5 is not {pair}.points")
    # a signed figure shows a difference, never a plain value
    signed = ok.replace("mindscape 0.207", "mindscape +0.207")
    found = [p.split(": ", 1)[1] for p in cf.problems(page(tmp_path, signed))]
    assert found == ["+0.207 is signed, test:mindscape.f1 is not a difference"]
    # one key a figure: a mark without keys, or with too few, fails
    bare = f"# T\n\n<!-- from: {src} -->\nnaive 0.232; {look}.\n"
    assert "names 0 keys for 1 figures" in cf.problems(page(tmp_path, bare))[0]
    # a negated difference: "2.5 points lower"
    lower = f"# T\n\n<!-- from: {src}; -{pair}.points -->\nmindscape is 2.5 points lower; {look}.\n"
    assert cf.problems(page(tmp_path, lower)) == []


def test_whole_numbers_in_a_from_block_s_tables_are_checked(tmp_path: Path) -> None:
    """Token counts and better/worse counts in a table are figures: a stale one fails."""
    src = "docs/results/novels/test"
    pair = "test:mindscape~test:naive"
    table = "| run | F1 | better / worse |\n|---|---|---|\n| 2 runs | {f1} | {better} / {worse} |\n"
    table += f"\nThe {cf.test_looks(src)} at these test questions.\n"
    keys = f"test:mindscape.f1 {pair}.better {pair}.worse"
    values = cf.figures([src])
    good = table.format(
        f1="0.207", better=int(values[f"{pair}.better"]), worse=int(values[f"{pair}.worse"])
    )
    assert cf.problems(page(tmp_path, f"# T\n\n<!-- from: {src}; {keys} -->\n{good}")) == []
    stale = good.replace(f"| {int(values[f'{pair}.better'])} /", "| 99 /")
    found = cf.problems(page(tmp_path, f"# T\n\n<!-- from: {src}; {keys} -->\n{stale}"))
    assert len(found) == 1 and "99 is not" in found[0]
    assert cf.page_figures("| label 12 | 1,004 / 990 | 2026-12-05 | R@10 |", table=True) == [
        "1,004",
        "990",
    ]


def test_the_model_cards_are_checked_pages() -> None:
    assert MODEL_CARDS and all(card in PAGES for card in MODEL_CARDS)


def test_a_mark_under_a_heading_covers_its_subsections_and_one_elsewhere_its_paragraphs(
    tmp_path: Path,
) -> None:
    mark = "<!-- recorded: 2026-12-04; cmd; no rows were kept -->"
    under = f"## A\n\n{mark}\n\n0.5\n\n### B\n\n0.6\n\n## C\n\n0.7\n"
    assert [p.split(": ")[1][:3] for p in cf.problems(page(tmp_path, under))] == ["0.7"]
    inside = f"## A\n\nText.\n\n{mark}\n0.5\n\n### B\n\n0.6\n"
    assert [p.split(": ")[1][:3] for p in cf.problems(page(tmp_path, inside))] == ["0.6"]


def test_answer_confidence_and_reading_rows_give_what_their_scripts_report() -> None:
    """reader/confidence.py's answers give its summary.txt's figures (the AUROC, the reading on
    when unsure, paired); reader/windows.py's readings give each reading's score where it
    holds an answer and where it does not."""
    confidence = cf.figures(["docs/results/local/answer-confidence-fairytaleqa-dev60"])
    shown = {
        f for f in ("0.794", "0.195", "0.461", "0.382", "0.550") if cf.candidates(f, confidence)
    }
    signed = {f for f in ("+0.016", "-0.001", "+0.050") if cf.candidates(f, confidence)}
    assert len(shown) == 5 and len(signed) == 3
    readings = cf.figures(["docs/results/local/reading-windows-fairytaleqa-dev60"])
    assert all(cf.candidates(f, readings) for f in ("0.519", "0.141", "0.532", "0.151"))


def copy_results(tmp_path: Path, *parts: str) -> Path:
    for part in parts:
        src, dst = REPO / part, tmp_path / part
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
    return tmp_path


def test_the_headline_says_which_rows_ran_with_today_s_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed runs are today's default (the answer verifier is off again); a row run
    before a change of the default says so in the table, under it and in the README's status."""
    copy_results(
        tmp_path,
        "docs/results/novels/test",
        "docs/results/novels/test-dense-tie",
        "docs/results/test-runs.jsonl",
        cf.FTQA_V2,
        cf.FTQA_120,
        cf.QUALITY_V2,
    )
    monkeypatch.setattr(cf, "REPO", tmp_path)
    figs = cf.headline()
    assert all(f.row.current for f in figs)
    table = cf.headline_table(figs)
    assert f"`{cf.FTQA_V2}/results.jsonl`" in table and "not yet rerun" not in table
    ftqa_fig = figs[0]
    assert ftqa_fig.ceiling is not None and ftqa_fig.ceiling[0] < 1.0
    assert not ftqa_fig.marked  # no FairytaleQA test rows were read for a change
    ftqa_120 = figs[1]
    assert ftqa_120.ceiling is None and not ftqa_120.marked
    assert figs[3].marked  # QuALITY's loop fixes came from its test rows

    before = "before a change"
    stale = [
        dataclasses.replace(
            figs[2], row=dataclasses.replace(figs[2].row, current=False, before=before)
        ),
        figs[0],
        figs[3],
    ]
    table = cf.headline_table(stale)
    assert table.count(before) == 2  # its row and the sentence under the table
    assert "Novels: measured before a change, not yet rerun with today's default." in table
    status = " ".join(cf.status_lines(stale).split())
    assert "Novels (NarrativeQA test, 60 questions of 5 books), measured before a change" in status
    assert "FairytaleQA test (60 random questions), today's default" in status


def test_the_headline_says_which_look_at_its_test_questions_each_run_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each headline row says how many runs had scored its test questions (its look), counted
    from the test-run log and the committed rows, not typed in: the same files with a log that
    lacks the earlier runs give an earlier look."""
    parts = ("docs/results/novels/test", "docs/results/novels/test-dense-tie")
    copy_results(tmp_path, *parts, "docs/results/test-runs.jsonl", cf.FTQA_V2, cf.FTQA_120)
    copy_results(tmp_path, cf.QUALITY_V2)
    monkeypatch.setattr(cf, "REPO", tmp_path)
    figs = cf.headline()
    assert figs[0].looks[1] == "at least the 10th look"  # FairytaleQA's 60: nine runs before
    assert "at least the 10th look" in cf.headline_table(figs)
    assert "at least the 10th look" in cf.status_lines(figs)

    log = tmp_path / "docs" / "results" / "test-runs.jsonl"
    kept = [x for x in log.read_text().splitlines() if '"dataset": "fairytaleqa"' in x]
    kept = [x for x in kept if "sample60-v2" in x or "sample120" in x]
    log.write_text("\n".join(kept) + "\n")
    figs = cf.headline()
    assert figs[0].looks[1] == "1st look" and figs[0].looks[2] == "2nd look"  # then the ceiling
    assert figs[1].looks[1] == "3rd look"  # the 120 share 57 questions with both
    assert figs[2].looks[1] == "not logged"  # no line for the novels' run in this log


def test_a_test_split_s_figures_say_which_look_at_its_questions_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside every figure from a test split's results the page says how many runs had scored
    those questions, as the test-run log counts them: left out, the check fails; the count is
    the log's, so a log without the earlier runs asks for an earlier look; a dev source asks
    for none, and a test folder no logged run wrote says it came before the log."""
    src = "docs/results/novels/test"
    keys = "test:naive.f1"
    look = cf.test_looks(src)
    assert look == "at least the 2nd look"
    said = f"# T\n\n<!-- from: {src}; {keys} -->\nnaive 0.232 ({look} at these questions).\n"
    assert cf.problems(page(tmp_path, said)) == []
    unsaid = said.replace(f" ({look} at these questions)", "")
    found = cf.problems(page(tmp_path, unsaid))
    assert len(found) == 1 and "'at least the 2nd look'" in found[0]
    assert cf.test_looks("docs/results/novels/dev") is None
    assert cf.test_looks("docs/results/ranker/local/quality_leval-test99.jsonl") == (
        "before the test-run log"
    )
    copy_results(tmp_path, "docs/results/test-runs.jsonl")
    log = tmp_path / "docs" / "results" / "test-runs.jsonl"
    mine = [x for x in log.read_text().splitlines() if f'"out": "{src}"' in x]
    log.write_text("\n".join(mine) + "\n")
    monkeypatch.setattr(cf, "REPO", tmp_path)
    assert cf.test_looks(src) == "1st look"
