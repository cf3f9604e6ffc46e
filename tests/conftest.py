"""Every test runs with HOME and the XDG directories in a temporary folder, so no test reads or
writes the learner's own progress or settings, pty and subprocess tests included (they inherit the
environment)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name, folder in (("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share"),
                         ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        monkeypatch.setenv(name, str(home / folder))
