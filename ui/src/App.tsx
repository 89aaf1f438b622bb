// The chat page: one thread of questions to mindscape's `chat` graph, streamed with the
// LangGraph SDK's useStream. Each reply shows the answer, the passages it read (folded, with
// their place in the book) and the run's rounds, calls and tokens: the graph puts them in the
// message's additional_kwargs.mindscape (see src/mindscape/graphs/chat.py, reply_parts).
//
// Settings come from the page URL, so one build serves any server:
//   ?apiUrl=http://127.0.0.1:2024  the LangGraph server (this is the default; `make ui`
//                                  prints the URL with the port it started it on)
//   &assistantId=chat              the graph or assistant
//   &threadId=…                    the thread (set by the page; a reload keeps the thread)
//   &store=DIR&doc=ID              the book (the run's context; default: the server's)
import { useStream } from "@langchain/langgraph-sdk/react";
import type { Message } from "@langchain/langgraph-sdk";
import { useState, type FormEvent } from "react";

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

function Reply({ m }: { m: Message }) {
  const p = partsOf(m);
  if (!p) return <div className="plain">{text(m)}</div>;
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
      {p.passages.length > 0 && (
        <details data-testid="passages">
          <summary>
            {p.passages.length} passage{p.passages.length > 1 ? "s" : ""} read (round {p.answer_round})
          </summary>
          {p.passages.map((q, i) => (
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
    </>
  );
}

export function App() {
  const [threadId, setThreadId] = useState<string | null>(params.get("threadId"));
  const [draft, setDraft] = useState("");
  const thread = useStream<{ messages: Message[] }>({
    apiUrl,
    assistantId,
    threadId,
    fetchStateHistory: false,
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
        {thread.isLoading && <p className="hint" data-testid="reading">Reading the book…</p>}
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
