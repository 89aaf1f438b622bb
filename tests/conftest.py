"""Test-wide settings: offline, no telemetry, no tracing."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import time
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
    # `ask` answers in the test's process; tests/*/test_warm*.py turn the warm process on
    # with a runtime folder of their own, so no test touches the user's socket.
    "MINDSCAPE_WARM": "0",
}.items():
    os.environ[_key] = _value
# ...and a warm process that some test starts all the same finds its socket in a folder of
# this run's own, never the user's.
os.environ["MINDSCAPE_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="mindscape-test-run-")
atexit.register(shutil.rmtree, os.environ["MINDSCAPE_RUNTIME_DIR"], ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No warm process outlives the suite: stop one a test left in the run's folder (the
    warm tests stop their own; this is the net under them)."""
    from mindscape.serve.warm import client, common

    info = common.read_info() or {}
    if info.get("pid") not in (None, os.getpid()):
        client.stop()


REPO = Path(__file__).resolve().parents[1]
BENCH = Path(os.environ.get("MINDSCAPE_BENCH", REPO.parent / "shared" / "bench"))
FIXTURE_BENCH = REPO / "tests" / "bench"
"""A small bench made from the bundled story (tests/fixture_bench.py): there in CI too."""
STORY = REPO / "src" / "mindscape" / "data" / "cinderella.txt"

LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def in_ci() -> bool:
    """Whether this is a CI run: ``CI`` set to anything but empty, ``0``, ``false`` or ``no``."""
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def require(condition: object, reason: str, target: str) -> None:
    """Go on when `condition` holds; otherwise stop the test for a missing install.

    The one rule for a test that needs something `make test` installs (the local model,
    Chromium, the built chat page, a dev package): under CI (``CI=true``) its absence is a
    broken install and the test FAILS with `reason`; locally the test is skipped, and the
    reason names the make target that installs it (`target`, e.g. ``"model"``). A missing
    *bench* is not such a case (CI has none by design): those tests keep a plain skip.
    """
    if condition:
        return
    if in_ci():
        pytest.fail(
            f"{reason}; CI is set, so this is a broken install, not a skip"
            f" (`make {target}` should have installed it)",
            pytrace=False,
        )
    # reported at the test's own location (as a skipif mark is), not at this line
    raise pytest.skip.Exception(f"{reason}; `make {target}` installs it", _use_item_location=True)


def require_local_model() -> None:
    """`require` the local model the `auto` backend resolves to (`make model` installs it)."""
    from mindscape.llm import LLMSettings, resolve_backend

    backend, notice = resolve_backend(LLMSettings(backend="auto"))
    why = (notice or "").split(";")[0] or f"the backend resolves to {backend}"
    require(backend == "local", f"no usable local model ({why})", "model")


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


def stopped_or_exited(pid: int, timeout: float) -> int | None:
    """Wait for child `pid` to stop (SIGSTOP) or end; its wait status (None on time-out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    return None
