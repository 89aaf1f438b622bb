"""``python -m mindscape.serve.warm [--llm BACKEND]``: the warm process, as ``ask`` starts it in the
background (``mindscape serve`` without the command line's start-up: no other command is
imported). ``--llm`` is the first ask's backend, to have ready before its question comes."""

import os
import sys

from mindscape.errors import MindscapeError
from mindscape.serve.warm.common import idle_minutes
from mindscape.serve.warm.server import serve

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
}.items():  # as `mindscape.cli.main` sets them
    os.environ.setdefault(_key, _value)
llm = sys.argv[2] if sys.argv[1:2] == ["--llm"] and len(sys.argv) > 2 else None
try:
    serve(idle_minutes(), llm=llm)
except MindscapeError as exc:  # another ask started one at the same moment: it serves
    sys.exit(f"mindscape warm: {exc}")
