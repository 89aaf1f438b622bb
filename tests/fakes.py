"""Shared test fakes. Each section belongs to the module it fakes; add new sections below."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, Field, ValidationError

# =====================================================================================
# LLM layer fakes (mindscape.llm): ScriptedChatModel, ScriptExhausted, DictCache
# =====================================================================================

#: A scripted response: text, a pydantic object, a dict (structured output), an
#: AIMessage, an exception instance (raised), or a callable of the prompt text
#: returning any of these.
Scripted = Any


class ScriptExhausted(AssertionError):
    """The test asked the fake model more often than it scripted answers."""


def _tokens(text: str) -> int:
    """The fake's deterministic token count: one per started 4 characters."""
    return (len(text) + 3) // 4


def _prompt_of(messages: Sequence[BaseMessage]) -> str:
    """The text of the last human message (what scripted callables receive)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return str(message.text)
    return str(messages[-1].text) if messages else ""


def _as_messages(value: Any) -> list[BaseMessage]:
    """Coerce a runnable input (str, PromptValue, message list) to messages."""
    if isinstance(value, str):
        return [HumanMessage(content=value)]
    if hasattr(value, "to_messages"):
        return list(value.to_messages())
    return list(value)


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a queue, for offline tests of LLM roles.

    ``responses`` are consumed in order by ``invoke`` and by the runnable returned from
    ``with_structured_output``. Every call records the messages it got (``calls``), the
    last human message (``prompts``) and, for structured calls, ``(schema name,
    method)`` in ``structured_calls``. AIMessages carry ``usage_metadata`` (tokens
    = ceil(chars / 4)) unless ``report_usage`` is False.
    """

    responses: list[Any] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    structured_calls: list[tuple[str, str | None]] = Field(default_factory=list)
    report_usage: bool = True
    model_name: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def queue(self, *responses: Scripted) -> ScriptedChatModel:
        """Append responses to the script; returns self."""
        self.responses.extend(responses)
        return self

    def _next(self, messages: Sequence[BaseMessage]) -> Any:
        """Record the call and return the next scripted item (callables resolved)."""
        prompt = _prompt_of(messages)
        self.calls.append(list(messages))
        self.prompts.append(prompt)
        if not self.responses:
            raise ScriptExhausted(f"no scripted response left for prompt {prompt[:200]!r}")
        item = self.responses.pop(0)
        if callable(item) and not isinstance(item, (BaseModel, BaseException, type)):
            item = item(prompt)
        if isinstance(item, BaseException):
            raise item
        return item

    def _message(self, messages: Sequence[BaseMessage], content: str) -> AIMessage:
        """An AIMessage with usage metadata computed from the exchange."""
        if not self.report_usage:
            return AIMessage(content=content)
        tokens_in = sum(_tokens(str(m.text)) for m in messages)
        tokens_out = _tokens(content)
        return AIMessage(
            content=content,
            usage_metadata={
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        )

    def _to_ai(self, messages: Sequence[BaseMessage], item: Any) -> AIMessage:
        if isinstance(item, AIMessage):
            return item
        if isinstance(item, BaseModel):
            return self._message(messages, item.model_dump_json())
        if isinstance(item, (dict, list)):
            return self._message(messages, json.dumps(item))
        return self._message(messages, str(item))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._to_ai(messages, self._next(messages))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """Tools are ignored: scripted answers decide what happens."""
        return self

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: str | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, Any]:
        """A runnable popping the next item and returning it as ``schema``.

        Strings are parsed strictly (``model_validate_json``); a failure becomes
        ``parsing_error`` with ``include_raw=True`` and is raised otherwise, like
        langchain's own structured-output runnables.
        """
        name = getattr(schema, "__name__", None) or str(schema.get("title", "schema"))  # type: ignore[union-attr]

        def run(value: Any) -> Any:
            messages = _as_messages(value)
            self.structured_calls.append((name, method))
            item = self._next(messages)
            raw = self._to_ai(messages, item)
            parsed, error = _parse_structured(schema, item)
            if include_raw:
                return {"raw": raw, "parsed": parsed, "parsing_error": error}
            if error is not None:
                raise error
            return parsed

        return RunnableLambda(run, name=f"structured_{name}")


def _parse_structured(schema: Any, item: Any) -> tuple[Any, BaseException | None]:
    """Turn a scripted item into ``(parsed, parsing_error)`` for ``schema``."""
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        try:
            return (json.loads(item) if isinstance(item, str) else item), None
        except ValueError as exc:
            return None, exc
    if isinstance(item, schema):
        return item, None
    try:
        if isinstance(item, str):
            return schema.model_validate_json(item), None
        if isinstance(item, AIMessage):
            return schema.model_validate_json(str(item.text)), None
        return schema.model_validate(item), None
    except ValidationError as exc:
        return None, exc


