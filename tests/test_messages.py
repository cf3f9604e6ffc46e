"""Issue 27, point 6: messages that say what is really wrong, where it is. A full-width comma in
any row of any matrix; .npy versions 1, 2 and 3 read through numpy's public format functions; a
special file in a model directory "is not a regular file"; an overflow blamed on the field that
caused it; a number too long for float64 called that; no parser's object reprs; a file whose
size the system does not know read whole; a config nested too deep is one line."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bounded import refused

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.scenario.load import load_scenario, scenario_from_text

MODELS = Path(__file__).resolve().parent / "fixtures" / "models"
EYE = "[[1, 0], [0, 1]]"


def error_of(text: str) -> str:
    with pytest.raises(ScenarioError) as caught:
        scenario_from_text(text, "s.yaml")
    return str(caught.value)


@pytest.mark.parametrize("field, text, line", [
    ("embeddings row 2, value 1", f"tokens: [a, b]\nembeddings:\n  - [0.1, 0.2]\n  - [0.2， 0.9]\nW_Q: {EYE}\nW_K: {EYE}\nW_V: {EYE}\n", 4),
    ("W_Q row 2, value 1", f"tokens: [a, b]\nembeddings: {EYE}\nW_Q:\n  - [1, 0]\n  - [0， 1]\nW_K: {EYE}\nW_V: {EYE}\n", 5),
    ("W_V row 2, value 1", f"tokens: [a, b]\nembeddings: {EYE}\nW_Q: {EYE}\nW_K: {EYE}\nW_V: [[1, 0], [0， 1]]\n", 5),
    ("mask row 2, entry 1", f"tokens: [a, b]\nembeddings: {EYE}\nW_Q: {EYE}\nW_K: {EYE}\nW_V: {EYE}\n"
                            "mask:\n  - [true, false]\n  - [true， true]\n", 8),
])
def test_a_fullwidth_comma_in_a_later_row_is_named_not_taken_for_a_short_row(field, text, line) -> None:
    # it was "row 2 has 1 number, but row 1 has 2": the check worked in row 1 only
    message = error_of(text)
    assert message.startswith(f"s.yaml:{line}: {field}: ") and "full-width comma" in message
    assert "every row needs the same length" not in message


def test_a_row_really_too_short_still_says_so() -> None:
    message = error_of(f"tokens: [a, b]\nembeddings:\n  - [0.1, 0.2]\n  - [0.2]\nW_Q: {EYE}\nW_K: {EYE}\nW_V: {EYE}\n")
    assert "row 2 has 1 number, but row 1 has 2" in message


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_files_of_every_version_numpy_writes_are_read(tmp_path: Path, version) -> None:
    W = np.array([[0.5, -1.25], [2.0, 0.0]])
    with open(tmp_path / "wq.npy", "wb") as handle:
        np.lib.format.write_array(handle, W, version=version)
    (tmp_path / "s.yaml").write_text(f"tokens: [a, b]\nembeddings: {EYE}\nW_Q: {{file: wq.npy}}\n"
                                     f"W_K: {EYE}\nW_V: {EYE}\n", encoding="utf-8")
    assert np.array_equal(load_scenario(tmp_path / "s.yaml").W_Q, W)


def npy_with_header(path: Path, header: str, version: int = 1) -> None:
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H", len(header)) + header.encode()
                     + b"\x00" * 32)


def test_an_unknown_npy_version_and_a_header_with_code_in_it_are_one_plain_line(tmp_path: Path) -> None:
    npy_with_header(tmp_path / "v9.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", version=9)
    npy_with_header(tmp_path / "call.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': range(2), }")
    for name, says in (("v9.npy", "version 9.0"), ("call.npy", "damaged .npy header")):
        (tmp_path / "s.yaml").write_text(f"tokens: [a, b]\nembeddings: {EYE}\nW_Q: {{file: {name}}}\n"
                                         f"W_K: {EYE}\nW_V: {EYE}\n", encoding="utf-8")
        line = refused("run", "-s", str(tmp_path / "s.yaml"), "--no-pause", where=f"{tmp_path / 's.yaml'}:3: ")
        assert says in line and "object at 0x" not in line and "AttributeError" not in line


def test_a_number_of_five_million_digits_is_too_large_not_infinity(tmp_path: Path) -> None:
    (tmp_path / "w.csv").write_text("1" * 5_000_000 + ",0\n0,1\n", encoding="utf-8")
    (tmp_path / "s.yaml").write_text(f"tokens: [a, b]\nembeddings: {EYE}\nW_Q: {{file: w.csv}}\n"
                                     f"W_K: {EYE}\nW_V: {EYE}\n", encoding="utf-8")
    line = refused("run", "-s", str(tmp_path / "s.yaml"), "--no-pause", where=f"{tmp_path / 's.yaml'}:3: ")
    assert "line 1, column 1" in line and "5,000,000 digits" in line and "beyond what float64 holds" in line
    assert "infinity" not in line
    (tmp_path / "w.csv").write_text("inf,0\n0,1\n", encoding="utf-8")  # written as infinity: said so
    assert "has infinity at row 1, column 1" in str(pytest.raises(ScenarioError, load_scenario, tmp_path / "s.yaml").value)


def test_an_overflow_under_qk_norm_is_blamed_on_qk_scale(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"tokens: [a, b]\nembeddings: [[1e300, 3], [2, 1e300]]\nW_Q: {EYE}\nW_K: {EYE}\nW_V: {EYE}\n"
                    "qk_norm: true\nqk_scale: 1e308\n", encoding="utf-8")
    line = refused("export", str(path), where=f"{path}:7: qk_scale: ")
    assert "overflows float64" in line


def test_a_file_that_does_not_say_its_size_is_read_whole() -> None:
    # /proc's files say 0 bytes: one byte of it was read, and the message was about 'N'
    result = CliRunner().invoke(app, ["run", "/proc/self/status", "--no-pause"])
    assert result.exit_code == 2 and "/proc/self/status:1: Name: unknown key" in result.stderr


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-bert"
    shutil.copytree(MODELS / "tiny-bert", folder)
    return folder


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "model.safetensors"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_in_a_model_directory_is_not_a_regular_file(model: Path, name: str, kind: str) -> None:
    (model / name).unlink()
    if kind == "fifo":
        os.mkfifo(model / name)
    else:
        (model / name).symlink_to("/dev/zero")
    line = refused("model", "the river bank", "--model", str(model), where=f"{model / name}: is not a regular file")
    assert ("named pipe" if kind == "fifo" else "a device") in line


def test_a_config_nested_100000_deep_is_one_line(model: Path) -> None:
    (model / "config.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    line = refused("model", "the river bank", "--model", str(model), where=f"{model / 'config.json'}: ")
    assert "nested too deeply" in line
