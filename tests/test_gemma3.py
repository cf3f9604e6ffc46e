"""Gemma 3 270M from its GGUF: the config read from the file's metadata, the tokens identical to
transformers' own GGUF tokenizer, and every recorded layer (1, a sliding one, a global one, the last)
equal to the independent float64 forward of tests/reference/make_gemma3_reference.py (numpy from
gguf-py's dequantized tensors, written apart from attnwalk) to 1e-6 of each matrix's size, in
English and in a sentence with Chinese and an emoji. Skips, saying how to get the file, where it is
absent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gemmafile import HOW, available, gemma3_gguf  # noqa: F401  (the fixture)

pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'attnwalk[gguf]'")
pytestmark = pytest.mark.skipif(not available(), reason=HOW)

REFERENCE = Path(__file__).resolve().parent / "reference" / "gemma3.npz"


@pytest.fixture(scope="module")
def ref() -> dict:
    with np.load(REFERENCE) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def model(gemma3_gguf: Path):  # noqa: F811
    from attnwalk.models.model import open_model

    return open_model(str(gemma3_gguf))


def test_the_config_comes_from_the_metadata_and_says_what_it_assumed(model) -> None:
    cfg = model.config
    assert (cfg.family, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.d_model, cfg.d_head) == \
        ("gemma3", 18, 4, 1, 640, 256)
    assert cfg.sliding_window == 512 and cfg.rope["theta"] == 1e6 and cfg.bos == 2
    # the file does not carry these two: llama.cpp's own rule for gemma3 fills them, and says so
    assert cfg.gemma["assumed"] == ("window_every", "local_theta")
    assert cfg.gemma["window_every"] == 6 and cfg.gemma["local_theta"] == 10000.0
    assert cfg.gemma["query_pre_attn_scalar"] == 256.0
    kinds = [model.family.sliding(l) for l in range(18)]
    assert [l + 1 for l, sliding in enumerate(kinds) if not sliding] == [6, 12, 18]


@pytest.mark.parametrize("s", [0, 1, 2])
def test_tokens_are_transformers_own(model, ref, s: int) -> None:
    tokens = model.tokenize(str(ref[f"s{s}/text"]))
    assert list(tokens.ids) == ref[f"s{s}/ids"].tolist()
    assert list(tokens.pieces) == ref[f"s{s}/pieces"].tolist()


@pytest.mark.parametrize("s", [0, 1])
def test_every_recorded_layer_is_the_independent_forward(model, ref, s: int) -> None:
    layers = set(ref["layers"].tolist())
    tokens = model.tokenize(str(ref[f"s{s}/text"]))
    seen = set()
    for trace in model.traces(tokens):
        l = trace.layer.layer
        if l not in layers:
            continue
        seen.add(l)
        at = trace.attention
        assert trace.layer.kind == ("global" if (l + 1) % 6 == 0 else "sliding")
        assert trace.layer.rope.theta == (1e6 if trace.layer.kind == "global" else 1e4)
        for key, mine in (("A", at.A), ("Q_rot", at.Q_rot), ("K_rot", at.K_rot), ("V", at.V),
                          ("O_post", at.O_post), ("out", trace.out)):
            theirs = ref[f"s{s}/L{l}/{key}"].astype(np.float64)
            scale = max(1.0, float(np.abs(theirs).max()))
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-6 * scale, err_msg=f"L{l + 1} {key}")
        if l == max(layers):
            break
    assert seen == layers


def test_heads_scores_gemma(gemma3_gguf: Path) -> None:  # noqa: F811
    from attnwalk.cli import app

    result = CliRunner().invoke(app, ["heads", "--model", str(gemma3_gguf), "--length", "12", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ids"][0] == 2 and data["first"] == 1  # <bos>
    assert len(data["heads"]) == 18 * 4


def walk_json(path: Path, sentence: str, layer: int, *extra: str) -> dict:
    from attnwalk.cli import app

    result = CliRunner().invoke(app, ["model", sentence, "--model", str(path), "--layer", str(layer),
                                      "--format", "json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("layer", [2, 6])  # a sliding layer and a global one
def test_the_walk_of_a_layer_is_the_independent_forward(gemma3_gguf: Path, ref, layer: int) -> None:  # noqa: F811
    data = walk_json(gemma3_gguf, str(ref["s1/text"]), layer)
    assert data["tokenization"]["ids"] == ref["s1/ids"].tolist()
    stages, l = data["stages"], layer - 1
    assert {"E_sum", "H", "RMS", "X", "Q", "K", "Q_hat", "K_hat", "Q_rot", "K_rot", "O", "O_post", "R"} <= \
        set(stages) | set(stages["heads"][0])
    for h in range(4):
        theirs = ref[f"s1/L{l}/A"][h]
        np.testing.assert_allclose(np.asarray(stages["heads"][h]["A"]), theirs, rtol=0, atol=1e-12)
        q_rot = ref[f"s1/L{l}/Q_rot"].astype(np.float64)[:, h * 256:(h + 1) * 256]
        np.testing.assert_allclose(np.asarray(stages["heads"][h]["Q_rot"]), q_rot, rtol=0,
                                   atol=1e-6 * np.abs(q_rot).max())
    o_post = ref[f"s1/L{l}/O_post"].astype(np.float64)
    np.testing.assert_allclose(np.asarray(stages["O_post"]), o_post, rtol=0, atol=1e-6 * np.abs(o_post).max())


def test_the_opening_says_the_layer_kind_its_window_and_base(gemma3_gguf: Path) -> None:  # noqa: F811
    from attnwalk.cli import app

    runner = CliRunner()
    sliding = runner.invoke(app, ["model", "the bank", "--model", str(gemma3_gguf), "--layer", "2", "--no-pause"])
    glob = runner.invoke(app, ["model", "the bank", "--model", str(gemma3_gguf), "--layer", "6", "--no-pause"])
    zh = runner.invoke(app, ["model", "河边", "--model", str(gemma3_gguf), "--layer", "6", "--no-pause", "--lang", "zh"])
    for result in (sliding, glob, zh):
        assert result.exit_code == 0, result.output
    s, g = (" ".join(r.stdout.replace("│", " ").split()) for r in (sliding, glob))  # panels' lines joined
    assert "Layer 2 is a sliding-window layer" in s and "(sliding_window 512)" in s and "θ = 10000" in s
    assert "Layer 6 is a global layer (one in every 6)" in g and "θ = 1e+06" in g
    assert "llama.cpp's own rule for gemma3" in g
    assert "QK-norm of the queries" in g and "The norm after attention" in g and "E_sum = E · √d_model" in g
    z = "".join(ch for ch in zh.stdout if ch not in " │\n")  # the panel's lines joined
    assert "第6层是全局层" in z and "llama.cpp对gemma3的规定" in z
    # W_O is Q4_K: the O cell works its weight out of its super-block
    assert "How W_O[1, 1] is stored (Q4_K)" in g and "d·sc·q − dmin·m" in g


def test_decode_steps_through_qk_norm_as_the_walk(gemma3_gguf: Path) -> None:  # noqa: F811
    data = walk_json(gemma3_gguf, "I sat by the river", 2, "--decode")
    assert data["difference"] <= 1e-9


@pytest.mark.parametrize("name", ["blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
                                  "blk.0.ffn_down.weight"])  # Q5_0, Q8_0, Q4_K, Q6_K as the file stores them
def test_the_files_own_blocks_read_apart_are_gguf_pys_bit_for_bit(gemma3_gguf: Path, name: str) -> None:  # noqa: F811
    import gguf

    from attnwalk.models import kquants
    from attnwalk.models.ggufile import GGUFFile

    file = GGUFFile(gemma3_gguf)
    info = file.tensors[name]
    raw = file.raw(name)
    blocks = raw.reshape(-1, info.type_size)  # every block of the tensor
    ours = kquants.READERS[info.kind](blocks)["w"]
    theirs = np.asarray(gguf.quants.dequantize(raw, info.type_id), dtype=np.float32).reshape(ours.shape)
    assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_quantize_requantizes_gemmas_projections(gemma3_gguf: Path) -> None:  # noqa: F811
    data = walk_json(gemma3_gguf, "the bank", 1, "--quantize", "q8_0")
    assert data["model"]["quantized"] == "Q8_0"
    assert {w["type"] for w in data["model"]["stored"].values()} == {"Q8_0"}