class DictCache:
    """In-memory :class:`mindscape.llm.TextCache` that records gets and puts."""

    def __init__(self, initial: dict[str, str] | None = None) -> None:
        self.data: dict[str, str] = dict(initial or {})
        self.gets: list[str] = []
        self.puts: list[str] = []

    def get_text(self, key: str) -> str | None:
        """Return the value under ``key`` or ``None``."""
        self.gets.append(key)
        return self.data.get(key)

    def put_text(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``."""
        self.puts.append(key)
        self.data[key] = value


def scripted(*responses: Scripted, **fields: Any) -> ScriptedChatModel:
    """Shorthand: ``scripted("a", "b")`` is a ScriptedChatModel answering a then b."""
    return ScriptedChatModel(responses=list(responses), **fields)


# ---------------------------------------------------------------------------
# Index fakes: a deterministic embedder whose similarities mean something
# ---------------------------------------------------------------------------


class HashingEmbedder(Embeddings):
    """Bag of words hashed into `dim` buckets, unit-normalised: texts sharing words are similar."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.model_id = f"hashing-{dim}"
        self.calls = 0
        self.texts_embedded = 0

    def _vec(self, text: str) -> list[float]:
        v = np.zeros(self.dim, dtype=np.float64)
        for w in re.findall(r"[a-z0-9]+", text.lower()):
            v[zlib.crc32(w.encode()) % self.dim] += 1.0
        n = np.linalg.norm(v)
        if n == 0:
            v[0] = 1.0
            n = 1.0
        return (v / n).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.texts_embedded += len(texts)
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


# ---------------------------------------------------------------------------
# QA agent fakes (mindscape.graphs.qa): a tiny story, FakeStore, FakeRetriever
# ---------------------------------------------------------------------------

from mindscape.memory.types import Hit as _Hit  # noqa: E402
from mindscape.memory.types import SignatureUnit as _SignatureUnit  # noqa: E402
from mindscape.memory.types import Unit as _Unit  # noqa: E402

#: A short story in 8 chunks, with names for entity probes.
STORY_CHUNKS: list[str] = [
    "Mara Quill kept the lighthouse on Gull Rock. Every night she lit the great lamp at dusk.",
    "Her brother Tobin Quill sailed the trading ship Heron between the islands.",
    "One winter the Heron did not return. Mara searched the shore for three days.",
    "An old fisherman, Edrin Vale, told Mara that he saw the Heron near the Black Reef.",
    "At the Black Reef Mara found a sealed bottle with a letter from Tobin.",
    "The letter said that Tobin had hidden the ship's gold in the cave beneath the lighthouse.",
    "Mara opened the cave with the brass key her mother left her.",
    "Inside the cave she found the gold and Tobin himself, alive but hurt.",
]
STORY_SESSIONS: list[tuple[str, list[int]]] = [
    (
        "Mara Quill keeps the lighthouse on Gull Rock; her brother Tobin sails the Heron, which "
        "fails to return one winter.",
        [0, 1, 2],
    ),
    (
        "Edrin Vale saw the Heron near the Black Reef, where Mara finds Tobin's letter about the "
        "gold hidden in the cave beneath the lighthouse.",
        [3, 4, 5],
    ),
    ("Mara opens the cave with her mother's brass key and finds the gold and Tobin alive.", [6, 7]),
]
STORY_CLUSTERS: list[tuple[str, list[int]]] = [
    (
        "The Quill siblings: Mara the lighthouse keeper and Tobin the sailor of the Heron.",
        [0, 1, 6, 7],
    ),
    ("The search: the lost ship, the Black Reef, the bottle and the letter.", [2, 3, 4, 5]),
]


def story_units(doc_id: str = "tale") -> list[_Unit]:
    """The story as units of three layers (chunk ids `<doc>:c<n>`)."""
    cid = [f"{doc_id}:c{i}" for i in range(len(STORY_CHUNKS))]
    units = [
        _Unit(
            cid[i],
            doc_id,
            "veridical",
            t,
            [cid[i]],
            kind="chunk",
            order=i,
            meta={
                "window": f"{doc_id}:e{next(n for n, (_, m) in enumerate(STORY_SESSIONS) if i in m)}"
            },
        )
        for i, t in enumerate(STORY_CHUNKS)
    ]
    units += [
        _Unit(f"{doc_id}:e{n}", doc_id, "episodic", t, [cid[i] for i in m], kind="session", order=n)
        for n, (t, m) in enumerate(STORY_SESSIONS)
    ]
    units += [
        _Unit(
            f"{doc_id}:s0.{n}", doc_id, "semantic", t, [cid[i] for i in m], kind="cluster", order=n
        )
        for n, (t, m) in enumerate(STORY_CLUSTERS)
    ]
    return units


class FakeStore:
    """Just enough of a MemoryStore for the agent: the document list (no cache)."""

    def __init__(self, doc_ids: set[str]) -> None:
        self.doc_ids = set(doc_ids)
        self.path = "fake-store"

    def documents(self) -> list[dict[str, Any]]:
        return [{"doc_id": d} for d in sorted(self.doc_ids)]


class FakeRetriever:
    """The Retriever API over in-memory units: cosine ranking, α-mixing, exclusion, budgets.

    Token counts are word counts. Every call is recorded in `calls` as
    `(method, query, kwargs)`.
    """

    def __init__(
        self, units: list[_Unit] | None = None, embedder: Embeddings | None = None
    ) -> None:
        self.units = units if units is not None else story_units()
        self.embedder = embedder or HashingEmbedder(256)
        self.store = FakeStore({u.doc_id for u in self.units})
        self.vecs = np.asarray(self.embedder.embed_documents([u.text for u in self.units]))
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def _q(self, text: str) -> Any:
        return np.asarray(self.embedder.embed_query(text))

    def _scope(self, layer: str, doc_ids: set[str] | None) -> list[int]:
        return [
            i
            for i, u in enumerate(self.units)
            if u.layer == layer and (doc_ids is None or u.doc_id in doc_ids)
        ]

    def signature(
        self,
        query: str,
        *,
        doc_ids: set[str] | None = None,
        method: str = "coverage",
        params: Any = None,
        extra_text: str = "",
    ) -> list[_SignatureUnit]:
        self.calls.append(("signature", query, {"method": method, "extra_text": extra_text}))
        k = getattr(params, "k", 5)
        rows = self._scope("episodic", doc_ids)
        scores = self.vecs[rows] @ self._q(f"{query} {extra_text}".strip())
        order = [rows[j] for j in np.argsort(-scores, kind="stable")][:k]
        return [
            _SignatureUnit(
                self.units[i].id,
                self.units[i].text,
                list(self.units[i].chunk_ids),
                gains={"total": float(self.vecs[i] @ self._q(query))},
                rank=r,
            )
            for r, i in enumerate(order)
        ]

    def retrieve(
        self,
        query: str,
        *,
        signature: list[_SignatureUnit] | None = None,
        doc_ids: set[str] | None = None,
        settings: Any = None,
        exclude: Any = frozenset(),
    ) -> dict[str, list[_Hit]]:
        self.calls.append(
            (
                "retrieve",
                query,
                {
                    "signature": [s.unit_id for s in signature or []],
                    "exclude": set(exclude),
                    "settings": settings,
                },
            )
        )
        budgets = getattr(settings, "budgets", {"veridical": 2000})
        alpha = getattr(settings, "alpha", 0.0) if signature else 0.0
        q = self._q(query)
        sig = None
        if signature:
            sig = np.mean([self._q(s.text) for s in signature], axis=0)
            sig = sig / (np.linalg.norm(sig) or 1.0)
        out: dict[str, list[_Hit]] = {}
        for layer, budget in budgets.items():
            if budget <= 0:
                continue
            rows = [i for i in self._scope(layer, doc_ids) if self.units[i].id not in exclude]
            hits = []
            for i in rows:
                sq = float(self.vecs[i] @ q)
                ss = float(self.vecs[i] @ sig) if sig is not None else 0.0
                u = self.units[i]
                hits.append(_Hit(u, sq, ss, (1 - alpha) * sq + alpha * ss, len(u.text.split())))
            hits.sort(key=lambda h: -h.score)
            packed, used = [], 0
            for h in hits:
                if used + h.tokens <= budget:
                    packed.append(h)
                    used += h.tokens
            out[layer] = packed
        return out


def qa_role(prompt: str) -> str:
    """Which QA-agent role a prompt is for: encode, answer, probe, update, fuse (or "")."""
    markers = {
        "Below are evidence blocks": "encode",
        "Passages from the story:": "answer",
        "Probes already used": "probe",
        "Update the state:": "update",
        "Notes gathered so far": "fuse",
    }
    for marker, role in markers.items():
        if marker in prompt:
            return role
    return ""


class QAScript:
    """Scripted replies for every QA role: "insufficient" for the first `refuse` answer
    attempts (and REFINE decisions), then `answer` with the given confidence.

    `replies` maps a role to a list of raw replies used first (e.g. malformed JSON), before
    the defaults. Calls per role are counted in `counts`. Use it as a function of the prompt
    text (ScriptedChatModel) or of the request (`QAScript.request` for tests/fake_openai.py).
    """

    def __init__(
        self,
        answer: str = "in the cave",
        refuse: int = 0,
        confidence: float = 0.9,
        replies: dict[str, list[str]] | None = None,
        n_probes: int = 2,
    ) -> None:
        self.answer, self.refuse, self.confidence, self.n_probes = (
            answer,
            refuse,
            confidence,
            n_probes,
        )
        self.replies = {k: list(v) for k, v in (replies or {}).items()}
        self.counts: dict[str, int] = {}
        self.answered = 0
        self.last_role = ""

    def __call__(self, prompt: str) -> str:
        role = qa_role(prompt)
        if not role and "could not be used" in prompt:  # a re-ask: same role as before
            role = self.last_role
        self.last_role = role
        self.counts[role] = self.counts.get(role, 0) + 1
        if self.replies.get(role):
            return self.replies[role].pop(0)
        if role == "encode":
            blocks = re.findall(r'<block id="(b\d+)"', prompt)
            return json.dumps(
                {
                    "cues": [{"block": b, "findings": f"finding {b}"} for b in blocks],
                    "fused": "synthesis so far"
                    if "integrates the earlier findings" in prompt
                    else "",
                }
            )
        if role == "fuse":
            return "The notes so far point to the cave."
        if role == "probe":
            n = self.counts[role]
            return json.dumps(
                {
                    "decision": "REFINE",
                    "probes": [f"probe {n}.{i + 1}" for i in range(self.n_probes)],
                    "next_query": "",
                    "reason": "missing evidence",
                }
            )
        if role == "update":
            ready = self.counts[role] > self.refuse
            ids = re.findall(r'<summary id="([^"]+)"', prompt)[:2]
            return json.dumps(
                {
                    "decision": "ANSWER" if ready else "REFINE",
                    "next_query": "where is the gold",
                    "signature": ids,
                    "evidence": [{"note": "a grounded note", "ids": []}],
                    "reason": "scripted",
                }
            )
        if role == "answer":
            self.answered += 1
            if self.answered <= self.refuse and self.counts.get("update", 0) <= self.refuse:
                return json.dumps(
                    {"answer": "", "sufficient": False, "confidence": 0.1, "evidence_ids": []}
                )
            return json.dumps(
                {
                    "quote": self.quote(prompt),
                    "answer": self.answer,
                    "sufficient": True,
                    "confidence": self.confidence,
                    "evidence_ids": [],
                }
            )
        return "{}"

    def quote(self, prompt: str) -> str:
        """A sentence of the prompt's passages that holds a word of the answer (what a
        grounded model quotes), else the first passage sentence."""
        passages = re.findall(r'<evidence id="[^"]+">(.*?)</evidence>', prompt, re.DOTALL)
        sentences = [
            s.strip() for p in passages for s in re.split(r"(?<=[.!?])\s+", p) if s.strip()
        ]
        words = [w for w in re.findall(r"[a-z]+", self.answer.lower()) if len(w) > 3]
        for sentence in sentences:
            if any(w[:5] in sentence.lower() for w in words):
                return sentence
        return sentences[0] if sentences else ""

    def request(self, request: dict[str, Any]) -> str:
        """The reply for an OpenAI chat-completions request (tests/fake_openai.py)."""
        from tests.fake_openai import last_user_text

        return self(last_user_text(request))

    def chat_model(self, n: int = 500) -> ScriptedChatModel:
        """A ScriptedChatModel answering every call from this script."""
        return ScriptedChatModel(responses=[self] * n)


def offline_reasoner(vectors: Any, **overrides: Any) -> Any:
    """The extractive reasoner of the default run (Context's thresholds) over `vectors`, with
    `overrides` of its thresholds (``open_threshold=0.5``)."""
    from mindscape.context import Context
    from mindscape.run import offline_reasoner as of_run

    reasoner = of_run(Context().resolved(), vectors)
    for name, value in overrides.items():
        if not hasattr(reasoner, name):
            raise TypeError(f"OfflineReasoner has no {name!r}")
        setattr(reasoner, name, value)
    return reasoner
