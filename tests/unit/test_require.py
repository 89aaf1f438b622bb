"""`tests.conftest.require`: a missing install fails under CI and is skipped elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import in_ci, require, require_local_model

REASON = "no Chromium on PATH"


@pytest.mark.parametrize("value", ["true", "1", "TRUE", "yes"])
def test_under_ci_a_missing_install_fails_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception) as failed:
        require(None, REASON, "browser")
    message = str(failed.value)
    assert REASON in message and "`make browser`" in message and "CI" in message


def set_ci(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    """CI set to `value`, or unset for None."""
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)


@pytest.mark.parametrize("value", [None, "", "0", "false", "False", "no"])
def test_locally_a_missing_install_skips_naming_the_make_target(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    set_ci(monkeypatch, value)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception) as skipped:
        require(False, REASON, "ui-build")
    assert REASON in str(skipped.value) and "`make ui-build`" in str(skipped.value)


@pytest.mark.parametrize("value", [None, "true"])
def test_what_is_installed_goes_on_either_way(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    set_ci(monkeypatch, value)
    assert require("/usr/bin/chromium", REASON, "browser") is None
    assert require(True, REASON, "model") is None


def test_a_local_model_that_does_not_resolve_names_make_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A named model file that is absent resolves to the extractive backend: under CI that
    fails, locally it skips, and either message says `make model` and why."""
    monkeypatch.setenv("MINDSCAPE_LOCAL_MODEL", str(tmp_path / "absent.gguf"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_local_model()
    assert "`make model`" in str(skipped.value) and "absent.gguf" in str(skipped.value)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_local_model()
    assert "`make model`" in str(failed.value) and "absent.gguf" in str(failed.value)
