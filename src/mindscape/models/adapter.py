"""The local reader's LoRA adapter: where it is, whether it fits the model, whether to use it.

The adapter (``adapter.gguf``, llama.cpp's LoRA format) is trained on FairytaleQA train by
``make reader-adapter`` (:mod:`mindscape.models.lora`, ``benchmarks/reader/adapter.py``) and
ships in ``mindscape/data/reader_adapter`` with a sha256 manifest that also names the sha256
of the model it was trained on. llama.cpp loads it beside the model file
(``--lora_path``, :func:`mindscape.models.server.llama_server_args`).

Which adapter a run uses (``LLMSettings.reader_adapter``, ``MINDSCAPE_READER_ADAPTER``,
``ask --reader-adapter``): ``none`` (the base weights), ``shipped`` (the one in the package),
or a path to an adapter GGUF (checked by its GGUF magic only). A shipped adapter whose file
does not match its manifest, or whose manifest names another model, is a one-line
:class:`~mindscape.errors.ModelError` naming the make target.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from mindscape.errors import ModelError
from mindscape.models import manifest
from mindscape.models.cache import file_sha256
from mindscape.models.manifest import MANIFEST

__all__ = [
    "ADAPTER_FILE",
    "DEFAULT",
    "MANIFEST",
    "REBUILD_HINT",
    "check_adapter",
    "resolve_adapter",
    "shipped_folder",
    "write_manifest",
]

ADAPTER_FILE = "adapter.gguf"
REBUILD_HINT = "run `make reader-adapter` (or set MINDSCAPE_READER_ADAPTER=none)"
OFF = ("none", "off", "0", "false", "no")
DEFAULT = "none"
"""The adapter a run uses unless told otherwise (``none``: the base weights; FairytaleQA dev
decides whether the shipped adapter becomes the default)."""


def shipped_folder() -> Path:
    """The folder of the adapter that ships in the package."""
    return Path(str(resources.files("mindscape") / "data" / "reader_adapter"))


def write_manifest(
    folder: Path, *, base_sha256: str, provenance: str, training: dict[str, Any]
) -> dict[str, Any]:
    """Write ``folder/manifest.json`` for ``folder/adapter.gguf``: its size and sha256, the
    sha256 of the model it adapts, what it was trained on and how."""
    path = Path(folder) / ADAPTER_FILE
    fields = {
        "file": ADAPTER_FILE,
        "bytes": path.stat().st_size,
        "sha256": file_sha256(path),
        "base_model_sha256": base_sha256,
        "trained_on": provenance,
        "training": training,
    }
    return manifest.write_manifest(Path(folder), fields)


def check_adapter(folder: Path, model_sha256: str | None) -> Path:
    """The adapter file of ``folder`` when it matches its manifest (size, sha256) and was
    trained on the model whose sha256 is ``model_sha256`` (None: a model of the user's own,
    which no shipped adapter was trained on); else a one-line ModelError."""
    folder = Path(folder)
    path = folder / ADAPTER_FILE
    try:
        recorded = dict(manifest.read_manifest(folder))
    except (OSError, ValueError, TypeError) as exc:
        raise ModelError(
            f"the reader adapter's manifest {folder / MANIFEST} cannot be read ({exc}); "
            f"{REBUILD_HINT}"
        ) from exc
    if not path.is_file():
        raise ModelError(f"no reader adapter at {path}; {REBUILD_HINT}")
    if path.stat().st_size != recorded.get("bytes") or not manifest.matches(
        path, recorded.get("sha256")
    ):
        raise ModelError(f"the reader adapter {path} does not match its manifest; {REBUILD_HINT}")
    if recorded.get("base_model_sha256") != model_sha256:
        raise ModelError(
            f"the reader adapter {path} was trained for another model (sha256 "
            f"{str(recorded.get('base_model_sha256'))[:12]}…) than the one in use; "
            f"{REBUILD_HINT}"
        )
    return path


def resolve_adapter(choice: str | None, model: Path) -> Path | None:
    """The adapter file to load with ``model`` for ``choice`` (module docstring), checked;
    None for the base weights."""
    from mindscape.models.local import MODEL_SHA256, default_model_path

    choice = (choice or DEFAULT).strip()
    if choice.lower() in OFF:
        return None
    if choice.lower() == "shipped":
        is_default = Path(model).expanduser() == default_model_path()
        return check_adapter(shipped_folder(), MODEL_SHA256 if is_default else None)
    path = Path(choice).expanduser()
    if path.is_dir():
        path = path / ADAPTER_FILE
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ModelError(f"no reader adapter at {path} ({exc.strerror}); {REBUILD_HINT}") from exc
    if magic != b"GGUF":
        raise ModelError(f"{path} is not a GGUF LoRA adapter; {REBUILD_HINT}")
    return path
