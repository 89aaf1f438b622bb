"""The map of a question's reading, drawn from ``ask``'s result (``ask --map FILE``).

The book is a strip of its sessions in story order (chapter labels where the outline has
headings); the question's activation is the strip's heat; the signature's sessions are
outlined; each round's read passages are numbered marks under the strip (the number is the
round); the answer's quote is a pin above it. For a library, a bar of the books the
question touched comes first, then the chosen book's strip (the quote's book, else the most
activated). The data is :mod:`mindscape.trace`'s; the chat page (ui/src/App.tsx) draws the
same map from the same data.

``FILE``'s extension picks the format: ``.svg``, ``.png``, or ``.html`` (the SVG in a page,
with the passages read and the quote listed under it). In the SVG and HTML, hovering a mark
shows its passage and the pin its quote (SVG ``<title>`` elements).
"""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindscape.errors import MindscapeError

__all__ = [
    "FORMATS",
    "MARK_COLOURS",
    "MAX_LABELS",
    "TITLE_CHARS",
    "MapError",
    "MapView",
    "Mark",
    "check_format",
    "draw",
    "map_view",
    "page",
    "with_titles",
    "write_map",
]

FORMATS = (".svg", ".png", ".html")
MARK_COLOURS = ("#2f4f7f", "#b0413e", "#3e7b3e", "#7a4fa0", "#b7791f", "#1f7a8c")
"""One colour per round, in order (they repeat after six)."""
TITLE_CHARS = 400
"""Longest passage text in a mark's tooltip."""
MAX_LABELS = 30
"""Most chapter labels drawn (a book with more labels every second, third… chapter)."""


class MapError(MindscapeError):
    """A map that cannot be written (a format it does not know, a result without a trace)."""


@dataclass
class Mark:
    """One passage read: where it is, the round that read it and its words."""

    round: int
    spans: list[tuple[int, int]]
    """Its chunk runs ``(first, last)``; the mark sits on the first."""
    unit_id: str
    layer: str
    text: str


@dataclass
class MapView:
    """What the map shows, taken from a result (:func:`map_view`)."""

    book: dict[str, Any]
    """The chosen book's strip (:class:`~mindscape.state.BookStrip`)."""
    books: list[dict[str, Any]]
    """Every book touched (one for a single book)."""
    signature: set[str]
    """The sessions of the last round's signature."""
    marks: list[Mark] = field(default_factory=list)
    quote: dict[str, Any] | None = None
    answer: str = ""
    rounds: int = 0


def check_format(path: str | Path) -> str:
    """The map's format from `path`'s extension; MapError for another."""
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise MapError(f"--map {path}: use a file ending in {', '.join(FORMATS)}")
    return ext


def map_view(result: dict[str, Any]) -> MapView | None:
    """The map's content from ``ask``'s result (its JSON object or the graph's output);
    None when the result holds no usable trace (an older run, a fake retriever)."""
    try:
        books = [b for b in result.get("books") or [] if b.get("chunks")]
        if not books:
            return None
        quote = result.get("quote") or None
        chosen = next((b for b in books if quote and b["doc_id"] == quote.get("doc_id")), books[0])
        trace = list(result.get("trace") or [])
        last = trace[-1] if trace else {}
        signature = {
            s["unit_id"] for s in last.get("sessions") or [] if s.get("doc_id") == chosen["doc_id"]
        }
        marks = [
            m
            for step in trace
            for p in step.get("read_passages") or []
            if p.get("doc_id") == chosen["doc_id"] and (m := _mark(step, p)) is not None
        ]
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        return None
    return MapView(
        book=chosen,
        books=books,
        signature=signature,
        marks=marks,
        quote=quote if quote and quote.get("doc_id") == chosen["doc_id"] else None,
        answer=str(result.get("answer") or ""),
        rounds=len(trace),
    )


def _mark(step: dict[str, Any], passage: dict[str, Any]) -> Mark | None:
    """A passage read as a mark; None for a damaged one (left out, as the page does)."""
    try:
        runs = [(int(a), int(b)) for a, b in passage["spans"]]
        return (
            Mark(
                round=int(step["round"]),
                spans=runs,
                unit_id=str(passage["unit_id"]),
                layer=str(passage.get("layer", "")),
                text=str(passage.get("text", "")),
            )
            if runs
            else None
        )
    except (KeyError, TypeError, ValueError):
        return None


