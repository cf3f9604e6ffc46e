"""The walk of a GGUF model: the opening names each weight's type and the file against float32,
a Q, K, V or O cell works out how its first weight comes out of its block, in English and Chinese,
and --format json of the real SmolLM2 file is the same as the walk of that model converted to
safetensors (live, where transformers can convert it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'attnwalk[gguf]'")

from typer.testing import CliRunner  # noqa: E402

from attnwalk.cli import app  # noqa: E402
from attnwalk.models.model import open_model  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gguf"
runner = CliRunner()
ENV = {"COLUMNS": "100", "NO_COLOR": "1"}


def walk(*args: str) -> str:
    result = runner.invoke(app, ["model", *args, "--no-pause"], env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_opening_names_each_weights_type_and_the_size_against_float32() -> None:
    out = walk("I sat by the river bank", "--model", str(FIXTURES / "tiny-gpt2.gguf"))
    model = open_model(str(FIXTURES / "tiny-gpt2.gguf"))
    size, float32 = model.info.file_bytes / 1024, model.info.n_params * 4 / 1024
    assert f"Stored as GGUF: {size:.1f} KiB on disk, against {float32:.1f} KiB for the same" in out
    assert "W_Q, W_K, W_V: Q8_0, 32 weights a block, 8.5 bits a weight on disk" in out
    assert "W_O: BF16, 16 bits a weight" in out


@pytest.mark.parametrize("name, kind", [("tiny-llama", "Q4_1"), ("tiny-qwen2", "Q5_1"), ("tiny-mistral", "Q8_0")])
def test_a_q_cell_works_out_its_first_weight_from_the_block(name: str, kind: str) -> None:
    out = walk("I sat by the river bank", "--model", str(FIXTURES / f"{name}.gguf"))
    cell = out[out.index("Worked cell: Q["):]
    cell = cell[:cell.index("╰")]
    col = int(re.search(r"Worked cell: Q\[[^,]+, (\d+)\]", cell).group(1))
    flat = " ".join(line.strip("│ ") for line in cell.splitlines())
    assert f"How W_Q[1, {col}] is stored ({kind}): in blocks of 32 weights down its column, W_Q[1–32, {col}]" in flat
    d, m = re.search(r"d = (-?[\d.]+)(?:, m = (-?[\d.]+))?; q = \[", flat).groups()
    line = re.search(rf"W_Q\[1, {col}\] = (d·q \+ m|d·q) = (.+?) = (-?[\d.]+)", flat)
    q = int(re.search(r"× \(?(-?\d+)\)?", line.group(2)).group(1))
    # the printed fields give the printed weight, and it is the weight the walk multiplies by
    expected = float(d) * q + float(m or 0)
    assert abs(expected - float(line.group(3))) < 1e-7
    model = open_model(str(FIXTURES / f"{name}.gguf"))
    W_Q = model.layer(model.tokenize("I sat by the river bank"), 0).W_Q
    assert abs(W_Q[0, col - 1] - float(line.group(3))) < 1e-7 * max(1, abs(W_Q[0, col - 1]))


def test_the_block_is_told_in_chinese_and_in_ascii() -> None:
    zh = walk("I sat by the river bank", "--model", str(FIXTURES / "tiny-llama.gguf"), "--lang", "zh")
    assert "是怎样存储的（Q4_1）：沿着它所在的列，每 32 个权重为一块" in zh and "以 GGUF 格式存储" in zh
    plain = walk("I sat by the river bank", "--model", str(FIXTURES / "tiny-llama.gguf"), "--ascii")
    assert re.search(r"W_Q\[1, \d+\] = d\.q \+ m = ", plain) and "·" not in plain.split("How W_Q")[1][:400]


def test_a_float_weight_says_it_has_no_block() -> None:
    out = walk("I sat by the river bank", "--model", str(FIXTURES / "tiny-gpt2.gguf"))
    assert re.search(r"W_O\[1, \d+\] is stored as BF16, 16 bits a weight: the number itself, no block", " ".join(out.split()))


def test_a_safetensors_model_adds_no_block_lines() -> None:
    out = walk("I sat by the river bank", "--model", str(FIXTURES.parent / "models" / "tiny-llama"))
    assert "is stored" not in out and "Stored as GGUF" not in out


def test_the_json_export_says_how_the_weights_are_stored() -> None:
    result = runner.invoke(app, ["model", "I sat by the river bank", "--model", str(FIXTURES / "tiny-qwen2.gguf"),
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    model = json.loads(result.stdout)["model"]
    assert model["file_format"] == "gguf" and model["quantized"] is None
    assert model["stored"]["W_Q"] == {"type": "Q5_1", "block": 32, "bits": 6.0}
