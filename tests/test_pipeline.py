"""The pipeline against an independent reference, on many random shapes, and its invariants."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.layer.ops import softmax
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import scenario_from_text
from reference import attention, sinusoidal_positions

MODES = ("scaled", "unscaled", "uniform")


def random_scenario(rng: np.random.Generator, *, n=None, d_model=None, positional=None, mask=None,
                    heads=1, cross=False, w_o=False, additive=False, qk_norm=False):
    """A random scenario as a plain dict (for YAML) and the arrays the reference needs."""
    n = n or int(rng.integers(1, 10))
    d_model = d_model or int(rng.integers(1, 13))
    d_k = int(rng.integers(1, 6)) * heads
    d_v = int(rng.integers(1, 6)) * heads
    while d_v == d_k and d_model > 0:  # the contract cares that d_k ≠ d_v works
        d_v = int(rng.integers(1, 6)) * heads
    m = int(rng.integers(1, 10)) if cross else n
    E = rng.normal(size=(n, d_model)).round(3)
    positional = positional or rng.choice(["none", "sinusoidal", "explicit"])
    doc = {"tokens": [f"t{i}" for i in range(n)], "embeddings": E.tolist(),
           "W_Q": rng.normal(size=(d_model, d_k)).tolist(), "W_K": rng.normal(size=(d_model, d_k)).tolist(),
           "W_V": rng.normal(size=(d_model, d_v)).tolist()}
    if positional == "explicit":
        P = rng.normal(size=(n, d_model))
        doc["positional"] = P.tolist()
    else:
        doc["positional"] = str(positional)
        P = sinusoidal_positions(n, d_model) if positional == "sinusoidal" else np.zeros((n, d_model))
    mask = mask or rng.choice(["none", "causal", "explicit"] if not cross else ["none", "explicit"])
    if mask == "none":
        allowed = np.ones((n, m), dtype=bool)
    elif mask == "causal":
        allowed = np.tril(np.ones((n, n), dtype=bool))
        doc["mask"] = "causal"
    else:
        allowed = rng.random((n, m)) < 0.6
        allowed[np.arange(n), rng.integers(0, m, size=n)] = True  # every row allows one key
        doc["mask"] = allowed.tolist()
    X = E + P
    X_kv = X
    if cross:
        E_src = rng.normal(size=(m, d_model))
        doc["source"] = {"tokens": [f"s{j}" for j in range(m)], "embeddings": E_src.tolist()}
        X_kv = E_src
    if heads > 1:
        doc["heads"] = heads
    W_O = None
    if w_o:
        W_O = rng.normal(size=(d_v, d_model))
        doc["W_O"] = W_O.tolist()
    arrays = dict(E=E, P=P, X=X, X_kv=X_kv, W_Q=np.array(doc["W_Q"]), W_K=np.array(doc["W_K"]),
                  W_V=np.array(doc["W_V"]), allowed=allowed, heads=heads, W_O=W_O)
    if additive:  # lesson 000 §1.1: tanh(q + k) · w_a, w_a of the per-head d_k
        doc["score"] = "additive"
        doc["w_a"] = rng.normal(size=d_k // heads).tolist()
        arrays.update(kind="additive", w_a=np.array(doc["w_a"]))
    if qk_norm:  # lesson 000 §1.2: RMS-normalised q and k, times a learnable scale
        doc["qk_norm"] = True
        doc["qk_scale"] = float(rng.uniform(0.5, 4.0))
        arrays.update(qk_norm=True, qk_scale=doc["qk_scale"])
    return doc, arrays


def export(tmp_path, doc, mode):
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    result = CliRunner().invoke(app, ["export", str(path), "--format", "json", "--mode", mode])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("seed", range(60))
def test_export_matches_reference_single_head(tmp_path, seed):
    rng = np.random.default_rng(seed)
    doc, a = random_scenario(rng)
    ref_modes = {mode: attention(a["X"], a["X_kv"], a["W_Q"], a["W_K"], a["W_V"], a["allowed"], mode)
                 for mode in MODES}
    for mode in MODES:
        out = export(tmp_path, doc, mode)
        ref = ref_modes[mode]
        stages = out["stages"]
        assert out["mode"] == mode
        assert out["mask"] == a["allowed"].tolist()
        for key, want in (("E", a["E"]), ("P", a["P"]), ("X", a["X"]), ("Q", ref["Q"]), ("K", ref["K"]),
                          ("V", ref["V"])):
            np.testing.assert_allclose(stages[key], want, rtol=1e-9, atol=1e-9, err_msg=key)
        for key in ("QK^T", "S", "A", "Z"):
            np.testing.assert_allclose(stages[key], ref["heads"][0][key], rtol=1e-9, atol=1e-9, err_msg=key)


@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (6, 1), (9, 12)])
def test_edge_shapes(tmp_path, shape):
    rng = np.random.default_rng(sum(shape))
    n, d_model = shape
    for mask in ("none", "causal"):
        doc, a = random_scenario(rng, n=n, d_model=d_model, mask=mask, positional="sinusoidal")
        out = export(tmp_path, doc, "scaled")
        ref = attention(a["X"], a["X"], a["W_Q"], a["W_K"], a["W_V"], a["allowed"])
        np.testing.assert_allclose(out["stages"]["Z"], ref["heads"][0]["Z"], rtol=1e-9, atol=1e-9)
        assert len(out["stages"]["A"]) == n


def test_sinusoidal_odd_d_model_ends_with_a_sin_column():
    scn = scenario_from_text("tokens: [a, b, c]\nembeddings: [[0,0,0],[0,0,0],[0,0,0]]\n"
                             "positional: sinusoidal\nW_Q: [[1],[1],[1]]\nW_K: [[1],[1],[1]]\n"
                             "W_V: [[1],[1],[1]]\n", "odd.yaml")
    P = compute(scn).mats["P"]
    # pos 2, column 2 is frequency pair i = 1: sin(2 / 10000^(2/3))
    assert P[2, 2] == pytest.approx(np.sin(2 / 10000 ** (2 / 3)), abs=1e-15)
    assert P[1, 1] == pytest.approx(np.cos(1.0), abs=1e-15)


def test_softmax_is_stable_for_huge_scores():
    S = np.array([[1e300, -1e300, 0.0], [800.0, 799.0, -np.inf]])
    A = softmax(S)
    assert np.all(np.isfinite(A))
    np.testing.assert_allclose(A.sum(axis=1), 1.0)
    assert A[0].tolist() == [1.0, 0.0, 0.0]
    assert A[1, 2] == 0.0
    assert A[1, 0] == pytest.approx(1 / (1 + np.exp(-1)))


# -- invariants -----------------------------------------------------------------------------------

@st.composite
def scenarios(draw, positional=None, mask=None):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    doc, arrays = random_scenario(rng, positional=positional, mask=mask)
    scale = draw(st.sampled_from([1e-3, 1.0, 30.0]))  # small, ordinary and saturating scores
    doc["embeddings"] = (np.array(doc["embeddings"]) * scale).tolist()
    return doc


def _scn(doc):
    return scenario_from_text(yaml.safe_dump(doc), "h.yaml")


@settings(max_examples=60, deadline=None)
@given(scenarios(), st.sampled_from(MODES))
def test_rows_of_A_sum_to_one_and_masked_weights_are_zero(doc, mode):
    scn = _scn(doc)
    walk = compute(scn, mode)
    A = walk.matrix("A")
    np.testing.assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(A[~scn.allowed] == 0.0)
    assert np.all(A >= 0)


@settings(max_examples=40, deadline=None)
@given(scenarios(positional="none", mask="none"), st.sampled_from(MODES), st.randoms(use_true_random=False))
def test_permuting_tokens_permutes_every_output(doc, mode, rnd):
    n = len(doc["tokens"])
    perm = list(range(n))
    rnd.shuffle(perm)
    shuffled = dict(doc, tokens=[doc["tokens"][i] for i in perm],
                    embeddings=[doc["embeddings"][i] for i in perm])
    base, moved = compute(_scn(doc), mode), compute(_scn(shuffled), mode)
    for key in ("X", "Q", "K", "V", "Z"):
        np.testing.assert_allclose(moved.matrix(key), base.matrix(key)[perm], rtol=1e-9, atol=1e-12)
    for key in ("QK^T", "S", "A"):
        np.testing.assert_allclose(moved.matrix(key), base.matrix(key)[np.ix_(perm, perm)], rtol=1e-9, atol=1e-12)


def test_uniform_is_the_mean_of_allowed_value_rows():
    scn = _scn({"tokens": ["a", "b", "c"], "embeddings": [[1, 0], [0, 1], [2, 2]], "mask": "causal",
                "W_Q": [[1, 0], [0, 1]], "W_K": [[1, 0], [0, 1]], "W_V": [[1, 0], [0, 1]]})
    Z = compute(scn, "uniform").matrix("Z")
    np.testing.assert_allclose(Z, [[1, 0], [0.5, 0.5], [1, 1]])


@pytest.mark.parametrize("seed", range(24))
def test_multi_head_and_cross_attention_match_reference(tmp_path, seed):
    rng = np.random.default_rng(1000 + seed)
    heads = int(rng.integers(1, 5))
    cross = bool(seed % 2)
    doc, a = random_scenario(rng, heads=heads, cross=cross, w_o=bool(seed % 3))
    for mode in MODES:
        out = export(tmp_path, doc, mode)
        ref = attention(a["X"], a["X_kv"], a["W_Q"], a["W_K"], a["W_V"], a["allowed"], mode,
                        heads=heads, W_O=a["W_O"])
        stages = out["stages"]
        for key in ("Q", "K", "V"):  # the full, unsplit projections
            np.testing.assert_allclose(stages[key], ref[key], rtol=1e-9, atol=1e-9, err_msg=key)
        got_heads = stages["heads"] if heads > 1 else [stages]
        assert len(got_heads) == heads
        for got, want in zip(got_heads, ref["heads"]):
            for key in ("QK^T", "S", "A", "Z"):
                np.testing.assert_allclose(got[key], want[key], rtol=1e-9, atol=1e-9, err_msg=key)
        if heads > 1:
            np.testing.assert_allclose(stages["concat"], ref["concat"], rtol=1e-9, atol=1e-9)
        if a["W_O"] is not None:
            np.testing.assert_allclose(stages["O"], ref["O"], rtol=1e-9, atol=1e-9)
        assert np.array(out["mask"]).shape == a["allowed"].shape


@pytest.mark.parametrize("seed", range(16))
def test_additive_and_qk_norm_scores_match_reference(tmp_path, seed):
    """Any number of heads, self- or cross-attention, every mask kind, all modes."""
    rng = np.random.default_rng(2000 + seed)
    heads = int(rng.integers(1, 4))
    additive, qk_norm = [(True, False), (False, True), (True, True), (True, False)][seed % 4]
    doc, a = random_scenario(rng, heads=heads, cross=bool(seed // 4 % 2), w_o=bool(seed % 3),
                             additive=additive, qk_norm=qk_norm)
    extra = {key: a[key] for key in ("kind", "w_a", "qk_norm", "qk_scale") if key in a}
    for mode in MODES:
        out = export(tmp_path, doc, mode)
        ref = attention(a["X"], a["X_kv"], a["W_Q"], a["W_K"], a["W_V"], a["allowed"], mode,
                        heads=heads, W_O=a["W_O"], **extra)
        stages = out["stages"]
        got_heads = stages["heads"] if heads > 1 else [stages]
        for got, want in zip(got_heads, ref["heads"], strict=True):
            for key in ("QK^T", "S", "A", "Z"):
                np.testing.assert_allclose(got[key], want[key], rtol=1e-9, atol=1e-9, err_msg=key)
        if a["W_O"] is not None:
            np.testing.assert_allclose(stages["O"], ref["O"], rtol=1e-9, atol=1e-9)