def write_map(result: dict[str, Any], path: str | Path) -> Path:
    """Draw the map of `result` into `path` (SVG, PNG or HTML by its extension)."""
    ext = check_format(path)
    view = map_view(result)
    if view is None:
        raise MapError("no map: the result has no book strip (a run without the trace)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = draw(view)
    if ext == ".png":
        fig.savefig(out, format="png", dpi=150)
        return out
    from matplotlib import rc_context

    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none"}):  # words as text, not paths: smaller, faster
        fig.savefig(buf, format="svg")
    svg = with_titles(buf.getvalue(), view)
    out.write_text(svg if ext == ".svg" else page(view, svg), encoding="utf-8")
    return out


def draw(view: MapView) -> Any:
    """The map as a matplotlib Figure. Each round's marks are one collection and their chunk
    runs one line (a book's rounds may read hundreds of passages); :func:`with_titles` gives
    each mark its tooltip."""
    from matplotlib.figure import Figure

    library = len(view.books) > 1
    rounds = max([m.round for m in view.marks] + [view.rounds, 1])
    strip_in = 2.0 + 0.3 * rounds
    height = strip_in + (0.8 if library else 0.0)
    fig = Figure(figsize=(10, height))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.5 / height, top=1 - 0.75 / height)
    if library:
        top, ax = fig.subplots(2, 1, height_ratios=[0.5, strip_in - 0.5])
        _books_bar(top, view)
    else:
        ax = fig.subplots()
    _sessions_strip(ax, view)
    _round_marks(ax, view, rounds)
    _quote_pin(ax, view)
    _axes(ax, view, rounds)
    return fig


