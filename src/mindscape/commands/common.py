"""Options and builders shared by the CLI subcommands."""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import traceback
import types
import typing
from collections.abc import Callable
from typing import Any

DEFAULT_STORE = ".mindscape/store"
LLM_CHOICES = ["auto", "local", "openai", "extractive"]
"""The `--llm` choices (the LLM backends, `mindscape.llm.settings.BACKENDS`)."""


def report_error(exc: BaseException, args: argparse.Namespace) -> int:
    """A user error as one line on stderr, with the traceback behind it under ``--debug`` (or
    ``MINDSCAPE_DEBUG=1``); the exit code, 2."""
    if getattr(args, "debug", False) or os.environ.get("MINDSCAPE_DEBUG") == "1":
        traceback.print_exception(exc)
    print(f"mindscape: error: {exc}", file=sys.stderr)
    return 2


def add_command(
    sub: argparse._SubParsersAction,
    name: str,
    run: Callable[[argparse.Namespace], int] | None = None,
    *,
    doc: str | None = None,
) -> argparse.ArgumentParser:
    """Register the subcommand (or action) `name` on `sub`, handled by `run` (None for a
    command whose actions have their own). Its help comes from `doc`, by default `run`'s
    docstring, read by :func:`command_help`."""
    summary, description, examples = command_help(doc or (run.__doc__ if run else None) or "")
    p = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if run is not None:
        p.set_defaults(func=run)
    return p


def command_help(doc: str) -> tuple[str, str, list[str]]:
    """A command's docstring as ``(summary, description, examples)``: the first line is its
    entry in the parent's list, the paragraphs up to an ``Examples:`` line head its ``--help``
    (the summary when there are none), and the lines after that one end it."""
    body, _, examples = inspect.cleandoc(doc).partition("\nExamples:\n")
    summary, _, description = body.partition("\n\n")
    lines = [line.strip() for line in examples.splitlines() if line.strip()]
    return summary.rstrip("."), description.strip() or summary, lines


