"""CLI subcommands: each module has `add_parser(subparsers)` and a handler `run(args) -> int`
whose docstring is the command's help (summary line, description, ``Examples:``; see
`common.command_help`)."""
