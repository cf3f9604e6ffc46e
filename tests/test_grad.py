"""The backward pass against central finite differences through attnwalk's own forward (float64,
relative error ≤ 1e-6), for every gradient `attnwalk grad --format json` writes, over random
scenarios covering every feature (the torch cases' scenarios, and more drawn here); and what the
gradients must be whatever the numbers: a masked cell exactly 0, uniform weights passing nothing to
the scores, ALiBi's bias and the positions taking none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnwalk.features.target import loss
from attnwalk.layer.backward import backward, output_key
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import scenario_from_text
from gradcheck import cells_of, numeric, relative_error

HERE = Path(__file__).resolve().parent
REFERENCE = json.loads((HERE / "reference" / "grad_reference.json").read_text(encoding="utf-8"))
CASES = {case["name"]: case for case in REFERENCE["cases"]}
CELLS = 8  # cells differenced per matrix (every cell of a smaller one)


def grads_of(text: str, mode: str):
    scn = scenario_from_text(text, "case.yaml")
    walk = compute(scn, mode)
    result = loss(walk)
    return scn, walk, backward(walk, result.seeds, result.value)


def checks(scn, walk, grads):
    """(label, key, head, analytic, is a parameter) for every gradient the JSON writes."""
    out = [("Y", output_key(walk), None, grads.mats[output_key(walk)], False)]
    for stage in grads.path:
        if stage.compute is None or not stage.inputs:
            continue
        if stage.per_head:
            out += [(f"{stage.key} head {h + 1}", stage.key, h, own[stage.key], False)
                    for h, own in enumerate(grads.heads)]
        else:
            out.append((stage.key, stage.key, None, grads.mats[stage.key], False))
            out += [(f"{stage.key} share of head {h + 1}", stage.key, h, own[stage.key], False)
                    for h, own in enumerate(grads.heads) if stage.key in own and scn.heads > 1]
    out += [(name, name, None, g, True) for name, g in grads.params.items()]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_gradient_matches_finite_differences(name):
    case = CASES[name]
    scn, walk, grads = grads_of(case["yaml"], case["mode"])
    for label, key, head, analytic, param in checks(scn, walk, grads):
        cells = cells_of(analytic.shape, CELLS, seed=len(label))
        approx = numeric(scn, case["mode"], key, head, analytic.shape, param, cells)
        assert relative_error(approx, analytic) <= 1e-6, (name, label)


def test_the_finite_differences_can_fail():
    # a wrong gradient is caught: the check compares, it does not only run
    case = CASES["one_head_output"]
    scn, walk, grads = grads_of(case["yaml"], case["mode"])
    wrong = grads.params["W_Q"] * 1.01
    approx = numeric(scn, case["mode"], "W_Q", None, wrong.shape, True, cells_of(wrong.shape, CELLS))
    assert relative_error(approx, wrong) > 1e-3


MASKED = """
tokens: [a, b, c, d]
embeddings: [[1, 0.5, -0.2], [0.3, -1, 0.8], [-0.7, 0.2, 0.4], [0.9, 0.9, -0.6]]
W_Q: [[0.5, -0.3], [0.2, 0.8], [-0.6, 0.1]]
W_K: [[0.4, 0.7], [-0.5, 0.3], [0.2, -0.9]]
W_V: [[1, 0], [0, 1], [0.5, -0.5]]
mask: causal
target: {output: [[1, 0], [0, 1], [1, 1], [-1, 0]]}
"""


@pytest.mark.parametrize("mode", ["scaled", "unscaled"])
def test_a_masked_cell_of_the_scores_gradient_is_exactly_zero(mode):
    scn, walk, grads = grads_of(MASKED, mode)
    dS = grads.heads[0]["S"]
    hidden = ~scn.allowed
    assert hidden.any() and np.all(dS[hidden] == 0.0)
    assert not np.any(np.signbit(dS[hidden]))  # 0.0, never −0.0
    several = scn.allowed & (scn.allowed.sum(axis=1, keepdims=True) > 1)  # a row of one key: A = 1, dS = 0
    assert np.all(dS[several] != 0.0)  # the allowed cells are not
    assert np.allclose(dS.sum(axis=1), 0.0, atol=1e-15)  # each row of the softmax's gradient sums to 0


def test_uniform_weights_pass_nothing_back_to_the_scores():
    scn, walk, grads = grads_of(MASKED, "uniform")
    for key in ("S", "QK^T", "Q", "K"):
        assert not np.any(grads.heads[0][key]), key
    assert not np.any(grads.params["W_Q"]) and not np.any(grads.params["W_K"])
    assert np.any(grads.params["W_V"])  # the values still learn


def test_alibi_bias_and_positions_take_no_gradient():
    text = MASKED.replace("mask: causal", "mask: causal\nbias: alibi\npositional: sinusoidal")
    scn, walk, grads = grads_of(text, "scaled")
    assert "B" not in grads.heads[0] and "P" not in grads.mats
    assert np.array_equal(grads.heads[0]["S"], grads.heads[0]["S+B"])  # passed through unchanged
    assert np.array_equal(grads.mats["E"], grads.mats["X"])  # E's rows would learn, P never


def test_an_attend_target_gives_the_values_no_gradient():
    text = MASKED.replace("target: {output: [[1, 0], [0, 1], [1, 1], [-1, 0]]}", "target: {attend: {d: b}}")
    scn, walk, grads = grads_of(text, "scaled")
    for key in ("Z", "V"):
        assert not np.any(grads.heads[0][key]) and not np.any(grads.mats.get(key, 0.0))
    assert not np.any(grads.params["W_V"])
    dA = grads.heads[0]["A"]
    assert dA[3, 1] == pytest.approx(-1.0 / walk.matrix("A")[3, 1])
    assert np.count_nonzero(dA) == 1
    assert loss(walk).value == pytest.approx(-np.log(walk.matrix("A")[3, 1]))


def test_the_norms_backward_matches_finite_differences():
    # LayerNorm and RMSNorm (layer/norms.py) on rows of very different sizes, γ and β not 1 and 0
    from attnwalk.layer import norms

    rng = np.random.default_rng(30)
    x = rng.normal(0, 1, (3, 5)) * np.array([[0.1], [1.0], [8.0]])
    gamma, beta, up, eps = rng.normal(1, 0.5, 5), rng.normal(0, 0.5, 5), rng.normal(0, 1, (3, 5)), 1e-5
    layer = lambda x, g, b: float(np.sum(up * norms.normalized(x, norms.stats(x, eps), g, b)))  # noqa: E731
    rms = lambda x, g: float(np.sum(up * norms.rms_normalized(x, norms.rms(x, eps), g)))  # noqa: E731

    def differenced(f, args, which):
        out = np.zeros_like(args[which])
        for cell in np.ndindex(out.shape):
            moved = [[np.array(a, dtype=np.float64) for a in args] for _ in range(2)]
            moved[0][which][cell] += 1e-6
            moved[1][which][cell] -= 1e-6
            out[cell] = (f(*moved[0]) - f(*moved[1])) / 2e-6
        return out

    for which, g in enumerate(norms.normalized_grad(up, x, gamma, eps)):
        assert relative_error(differenced(layer, (x, gamma, beta), which), g) <= 1e-6, which
    for which, g in enumerate(norms.rms_normalized_grad(up, x, gamma, eps)):
        assert relative_error(differenced(rms, (x, gamma), which), g) <= 1e-6, which


def _normed(name: str, extra: str) -> str:
    """A torch case's scenario with a norm before the projections (`norm: …` and its γ, β)."""
    return CASES[name]["yaml"].replace("\ntarget:", f"\n{extra}\ntarget:", 1)


