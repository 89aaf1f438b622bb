"""The chat page in a real browser: Playwright drives the system Chromium against `langgraph dev`.

It answers, cites and follows up; it shows the step a run is in before the answer arrives and
draws each reply's map (one mark per passage read, one pin for the quote: hovering and
clicking them); a thread of 20 replies with maps stays usable, and a reply whose trace is
missing or damaged shows without a map.

`make test` installs Chromium (Debian's) and builds the page (`make browser`) first. Where
either is missing, `require` fails the test under CI and skips it locally, naming the make
target that installs it (the reason shows in pytest's summary, ``-ra``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from mindscape.serve.dev import page_url, serve_static, start_langgraph_dev, stop, system_chromium
from tests.conftest import REPO, require

pytestmark = pytest.mark.integration

DIST = REPO / "ui" / "dist"
QUESTION = "What did the father bring back for Cinderella?"
FOLLOW_UP = "And what did she do with it?"
REFINED = "Who helped Cinderella sort the lentils from the ashes?"
"""A question the extractive reader refines over rounds (its map fills in before the answer)."""
WAIT_MS = 180_000


@pytest.fixture(scope="module")
def dist() -> Path:
    """The built chat page (checked before the story store is built)."""
    require((DIST / "index.html").is_file(), f"no chat page at {DIST} (built with npm)", "ui-build")
    return DIST


@pytest.fixture(scope="module")
def page_and_server(
    dist: Path, qa_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The chat page's URL, pointed at a `langgraph dev` over the bundled story."""
    log = tmp_path_factory.mktemp("browser") / "server.log"
    env = {"MINDSCAPE_STORE": str(qa_store), "MINDSCAPE_LLM_BACKEND": "extractive"}
    server, api = start_langgraph_dev(REPO, log, env)
    page, base = serve_static(dist)
    try:
        yield page_url(base, api)
    finally:
        page.shutdown()
        stop(server)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = system_chromium()
    require(exe, "no Chromium on PATH (Debian's `chromium` package)", "browser")
    require(find_spec("playwright"), "playwright is not installed (the dev group)", "install")
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def test_the_page_answers_cites_and_follows_up(browser: Any, page_and_server: str) -> None:
    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(page_and_server)
    page.get_by_test_id("question").fill(QUESTION)
    page.get_by_role("button", name="Ask").click()

    answers = page.get_by_test_id("answer")
    answers.first.wait_for()
    assert answers.first.inner_text().strip()
    passages = page.get_by_test_id("passages").first
    passages.locator("summary").click()  # folded until opened
    quote = passages.get_by_test_id("passage").first
    assert quote.is_visible() and "cinderella, chunk" in quote.locator("cite").inner_text()
    assert page.get_by_test_id("cost").first.inner_text().startswith("1 round")
    assert "threadId=" in page.url  # a reload keeps the thread

    page.get_by_test_id("question").fill(FOLLOW_UP)
    page.get_by_role("button", name="Ask").click()
    page.wait_for_function("document.querySelectorAll('[data-testid=answer]').length == 2")
    asked = page.locator(".ai .asked").nth(1).inner_text()
    assert QUESTION in asked and FOLLOW_UP in asked  # asked with the thread before it
    kinds = page.locator("[data-testid^=message-]").evaluate_all(
        "els => els.map(e => e.dataset.testid)"
    )
    assert kinds == ["message-human", "message-ai", "message-human", "message-ai"]

    page.reload()  # the thread survives a reload: the server keeps it
    page.wait_for_function("document.querySelectorAll('[data-testid=answer]').length == 2")
    page.close()


RECORD_STEPS = """() => {
  window.__steps = [];
  const note = () => {
    const step = document.querySelector('[data-testid=step]');
    if (step) window.__steps.push({
      step: step.textContent,
      answers: document.querySelectorAll('[data-testid=answer]').length,
      marks: document.querySelectorAll('[data-testid=reading] [data-testid=mark]').length,
    });
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
"""Records the step shown (and how many answers there were) at every change of the page."""


def api_of(url: str) -> str:
    """The LangGraph server's address in the page's URL."""
    return parse_qs(urlparse(url).query)["apiUrl"][0]


def reply_parts_of(api: str, thread_id: str) -> dict[str, Any]:
    """The last reply's structured parts, as the server keeps them."""
    from langgraph_sdk import get_sync_client

    state = get_sync_client(url=api).threads.get_state(thread_id)
    return dict(state["values"]["messages"][-1]["additional_kwargs"]["mindscape"])


