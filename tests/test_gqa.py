"""Grouped-query and multi-query attention (issue 19, point 4): kv_heads: g splits K and V into g
heads, each read by heads/g consecutive query heads. Against tests/variants_reference.py; g = heads
must be ordinary multi-head attention exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer.walk import compute
from attnwalk.scenario.builtins import builtin_path
from attnwalk.scenario.load import load_scenario, scenario_from_text
from variants_reference import layer, window_allowed


def doc_for(heads: int, kv_heads: int | None, n: int = 5, d_k: int = 2, d_v: int = 3, seed: int = 0,
            **extra) -> dict:
    rng = np.random.default_rng(seed)
    g = heads if kv_heads is None else kv_heads
    doc = {"tokens": [f"g{i}" for i in range(n)],
           "embeddings": rng.normal(size=(n, 4)).round(3).tolist(),
           "W_Q": rng.normal(size=(4, heads * d_k)).round(3).tolist(),
           "W_K": rng.normal(size=(4, g * d_k)).round(3).tolist(),
           "W_V": rng.normal(size=(4, g * d_v)).round(3).tolist(),
           "heads": heads, **extra}
    if kv_heads is not None:
        doc["kv_heads"] = kv_heads
    return doc


def load(doc: dict):
    return scenario_from_text(yaml.safe_dump(doc, allow_unicode=True), "test.yaml")


@pytest.mark.parametrize("heads, kv_heads", [(4, 1), (4, 2), (4, 4), (6, 1), (6, 2), (6, 3), (6, 6),
                                             (8, 2), (1, 1)])
@pytest.mark.parametrize("mask", ["none", "causal", "window"])
def test_each_query_head_reads_its_groups_k_and_v(heads: int, kv_heads: int, mask: str) -> None:
    n = 5
    extra = {"mask": {"causal": True, "window": 2}} if mask == "window" else {"mask": mask}
    doc = doc_for(heads, kv_heads, n=n, seed=heads * 10 + kv_heads, **extra)
    allowed = (np.ones((n, n), bool) if mask == "none" else np.tril(np.ones((n, n), bool))
               if mask == "causal" else window_allowed(n, 2, True))
    walk = compute(load(doc))
    ref = layer(np.array(doc["embeddings"]), *(np.array(doc[w]) for w in ("W_Q", "W_K", "W_V")),
                heads, kv_heads, allowed)
    for h in range(heads):
        for key in ("Q", "K", "V", "S", "A", "Z"):  # Q, K, V: the head's own blocks
            assert np.allclose(walk.heads[h].mats[key], ref[h][key], atol=1e-12), (h, key)
    if heads > 1:
        assert np.allclose(walk.matrix("concat"), np.concatenate([r["Z"] for r in ref], axis=1), atol=1e-12)
        group = heads // kv_heads
        for h in range(heads):  # the heads of one group hold the very same K and V
            assert np.array_equal(walk.heads[h].mats["K"], walk.heads[h - h % group].mats["K"])
            assert np.array_equal(walk.heads[h].mats["V"], walk.heads[h - h % group].mats["V"])


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("mode", ["scaled", "unscaled", "uniform"])
def test_kv_heads_equal_to_heads_is_ordinary_multi_head_attention_exactly(heads: int, mode: str) -> None:
    doc = doc_for(heads, None, seed=heads, mask="causal")
    W_O = np.random.default_rng(9).normal(size=(heads * 3, 4)).round(3).tolist()
    plain = compute(load({**doc, "W_O": W_O}), mode)
    grouped = compute(load({**doc, "W_O": W_O, "kv_heads": heads}), mode)
    assert [s.key for s in plain.stages] == [s.key for s in grouped.stages]
    for key in plain.mats:
        assert np.array_equal(plain.mats[key], grouped.mats[key]), key
    for a, b in zip(plain.heads, grouped.heads):
        assert a.mats.keys() == b.mats.keys()
        for key in a.mats:
            assert np.array_equal(a.mats[key], b.mats[key]), key


def test_shapes_follow_g() -> None:
    scn = load(doc_for(6, 2, d_k=2, d_v=3, W_O=np.zeros((18, 4)).tolist()))
    assert (scn.heads, scn.groups, scn.d_k, scn.d_v) == (6, 2, 2, 3)
    assert [scn.kv_head(h) for h in range(6)] == [0, 0, 0, 1, 1, 1]
    walk = compute(scn)
    assert walk.matrix("K").shape == (5, 4) and walk.matrix("V").shape == (5, 6)
    assert walk.matrix("concat").shape == (5, 18) and walk.matrix("O").shape == (5, 4)


@pytest.mark.parametrize("change, message", [
    ({"kv_heads": 3}, "kv_heads is 3, but it must divide heads (4)"),
    ({"kv_heads": 8}, "kv_heads is 8, but it must divide heads (4)"),
    ({"kv_heads": 0}, "kv_heads: must be at least 1"),
    ({"W_K": np.ones((4, 8)).tolist()}, "W_K has 8 columns, but with kv_heads 2 it must be kv_heads × d_k = 2 × 2 = 4"),
    ({"W_V": np.ones((4, 5)).tolist()}, "W_V has 5 columns, which 2 K/V heads cannot split evenly"),
    ({"W_O": np.ones((6, 4)).tolist()}, "W_O is 6 × 4, but it must be (h·d_v) × d_model = 12 × 4"),
])
def test_a_bad_kv_heads_is_one_line_naming_the_field(change: dict, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load({**doc_for(4, 2), **change})
    assert message in str(info.value) and "\n" not in str(info.value)
    assert "choose one of 1, 2, 4" in str(info.value) if "divide" in message else True


def test_a_bad_kv_heads_exits_2_on_the_command_line(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**doc_for(4, 2), "kv_heads": 3}), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--scenario", str(path), "--no-pause"])
    assert result.exit_code == 2 and "Traceback" not in result.output and "kv_heads" in result.output


def test_cross_attention_shares_the_sources_k_and_v(tmp_path) -> None:
    doc = doc_for(4, 2, n=3)
    rng = np.random.default_rng(5)
    doc["source"] = {"tokens": ["s0", "s1", "s2", "s3"], "embeddings": rng.normal(size=(4, 4)).round(3).tolist()}
    walk = compute(load(doc))
    X_src = np.array(doc["source"]["embeddings"])
    K = X_src @ np.array(doc["W_K"])
    assert np.array_equal(walk.heads[3].mats["K"], K[:, 2:4]) and walk.matrix("A", 3).shape == (3, 4)


def test_export_names_each_query_heads_kv_head(tmp_path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(doc_for(6, 3)), encoding="utf-8")
    result = CliRunner().invoke(app, ["export", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kv_heads"] == [0, 0, 1, 1, 2, 2] and data["shape"]["kv_heads"] == 3
    assert np.array(data["stages"]["K"]).shape == (5, 6)  # g·d_k
    heads = data["stages"]["heads"]
    assert heads[2]["K"] == heads[3]["K"] != heads[4]["K"]
    plain = tmp_path / "p.yaml"
    plain.write_text(yaml.safe_dump(doc_for(2, None)), encoding="utf-8")
    data = json.loads(CliRunner().invoke(app, ["export", str(plain), "--format", "json"]).stdout)
    assert "kv_heads" not in data and "kv_heads" not in data["shape"]


@pytest.mark.parametrize("lang, cache, shares", [
    ("en", "2 × (2 + 2) = 8 numbers instead of 4 × (2 + 2) = 16", "shared by query heads 1, 2"),
    ("zh", "2 × (2 + 2) = 8 个数；如果每个头都有自己的 K 和 V，就要存 4 × (2 + 2) = 16 个", "由查询头 3、4 共用"),
])
def test_the_walk_shows_who_shares_and_the_cache_saved(lang: str, cache: str, shares: str) -> None:
    result = CliRunner().invoke(app, ["run", "grouped_query", "--no-pause", "--lang", lang, "--head", "all"],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert cache in out and shares in out
    assert "n × g·d_k" in out
    assert ("50.0% saved" if lang == "en" else "省下 50.0%") in out


def test_explain_names_the_kv_head_of_a_w_k_column() -> None:
    result = CliRunner().invoke(app, ["explain", "grouped_query", "K", "我", "3"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "K/V head 2 / 2, column 1 of its 2, read by query heads 3, 4" in result.stdout


def test_the_quiz_asks_what_a_group_shares_not_that_each_head_has_its_own_w_k() -> None:
    result = CliRunner().invoke(app, ["quiz", "grouped_query", "--format", "json"])
    assert result.exit_code == 0, result.output
    topics = [q["topic"] for q in json.loads(result.stdout)["questions"]]
    assert "gqa" in topics and "heads" not in topics


def test_the_grouped_query_lesson_matches_the_reference_and_its_notes() -> None:
    doc = yaml.safe_load(builtin_path("grouped_query").read_text(encoding="utf-8"))
    X = np.array(doc["embeddings"], dtype=float)
    n = len(X)
    ref = layer(X, *(np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")), 4, 2,
                np.tril(np.ones((n, n), bool)))
    walk = compute(load_scenario("grouped_query"))
    for h in range(4):
        for key in ("S", "A", "Z"):
            assert np.allclose(walk.matrix(key, h), ref[h][key], atol=1e-12)
    verb, book, me, yesterday = 3, 0, 1, 2
    assert np.array_equal(ref[0]["K"], ref[1]["K"]) and np.array_equal(ref[2]["V"], ref[3]["V"])
    pct = lambda h, j: round(100 * ref[h]["A"][verb, j])  # noqa: E731
    assert (pct(0, yesterday), pct(1, book), pct(2, me)) == (85, 85, 85)
    assert (pct(3, me), pct(3, verb)) == (40, 40)
    assert np.allclose(ref[0]["Z"][verb].round(2), [0.85, 0.05]) and np.allclose(ref[1]["Z"][verb].round(2), [0.05, 0.85])
    for i in range(3):  # the other tokens ask nothing: their rows are even
        assert np.allclose(ref[0]["A"][i][:i + 1], 1 / (i + 1))


def test_compare_refuses_two_scenarios_with_different_kv_heads_in_one_line(tmp_path) -> None:
    left, right = tmp_path / "l.yaml", tmp_path / "r.yaml"
    left.write_text(yaml.safe_dump(doc_for(4, 2, d_v=2)), encoding="utf-8")
    right.write_text(yaml.safe_dump(doc_for(4, 1, d_v=2)), encoding="utf-8")
    result = CliRunner().invoke(app, ["compare", "-s", str(left), "-s", str(right)])
    assert result.exit_code == 2
    assert "has 2 K/V heads" in result.output and "has 1 K/V heads" in result.output
    same = CliRunner().invoke(app, ["compare", "-s", str(left), "-s", str(left)])
    assert same.exit_code == 0, same.output


@pytest.mark.parametrize("lang, false, true", [
    ("en", ["its own slice of W_Q, W_K and W_V", "from its own columns of Q, K and V",
            "Q, K and V are computed once with full-width matrices, then split into 4"],
     ["still different heads", "Q is computed once with the full-width W_Q and split into 4 blocks"]),
    ("zh", ["各有自己的 W_Q、W_K、W_V 切片"], ["共用 K 和 V 的查询头仍然是不同的头"]),
])
def test_no_sentence_says_each_head_has_its_own_keys_and_values(lang, false, true) -> None:
    out = " ".join(CliRunner().invoke(app, ["run", "grouped_query", "--no-pause", "--lang", lang],
                                      env={"COLUMNS": "2000"}).stdout.split())
    for sentence in false:
        assert sentence not in out
    for sentence in true:
        assert sentence in out
    plain = " ".join(CliRunner().invoke(app, ["run", "shapes", "--no-pause"], env={"COLUMNS": "2000"}).stdout.split())
    assert "its own slice of W_Q, W_K and W_V" in plain  # ordinary heads keep the ordinary text


def test_multi_query_attention_is_named_and_not_split(tmp_path) -> None:
    path = tmp_path / "mqa.yaml"
    path.write_text(yaml.safe_dump(doc_for(4, 1, d_v=2)), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--scenario", str(path), "--no-pause"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Multi-query attention: one K/V head serves all 4 query heads" in out
    assert "one K/V head, read by all 4 query heads" in out
    assert "1 K/V heads" not in out
    assert "1 × (d_k + d_v) = 1 × (2 + 2) = 4 numbers instead of 4 × (2 + 2) = 16" in out
