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