def add_actions(p: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """The actions of a command that has them (`model install`): one is required, and the
    one given is ``args.action``; register each with :func:`add_command`."""
    return p.add_subparsers(dest="action", metavar="ACTION", required=True)


def add_context_option(p: argparse.ArgumentParser, name: str, *flags: str, **kwargs: Any) -> None:
    """An option for the :class:`~mindscape.context.Context` field `name` (flag: ``--name``
    unless `flags` are given). It defaults to None, so that an option not given leaves the
    value to the preset or the Context; its help is the field's doc with its real default,
    after `help` when one is given; a field typed ``Literal[...]`` takes its values as the
    option's choices unless `choices` are given. :func:`context_values` collects what was
    given."""
    lead = kwargs.pop("help", "")
    if "choices" not in kwargs and "action" not in kwargs:
        kwargs["choices"] = context_choices(name)
    p.add_argument(
        *(flags or (f"--{name.replace('_', '-')}",)),
        dest=name,
        default=None,
        help=" ".join(filter(None, [lead, context_help(name)])).replace("%", "%%"),
        **kwargs,
    )
    p.set_defaults(context_fields=(*(p.get_default("context_fields") or ()), name))


def context_values(args: argparse.Namespace) -> dict[str, Any]:
    """The Context fields given on the command line (options added by
    :func:`add_context_option`)."""
    names = getattr(args, "context_fields", ())
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def context_choices(name: str) -> list[str] | None:
    """The values of the Context field `name` when it is typed ``Literal[...]`` (or that or
    None), in their declared order; None for any other type."""
    from mindscape.context import Context

    hint = typing.get_type_hints(Context)[name]
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    parts = typing.get_args(hint) if union else (hint,)
    literal = next((a for a in parts if typing.get_origin(a) is typing.Literal), None)
    return list(typing.get_args(literal)) if literal is not None else None


def context_help(name: str) -> str:
    """The doc of the Context field `name` and its real default, with the presets that set
    another value (``default: 5; naive, raptor: 1``)."""
    from dataclasses import fields

    from mindscape.context import Context, preset_defaults
    from mindscape.presets import PRESETS

    field = next(f for f in fields(Context) if f.name == name)
    doc = field.metadata["description"]
    if name not in preset_defaults():
        return doc if field.default is None else f"{doc} Default: {_shown(field.default)}."
    others: dict[str, list[str]] = {}
    for preset in PRESETS.values():
        if name in preset.values:
            others.setdefault(_shown(preset.values[name]), []).append(preset.name)
    exceptions = "".join(f"; {', '.join(names)}: {value}" for value, names in others.items())
    return f"{doc} Default: {_shown(preset_defaults()[name])}{exceptions}."


def _shown(value: Any) -> str:
    """A default as a user types it: on/off, a plain number or word, ``k v`` pairs."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def add_quiet_option(p: argparse.ArgumentParser) -> None:
    """`--quiet`: no progress bars and no notices; results and errors only (and the line that
    says the ``auto`` backend fell back to extractive, which ``ask`` and ``demo`` print)."""
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bars, status lines or notices (errors, input warnings and an auto "
        "fall-back to the extractive reasoner still show)",
    )


def add_listing_command(
    sub: argparse._SubParsersAction, name: str, run: Callable[[argparse.Namespace], int], what: str
) -> None:
    """Register a command that lists what a store holds: `--store`, `--quiet` and `--json`
    (`what` is the help of `--json`)."""
    p = add_command(sub, name, run)
    add_store_option(p)
    add_quiet_option(p)
    p.add_argument("--json", action="store_true", help=what)


def add_store_option(p: argparse.ArgumentParser) -> None:
    """`--store DIR` (default: $MINDSCAPE_STORE or ./.mindscape/store)."""
    from mindscape.context import env_store

    p.add_argument(
        "--store",
        default=env_store() or DEFAULT_STORE,
        help="store directory (default: $MINDSCAPE_STORE or %(default)s)",
    )


def add_model_options(p: argparse.ArgumentParser) -> None:
    """Embedder and LLM backend options."""
    p.add_argument(
        "--embedder",
        default=None,
        help="'minilm' (default, packaged), 'gemma' (EmbeddingGemma-300M, after `mindscape model "
        "install --embedder gemma`) or a local BGE model directory ($MINDSCAPE_EMBEDDER)",
    )
    add_llm_options(p)


def add_llm_options(p: argparse.ArgumentParser) -> None:
    """LLM backend options: `--llm`, `--model`, `--base-url` and the local model's files."""
    p.add_argument(
        "--llm",
        choices=LLM_CHOICES,
        default=None,
        help="auto (default: the local model when installed, else extractive), local, an "
        "OpenAI-compatible endpoint, or extractive ($MINDSCAPE_LLM_BACKEND)",
    )
    p.add_argument("--model", default=None, help="chat model id ($MINDSCAPE_LLM_MODEL)")
    p.add_argument(
        "--base-url", default=None, help="OpenAI-compatible base URL ($MINDSCAPE_LLM_BASE_URL)"
    )
    add_local_model_options(p)


def add_local_model_options(
    p: argparse.ArgumentParser, what: str = "a GGUF file for the local backend"
) -> None:
    """The local model's files: `--local-model` (`what` it is) and `--reader-adapter`."""
    p.add_argument(
        "--local-model",
        default=None,
        metavar="GGUF",
        help=f"{what} ($MINDSCAPE_LOCAL_MODEL; default: the installed Qwen2.5-Coder-1.5B-Instruct)",
    )
    p.add_argument(
        "--reader-adapter",
        default=None,
        metavar="NAME",
        help="the local model's LoRA adapter: none, shipped (trained on FairytaleQA train) or "
        "an adapter GGUF ($MINDSCAPE_READER_ADAPTER; default: none)",
    )


def settings_from_args(args: argparse.Namespace, **extra: Any) -> Any:
    """`LLMSettings` from the CLI options over the environment."""
    from mindscape.llm import LLMSettings

    return LLMSettings.from_env(
        backend=args.llm,
        model=args.model,
        base_url=args.base_url,
        local_model=getattr(args, "local_model", None),
        reader_adapter=getattr(args, "reader_adapter", None),
        **extra,
    )


def llm_from_args(
    args: argparse.Namespace, cache: Any = None, *, index_llm: bool | None = None
) -> Any:
    """The `LLM` for index-time roles, or None for extractive indexing.

    An endpoint (``openai``) is used at index time; the local model only with
    ``--index-llm`` / ``MINDSCAPE_INDEX_LLM=1`` (a long book would take hours on two cores),
    or `index_llm` for a command whose only work is the model's.
    """
    from mindscape.llm import LLM
    from mindscape.tokens import default_counter

    settings = settings_from_args(
        args, index_llm=index_llm or getattr(args, "index_llm", None) or None
    ).resolved()
    if settings.backend == "extractive" or (settings.backend == "local" and not settings.index_llm):
        return None
    return LLM.from_settings(settings, cache=cache, count_tokens=default_counter().count)


def warn(msg: str) -> None:
    """A warning about the input on stderr (shown under ``--quiet`` too, like errors)."""
    print(f"mindscape: warning: {msg}", file=sys.stderr)


def say(args: argparse.Namespace, msg: str) -> None:
    """A progress or status line on stderr, unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(msg, file=sys.stderr)
