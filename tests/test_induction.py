"""The induction lesson's training: Adam's update (layer/train.py) against a reference written
here; `sequences:` (features/sequences.py), its draws and its refusals; the built-in `induction`
trained from its fixed seed, whose heads' scores cross the thresholds the lesson's text quotes."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attnwalk.layer.train import descend
from attnwalk.scenario.load import load_scenario, scenario_from_text

BACKPROP_ADAM = re.sub(r"train: \{[^}]*\}", "train: {steps: 4, lr: 0.05, optimizer: adam}",
                       open(load_scenario("backprop").path, encoding="utf-8").read())


def _adam_reference(W0, grads, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """Kingma & Ba's Algorithm 1 (torch.optim.Adam's defaults), written out: the weights after
    each of the gradients given, in order."""
    W, m, v, out = W0.copy(), np.zeros_like(W0), np.zeros_like(W0), []
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g ** 2
        W = W - lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps)
        out.append(W.copy())
    return out


def test_adam_moves_each_weight_as_kingma_and_ba_write_it():
    scn = scenario_from_text(BACKPROP_ADAM, "backprop_adam.yaml")
    steps = list(descend(scn, "scaled", 4, 0.05, "adam"))
    for name in ("W_Q", "W_K"):
        grads = [s.grads.params[name] for s in steps[:-1]]
        expected = _adam_reference(np.asarray(scn.param(name)), grads, 0.05)
        for step, W in zip(steps[1:], expected):
            np.testing.assert_allclose(step.walk.scenario.param(name), W, rtol=1e-12, atol=1e-15)
    # the first step is ±η on every weight whose gradient is not 0 (m̂/√v̂ = g/|g|, but for ε)
    g0 = steps[0].grads.params["W_Q"]
    moved = np.asarray(steps[1].walk.scenario.W_Q) - np.asarray(scn.W_Q)
    np.testing.assert_allclose(moved[g0 != 0], -0.05 * np.sign(g0[g0 != 0]), rtol=1e-5)


def test_plain_descent_is_unchanged_by_the_optimizer_key():
    gd = scenario_from_text(BACKPROP_ADAM.replace("optimizer: adam", "optimizer: gd"), "gd.yaml")
    first, second = list(descend(gd, "scaled", 1, 0.05, "gd"))
    W = np.asarray(gd.W_Q) - 0.05 * first.grads.params["W_Q"]
    np.testing.assert_allclose(second.walk.scenario.W_Q, W, rtol=0, atol=1e-15)


def test_an_unknown_optimizer_is_one_line_naming_the_field():
    from attnwalk.errors import ScenarioError

    with pytest.raises(ScenarioError) as info:
        scenario_from_text(BACKPROP_ADAM.replace("optimizer: adam", "optimizer: sgd"), "x.yaml")
    message = str(info.value)
    assert "x.yaml:" in message and "train.optimizer" in message and "adam" in message
    assert "\n" not in message
