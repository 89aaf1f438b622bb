"""The chat page in a real browser: Playwright drives the system Chromium against `langgraph dev`.

`make test` installs Chromium (Debian's) and builds the page (`make browser`) first. Where
either is missing, `require` fails the test under CI and skips it locally, naming the make
target that installs it (the reason shows in pytest's summary, ``-ra``).
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from mindscape.serve import page_url, serve_static, start_langgraph_dev, stop, system_chromium
from tests.conftest import REPO, require

pytestmark = pytest.mark.integration

DIST = REPO / "ui" / "dist"
QUESTION = "What did the father bring back for Cinderella?"
FOLLOW_UP = "And what did she do with it?"
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
