"""QK-norm is q̂ = q / RMS(q) exactly, as the README, the formula and the worked cell say, at any
scale: rows near 1e±200 neither overflow nor vanish, and no ε bends small vectors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnwalk.layer.scores import rms_normalize
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import scenario_from_text

import reference


def scenario(scale: float, d: int = 8, qk_scale: float = 1.0) -> str:
    rows = [[scale * ((i * 7 + j * 3) % 5 - 2 + 0.5 * (i == j)) for j in range(d)] for i in range(3)]
    eye = [[1 if i == j else 0 for j in range(d)] for i in range(d)]
    return (f"tokens: [a, b, c]\nembeddings: {rows}\nW_Q: {eye}\nW_K: {eye}\nW_V: {eye}\n"
            f"qk_norm: true\n" + (f"qk_scale: {qk_scale}\n" if qk_scale != 1 else ""))


@pytest.mark.parametrize("scale", [1e-200, 1e-100, 1e-4, 1.0, 1e100, 1e200])
def test_qk_norm_matches_the_reference_at_every_scale(scale: float) -> None:
    scn = scenario_from_text(scenario(scale, qk_scale=2.5), "qk.yaml")
    walk = compute(scn)
    X = np.array(scn.main.E)
    ref = reference.attention(X, X, np.array(scn.W_Q), np.array(scn.W_K), np.array(scn.W_V),
                              scn.allowed, qk_norm=True, qk_scale=2.5)
    np.testing.assert_allclose(walk.matrix("QK^T"), ref["heads"][0]["QK^T"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(walk.matrix("A"), ref["heads"][0]["A"], rtol=1e-12, atol=1e-12)
    # the same direction at every scale: the scores do not depend on the scale at all
    unit = compute(scenario_from_text(scenario(1.0, qk_scale=2.5), "qk.yaml"))
    np.testing.assert_allclose(walk.matrix("QK^T"), unit.matrix("QK^T"), rtol=1e-12)


@pytest.mark.parametrize("scale", [1e-200, 1e-4, 1e200])
def test_a_vector_with_itself_scores_d_k(scale: float) -> None:
    # q̂ · q̂ = d · mean(q̂²) = d · 1: no ε pulls small vectors toward 0 (0.195 instead of 8 before)
    q = np.full((1, 8), scale) * np.array([1, -2, 3, 0.5, -1, 2, 0, 1])
    q_hat = rms_normalize(q)
    assert float((q_hat @ q_hat.T)[0, 0]) == pytest.approx(8.0, rel=1e-14)
    assert math.sqrt(float(np.mean(q_hat * q_hat))) == pytest.approx(1.0, rel=1e-14)  # RMS(q̂) = 1


def test_a_zero_row_stays_zero_and_warns_nothing(recwarn) -> None:
    q = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, 4.0]])
    out = rms_normalize(q)
    assert out[0].tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(out[1], np.array([3.0, 0.0, 4.0]) / math.sqrt(25 / 3), rtol=1e-15)
    assert len(recwarn) == 0
