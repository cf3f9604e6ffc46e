"""The tiled (online) softmax against the direct form and against the recurrence written here from
the papers' formulas (Milakov & Gimelshein 2018; FlashAttention Alg. 1, FA-2's unnormalised Õ):

    m_new = max(m, rowmax(S_blk)),  α = exp(m − m_new),
    l = α·l + rowsum(exp(S_blk − m_new)),  Õ = α·Õ + exp(S_blk − m_new)·V_blk,  O = Õ / l

Random scenarios cover every mask, several heads, cross-attention and B from 1 to beyond m."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.export.data import walk_data
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.features.tiles import with_tiles

runner = CliRunner()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the references, from the formulas -----------------------------------------------------------


def direct_rows(S: np.ndarray, allowed: np.ndarray, V: np.ndarray) -> np.ndarray:
    """softmax over the allowed keys of each row, times V, one row at a time."""
    out = []
    for s, ok in zip(S, allowed):
        top = max(x for x, keep in zip(s, ok) if keep)
        e = np.array([math.exp(x - top) if keep else 0.0 for x, keep in zip(s, ok)])
        out.append(e / e.sum() @ V)
    return np.array(out)


def online_row(s: np.ndarray, ok: np.ndarray, V: np.ndarray, B: int) -> list[dict]:
    """One row's state after each block, by the recurrence; a fully masked block is skipped."""
    m, l, O = -math.inf, 0.0, np.zeros(V.shape[1])
    states = []
    for start in range(0, len(s), B):
        idx = [j for j in range(start, min(start + B, len(s))) if ok[j]]
        if not idx:
            states.append({"m": m, "alpha": None, "l": l, "O": O.copy(), "skipped": True})
            continue
        m_new = max(m, max(s[j] for j in idx))
        alpha = math.exp(m - m_new) if m > -math.inf else 0.0
        p = {j: math.exp(s[j] - m_new) for j in idx}
        l = alpha * l + sum(p.values())
        O = alpha * O + sum(p[j] * V[j] for j in idx)
        m = m_new
        states.append({"m": m, "alpha": alpha, "l": l, "O": O.copy(), "skipped": False})
    return states


# -- random scenarios ----------------------------------------------------------------------------


@st.composite
def scenarios(draw) -> tuple[str, int]:
    n = draw(st.integers(1, 6))
    cross = draw(st.booleans())
    m = draw(st.integers(1, 7)) if cross else n
    d_model = draw(st.integers(1, 4))
    heads = draw(st.integers(1, 3))
    d_k, d_v = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.5, 2.0, 8.0]))  # 8: large scores, a late maximum rescales hard

    def matrix(rows: int, cols: int) -> list:
        return np.round(rng.normal(0, scale, (rows, cols)), 3).tolist()

    doc = {"tokens": [f"t{i}" for i in range(n)], "embeddings": matrix(n, d_model),
           "W_Q": matrix(d_model, heads * d_k), "W_K": matrix(d_model, heads * d_k),
           "W_V": matrix(d_model, heads * d_v), "heads": heads,
           "tiles": draw(st.integers(1, m + 2))}
    if cross:
        doc["source"] = {"tokens": [f"s{j}" for j in range(m)], "embeddings": matrix(m, d_model)}
    mask = draw(st.sampled_from(["none", "explicit"] + ([] if cross else ["causal"])))
    if mask == "explicit":
        allowed = rng.random((n, m)) < 0.5
        for i in range(n):  # every row sees at least one key
            if not allowed[i].any():
                allowed[i, rng.integers(m)] = True
        doc["mask"] = allowed.tolist()
    else:
        doc["mask"] = mask
    return yaml.safe_dump(doc, allow_unicode=True), doc["tiles"]


