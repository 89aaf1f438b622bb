"""A screenshot of the chat page answering a real question (docs/images/chat.png in the README).

    python benchmarks/figures/ui_screenshot.py --llm local --out docs/images/chat.png

Starts ``langgraph dev`` and the built page (``make ui-build``) as ``mindscape ui`` does, asks
the demo's story a question and a follow-up in one thread in the system Chromium, opens the
passages read and the last reply's quote (its map's pin), and saves the page. Prints each
answer and how long it took.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from mindscape.context import DEMO_STORE
from mindscape.serve.dev import page_url, serve_static, start_langgraph_dev, stop, system_chromium

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default=str(REPO / DEMO_STORE))
    ap.add_argument("--llm", default="local")
    ap.add_argument("--question", default="Who helped Cinderella sort the lentils from the ashes?")
    ap.add_argument("--follow-up", default="And what did they do at her wedding?")
    ap.add_argument("--out", default="docs/images/chat.png")
    args = ap.parse_args()
    log = Path(tempfile.mkdtemp()) / "server.log"
    env = {"MINDSCAPE_STORE": args.store, "MINDSCAPE_LLM_BACKEND": args.llm}
    server, api = start_langgraph_dev(REPO, log, env)
    page_server, base = serve_static(REPO / "ui" / "dist")
    try:
        with sync_playwright() as p:
            exe = system_chromium()
            if exe is None:
                raise SystemExit("no Chromium: apt-get install -y chromium")
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 900, "height": 1000})
            page.set_default_timeout(600_000)
            page.goto(page_url(base, api))
            for n, question in enumerate([args.question, args.follow_up], start=1):
                t0 = time.monotonic()
                page.get_by_test_id("question").fill(question)
                page.get_by_role("button", name="Ask").click()
                page.wait_for_function(
                    f"document.querySelectorAll('[data-testid=answer]').length == {n}"
                )
                answer = page.get_by_test_id("answer").nth(n - 1).inner_text()
                print(f"{question} → {answer} ({time.monotonic() - t0:.1f} s)")
            for summary in page.locator("details summary").all():
                summary.click()
            pins = page.get_by_test_id("pin")
            if pins.count():  # the last reply's map: its quote opened
                pins.last.click(force=True)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=args.out, full_page=True)
            browser.close()
        print(f"saved {args.out}")
    finally:
        page_server.shutdown()
        stop(server)


if __name__ == "__main__":
    main()
