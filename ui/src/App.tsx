// The chat page: one thread of questions to mindscape's `chat` graph, streamed with the
// LangGraph SDK's useStream. Each reply shows the answer, the passages it read (folded, with
// their place in the book), the run's rounds, calls and tokens, and the map of where in the
// book the answer came from (ReadingMap.tsx): the graph puts them in the message's
// additional_kwargs.mindscape (see src/mindscape/graphs/chat.py, reply_parts). While a run
// works, its progress events (the stream's custom mode) show the step it is in and fill the
// map round by round.
//
// Settings come from the page URL, so one build serves any server:
//   ?apiUrl=http://127.0.0.1:2024  the LangGraph server (this is the default; `make ui`
//                                  prints the URL with the port it started it on)
//   &assistantId=chat              the graph or assistant
//   &threadId=…                    the thread (set by the page; a reload keeps the thread)
//   &store=DIR&doc=ID              the book (the run's context; default: the server's)
import { useStream } from "@langchain/langgraph-sdk/react";
import type { Message } from "@langchain/langgraph-sdk";
import { memo, useState, type FormEvent } from "react";
import { ReadingMap, stepOf, type Step } from "./ReadingMap";

type Passage = { quote: string; place: string };
type Parts = {
  question: string;
  answer: string;
  passages: Passage[];
  answer_round: number;
  confidence?: number;
  trusted?: boolean;
  rounds: number;
  llm_calls: number;
  tokens_in: number;
  tokens_out: number;
  trace?: unknown;
  books?: unknown;
  quote?: unknown;
};
type Live = { step: string; books?: unknown; trace: Step[]; quote?: unknown };
type Progress = {
  event?: string;
  round?: number;
  decision?: string;
  books?: unknown;
  step?: Step;
  quote?: unknown;
};

const params = new URLSearchParams(window.location.search);
const apiUrl = params.get("apiUrl") ?? "http://127.0.0.1:2024";
const assistantId = params.get("assistantId") ?? "chat";
const context = Object.fromEntries(
  [
    ["store", params.get("store")],
    ["doc_id", params.get("doc")],
  ].filter(([, v]) => v),
);

function setThreadInUrl(id: string | null) {
  const url = new URL(window.location.href);
  if (id) url.searchParams.set("threadId", id);
  else url.searchParams.delete("threadId");
  window.history.replaceState(null, "", url);
}

function text(m: Message): string {
  if (typeof m.content === "string") return m.content;
  return m.content
    .map((b) => (b.type === "text" && "text" in b ? b.text : ""))
    .join("");
}

function partsOf(m: Message): Parts | undefined {
  return (m.additional_kwargs as { mindscape?: Parts } | undefined)?.mindscape;
}

// A reply, drawn again only when its message changes (a thread of 20 maps stays quick to type in).
const Reply = memo(
  function Reply({ m }: { m: Message }) {
    return <ReplyBody m={m} />;
  },
  (a, b) => a.m === b.m || (a.m.id !== undefined && a.m.id === b.m.id && text(a.m) === text(b.m)),
);

function ReplyBody({ m }: { m: Message }) {
  const p = partsOf(m);
  if (!p || typeof p !== "object" || typeof p.answer !== "string") {
    return <div className="plain">{text(m)}</div>;
  }
  const passages = Array.isArray(p.passages) ? p.passages : [];
  return (
    <>
      <div className="answer" data-testid="answer">
        {p.answer}
      </div>
      {p.trusted === false && (
        <div className="unsure" data-testid="unsure">
          Unsure: the reader could not confirm this from the book (confidence{" "}
          {(p.confidence ?? 0).toFixed(2)}).
        </div>
      )}
      {p.question && <div className="asked">asked as: {p.question}</div>}
      {passages.length > 0 && (
        <details data-testid="passages">
          <summary>
            {passages.length} passage{passages.length > 1 ? "s" : ""} read (round {p.answer_round})
          </summary>
          {passages.map((q, i) => (
            <blockquote key={i} data-testid="passage">
              {q.quote}
              {q.place && <cite>{q.place}</cite>}
            </blockquote>
          ))}
        </details>
      )}
      <div className="cost" data-testid="cost">
        {p.rounds} round{p.rounds === 1 ? "" : "s"} · {p.llm_calls} LLM call
        {p.llm_calls === 1 ? "" : "s"} · {p.tokens_in} tokens in · {p.tokens_out} out
      </div>
      <ReadingMap trace={p} />
    </>
  );
}

export function App() {
  const [threadId, setThreadId] = useState<string | null>(params.get("threadId"));
  const [draft, setDraft] = useState("");
  const [live, setLive] = useState<Live | null>(null);
  const thread = useStream<{ messages: Message[] }>({
    apiUrl,
    assistantId,
    threadId,
    fetchStateHistory: false,
    onCustomEvent: (data) => {
      const e = (data ?? {}) as Progress;
      setLive((prev) => {
        const now = prev ?? { step: stepOf({ event: "start" }) ?? "", trace: [] };
        const step = stepOf(e) ?? now.step;
        if (e.event === "signature" && !e.round) return { ...now, step, books: e.books };
        if (e.event === "decision" && e.step) {
          return { ...now, step, trace: [...now.trace, e.step], quote: e.quote };
        }
        return { ...now, step };
      });
    },
    onThreadId: (id) => {
      setThreadId(id);
      setThreadInUrl(id);
    },
  });

  function send(e: FormEvent) {
    e.preventDefault();
    const question = draft.trim();
    if (!question || thread.isLoading) return;
    setDraft("");
    setLive({ step: stepOf({ event: "start" }) ?? "", trace: [] });
    thread.submit(
      { messages: [{ type: "human", content: [{ type: "text", text: question }] }] },
      {
        context,
        optimisticValues: (prev) => ({
          ...prev,
          messages: [...(prev.messages ?? []), { type: "human", content: question }],
        }),
      },
    );
  }

  function newThread() {
    setThreadId(null);
    setThreadInUrl(null);
  }

  return (
    <main>
      <header>
        <h1>mindscape</h1>
        <span className="where">
          {assistantId} at {apiUrl}
          {threadId ? ` · thread ${threadId.slice(0, 8)}` : ""}
        </span>
        <button type="button" onClick={newThread} disabled={thread.isLoading}>
          New thread
        </button>
      </header>
      <section className="messages" data-testid="messages">
        {thread.messages.length === 0 && (
          <p className="hint">Ask a question about the book. Follow-ups in the same thread see the earlier turns.</p>
        )}
        {thread.messages.map((m, i) => (
          <article key={m.id ?? i} className={m.type} data-testid={`message-${m.type}`}>
            {m.type === "ai" ? <Reply m={m} /> : <div className="plain">{text(m)}</div>}
          </article>
        ))}
        {thread.isLoading && (
          <div className="live" data-testid="reading">
            <p className="hint">
              Reading the book: <span data-testid="step">{live?.step || "starting"}</span>…
            </p>
            {live && <ReadingMap trace={live} />}
          </div>
        )}
        {thread.error != null && (
          <p className="error" data-testid="error">
            {String((thread.error as Error).message ?? thread.error)}
          </p>
        )}
      </section>
      <form onSubmit={send}>
        <input
          data-testid="question"
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          placeholder="Who was kind to Cinderella?"
          autoFocus
        />
        <button type="submit" disabled={thread.isLoading || !draft.trim()}>
          Ask
        </button>
      </form>
    </main>
  );
}