def test_the_page_shows_the_step_then_maps_the_passages_read_and_the_quote(
    browser: Any, page_and_server: str
) -> None:
    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(page_and_server)
    page.evaluate(RECORD_STEPS)
    page.get_by_test_id("question").fill(REFINED)
    page.get_by_role("button", name="Ask").click()
    page.get_by_test_id("answer").first.wait_for()

    steps = page.evaluate("window.__steps")
    from_server = [s for s in steps if s["step"] != "activating the signature"]
    assert any(s["answers"] == 0 for s in from_server), steps  # a step before the answer
    assert {s["step"] for s in from_server} & {"retrieving (round 1)", "reading round 1"}
    # the map fills in round by round: marks of a round drawn before the answer came
    assert any(s["marks"] > 0 and s["answers"] == 0 for s in steps), steps

    thread_id = parse_qs(urlparse(page.url).query)["threadId"][0]
    parts = reply_parts_of(api_of(page_and_server), thread_id)
    read = [p for step in parts["trace"] for p in step["read_passages"]]
    reply_map = page.locator(".ai [data-testid=map]").first
    marks = reply_map.get_by_test_id("mark")
    assert read and marks.count() == len(read)  # one mark per passage read
    assert reply_map.get_by_test_id("pin").count() == 1  # one pin: the quote

    marks.last.hover()  # hovering a mark shows its passage
    shown = reply_map.get_by_test_id("mark-passage").inner_text()
    assert read[-1]["unit_id"] in shown and " ".join(read[-1]["text"].split())[:40] in shown
    reply_map.get_by_test_id("pin").click(force=True)  # clicking the pin opens the quote
    assert parts["quote"]["text"][:40] in reply_map.get_by_test_id("pin-quote").inner_text()
    page.close()


def test_twenty_replies_with_maps_and_damaged_traces_show_without_one(
    browser: Any, page_and_server: str
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=api_of(page_and_server))
    asked = client.threads.create()["thread_id"]
    client.runs.wait(asked, "chat", input={"messages": [{"type": "human", "content": QUESTION}]})
    reply = client.threads.get_state(asked)["values"]["messages"][-1]
    good = reply["additional_kwargs"]["mindscape"]
    damaged = {
        5: {**good, "books": "damaged", "trace": [{"round": "x"}], "quote": 7},
        6: {k: v for k, v in good.items() if k not in ("trace", "books", "quote")},  # older
        7: {**good, "books": [{"doc_id": "cinderella", "chunks": 34, "sessions": "x"}]},
    }
    messages: list[dict[str, Any]] = []
    for n in range(20):
        parts = damaged.get(n, good)
        messages.append({"type": "human", "content": f"{QUESTION} ({n})"})
        messages.append(
            {"type": "ai", "content": reply["content"], "additional_kwargs": {"mindscape": parts}}
        )
    thread = client.threads.create(graph_id="chat")["thread_id"]
    client.threads.update_state(thread, {"messages": messages}, as_node="ask_book")

    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    t0 = time.monotonic()
    page.goto(f"{page_and_server}&threadId={thread}")
    page.wait_for_function("document.querySelectorAll('[data-testid=answer]').length == 20")
    shown_s = time.monotonic() - t0
    assert page.get_by_test_id("map").count() == 17  # the three damaged ones: no map
    assert page.get_by_test_id("error").count() == 0 and not errors
    t0 = time.monotonic()
    page.get_by_test_id("question").press_sequentially("Who was kind to her?")
    typed_s = time.monotonic() - t0
    assert page.get_by_test_id("question").input_value() == "Who was kind to her?"
    last = page.get_by_test_id("map").last
    last.get_by_test_id("mark").last.hover()
    assert last.get_by_test_id("mark-passage").is_visible()
    print(f"20 replies with 17 maps shown in {shown_s:.1f} s; 20 keys typed in {typed_s:.1f} s")
    page.close()