@SETTINGS
@given(scenarios(), st.sampled_from(["scaled", "unscaled", "uniform"]))
def test_tiled_equals_direct_and_the_recurrence(case, mode) -> None:
    text, B = case
    scn = scenario_from_text(text, "random.yaml")
    walk = compute(scn, mode)
    for h, head in enumerate(walk.heads):
        # uniform: the weights are softmax(M), so the recurrence reads 0 for every visible key
        S = np.zeros_like(head.mats["S"]) if mode == "uniform" else head.mats["S"]
        V = head.mats["V"]
        want = direct_rows(S, scn.allowed, V)
        got = head.mats["tiled"]
        assert np.allclose(got, want, rtol=0, atol=1e-12 * max(1.0, np.abs(want).max()))
        assert np.allclose(head.mats["Z"], got, rtol=0, atol=1e-12 * max(1.0, np.abs(want).max()))
        rows = walk_data(walk)["tiled"]["rows"] if scn.heads == 1 else \
            walk_data(walk)["stages"]["heads"][h]["tiled"]["rows"]
        assert len(rows) == scn.n
        for i, row in enumerate(rows):
            ref = online_row(S[i], scn.allowed[i], V, B)
            assert len(row) == len(ref) == math.ceil(scn.m / B)
            for got_blk, ref_blk in zip(row, ref):
                assert got_blk["skipped"] == ref_blk["skipped"]
                if ref_blk["m"] == -math.inf:
                    assert got_blk["m"] is None  # JSON has no −∞
                else:
                    assert got_blk["m"] == pytest.approx(ref_blk["m"], abs=1e-12)
                if ref_blk["alpha"] is None:
                    assert got_blk["alpha"] is None
                else:
                    assert got_blk["alpha"] == pytest.approx(ref_blk["alpha"], rel=1e-12, abs=1e-300)
                assert got_blk["l"] == pytest.approx(ref_blk["l"], rel=1e-12)
                assert np.allclose(got_blk["O"], ref_blk["O"], rtol=1e-12, atol=1e-12)
            visible = S[i][scn.allowed[i]]
            last = row[-1]
            assert last["m"] == pytest.approx(visible.max(), abs=0)  # the row's maximum, exactly
            assert last["l"] == pytest.approx(np.exp(visible - visible.max()).sum(), rel=1e-12)
            if B >= scn.m:  # one block: the plain softmax
                p = np.exp(visible - visible.max()) / np.exp(visible - visible.max()).sum()
                assert np.allclose(np.array(last["O"]) / last["l"], p @ V[scn.allowed[i]], atol=1e-12)


def test_uniform_mode_runs_on_m_alone_and_hard_has_no_tiled_stage() -> None:
    scn = with_tiles(load_scenario("causal_mask"), 2)
    walk = compute(scn, "uniform")
    V = walk.heads[0].mats["V"]
    for i in range(scn.n):  # the mean of the values the row may see
        assert np.allclose(walk.matrix("tiled")[i], V[scn.allowed[i]].mean(axis=0), atol=1e-15)
    assert "tiled" not in [s.key for s in compute(scn, "hard").stages]


def test_a_fully_masked_first_block_is_skipped_and_m_is_null_until_the_first_visible_key() -> None:
    doc = {"tokens": ["a", "b", "c", "d"], "embeddings": [[1, 0], [0, 1], [1, 1], [2, -1]],
           "W_Q": [[1, 0], [0, 1]], "W_K": [[1, 0], [0, 1]], "W_V": [[1, 0], [0, 1]],
           "mask": [[False, False, True, True] for _ in range(4)], "tiles": 2}
    walk = compute(scenario_from_text(yaml.safe_dump(doc), "m.yaml"))
    row = walk_data(walk)["tiled"]["rows"][0]
    assert row[0] == {"start": 0, "stop": 2, "skipped": True, "m": None, "alpha": None, "l": 0.0,
                      "O": [0.0, 0.0]}
    assert row[1]["alpha"] == 0.0 and row[1]["m"] is not None  # e^−∞: nothing to rescale yet


def test_the_lesson_rescales_late_and_keeps_a_block_below_the_maximum() -> None:
    walk = compute(load_scenario("online_softmax"))
    rows = walk_data(walk)["tiled"]["rows"]
    alphas = [blk["alpha"] for row in rows for blk in row[1:] if blk["alpha"] is not None]
    assert any(a < 1 for a in alphas)  # a maximum that arrives late
    assert any(a == 1 for a in alphas)  # a block below the running maximum


