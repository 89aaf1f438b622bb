"""Test-wide settings: offline, no telemetry, no tracing."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "LANGSMITH_TRACING": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # The suite runs on fakes; tests/live/ picks the local model explicitly.
    "MINDSCAPE_LLM_BACKEND": "extractive",
}.items():
    os.environ[_key] = _value

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(os.environ.get("MINDSCAPE_BENCH", REPO.parent / "shared" / "bench"))
STORY = REPO / "src" / "mindscape" / "data" / "cinderella.txt"

LOOPBACK = {"127.0.0.1", "::1", "localhost"}


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any connection that is not to loopback; ignore proxy settings."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in LOOPBACK:
            raise AssertionError(f"test tried to reach {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield
