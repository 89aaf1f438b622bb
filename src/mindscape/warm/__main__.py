"""``python -m mindscape.warm``: the warm process, as ``ask`` starts it in the background
(``mindscape serve`` without the command line's start-up: no other command is imported)."""

import os

from mindscape.warm.common import idle_minutes
from mindscape.warm.server import serve

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
}.items():  # as `mindscape.cli.main` sets them
    os.environ.setdefault(_key, _value)
serve(idle_minutes())
