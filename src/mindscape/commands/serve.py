"""`mindscape serve`: the warm process that answers `mindscape ask` (:mod:`mindscape.serve.warm`).

    mindscape serve [--idle-minutes N]     # in the foreground, until Ctrl-C or idle
    mindscape serve --status [--json]      # is one running? what does it hold?
    mindscape serve --stop                 # stop it

(Not to be confused with `mindscape model serve`, the local model's own server, or
`mindscape ui`, the chat page.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from mindscape.commands.common import add_command, add_quiet_option, say


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `serve` on the CLI's subparsers."""
    from mindscape.serve.warm.common import DEFAULT_IDLE_MINUTES, ENV_IDLE

    p = add_command(sub, "serve", run)
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--status", action="store_true", help="say whether one runs, and what it holds"
    )
    what.add_argument("--stop", action="store_true", help="stop the running one")
    p.add_argument(
        "--idle-minutes",
        type=float,
        default=None,
        metavar="N",
        help=f"stop after N minutes without a request (${ENV_IDLE}; default "
        f"{DEFAULT_IDLE_MINUTES:g})",
    )
    p.add_argument("--json", action="store_true", help="with --status: one JSON object")
    add_quiet_option(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Keep the models warm for `mindscape ask`, or show or stop the process that does.

    Run the warm process in the foreground: it holds the embedder, the open stores and the
    local model's server, and answers `mindscape ask` from the command line over a Unix
    socket that only this user can reach (in $MINDSCAPE_RUNTIME_DIR, else
    $XDG_RUNTIME_DIR/mindscape, else /tmp/mindscape-UID). `ask` starts one in the background
    when none runs (`ask --no-warm` or MINDSCAPE_WARM=0: it does not). It stops after
    --idle-minutes without a request, when the mindscape sources or a model file change, on
    Ctrl-C, and with `serve --stop`. A store indexed again while it runs is read afresh.

    Examples:
        mindscape serve
        mindscape serve --idle-minutes 60
        mindscape serve --status
        mindscape serve --status --json
        mindscape serve --stop
    """
    from mindscape.serve.warm import client
    from mindscape.serve.warm.common import WarmUnavailable, idle_minutes

    try:
        if args.status:
            found = client.status()
            sys.stdout.write(
                (json.dumps(found or {"running": False}) if args.json else describe(found)) + "\n"
            )
            return 0
        if args.stop:
            pid = client.stop()
            say(args, f"stopped the warm process (pid {pid})" if pid else "no warm process ran")
            return 0
        from mindscape.commands.ask import answer_here
        from mindscape.serve.warm.server import serve

        minutes = args.idle_minutes if args.idle_minutes is not None else idle_minutes()
        serve(minutes, answer_here, args.quiet)
    except WarmUnavailable as exc:
        from mindscape.errors import MindscapeError

        raise MindscapeError(str(exc)) from exc
    return 0


def describe(found: dict[str, Any] | None) -> str:
    """`--status` as text."""
    if not found:
        return (
            "no warm process runs (`mindscape ask` starts one; --no-warm or MINDSCAPE_WARM=0 "
            "turn that off)"
        )
    if not found.get("answering"):
        return (
            f"warm process pid {found.get('pid')} does not answer (`mindscape serve --stop` "
            f"ends it; log: {found.get('log')})"
        )
    idle = found["idle_s"] / 60
    lines = [
        f"warm process pid {found['pid']}: up {found['uptime_s'] / 60:.1f} min, "
        f"{found['requests']} question(s), idle {idle:.1f} min (stops at "
        f"{found['idle_minutes']:g}), {found['rss_mb']:.0f} MB"
        + (" with its model server" if found.get("model_servers") else "")
        + (f"; stopping: {found['stopping']}" if found.get("stopping") else ""),
        f"  version {found['version']}",
        f"  socket {found['socket']}, log {found['log']}",
        f"  started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(found['started']))}",
    ]
    lines += [f"  store {s}" for s in found.get("stores") or []]
    lines += [
        f"  model server pid {m['pid']} on port {m['port']}: {m['model']}"
        for m in found.get("model_servers") or []
    ]
    return "\n".join(lines)


def detached(argv: list[str]) -> int:
    """``python -m mindscape.commands.serve [--llm BACKEND]``: the warm process as ``ask``
    starts it in the background (``mindscape serve`` without the command line's start-up: no
    other command is imported). ``--llm`` is the first ask's backend, to have ready before its
    question comes."""
    import os

    from mindscape.commands.ask import answer_here
    from mindscape.errors import MindscapeError
    from mindscape.serve.warm.common import idle_minutes
    from mindscape.serve.warm.server import serve

    for key, value in {
        "HF_HUB_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "TOKENIZERS_PARALLELISM": "false",
    }.items():  # as `mindscape.cli.main` sets them
        os.environ.setdefault(key, value)
    llm = argv[1] if argv[:1] == ["--llm"] and len(argv) > 1 else None
    try:
        serve(idle_minutes(), answer_here, llm=llm)
    except MindscapeError as exc:  # another ask started one at the same moment: it serves
        sys.stderr.write(f"mindscape warm: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(detached(sys.argv[1:]))
