"""A norm before the projections (`norm: layer | rms`, features/norm.py), the feature that proved
the layer's graph: one module, one line in FEATURES, its text and its lesson.

The references are computed here and in tests/reference.py, apart from attnwalk.layer: LayerNorm
as Ba, Kiros and Hinton (2016) write it, (x − μ) / √(var + ε) · γ + β with the population
variance, and RMSNorm as Zhang and Sennrich (2019), x / √(mean(x²) + ε) · γ; the lesson's numbers
from the layer_norm lesson's own text, recomputed with and without the norm.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer.decodemath import step_lines
from attnwalk.layer.kvcache import decode
from attnwalk.layer.modes import mode_named
from attnwalk.layer.walk import compute
from attnwalk.scenario.builtins import builtin_path
from attnwalk.scenario.load import scenario_from_text
from reference import attention, normalized

runner = CliRunner()
ENV = {"COLUMNS": "100", "NO_COLOR": "1"}


def lesson() -> dict:
    return yaml.safe_load(builtin_path("layer_norm").read_text(encoding="utf-8"))


def load(doc: dict):
    return scenario_from_text(yaml.safe_dump(doc, allow_unicode=True), "norm.yaml")


def layer(doc: dict, norm: bool = True) -> dict:
    X = np.array(doc["embeddings"], dtype=float)
    d = X.shape[1]
    if norm:
        X = normalized(X, doc["norm"], doc.get("norm_gamma", [1.0] * d), doc.get("norm_beta", [0.0] * d),
                       float(doc.get("norm_eps", 1e-5)))
    out = attention(X, X, *(np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")),
                    np.ones((len(X), len(X)), bool))
    return {"LN": X, **out["heads"][0]}


def export(ref: str) -> dict:
    result = runner.invoke(app, ["export", ref, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- the lesson's numbers, with and without its norm ------------------------------------------------


def test_the_lessons_numbers_without_the_norm() -> None:
    raw, t = layer(lesson(), norm=False), lesson()["tokens"]
    cat, sat, the = t.index("cat"), t.index("sat"), t.index("the")
    E = np.array(lesson()["embeddings"], dtype=float)
    assert np.linalg.norm(E[cat]) == pytest.approx(7.48, abs=0.005)
    assert raw["S"][cat, cat] == pytest.approx(25.46, abs=0.005)
    assert f"{raw['A'][cat, cat]:.4f}" == "1.0000"  # saturated
    assert raw["A"][sat, cat] == pytest.approx(0.889, abs=0.0005)
    assert (raw["S"][the].min(), raw["S"][the].max()) == pytest.approx((-0.21, 0.78), abs=0.005)
    assert raw["Z"][cat] == pytest.approx([6, 2], abs=5e-5) and raw["Z"][sat] == pytest.approx([5.37, 1.82], abs=0.005)


def test_the_lessons_numbers_with_the_norm_match_the_walk() -> None:
    doc, t = lesson(), lesson()["tokens"]
    want, data = layer(doc), export("layer_norm")
    for key in ("S", "A", "Z"):
        assert np.allclose(data["stages"][key], want[key], atol=1e-12), key
    assert np.allclose(data["stages"]["LN"], want["LN"], atol=1e-12)
    cat, sat, the = t.index("cat"), t.index("sat"), t.index("the")
    assert [f"{v:.4f}" for v in want["LN"][cat]] == ["1.3867", "0.2773", "-1.3867", "-0.2773"]
    assert np.allclose(np.linalg.norm(want["LN"], axis=1), 2.0, atol=2e-4)  # √d_model (ε aside), every row
    assert np.allclose(want["LN"].mean(axis=1), 0.0, atol=1e-12)
    assert (want["S"][cat].min(), want["S"][cat].max()) == pytest.approx((-0.88, 0.90), abs=0.005)
    assert round(100 * want["A"][sat, cat]) == 9 and round(100 * want["A"][sat, sat]) == 88
    assert round(100 * want["A"][the, the]) == 92 and want["A"][cat, cat] == pytest.approx(0.46, abs=0.005)
    assert (want["S"][the].min(), want["S"][the].max()) == pytest.approx((-3.09, 3.00), abs=0.005)
    assert [f"{v:.4f}" for v in want["Z"][cat]] == ["0.7226", "0.0245"]
    assert [f"{v:.4f}" for v in want["Z"][sat]] == ["0.0305", "1.3302"]
    for lang in ("en", "zh"):  # the lesson says these numbers
        text = doc["description"][lang] + doc["notes"]["LN"][lang] + doc["notes"]["A"][lang]
        for said in ("25.46", "0.889" if lang == "zh" else "89%", "1.3867", "-0.88", "0.90", "3.6056", "0.2586"):
            assert said in text, (lang, said)


# -- the stage, its text and its cell ---------------------------------------------------------------


@pytest.mark.parametrize("lang, words", [("en", ["Each token's row, normalised", "Q = LN(X) · W_Q",
                                                 "norm after it (LN)", "σ = √(var + ε)"]),
                                         ("zh", ["逐行归一化", "Q = LN(X) · W_Q", "归一化（LN）"])])
def test_the_walk_shows_ln_between_x_and_the_projections(lang: str, words: list[str]) -> None:
    result = runner.invoke(app, ["run", "layer_norm", "--no-pause", "--lang", lang], env=ENV)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for word in words:
        assert word in out, word
    assert out.index("LN(X)") > out.index("Stage 4 / 12" if lang == "en" else "阶段 4 / 12")
    assert "Stage 5 / 12   LN(X)" in out or "阶段 5 / 12   LN(X)" in out


def test_the_worked_cell_checks_with_its_own_digits() -> None:
    result = runner.invoke(app, ["explain", "layer_norm", "LN", "cat", "1"], env=ENV)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "μ = 4.0000 / 4 = 1.0000" in out and "√(13.0000 + 1e-05) = 3.6056" in out
    assert "5.0000 / 3.6056" in out and "LN(X)[cat, 1] = 1.3867" in out  # 5 / 3.6056 = 1.38673


def test_rms_norm_has_no_mean_and_no_beta(tmp_path) -> None:
    doc = {**lesson(), "norm": "rms", "norm_gamma": [1, 2, 0.5, 1]}
    doc.pop("notes")
    scn = load(doc)
    walk = compute(scn)
    want = layer(doc)
    assert np.allclose(walk.mats["LN"], want["LN"], atol=1e-12)
    assert np.allclose(walk.heads[0].mats["Z"], want["Z"], atol=1e-12)
    stage = next(s for s in scn.graph if s.key == "LN")
    assert stage.symbol == "RMSNorm(X)" and "β" not in stage.formula_in(scn) and "μ" not in stage.formula_in(scn)
    path = tmp_path / "rms.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = runner.invoke(app, ["explain", str(path), "LN", "cat", "2"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "RMS = √(mean(X[cat]²) + ε)" in result.stdout and "γ[2] = 2.0000" in result.stdout


# -- everything else reads the graph: decode, tiles, compare, quiz ----------------------------------


def test_decode_steps_through_the_norm_as_the_walk_does() -> None:
    doc = {**lesson(), "mask": "causal"}
    doc.pop("notes")
    scn = load(doc)
    dec = decode(scn)
    for step in dec.steps:
        assert np.max(np.abs(step.heads[0].z - dec.walk.matrix("Z", 0)[step.t - 1])) <= 1e-12
    assert step_lines(scn, mode_named("scaled"))[0] == (
        "x_t = e_t;  q_t = LN(x_t) · W_Q,  k_t = LN(x_t) · W_K,  v_t = LN(x_t) · W_V")


def test_tiles_compare_and_quiz_take_the_norm() -> None:
    result = runner.invoke(app, ["run", "layer_norm", "--no-pause", "--tiles", "2"], env=ENV)
    assert result.exit_code == 0 and "LN(X)" in result.stdout
    ref = layer(lesson())
    data = export("layer_norm")
    assert np.allclose(data["stages"]["Z"], ref["Z"], atol=1e-12)
    result = runner.invoke(app, ["compare", "layer_norm", "--mode", "unscaled"], env=ENV)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["quiz", "layer_norm", "--count", "40"], input="\n" * 80, env=ENV)
    assert "LayerNorm" in result.stdout and "√d_model" in result.stdout  # the lesson's own questions


@pytest.mark.parametrize("extra, message", [
    ({"norm": "batch"}, "norm: expected one of layer | rms"),
    ({"norm": "layer", "norm_gamma": [1, 1]}, "norm_gamma has 2 numbers, but d_model is 4"),
    ({"norm": "rms", "norm_beta": [0, 0, 0, 0]}, "norm_beta is only used with norm: layer"),
    ({"norm": "layer", "norm_eps": 0}, "norm_eps must be greater than 0"),
    ({"norm_gamma": [1, 1, 1, 1]}, "norm_gamma is only used with norm: layer or norm: rms"),
])
def test_a_bad_norm_is_one_line_naming_the_file_line_and_field(extra: dict, message: str) -> None:
    doc = {**lesson(), **extra}
    doc.pop("notes")
    if "norm" not in extra:
        doc.pop("norm")
    with pytest.raises(ScenarioError) as info:
        load(doc)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("norm.yaml:")
