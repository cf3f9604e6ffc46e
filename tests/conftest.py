"""Every test runs with HOME and the XDG directories in a temporary folder, so no test reads or
writes the learner's own progress or settings or finds a model in their Hugging Face cache, pty and subprocess tests included (they inherit the
environment); and in a plain terminal environment: no NO_COLOR, FORCE_COLOR, TERM, COLUMNS, LINES
or ATTNWALK_LANG from the shell that runs them, a UTF-8 locale (as rich's own conftest clears them)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name, folder in (("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share"),
                         ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        monkeypatch.setenv(name, str(home / folder))
    # attnwalk model looks names up in the Hugging Face cache: the temporary home's, empty
    monkeypatch.setenv("HF_HOME", str(home / ".cache" / "huggingface"))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / ".cache" / "huggingface" / "hub"))


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "LINES", "ATTNWALK_LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
