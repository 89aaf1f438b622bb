"""Child entry point of :class:`~mindscape.models.server.LocalServer`: a server that dies with
its parent.

``python -m mindscape.models._serve --parent PID -- MODULE [ARGS...]`` starts a watchdog
thread that ends this process as soon as ``PID`` is no longer its parent (the parent was
killed, even with SIGKILL, and this process was re-parented), then runs ``MODULE`` as
``__main__`` with ``ARGS`` (:mod:`mindscape.models.llama_server` and its options in production).
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time

POLL_S = 0.5


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    os._exit(0)


def main(argv: list[str]) -> None:
    """Parse ``--parent PID -- MODULE ARGS``, start the watchdog, run the module."""
    if len(argv) < 4 or argv[0] != "--parent" or argv[2] != "--":
        sys.exit("usage: python -m mindscape.models._serve --parent PID -- MODULE [ARGS...]")
    parent, module, args = int(argv[1]), argv[3], argv[4:]
    if os.getppid() != parent:
        sys.exit(0)
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="parent-watch").start()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
