"""`mindscape ui`: the chat page and `langgraph dev` on free loopback ports (`make ui`)."""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from pathlib import Path

from mindscape.commands.common import add_command, add_llm_options, add_quiet_option
from mindscape.errors import StoreError

FIELD_OF_OPTION = {
    "llm": "backend",
    "model": "model",
    "base_url": "base_url",
    "local_model": "local_model",
    "reader_adapter": "reader_adapter",
}
"""The LLM options and the LLMSettings fields they set; the server reads them from those
fields' environment variables (``llm.settings.env_name``)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `ui`."""
    from mindscape.context import DEMO_STORE, env_store

    p = add_command(sub, "ui", run)
    p.add_argument(
        "--store",
        default=env_store() or DEMO_STORE,
        help="the book's store (default: $MINDSCAPE_STORE or the demo's, %(default)s)",
    )
    p.add_argument(
        "--dist",
        default="ui/dist",
        help="the built chat page (default: %(default)s; `make ui` builds it)",
    )
    p.add_argument(
        "--repo",
        default=".",
        help="the folder with langgraph.json (default: the current one)",
    )
    add_llm_options(p)
    add_quiet_option(p)


def run(args: argparse.Namespace) -> int:
    """Chat with a book in the browser.

    Start `langgraph dev` (the `chat` graph) and the chat page on free loopback ports, print
    the address to open, and stop both on Ctrl-C. The page shows each answer, the passages it
    read (folded) and the run's rounds, calls and tokens; a follow-up in the same thread sees
    the earlier turns. `make ui` installs and builds the page first.

    Examples:
        mindscape ui
        mindscape ui --store runs/book --llm extractive
    """
    from mindscape.serve.dev import page_url, serve_static, start_langgraph_dev, stop

    repo, dist, env = _checked(args)
    log = Path(tempfile.gettempdir()) / f"mindscape-ui-{os.getpid()}.log"

    def say(text: str) -> None:
        if not args.quiet:
            print(text, flush=True)

    say(f"starting langgraph dev (log: {log}) ...")
    server, api = start_langgraph_dev(repo, log, env)
    page, page_base = serve_static(dist)
    say(f"LangGraph server: {api} (Studio reads it too)")
    say(f"the book: {env['MINDSCAPE_STORE']}\n")
    print(f"Open {page_url(page_base, api)}", flush=True)
    say("\nCtrl-C stops both.")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in background
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while server.poll() is None:
            time.sleep(0.5)
        print(f"langgraph dev stopped (exit {server.returncode}); its log: {log}")
        return 1
    except KeyboardInterrupt:
        print("\nstopping ...")
        return 0
    finally:
        page.shutdown()
        stop(server)


def _checked(args: argparse.Namespace) -> tuple[Path, Path, dict[str, str]]:
    """The repository, the built page and the server's environment (the book's store and the
    LLM options), each checked to exist (a one-line error naming the fix)."""
    repo = Path(args.repo).resolve()
    dist = Path(args.dist).resolve()
    if not (repo / "langgraph.json").is_file():
        raise StoreError(f"no langgraph.json in {repo}: run this from the repository root")
    if not (dist / "index.html").is_file():
        raise StoreError(f"no chat page at {dist}: run `make ui` (it builds the page)")
    store = Path(args.store).resolve()
    if not store.is_dir():
        raise StoreError(
            f"there is no book at {store}: run `mindscape demo` for the bundled story, or "
            "`mindscape index BOOK --store DIR` and pass --store DIR"
        )
    env = {"MINDSCAPE_STORE": str(store)}
    from mindscape.llm.settings import env_name

    env |= {
        env_name(field): str(getattr(args, option))
        for option, field in FIELD_OF_OPTION.items()
        if getattr(args, option)
    }
    return repo, dist, env
