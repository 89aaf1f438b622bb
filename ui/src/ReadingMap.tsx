// The map under a reply: where in the book the answer came from (src/mindscape/trace.py makes
// the data; src/mindscape/reading_map.py draws the same map for `ask --map`).
//
// The book is a strip of its sessions in story order (chapter labels where the outline has
// headings); the question's activation is the strip's heat; the last round's signature is
// outlined; each round's read passages are numbered marks under it (the number is the round);
// the answer's quote is a pin above it. For a library, a bar of the books the question touched
// comes first. Hovering a mark shows its passage; clicking the pin opens the quote.
//
// The data may be missing or damaged (an older thread, a run without a trace): `mapData`
// then gives null and the reply shows no map. `MapBoundary` keeps a drawing error to the map.
import { Component, memo, useState, type ReactNode } from "react";

export type StripSession = { unit_id: string; chunks: [number, number]; heat: number };
export type Book = {
  doc_id: string;
  title: string;
  chunks: number;
  share: number;
  sessions: StripSession[];
  chapters: { label: string; chunk: number }[];
};
export type ReadPassage = {
  unit_id: string;
  doc_id: string;
  spans: [number, number][];
  layer: string;
  text: string;
};
export type Step = {
  round: number;
  sessions?: { unit_id: string; doc_id: string; weight: number }[];
  read_passages?: ReadPassage[];
};
export type Quote = {
  text: string;
  doc_id: string;
  unit_id: string;
  chunk: number | null;
  round: number;
};
export type Trace = { books?: unknown; trace?: unknown; quote?: unknown };

type Mark = { round: number; spans: [number, number][]; unit_id: string; text: string };
type MapData = {
  book: Book;
  books: Book[];
  signature: Set<string>;
  marks: Mark[];
  quote: Quote | null;
  rounds: number;
};

const COLOURS = ["#2f4f7f", "#b0413e", "#3e7b3e", "#7a4fa0", "#b7791f", "#1f7a8c"];
const HEAT = [
  [246, 245, 241],
  [242, 200, 121],
  [217, 98, 43],
  [140, 28, 19],
];
const W = 600;

const isNum = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);
const isSpan = (x: unknown): x is [number, number] =>
  Array.isArray(x) && x.length === 2 && isNum(x[0]) && isNum(x[1]);

function isBook(b: unknown): b is Book {
  const o = b as Book | null;
  return (
    !!o &&
    typeof o.doc_id === "string" &&
    isNum(o.chunks) &&
    o.chunks > 0 &&
    Array.isArray(o.sessions) &&
    o.sessions.every((s) => s && typeof s.unit_id === "string" && isSpan(s.chunks) && isNum(s.heat)) &&
    Array.isArray(o.chapters ?? [])
  );
}

// The map's content from a reply's parts (or a live run's events); null when unusable.
export function mapData(t: Trace | undefined): MapData | null {
  if (!t || !Array.isArray(t.books)) return null;
  const books = t.books.filter(isBook);
  if (books.length === 0) return null;
  const q = t.quote as Quote | null | undefined;
  const quote = q && typeof q.text === "string" && typeof q.doc_id === "string" ? q : null;
  const book = books.find((b) => quote && b.doc_id === quote.doc_id) ?? books[0];
  const steps = (Array.isArray(t.trace) ? t.trace : []).filter(
    (s): s is Step => !!s && isNum((s as Step).round),
  );
  const last = steps[steps.length - 1];
  const signature = new Set(
    (Array.isArray(last?.sessions) ? last.sessions : [])
      .filter((s) => s && s.doc_id === book.doc_id)
      .map((s) => s.unit_id),
  );
  const marks: Mark[] = [];
  for (const step of steps) {
    for (const p of Array.isArray(step.read_passages) ? step.read_passages : []) {
      if (p && p.doc_id === book.doc_id && Array.isArray(p.spans) && p.spans.length && p.spans.every(isSpan)) {
        marks.push({ round: step.round, spans: p.spans, unit_id: String(p.unit_id), text: String(p.text ?? "") });
      }
    }
  }
  return {
    book,
    books,
    signature,
    marks,
    quote: quote && quote.doc_id === book.doc_id ? quote : null,
    rounds: Math.max(steps.length, ...marks.map((m) => m.round), 1),
  };
}

