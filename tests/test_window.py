"""Sliding-window masks (issue 19, point 3): mask: {causal: true, window: w} lets query i see key
j when 0 ≤ i − j < w (Mistral's definition: w keys including itself); without causal, |i − j| < w.
Every width from 1 to n, against tests/variants_reference.py; every older mask form still loads."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import scenario_from_text
from variants_reference import layer, window_allowed

N = 7


def doc_with(mask, n: int = N, seed: int = 0, heads: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {"tokens": [f"w{i}" for i in range(n)],
            "embeddings": rng.normal(size=(n, 3)).round(3).tolist(),
            "W_Q": rng.normal(size=(3, 2 * heads)).round(3).tolist(),
            "W_K": rng.normal(size=(3, 2 * heads)).round(3).tolist(),
            "W_V": rng.normal(size=(3, 2 * heads)).round(3).tolist(),
            "heads": heads, "mask": mask}


def load(doc: dict):
    return scenario_from_text(yaml.safe_dump(doc, allow_unicode=True), "test.yaml")


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("width", range(1, N + 1))
def test_every_width_allows_exactly_the_band_and_the_weights_match(width: int, causal: bool) -> None:
    doc = doc_with({"causal": causal, "window": width}, seed=width)
    scn = load(doc)
    expected = window_allowed(N, width, causal)
    assert np.array_equal(scn.allowed, expected)
    assert scn.mask_kind == "window" and scn.window == width and scn.window_causal is causal
    counts = scn.allowed.sum(axis=1)  # w keys, fewer only where the sequence begins (or ends)
    for i in range(N):
        assert counts[i] == (min(i + 1, width) if causal else min(i, width - 1) + 1 + min(N - 1 - i, width - 1))
    walk = compute(scn)
    ref = layer(np.array(doc["embeddings"]), *(np.array(doc[w]) for w in ("W_Q", "W_K", "W_V")), 1, 1,
                expected)
    for key in ("S", "A", "Z"):
        assert np.allclose(walk.matrix(key), ref[0][key], atol=1e-12), key
    A = walk.matrix("A")
    assert np.all(A[~expected] == 0) and np.allclose(A.sum(axis=1), 1)


def test_width_one_is_each_token_alone_and_width_n_is_the_causal_mask() -> None:
    one = load(doc_with({"causal": True, "window": 1}))
    assert np.array_equal(one.allowed, np.eye(N, dtype=bool))
    assert np.allclose(compute(one).matrix("A"), np.eye(N))
    full = load(doc_with({"causal": True, "window": N}))
    assert np.array_equal(full.allowed, np.tril(np.ones((N, N), bool)))
    assert load(doc_with({"causal": False, "window": N})).allowed.all()


def test_causal_alone_in_a_mapping_is_the_causal_mask() -> None:
    scn = load(doc_with({"causal": True}))
    assert scn.mask_kind == "causal" and np.array_equal(scn.allowed, np.tril(np.ones((N, N), bool)))


@pytest.mark.parametrize("mask", ["none", "causal", [[True] * N for _ in range(N)], {"file": "m.npy"}])
def test_every_older_mask_form_still_loads(mask, tmp_path) -> None:
    np.save(tmp_path / "m.npy", np.tril(np.ones((N, N), bool)))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc_with(mask)), encoding="utf-8")
    from attnwalk.scenario.load import load_scenario

    scn = load_scenario(path)
    assert scn.window is None and scn.mask_kind in ("none", "causal", "explicit")


@pytest.mark.parametrize("mask, message", [
    ({"causal": True, "window": 0}, "mask.window: must be at least 1"),
    ({"causal": True, "window": 2.5}, "mask.window: expected a whole number"),
    ({"causal": "yes", "window": 2}, "mask.causal: expected true or false"),
    ({"causal": False}, "masks nothing"),
    ({"causal": True, "widow": 2}, "widow"),
])
def test_a_bad_window_is_one_line_naming_the_field(mask, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load(doc_with(mask))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_window_with_a_source_is_refused() -> None:
    doc = doc_with({"causal": True, "window": 2})
    doc["source"] = {"tokens": ["a", "b"], "embeddings": [[1, 0, 0], [0, 1, 0]]}
    with pytest.raises(ScenarioError, match="another sequence"):
        load(doc)


def test_export_carries_the_window_in_the_mask(tmp_path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc_with({"causal": True, "window": 3})), encoding="utf-8")
    result = CliRunner().invoke(app, ["export", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["mask"] == window_allowed(N, 3, True).tolist()
    assert data["window"] == {"width": 3, "causal": True}


@pytest.mark.parametrize("lang, band, far", [
    ("en", "Sliding window of 3", "is 4 places from query 5, outside the window of 3"),
    ("zh", "滑动窗口，宽 3", "离查询 5 有 4 个位置，超出了宽 3 的窗口"),
])
def test_the_mask_stage_shows_the_band_and_why_a_far_key_is_hidden(tmp_path, lang, band, far) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc_with({"causal": True, "window": 3})), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--scenario", str(path), "--no-pause", "--lang", lang],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert band in result.stdout
    explained = CliRunner().invoke(app, ["explain", str(path), "S+M", "w4", "w0", "--lang", lang],
                                   env={"COLUMNS": "200"})
    assert far in explained.stdout
    later = CliRunner().invoke(app, ["explain", str(path), "S+M", "w0", "w4"], env={"COLUMNS": "200"})
    assert "comes after query 1" in later.stdout


def test_a_symmetric_window_says_it_looks_both_ways(tmp_path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc_with({"window": 2})), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--scenario", str(path), "--no-pause"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "Symmetric window of 2" in result.stdout
    later = CliRunner().invoke(app, ["explain", str(path), "S+M", "w0", "w4"], env={"COLUMNS": "200"})
    assert "is 4 places from query 1" in later.stdout and "comes after" not in later.stdout


def test_a_window_as_long_as_the_sequence_says_it_hides_nothing_more(tmp_path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc_with({"causal": True, "window": 9})), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--scenario", str(path), "--no-pause"], env={"COLUMNS": "200"})
    assert "at least as long as the sequence" in result.stdout


def test_the_quiz_asks_what_a_window_reaches(tmp_path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc_with({"causal": True, "window": 3})), encoding="utf-8")
    result = CliRunner().invoke(app, ["quiz", "--scenario", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    asked = [q for q in json.loads(result.stdout)["questions"] if q["topic"] == "window"]
    assert len(asked) == 1 and "sliding window of 3" in asked[0]["prompt"]
    right = asked[0]["options"]["abc".index(asked[0]["answer"])]
    assert right.startswith("Itself and the 3 − 1 tokens")


def test_the_sliding_window_lesson_matches_the_reference_and_its_notes() -> None:
    from attnwalk.scenario.builtins import builtin_path
    from attnwalk.scenario.load import load_scenario

    doc = yaml.safe_load(builtin_path("sliding_window").read_text(encoding="utf-8"))
    X = np.array(doc["embeddings"], dtype=float)
    n = len(X)
    weights = [np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")]
    ref = layer(X, *weights, 1, 1, window_allowed(n, 3, True))[0]
    walk = compute(load_scenario("sliding_window"))
    for key in ("S", "A", "Z"):
        assert np.allclose(walk.matrix(key), ref[key], atol=1e-12)
    ming, morning, park, li, run, step = 0, 2, 4, 5, 6, 7
    assert ref["S"][step].argmax() == ming and round(ref["S"][step, ming], 4) == 1.4142
    assert round(100 * ref["A"][morning, ming]) == 67 and round(100 * ref["A"][run, park]) == 50
    assert np.allclose(ref["A"][step, [li, run, step]], 1 / 3) and ref["A"][step, ming] == 0
    assert np.allclose(ref["Z"][step], 0) and np.allclose(ref["Z"][morning].round(2), [0.67, 0])
    unwindowed = layer(X, *weights, 1, 1, np.tril(np.ones((n, n), bool)))[0]
    assert round(100 * unwindowed["A"][step, ming]) == 34
    for i in range(n):  # the band: the last row to reach 小明 is 早上, the last to reach 公园 is 跑
        assert walk.scenario.allowed[i, ming] == (i <= morning)
        assert walk.scenario.allowed[i, park] == (park <= i <= run)


def test_list_shows_the_window() -> None:
    result = CliRunner().invoke(app, ["list"], env={"COLUMNS": "200"})
    line = next(line for line in result.stdout.splitlines() if " sliding_window " in line)
    assert "causal, window 3" in line
    zh = CliRunner().invoke(app, ["list", "--lang", "zh"], env={"COLUMNS": "200"})
    assert "因果，窗口 3" in next(line for line in zh.stdout.splitlines() if " sliding_window " in line)
