"""Attention sinks (`sinks:`, features/sinks.py) against a reference written here apart from attnwalk:
a softmax with one more term e^(s_h) in each row's sum, written with plain loops; gradients by
central finite differences of that reference; decode and the tiled form against the walk; the
lesson's stated numbers recomputed; bad values refused with file:line.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.scenario.builtins import builtin_path

runner = CliRunner()
ENV = {"COLUMNS": "100", "NO_COLOR": "1", "ATTNWALK_LANG": None, "LANG": "C.UTF-8", "LC_ALL": None}


def invoke(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args), env=ENV)
    assert result.exit_code == code, result.output
    return result.stdout if code == 0 else result.output


def lesson_doc() -> dict:
    return yaml.safe_load(builtin_path("attention_sink").read_text(encoding="utf-8"))


def reference(doc: dict, mode: str = "scaled", sinks=None) -> list[dict]:
    """Per head: S, A and Z, the sink's term in every row's sum (uniform: the mask alone)."""
    E = np.array(doc["embeddings"], float)
    W_Q, W_K, W_V = (np.array(doc[w], float) for w in ("W_Q", "W_K", "W_V"))
    heads = doc.get("heads", 1)
    s = doc["sinks"] if sinks is None else sinks
    s = [float(s)] if not isinstance(s, list) else [float(x) for x in s]
    n = len(E)
    mask = doc.get("mask", "none")
    allowed = [[mask != "causal" or j <= i for j in range(n)] for i in range(n)]
    Q, K, V = E @ W_Q, E @ W_K, E @ W_V
    d_k, d_v = W_Q.shape[1] // heads, W_V.shape[1] // heads
    out = []
    for h in range(heads):
        q, k, v = (M[:, h * d: (h + 1) * d] for M, d in ((Q, d_k), (K, d_k), (V, d_v)))
        S = np.array([[float(q[i] @ k[j]) / (math.sqrt(d_k) if mode != "unscaled" else 1.0)
                       for j in range(n)] for i in range(n)])
        A = np.zeros((n, n))
        for i in range(n):
            seen = [j for j in range(n) if allowed[i][j]]
            if mode == "uniform":
                for j in seen:
                    A[i, j] = 1 / len(seen)
                continue
            total = math.exp(s[h]) + sum(math.exp(S[i, j]) for j in seen)
            for j in seen:
                A[i, j] = math.exp(S[i, j]) / total
        out.append({"S": S, "A": A, "Z": A @ v})
    return out


def export(path_or_name: str, *more: str) -> dict:
    return json.loads(invoke("export", path_or_name, "--format", "json", *more))


def two_heads(tmp_path, sinks="[1.5, -0.5]", extra="") -> str:
    doc = {"tokens": ["a", "b", "c", "d", "e"], "heads": 2, "mask": "causal", "positional": "none",
           "embeddings": np.round(np.random.default_rng(3).normal(size=(5, 4)), 2).tolist(),
           "W_Q": np.round(np.random.default_rng(4).normal(size=(4, 4)), 2).tolist(),
           "W_K": np.round(np.random.default_rng(5).normal(size=(4, 4)), 2).tolist(),
           "W_V": np.round(np.random.default_rng(6).normal(size=(4, 4)), 2).tolist()}
    text = yaml.safe_dump(doc) + f"sinks: {sinks}\n" + extra
    path = tmp_path / "two.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- the numbers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["scaled", "unscaled", "uniform"])
def test_the_lesson_equals_the_reference_in_every_mode(mode: str) -> None:
    data = export("attention_sink", "--mode", mode)
    want = reference(lesson_doc(), mode)[0]
    for key in ("S", "A", "Z"):
        np.testing.assert_allclose(np.array(data["stages"][key]), want[key], atol=1e-12)
    assert data["sinks"] == [2.0]


def test_two_heads_each_with_its_sink(tmp_path) -> None:
    path = two_heads(tmp_path)
    data = export(path)
    want = reference(yaml.safe_load(open(path, encoding="utf-8")))
    for h in range(2):
        for key in ("A", "Z"):
            np.testing.assert_allclose(np.array(data["stages"]["heads"][h][key]), want[h][key], atol=1e-12)
    sums = np.array(data["stages"]["heads"][0]["A"]).sum(axis=1)
    assert np.all(sums < 1)


def test_the_lesson_says_what_it_claims() -> None:
    # The description's numbers, from the reference with and without the sink
    doc = lesson_doc()
    with_sink, plain = reference(doc)[0], reference(doc, sinks=-np.inf)[0]
    the, sat, cat = 2, 1, 0
    assert [round(x, 2) for x in with_sink["S"][the, :3]] == [0.42, 0.28, 0.07]
    assert [round(math.exp(x), 2) for x in with_sink["S"][the, :3]] == [1.53, 1.33, 1.07]
    assert round(math.exp(2), 2) == 7.39
    assert round(1 - with_sink["A"][the].sum(), 2) == 0.65
    assert round(with_sink["A"][the].sum(), 2) == 0.35
    assert [round(x, 2) for x in plain["Z"][the]] == [0.42, 0.37]
    assert [round(x, 2) for x in with_sink["Z"][the]] == [0.14, 0.13]
    assert round(with_sink["S"][sat, cat], 2) == 4.24 and round(math.exp(with_sink["S"][sat, cat]), 1) == 69.6
    assert round(with_sink["A"][sat, cat], 2) == 0.89
    assert plain["A"][cat, cat] == 1.0 and round(with_sink["A"][cat, cat], 2) == 0.12
    described = " ".join(doc["description"].values())
    for number in ("0.42", "0.28", "0.07", "7.39", "3.93", "0.65", "0.35", "[0.42, 0.37]", "[0.14, 0.13]",
                   "4.24", "69.6", "0.89", "0.12"):
        assert number in doc["description"]["en"], number
        assert number in doc["description"]["zh"], number
    assert "Xiao" in described


def test_the_lesson_s_notes_say_what_the_reference_computes() -> None:
    doc = lesson_doc()
    with_sink, plain = reference(doc)[0], reference(doc, sinks=-np.inf)[0]
    the, sat, cat = 2, 1, 0
    r4 = lambda v: "[" + ", ".join(f"{x:.4f}" for x in v) + "]"  # noqa: E731
    said = {key: note["en"] + note["zh"] for key, note in doc["notes"].items()}
    assert r4(with_sink["A"][the, :3]) in said["A"] and r4(plain["A"][the, :3]) in said["A"]
    assert f"{with_sink['A'][the].sum():.4f}" in said["A"] and f"{1 - with_sink['A'][the].sum():.4f}" in said["A"]
    assert f"{with_sink['A'][sat, cat]:.4f}" in said["A"]
    assert r4(with_sink["Z"][the]) in said["Z"] and r4(plain["Z"][the]) in said["Z"]
    assert f"{with_sink['A'][cat, cat]:.4f}" in said["Z"] and with_sink["Z"][cat].tolist()[1] == 0.0
    # L = −log A[sat, cat]: ∂L/∂s by central differences of the reference
    h = 1e-6
    loss = lambda s: -math.log(reference(doc, sinks=[s])[0]["A"][sat, cat])  # noqa: E731
    assert f"{(loss(2 + h) - loss(2 - h)) / (2 * h):.4f}" in said["dsinks"]
    assert f"{1 - with_sink['A'][sat].sum():.4f}" in said["dsinks"]  # it is sat's sink share


# -- every surface --------------------------------------------------------------------------------


def test_the_walk_shows_the_sink_in_the_formula_the_cell_and_the_row_sums() -> None:
    walked = invoke("run", "attention_sink", "--no-pause")
    assert "A[i, j] = e^(S + M)[i, j] / (e^s_h + Σ_k e^(S + M)[i, k])" in walked
    assert "· each row sums to 1 ·" not in walked.split("Stage 11 / 12")[1].split("Stage 12 / 12")[0]
    assert "· each row sums to 1 ·" in invoke("run", "river_bank", "--no-pause")  # the legend, where true
    flat = " ".join(walked.split())
    assert "Each row of A sums to less than 1 here" in flat and "the 0.3471" in flat
    assert "sink   e^2.0000 = 7.389" in walked  # the worked cell's term of the sum
    zh = invoke("run", "attention_sink", "--no-pause", "--lang", "zh")
    assert "汇点" in zh and "加起来都不到 1" in zh


def test_uniform_ignores_the_sinks_and_says_so() -> None:
    walked = invoke("run", "attention_sink", "--no-pause", "--mode", "uniform")
    assert "do not read the scores, nor the sink logits" in walked
    A = np.array(export("attention_sink", "--mode", "uniform")["stages"]["A"])
    np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-15)


def test_decode_equals_the_walk_and_shows_the_rows_that_sum_below_one(tmp_path) -> None:
    for source in ("attention_sink", two_heads(tmp_path)):
        data = json.loads(invoke("decode", source, "--format", "json"))
        assert data["difference"] <= 1e-12
    shown = " ".join(invoke("decode", "attention_sink", "--no-pause").split())
    assert "(they sum to 0.3471: the softmax's sink took the rest)" in shown and "(they sum to 1)" not in shown
    steps = json.loads(invoke("decode", "attention_sink", "--format", "json"))["steps"]
    want = reference(lesson_doc())[0]["A"]
    for t, step in enumerate(steps):
        np.testing.assert_allclose(step["a"], want[t, :t + 1], atol=1e-12)


def test_tiles_start_at_the_sink_and_still_equal_z(tmp_path) -> None:
    from attnwalk.features.tiles import with_tiles
    from attnwalk.layer.walk import compute
    from attnwalk.scenario.load import load_scenario

    walk = compute(with_tiles(load_scenario(two_heads(tmp_path)), 2))
    want = reference(yaml.safe_load(open(two_heads(tmp_path), encoding="utf-8")))
    for h in range(2):
        np.testing.assert_allclose(walk.matrix("tiled", h), want[h]["Z"], atol=1e-12)
    walked = invoke("run", "attention_sink", "--no-pause", "--tiles", "2")
    assert "m starts at 2.00000 and l at e⁰ = 1" in walked


def _loss(doc: dict, sinks: list[float], W_Q=None) -> float:
    """L = −log A[sat, cat] from the reference: the lesson's target."""
    if W_Q is not None:
        doc = {**doc, "W_Q": W_Q}
    return -math.log(reference(doc, sinks=sinks)[0]["A"][1, 0])


