"""Every test runs with HOME and the XDG directories in a temporary folder, so no test reads or
writes the learner's own progress or settings or finds a model in their Hugging Face cache, pty and subprocess tests included (they inherit the
environment); and in a plain terminal environment: no NO_COLOR, FORCE_COLOR, TERM, COLUMNS, LINES
or ATTNWALK_LANG from the shell that runs them, a UTF-8 locale (as rich's own conftest clears them).

The suite runs on pytest-xdist's workers (pyproject.toml's addopts): what a test writes goes under
its own tmp_path or this home, never a fixed path or port that another worker could share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject.toml's addopts) starts two workers a CPU: most of the app tests' time is
    Textual's pilot sleeping until the app is idle after a key (test_app_quiz.py alone: 58.5 s, of
    which 11.8 s on the CPU), and a subprocess test waits for its program; while one worker waits,
    the other computes (test_app_quiz.py and test_app_grad.py: 38 s with 2 workers, 26 s with 4, on
    2 CPUs; the whole suite in benchmarks/README.md)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 * cpus


@pytest.fixture(scope="session")
def _bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the programs the tests start keep their compiled modules: each `python -m attnwalk`
    compiled attnwalk from source again (~60 ms of CPU a start) where the shell sets
    PYTHONDONTWRITEBYTECODE, as this workplace's does. Under the session's temporary folder, so the
    checkout's own files are left as they were."""
    return tmp_path_factory.mktemp("pycache")


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                  _bytecode_cache: Path) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name, folder in (("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share"),
                         ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        monkeypatch.setenv(name, str(home / folder))
    # attnwalk model looks names up in the Hugging Face cache: the temporary home's, empty
    monkeypatch.setenv("HF_HOME", str(home / ".cache" / "huggingface"))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / ".cache" / "huggingface" / "hub"))
    # `ollama:NAME` reads OLLAMA_MODELS, else ~/.ollama: the temporary home's, empty
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(_bytecode_cache))


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "LINES", "ATTNWALK_LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