def test_cli_tiles_shows_the_blocks_and_the_final_equality() -> None:
    result = runner.invoke(app, ["run", "causal_mask", "--tiles", "2", "--no-pause"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Keys 2 at a time" in out and "Z_tiled" in out
    assert "skipped" in out  # causal: T1's and T2's second block is all masked
    assert "against Z from the direct form" in out
    assert "Õ[1] = α·Õ[1]" in out  # the worked cell's recurrence, on the column labelled 1


def test_export_with_several_heads_puts_tiled_in_each_head() -> None:
    result = runner.invoke(app, ["export", "shapes", "--tiles", "40"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert "tiled" not in data
    heads = data["stages"]["heads"]
    assert len(heads) == 8 and all(h["tiled"]["block"] == 40 for h in heads)
    assert [len(r) for r in heads[3]["tiled"]["rows"]] == [3] * 100  # 100 keys: 40, 40, 20


def test_bad_tiles_are_one_line_errors() -> None:
    result = runner.invoke(app, ["run", "causal_mask", "--tiles", "0", "--no-pause"])
    assert result.exit_code == 2
    doc = yaml.safe_load(open(load_scenario("causal_mask").path, encoding="utf-8"))
    doc["tiles"] = 0
    with pytest.raises(ScenarioError, match=r"^t.yaml:\d+: tiles: must be at least 1"):
        scenario_from_text(yaml.safe_dump(doc, allow_unicode=True), "t.yaml")


def test_the_quiz_asks_m_and_l_after_a_rescaling_block_with_the_recurrences_numbers() -> None:
    from attnwalk.tutor.questions import questions

    walk = compute(load_scenario("online_softmax"))
    S, V = walk.matrix("S"), walk.heads[0].mats["V"]
    asked = [q for q in questions(walk) if q.topic == "tiled"]
    assert [q.qid.split(":")[1] for q in asked] == ["m", "l"]
    for q in asked:
        _, what, head, row, block = q.qid.split(":")
        ref = online_row(S[int(row)], walk.scenario.allowed[int(row)], V, 2)[int(block)]
        assert q.answer == pytest.approx(ref[what], rel=1e-12)
        assert ref["alpha"] < 1  # the block that raises the maximum: the rescaling is the point
        assert int(row) != walk.scenario.focus  # not the row the walk's worked cell follows


def test_explain_works_a_tiled_cell_whose_every_line_holds_for_its_digits(tmp_path) -> None:
    """Each l line and the final division, recomputed here from the digits they print."""
    import re

    rows = [[False] * 4 + [True] * 7 for _ in range(11)]  # a 4-key masked start: blocks skipped
    doc = {"tokens": list("abcdefghijk"),
           "embeddings": [[1, 0], [0, 1], [1, 1], [2, 0], [0, 2], [1, 2], [2, 1], [3, 0], [0, 3], [1, 3],
                          [2, 2]],
           "W_Q": [[1, 0], [0, 1]], "W_K": [[1, 0], [0, 1]], "W_V": [[1, 0], [0, 1]], "mask": rows}
    path = tmp_path / "masked.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = runner.invoke(app, ["explain", str(path), "tiled", "k", "1", "--tiles", "2"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.count("every key of this block is masked: skipped") == 2  # a–b, c–d
    assert "α = e^(−∞) = 0" in out  # the first visible block: nothing to rescale yet
    l_lines = re.findall(r"l = α·l \+ Σ e\^\(S_blk − m\) = ([\d.]+) × ([\d.]+) \+ \(([\d. +]+)\) = ([\d.]+)",
                         out)
    assert len(l_lines) == 4  # a–b and c–d are skipped; e–f, g–h, i–j and k are worked
    for alpha, l_old, terms, l_new in l_lines:  # at the decimals the cell is worked to
        total = float(alpha) * float(l_old) + sum(float(t) for t in terms.split(" + "))
        assert f"{total:.{len(l_new.split('.')[1])}f}" == l_new
    O, l, Z = re.search(r"Õ\[1\] / l = ([\d.]+) / ([\d.]+) = ([\d.]+)", out).groups()
    assert f"{float(O) / float(l):.{len(Z.split('.')[1])}f}" == Z