NORMED = {
    "layer_one_head": (_normed("one_head_output", "norm: layer\nnorm_gamma: [1.5, -0.5, 0.8, 1.2]\n"
                                                  "norm_beta: [0.1, -0.2, 0.3, 0]"), "scaled"),
    "layer_attend_causal": (_normed("one_head_attend_causal", "norm: layer\nnorm_eps: 0.01"), "unscaled"),
    "rms_heads_w_o": (_normed("heads_w_o_causal", "norm: rms\nnorm_gamma: [1, 2, 0.5, -1, 0.7, 1.3]"), "scaled"),
    "rms_rope_gqa": (_normed("rope_gqa_w_o", "norm: rms"), "scaled"),
    "layer_cross_source": (_normed("cross_source", "norm: layer\nnorm_gamma: [0.9, 1.1, 1.3, 0.6]\n"
                                                   "norm_beta: [0, 0.5, -0.5, 0.2]"), "scaled"),
}


@pytest.mark.parametrize("name", sorted(NORMED))
def test_a_norm_before_the_projections_matches_finite_differences(name):
    # LN's backward (X, γ, β) through the whole layer: every gradient the JSON writes, as above
    text, mode = NORMED[name]
    scn, walk, grads = grads_of(text, mode)
    assert "LN" in grads.mats and "norm_gamma" in grads.params
    assert ("norm_beta" in grads.params) == ("norm: layer" in text)
    for label, key, head, analytic, param in checks(scn, walk, grads):
        cells = cells_of(analytic.shape, CELLS, seed=len(label))
        approx = numeric(scn, mode, key, head, analytic.shape, param, cells)
        assert relative_error(approx, analytic) <= 1e-6, (name, label)
    if "norm: layer" in text:  # the norm's output has mean 0 whatever the row's: each row of ∂L/∂X sums to 0
        assert np.allclose(grads.mats["X"].sum(axis=1), 0.0, atol=1e-12)


def test_a_quantized_layer_s_weight_gradients_are_taken_at_the_read_back_weights_and_say_so(tmp_path):
    """The quantized lesson with a target: ∂L/∂W_Q, W_K, W_V are the gradients with respect to the
    weights read back from their blocks (what the layer multiplied by), as finite differences of
    those show, and each weight's gradient screen says so (en and zh); a float layer says nothing."""
    from typer.testing import CliRunner

    from attnwalk.cli import app

    text = (HERE.parent / "scenarios" / "quantized.yaml").read_text(encoding="utf-8")
    text = text.split("\nnotes:")[0] + "\ntarget: {attend: {it: cat}}\n"
    scn, walk, grads = grads_of(text, "scaled")
    held = scn.setting("quantize")
    for name in ("W_Q", "W_K", "W_V"):
        assert not np.allclose(scn.param(name), held.floats[name])  # read back, not as written
        analytic = grads.params[name]
        cells = cells_of(analytic.shape, CELLS, seed=len(name))
        approx = numeric(scn, "scaled", name, None, analytic.shape, True, cells)
        assert relative_error(approx, analytic) <= 1e-6, name
    path = tmp_path / "qgrad.yaml"
    path.write_text(text, encoding="utf-8")
    runner = CliRunner()
    for lang, said in (("en", "The weights are quantized here (Q4_1): this is the gradient"),
                       ("zh", "这里的权重是量化过的（Q4_1）")):
        out = runner.invoke(app, ["grad", str(path), "--no-pause", "--lang", lang], env={"COLUMNS": "200"})
        assert out.exit_code == 0, out.output
        assert out.stdout.count(said) == 3  # ∂L/∂W_Q, ∂L/∂W_K, ∂L/∂W_V
    plain = runner.invoke(app, ["grad", "backprop", "--no-pause"], env={"COLUMNS": "200"})
    assert plain.exit_code == 0 and "quantized here" not in plain.stdout