def _sessions_strip(ax: Any, view: MapView) -> None:
    """The book's sessions as a heat strip (the signature's outlined) with chapter labels."""
    book = view.book
    cmap = _heat_cmap()
    sessions = list(book.get("sessions") or [])
    for outlined in (False, True):
        chosen = [s for s in sessions if (s["unit_id"] in view.signature) == outlined]
        if chosen:
            ax.broken_barh(
                [
                    (int(s["chunks"][0]), int(s["chunks"][1]) + 1 - int(s["chunks"][0]))
                    for s in chosen
                ],
                (0.0, 1.0),
                facecolors=[cmap(min(max(float(s.get("heat", 0.0)), 0.0), 1.0)) for s in chosen],
                edgecolors="#1d2330" if outlined else "#b8b2a2",
                linewidths=2.2 if outlined else 0.6,
                zorder=3 if outlined else 2,
            )
    labels = list(book.get("chapters") or [])
    every = max(1, -(-len(labels) // MAX_LABELS))
    if labels:
        ax.vlines(
            [int(c["chunk"]) for c in labels], 0.0, 1.0, color="#6b7080", linewidth=0.6, zorder=4
        )
    for c in labels[::every]:
        ax.text(int(c["chunk"]), 1.05, _clip(str(c["label"]), 24), fontsize=7, rotation=30)


def _round_marks(ax: Any, view: MapView, rounds: int) -> None:
    """Each round's passages read: a row of numbered marks over their chunk runs."""
    for r in range(1, rounds + 1):
        marks = [m for m in view.marks if m.round == r]
        if not marks:
            continue
        y = -0.45 * r
        colour = MARK_COLOURS[(r - 1) % len(MARK_COLOURS)]
        xs_runs = [x for m in marks for a, b in m.spans for x in (a, b + 1, float("nan"))]
        ax.plot(xs_runs, [y] * len(xs_runs), color=colour, linewidth=3, alpha=0.35, zorder=5)
        xs = [(m.spans[0][0] + m.spans[0][1] + 1) / 2 for m in marks]
        dots = ax.scatter(xs, [y] * len(xs), s=90, color=colour, edgecolors="white", zorder=6)
        dots.set_gid(f"marks-r{r}")
        number = ax.scatter(xs, [y] * len(xs), s=28, marker=_digits(r), color="white", zorder=7)
        number.set_gid(f"numbers-r{r}")


def _quote_pin(ax: Any, view: MapView) -> None:
    """The pin over the chunk that holds the answer's quote (none when its place is unknown)."""
    q = view.quote
    if q and q.get("chunk") is not None:
        x = int(q["chunk"]) + 0.5
        ax.plot([x, x], [1.0, 1.45], color="#a32020", linewidth=1.5, zorder=8)
        pin = ax.scatter([x], [1.5], marker="v", s=140, color="#a32020", zorder=9)
        pin.set_gid("pin")


def _axes(ax: Any, view: MapView, rounds: int) -> None:
    """The strip's limits, row labels, the book's name and the answer as the title."""
    book = view.book
    ax.set_xlim(0, max(int(book["chunks"]), 1))
    ax.set_ylim(-0.45 * rounds - 0.4, 2.1)
    ax.set_yticks([-0.45 * r for r in range(1, rounds + 1)] + [0.5])
    ax.set_yticklabels([f"round {r}" for r in range(1, rounds + 1)] + ["sessions"], fontsize=8)
    ax.set_xlabel(f"{book.get('title') or book['doc_id']}: chunks in story order", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(
        f"Answer: {_clip(view.answer, 120)}\nheat: the question's activation · outlined: the "
        "last round's signature · numbered: passages read in that round · pin: the quote",
        fontsize=8,
        loc="left",
    )


def _books_bar(ax: Any, view: MapView) -> None:
    """The books the question touched, as one bar split by their share of the activation."""
    left = 0.0
    for i, b in enumerate(view.books):
        share = float(b.get("share", 0.0))
        chosen = b["doc_id"] == view.book["doc_id"]
        ax.barh(
            0,
            share,
            left=left,
            color=MARK_COLOURS[i % len(MARK_COLOURS)],
            alpha=1.0 if chosen else 0.45,
            edgecolor="white",
        )
        if share > 0.08:
            ax.text(
                left + share / 2,
                0,
                b["doc_id"],
                ha="center",
                va="center",
                fontsize=7,
                color="white",
            )
        left += share
    ax.set_xlim(0, max(left, 1e-9))
    ax.set_yticks([])
    ax.set_xticks([])
    ax.set_title("books the question touched (share of its activation)", fontsize=8, loc="left")
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)


def _digits(n: int) -> Any:
    """The round's number as a marker: the outline of its digits, centred. A mathtext marker
    (``"$3$"``) would do the same, but matplotlib's first mathtext parse builds its grammar
    (about 140 ms of the first map a process draws)."""
    from matplotlib.path import Path
    from matplotlib.textpath import TextPath

    text = TextPath((0, 0), str(n), size=1)
    low, high = text.vertices.min(axis=0), text.vertices.max(axis=0)
    return Path(text.vertices - (low + high) / 2, text.codes)


def _heat_cmap() -> Any:
    from matplotlib.colors import LinearSegmentedColormap

    return LinearSegmentedColormap.from_list("heat", ["#f6f5f1", "#f2c879", "#d9622b", "#8c1c13"])


def _clip(text: str, n: int = TITLE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def with_titles(svg: str, view: MapView) -> str:
    """`svg` with a hover tooltip (an SVG ``<title>``) on each mark and on the pin: each
    round's dots are one group (``marks-rN``) of ``<use>`` elements in the order of its marks;
    each becomes ``<g id="mark-K">`` with its passage as title (K counts the marks in order).
    A string pass, not a parsed tree: the SVG of a long book's map holds thousands of
    elements."""
    out: list[str] = []
    pos = 0
    n = 0
    for r in sorted({m.round for m in view.marks}):
        marks = [m for m in view.marks if m.round == r]
        start = svg.find(f'<g id="marks-r{r}">', pos)
        if start < 0:
            continue
        stop = svg.find('<g id="', start + 1)
        stop = len(svg) if stop < 0 else stop
        out.append(svg[pos:start])
        body = svg[start:stop]
        uses = list(re.finditer(r"<use [^>]*/>", body))
        last = 0
        for use, m in zip(uses, marks, strict=False):
            tip = html.escape(f"round {m.round} · {m.unit_id}: {_clip(m.text)}", quote=False)
            out.append(body[last : use.start()])
            out.append(f'<g id="mark-{n}"><title>{tip}</title>{use.group(0)}</g>')
            last = use.end()
            n += 1
        out.append(body[last:])
        pos = stop
    out.append(svg[pos:])
    text = "".join(out)
    for r in {m.round for m in view.marks}:
        text = text.replace(
            f'<g id="numbers-r{r}">', f'<g id="numbers-r{r}" style="pointer-events: none">'
        )
    if view.quote:
        quote = _clip(str(view.quote.get("text", "")))
        tip = html.escape(f"the quote (round {view.quote.get('round')}): {quote}", quote=False)
        text = text.replace('<g id="pin">', f'<g id="pin"><title>{tip}</title>', 1)
    return text


def page(view: MapView, svg: str) -> str:
    """The HTML page: the map, then the quote and the passages read, round by round."""
    body = svg[svg.index("<svg") :]
    rows = "\n".join(
        f'<li class="mark"><b>round {m.round}</b> · {html.escape(m.unit_id)} '
        f"({html.escape(m.layer)}): {html.escape(_clip(m.text))}</li>"
        for m in view.marks
    )
    quote = (
        f"<blockquote>{html.escape(str(view.quote.get('text', '')))}"
        f"<cite>{html.escape(str(view.quote.get('unit_id', '')))}</cite></blockquote>"
        if view.quote
        else "<p>No quote.</p>"
    )
    title = html.escape(str(view.book.get("title") or view.book["doc_id"]))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mindscape map: {title}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:64rem;margin:1rem auto;color:#1d2330}}
svg{{width:100%;height:auto}}blockquote{{font-family:Georgia,serif;border-left:3px solid #a32020;
padding-left:.7rem}}cite{{display:block;color:#6b7080;font-size:.8rem}}li{{margin:.3rem 0}}</style>
</head><body>
<h1>{title}</h1>
<p><b>Answer:</b> {html.escape(view.answer)}</p>
{body}
<h2>The quote</h2>
{quote}
<h2>Passages read</h2>
<ul>
{rows}
</ul>
</body></html>
"""
