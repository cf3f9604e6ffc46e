"""ALiBi (issue 19, point 2): −m_h · |i − j| added to head h's scores, with the paper's slopes,
shown as the stages B and S + B. Numbers against tests/variants_reference.py, written from the
formulas; the lesson's notes against the same reference."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer import alibi
from attnwalk.layer.walk import compute
from attnwalk.scenario.builtins import builtin_path
from attnwalk.scenario.load import load_scenario, scenario_from_text
from variants_reference import layer, paper_slopes, window_allowed


def scenario(rng: np.random.Generator, n: int, heads: int, d_k: int = 2, **extra) -> dict:
    d_model = 3
    doc = {"tokens": [f"t{i}" for i in range(n)],
           "embeddings": rng.normal(size=(n, d_model)).round(3).tolist(),
           "W_Q": rng.normal(size=(d_model, heads * d_k)).round(3).tolist(),
           "W_K": rng.normal(size=(d_model, heads * d_k)).round(3).tolist(),
           "W_V": rng.normal(size=(d_model, heads * d_k)).round(3).tolist(),
           "heads": heads, "bias": "alibi"}
    doc.update(extra)
    return doc


def load(doc: dict):
    return scenario_from_text(yaml.safe_dump(doc, allow_unicode=True), "test.yaml")


# -- the slopes -------------------------------------------------------------------------------------


def test_slopes_of_powers_of_two_are_the_papers_geometric_sequence() -> None:
    assert alibi.slopes(8) == [2.0 ** -k for k in range(1, 9)]  # 1/2, 1/4, ..., 1/256
    assert alibi.slopes(4) == [0.25, 0.0625, 0.015625, 0.00390625]
    assert alibi.slopes(16)[0] == 2 ** -0.5 and alibi.slopes(16)[-1] == 2 ** -8
    assert alibi.slopes(1) == [2 ** -8]


@pytest.mark.parametrize("heads", range(1, 33))
def test_slopes_follow_the_papers_rule_for_every_head_count(heads: int) -> None:
    assert np.allclose(alibi.slopes(heads), paper_slopes(heads), rtol=1e-12, atol=0)  # the paper multiplies, rounding at ~1e-16


def test_slopes_of_other_head_counts_interleave() -> None:
    # 6 heads: the 4 of 4 heads, then every other slope of 8 heads (1/2, 1/8)
    assert alibi.slopes(6) == [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
    assert alibi.slopes(3) == [2 ** -4, 2 ** -8, 2 ** -2]


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 6, 8, 12])
def test_the_worked_cells_exponent_gives_the_slope(heads: int) -> None:
    for h, slope in enumerate(alibi.slopes(heads)):
        a, b = alibi.exponent(heads, h)
        assert 2.0 ** (-a / b) == pytest.approx(slope, rel=1e-15)


# -- the walk against the reference -----------------------------------------------------------------


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("mask", ["none", "causal", "window"])
@pytest.mark.parametrize("mode", ["scaled", "unscaled", "uniform"])
def test_every_head_matches_the_formula(heads: int, mask: str, mode: str) -> None:
    rng = np.random.default_rng(100 * heads + len(mask) + len(mode))
    n = 6
    extra = {"mask": {"causal": True, "window": 3}} if mask == "window" else {"mask": mask}
    doc = scenario(rng, n, heads, **extra)
    allowed = (np.ones((n, n), bool) if mask == "none" else np.tril(np.ones((n, n), bool))
               if mask == "causal" else window_allowed(n, 3, True))
    walk = compute(load(doc), mode)
    expected = layer(np.array(doc["embeddings"]), *(np.array(doc[w]) for w in ("W_Q", "W_K", "W_V")),
                     heads, heads, allowed, alibi=True, mode=mode)
    for h, ref in enumerate(expected):
        for key in ("S", "B", "S+B", "A", "Z"):
            assert np.allclose(walk.matrix(key, h), ref[key], atol=1e-12, rtol=1e-12), (h, key)


def test_b_depends_only_on_the_offset_and_is_zero_on_the_diagonal() -> None:
    walk = compute(load(scenario(np.random.default_rng(1), 5, 2)))
    for h, slope in enumerate(alibi.slopes(2)):
        B = walk.matrix("B", h)
        assert np.all(np.diag(B) == 0) and not np.signbit(np.diag(B)).any()  # +0, not −0
        assert B[4, 1] == B[3, 0] == -3 * slope
        assert np.array_equal(B, B.T)


def test_without_bias_there_are_no_alibi_stages() -> None:
    doc = scenario(np.random.default_rng(2), 4, 2)
    del doc["bias"]
    walk = compute(load(doc))
    assert "B" not in [s.key for s in walk.stages] and "S+B" not in [s.key for s in walk.stages]
    assert load({**doc, "bias": "none"}).bias == "none"


# -- export, walk, explain, errors ------------------------------------------------------------------


def test_export_carries_b_per_head_and_the_slopes(tmp_path) -> None:
    doc = scenario(np.random.default_rng(3), 5, 3, mask="causal")
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = CliRunner().invoke(app, ["export", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["alibi_slopes"] == paper_slopes(3)
    for h, head in enumerate(data["stages"]["heads"]):
        d = np.arange(5)
        assert np.allclose(head["B"], -paper_slopes(3)[h] * np.abs(d[:, None] - d[None, :]), atol=0)
        assert np.allclose(np.array(head["S+B"]), np.array(head["S"]) + np.array(head["B"]), atol=0)
    csv = CliRunner().invoke(app, ["export", str(path), "--format", "csv"]).stdout
    assert "\nB,0,4,t4,0,t0," in csv


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_walk_shows_the_bias_with_each_heads_slope(lang: str) -> None:
    result = CliRunner().invoke(app, ["run", "alibi", "--no-pause", "--lang", lang, "--head", "all"],
                                env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "B[i, j] = −m_h · (i − j)" in out  # causal: the paper's form
    assert "(S + B) + M" in out
    for h, (a, b) in enumerate([(8, 4), (16, 4), (24, 4), (32, 4)]):
        assert f"m_{h + 1} = 2^(−{a}/{b})" in out
    assert "0.25, 0.0625, 0.015625, 0.00390625" in out
    assert ("ALiBi bias" if lang == "en" else "ALiBi 偏置") in out


def test_explain_works_a_bias_cell_out() -> None:
    result = CliRunner().invoke(app, ["explain", "alibi", "B", "它", "小猫"])
    assert result.exit_code == 0, result.output
    assert "−m_1 × |6 − 1| = −0.2500 × 5 = -1.2500" in result.stdout
    result = CliRunner().invoke(app, ["explain", "alibi", "S+B", "它", "垫子"])
    assert "1.4142 + (-0.5000) = 0.9142" in result.stdout


def test_uniform_mode_says_the_bias_is_ignored() -> None:
    result = CliRunner().invoke(app, ["run", "alibi", "--no-pause", "--mode", "uniform"],
                                env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "ALiBi bias, ignored" in result.stdout
    assert "fades" not in result.stdout.split("ALiBi bias, ignored")[1].split("Stage")[0]


@pytest.mark.parametrize("bad, message", [
    ({"bias": "alibi2"}, "bias: expected one of none | alibi"),
    ({"bias": "alibi", "source": {"tokens": ["x"], "embeddings": [[1, 0, 0]]}}, "bias: alibi needs keys from the same sequence"),
])
def test_bad_bias_is_one_line_naming_the_field(bad: dict, message: str) -> None:
    doc = {**scenario(np.random.default_rng(4), 3, 1), **bad}
    with pytest.raises(ScenarioError) as info:
        load(doc)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_bias_on_the_command_line_exits_2(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**scenario(np.random.default_rng(5), 3, 1), "bias": "rope"}))
    result = CliRunner().invoke(app, ["run", "--scenario", str(path), "--no-pause"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "bias" in result.output


# -- the lesson -------------------------------------------------------------------------------------


def test_the_alibi_lesson_matches_the_reference_and_its_notes() -> None:
    doc = yaml.safe_load(builtin_path("alibi").read_text(encoding="utf-8"))
    X = np.array(doc["embeddings"], dtype=float)
    n = len(X)
    ref = layer(X, *(np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")), 4, 4,
                np.tril(np.ones((n, n), bool)), alibi=True)
    walk = compute(load_scenario("alibi"))
    for h in range(4):
        for key in ("S", "B", "S+B", "A", "Z"):
            assert np.allclose(walk.matrix(key, h), ref[h][key], atol=1e-12)
    it, cat, mat = 5, 0, 3
    # the numbers its description and notes give
    assert ref[0]["S"][it, cat] == pytest.approx(2.4 / math.sqrt(2)) and round(ref[0]["S"][it, cat], 4) == 1.6971
    assert round(ref[0]["S+B"][it, cat], 4) == 0.4471 and round(ref[0]["S+B"][it, mat], 4) == 0.9142
    assert round(ref[3]["S+B"][it, cat], 4) == 1.6775 and round(ref[3]["S+B"][it, mat], 4) == 1.4064
    percent = lambda h, j: round(100 * ref[h]["A"][it, j])  # noqa: E731
    assert (percent(0, mat), percent(0, cat)) == (37, 23)
    assert (percent(1, cat), percent(1, mat)) == (36, 32)
    assert (percent(3, cat), percent(3, mat)) == (40, 30)
    assert ref[0]["A"][it].argmax() == mat and all(ref[h]["A"][it].argmax() == cat for h in (1, 2, 3))
    for h in range(4):
        assert np.allclose(ref[h]["S"], ref[0]["S"])  # the heads differ only by their slopes
    for i in range(1, 5):  # zero queries: a token gives itself the most in head 1
        assert ref[0]["A"][i].argmax() == i


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_without_positions_alibi_is_not_called_order_blind(lang: str) -> None:
    doc = scenario(np.random.default_rng(7), 4, 2)  # no mask, no positions: only ALiBi carries order
    scn = load(doc)
    from attnwalk.features import stage_named
    from attnwalk.text import stage_text

    P, X = stage_named("P"), stage_named("X")
    said = " ".join(stage_text(lang, stage, scn, "scaled", field)
                    for stage in (P, X) for field in ("title", "what", "why", "mistake"))
    assert "ALiBi" in said
    for false in ("permutation-equivariant", "same output wherever it stands", "only reorders",
                  "置换等变", "输出也完全相同"):
        assert false not in said
    # and the permutation claim really is false here: swapping the first two tokens changes the
    # first one's output (a reversal would not: it keeps every |i − j|)
    walk = compute(scn)
    E = doc["embeddings"]
    swapped = compute(load({**doc, "embeddings": [E[1], E[0], *E[2:]]}))
    assert not np.allclose(walk.matrix("Z", 0)[0], swapped.matrix("Z", 0)[1])