function heatColour(h: number): string {
  const x = Math.min(Math.max(h, 0), 1) * (HEAT.length - 1);
  const i = Math.min(Math.floor(x), HEAT.length - 2);
  const f = x - i;
  const c = HEAT[i].map((v, k) => Math.round(v + (HEAT[i + 1][k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function clip(s: string, n: number): string {
  const flat = s.split(/\s+/).join(" ").trim();
  return flat.length <= n ? flat : flat.slice(0, n - 1) + "…";
}

function MapView({ data }: { data: MapData }) {
  const [hover, setHover] = useState<Mark | null>(null);
  const [open, setOpen] = useState(false);
  const { book, books, signature, marks, quote, rounds } = data;
  const x = (chunk: number) => (chunk / book.chunks) * W;
  const top = 34;
  const stripH = 26;
  const row = 16;
  const height = top + stripH + 10 + row * rounds + 6;
  return (
    <div className="map" data-testid="map">
      {books.length > 1 && (
        <div className="books" data-testid="books" title="the books the question touched">
          {books.map((b) => (
            <span
              key={b.doc_id}
              className={b.doc_id === book.doc_id ? "book chosen" : "book"}
              style={{ flexGrow: Math.max(b.share, 0.02) }}
            >
              {b.doc_id}
            </span>
          ))}
        </div>
      )}
      <svg viewBox={`0 0 ${W} ${height}`} role="img" aria-label={`map of ${book.title}`}>
        {book.chapters.map((c, i) => (
          <text key={i} x={x(c.chunk) + 2} y={top - 22} className="chapter">
            {clip(c.label, 24)}
          </text>
        ))}
        {book.sessions.map((s) => (
          <rect
            key={s.unit_id}
            data-testid="session"
            className={signature.has(s.unit_id) ? "session signature" : "session"}
            x={x(s.chunks[0])}
            y={top}
            width={Math.max(x(s.chunks[1] + 1) - x(s.chunks[0]), 1)}
            height={stripH}
            fill={heatColour(s.heat)}
          >
            <title>
              {s.unit_id} · activation {s.heat.toFixed(2)}
              {signature.has(s.unit_id) ? " · in the signature" : ""}
            </title>
          </rect>
        ))}
        {marks.map((m, i) => {
          const y = top + stripH + 10 + row * (m.round - 1) + row / 2;
          const c = COLOURS[(m.round - 1) % COLOURS.length];
          const cx = (x(m.spans[0][0]) + x(m.spans[0][1] + 1)) / 2;
          return (
            <g
              key={i}
              data-testid="mark"
              className="mark"
              onMouseEnter={() => setHover(m)}
              onMouseLeave={() => setHover(null)}
            >
              {m.spans.map(([a, b], k) => (
                <line key={k} x1={x(a)} x2={x(b + 1)} y1={y} y2={y} stroke={c} strokeOpacity={0.35} strokeWidth={4} />
              ))}
              <circle cx={cx} cy={y} r={6} fill={c} stroke="white" />
              <text x={cx} y={y + 3} className="mark-n">
                {m.round}
              </text>
            </g>
          );
        })}
        {quote && quote.chunk !== null && isNum(quote.chunk) && (
          <g data-testid="pin" className="pin" onClick={() => setOpen((o) => !o)}>
            <line x1={x(quote.chunk + 0.5)} x2={x(quote.chunk + 0.5)} y1={top - 12} y2={top} />
            <path d={`M ${x(quote.chunk + 0.5) - 6} ${top - 20} h 12 l -6 9 z`} />
            <title>the quote: click to open</title>
          </g>
        )}
      </svg>
      <div className="map-note">
        {hover ? (
          <span data-testid="mark-passage">
            round {hover.round} · {hover.unit_id}: {clip(hover.text, 300)}
          </span>
        ) : (
          <span>
            {book.title}: heat is the question's activation, outlined sessions the last round's signature,
            numbered marks the passages read in that round
            {quote ? ", the pin the quote" : ""}. Hover a mark to read it.
          </span>
        )}
      </div>
      {open && quote && (
        <blockquote data-testid="pin-quote">
          {quote.text}
          <cite>
            {quote.unit_id} (round {quote.round})
          </cite>
        </blockquote>
      )}
    </div>
  );
}

class MapBoundary extends Component<{ children: ReactNode }, { failed: boolean }> {
  state = { failed: false };
  static getDerivedStateFromError() {
    return { failed: true };
  }
  render() {
    return this.state.failed ? null : this.props.children;
  }
}

// The map of a reply or a live run: nothing when its data is missing or damaged.
export const ReadingMap = memo(function ReadingMap({ trace }: { trace: Trace | undefined }) {
  const data = mapData(trace);
  if (!data) return null;
  return (
    <MapBoundary>
      <MapView data={data} />
    </MapBoundary>
  );
});

// The step a run is in once a progress event happened (src/mindscape/trace.py, step_of).
export function stepOf(e: { event?: unknown; round?: unknown; decision?: unknown }): string | null {
  const round = isNum(e.round) ? e.round : 0;
  const key = e.event === "decision" ? String(e.decision) : String(e.event);
  if (e.event === "signature" && round) return null;
  const steps: Record<string, string> = {
    start: "activating the signature",
    signature: `retrieving (round ${round + 1})`,
    retrieve: `reading round ${round}`,
    answer: `refining after round ${round}`,
    REFINE: `retrieving (round ${round + 1})`,
    ANSWER: "answering",
    STOP: "answering",
  };
  return steps[key] ?? null;
}
