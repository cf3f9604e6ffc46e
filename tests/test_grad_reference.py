"""attnwalk's gradients and training against torch autograd: `grad --format json` to 1e-9 of the
gradients torch computes through an independent forward pass (tests/reference/make_grad_reference.py,
float64), for random scenarios with every feature; `train --steps 5 --format json` gives the losses
of five steps of plain gradient descent. Against the committed numbers always, and live where torch
is importable."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.cli import app

HERE = Path(__file__).resolve().parent
REFERENCE = json.loads((HERE / "reference" / "grad_reference.json").read_text(encoding="utf-8"))
CASES = {case["name"]: case for case in REFERENCE["cases"]}
TOL = 1e-9


def run(args: list[str]) -> dict:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def scenario_file(case: dict, tmp_path: Path) -> str:
    path = tmp_path / f"{case['name']}.yaml"
    path.write_text(case["yaml"], encoding="utf-8")
    return str(path)


def assert_close(got, want, where: str) -> None:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, where
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    assert float(np.max(np.abs(got - want), initial=0.0)) <= TOL * scale, where


def compare_grads(got: dict, want: dict) -> None:
    assert set(got) == set(want)  # the same matrices, named as the contract names them
    for key, value in want.items():
        if key == "heads":
            assert len(got["heads"]) == len(value)
            for h, (mine, theirs) in enumerate(zip(got["heads"], value)):
                assert set(mine) == set(theirs), h
                for name in theirs:
                    assert_close(mine[name], theirs[name], f"heads[{h}].{name}")
        else:
            assert_close(got[key], value, key)


def test_the_reference_covers_every_feature_and_mode():
    text = "".join(case["yaml"] for case in CASES.values())
    for feature in ("W_O:", "heads:", "kv_heads:", "mask: causal", "window:", "mask: [[", "positional: rope",
                    "pairing: interleaved", "bias: alibi", "score: additive", "qk_norm: true", "source:",
                    "positional: sinusoidal", "output:", "attend:"):
        assert feature in text, feature
    assert {case["mode"] for case in CASES.values()} == {"scaled", "unscaled", "uniform"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_json_agrees_with_torch_autograd(name, tmp_path):
    case = CASES[name]
    data = run(["grad", scenario_file(case, tmp_path), "--mode", case["mode"], "--format", "json"])
    assert data["loss"] == pytest.approx(case["loss"], rel=TOL, abs=TOL)
    compare_grads(data["grads"], case["grads"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_five_steps_of_train_are_five_steps_of_gradient_descent(name, tmp_path):
    case = CASES[name]
    data = run(["train", scenario_file(case, tmp_path), "--steps", "5", "--lr", str(case["lr"]),
                "--mode", case["mode"], "--format", "json"])
    assert [s["step"] for s in data["steps"]] == list(range(6))
    assert [s["loss"] for s in data["steps"]] == pytest.approx(case["train_losses"], rel=TOL, abs=TOL)


def test_uniform_mode_passes_nothing_to_the_scores_and_the_mask_stops_the_gradient():
    case = CASES["gqa_explicit_mask_uniform"]
    for head in case["grads"]["heads"]:
        for name in ("S", "QK^T", "Q", "K"):
            assert not np.any(head[name]), name  # uniform: not a small number, exactly 0
    assert not np.any(case["grads"]["W_Q"]) and not np.any(case["grads"]["W_K"])


TORCH = importlib.util.find_spec("torch") is not None


@pytest.mark.skipif(not TORCH, reason="torch is not installed (the committed numbers are checked above)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_live_torch_agrees_with_the_committed_numbers_and_attnwalk(name, tmp_path):
    import sys

    sys.path.insert(0, str(HERE / "reference"))
    from make_grad_reference import CASES as SPECS, reference

    live = reference(next(spec for spec in SPECS if spec["name"] == name))
    assert live["yaml"] == CASES[name]["yaml"]
    data = run(["grad", scenario_file(live, tmp_path), "--mode", live["mode"], "--format", "json"])
    compare_grads(data["grads"], live["grads"])
