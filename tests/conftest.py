"""Test-wide settings: offline, no telemetry, no tracing."""

from __future__ import annotations

import os
from pathlib import Path

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "LANGSMITH_TRACING": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ[_key] = _value

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(os.environ.get("MINDSCAPE_BENCH", REPO.parent / "shared" / "bench"))
STORY = REPO / "src" / "mindscape" / "data" / "cinderella.txt"