def test_grad_of_the_sinks_and_the_weights_by_finite_differences() -> None:
    doc = lesson_doc()
    assert doc["target"] == {"attend": {"sat": "cat"}}
    data = json.loads(invoke("grad", "attention_sink", "--format", "json"))
    h = 1e-6
    fd = (_loss(doc, [2 + h]) - _loss(doc, [2 - h])) / (2 * h)
    assert data["grads"]["sinks"] == pytest.approx([fd], abs=1e-8)
    W = np.array(doc["W_Q"], float)
    want = np.zeros_like(W)
    for i, j in np.ndindex(W.shape):
        up, down = W.copy(), W.copy()
        up[i, j] += h
        down[i, j] -= h
        want[i, j] = (_loss(doc, [2.0], up.tolist()) - _loss(doc, [2.0], down.tolist())) / (2 * h)
    np.testing.assert_allclose(data["grads"]["W_Q"], want, atol=1e-7)
    walked = invoke("grad", "attention_sink", "--no-pause")
    assert "∂L/∂s" in walked and "−Σ_i σ_i" in walked


def test_train_moves_the_sinks_against_their_gradient() -> None:
    grads = json.loads(invoke("grad", "attention_sink", "--format", "json"))["grads"]
    data = json.loads(invoke("train", "attention_sink", "--steps", "1", "--lr", "0.5", "--format", "json"))
    # one step moves W_Q, W_K, W_V and the sink against their gradients: A after it, by the reference
    doc = lesson_doc()
    moved = {w: (np.array(doc[w], float) - 0.5 * np.array(grads[w])).tolist() for w in ("W_Q", "W_K", "W_V")}
    sink = 2.0 - 0.5 * grads["sinks"][0]
    assert grads["sinks"][0] != 0.0
    np.testing.assert_allclose(data["steps"][1]["A"], reference({**doc, **moved}, sinks=[sink])[0]["A"], atol=1e-12)
    kept = reference({**doc, **moved}, sinks=[2.0])[0]["A"]
    assert np.abs(np.array(data["steps"][1]["A"]) - kept).max() > 1e-3  # the sink moved, not only W


