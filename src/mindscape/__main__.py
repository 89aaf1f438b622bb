"""`python -m mindscape` runs the CLI."""

from mindscape.cli import main

raise SystemExit(main())