def test_compare_signal_by_finite_differences() -> None:
    # ∂A[i, j]/∂S[i, j] of the reference, largest per row: with a sink still a(1 − a)
    data = json.loads(invoke("compare", "attention_sink", "--format", "json"))
    got = data["modes"]["scaled"]["signal"]
    want = reference(lesson_doc())[0]["A"]
    np.testing.assert_allclose(got, np.max(want * (1 - want), axis=1), atol=1e-12)


def test_the_quiz_asks_the_lesson_s_own_questions_in_both_languages() -> None:
    for lang, said in (("en", "Without the sink"), ("zh", "去掉汇点")):
        sheet = invoke("quiz", "attention_sink", "--format", "markdown", "--lang", lang)
        assert said in sheet


# -- bad values -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value, says", [
    ("[1, 2]", "sinks has 2 numbers, but heads is 1"),
    ("nan", "NaN"),
    ("hello", "expected a number"),
    ("[1, .nan]", "NaN"),
])
def test_bad_sinks_are_refused_with_file_and_line(tmp_path, value: str, says: str) -> None:
    text = builtin_path("attention_sink").read_text(encoding="utf-8").replace("sinks: 2", f"sinks: {value}")
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), start=1) if row.startswith("sinks:"))
    out = invoke("run", str(path), "--no-pause", code=2)
    assert f"bad.yaml:{line}" in out and says in out and "Traceback" not in out


def test_a_single_number_is_for_one_head_only(tmp_path) -> None:
    out = invoke("run", two_heads(tmp_path, sinks="2"), "--no-pause", code=2)
    assert "a list of 2 numbers" in out
