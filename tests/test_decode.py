"""`attnwalk decode`: the layer's output made one token at a time with a KV cache (issue 18, point 3).

Every step is checked against two computations made apart from it: the whole causal walk
(attnwalk's own compute, every row at once) and tests/reference.py, an independent layer written
with plain loops. The multiply-adds are counted here by walking the loops a layer runs, one
product at a time, never from attnwalk's formulas. Golden numbers come from lesson 003 §9 (the
causal mask's hand calculation, ../shared/seeds/003_*.txt) or are computed in the test.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer.kvcache import decode, refusal
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.scenario.builtins import builtin_names
from reference import attention, sinusoidal_positions

runner = CliRunner()
ENV = {"COLUMNS": "100", "NO_COLOR": "1", "LANG": "C.UTF-8"}


def scenario_yaml(rng: np.random.Generator, n: int, d_model: int, heads: int, d_k: int, d_v: int, *,
                  positional: str = "none", score: str = "dot", qk_norm: bool = False,
                  w_o: bool = False, mask: object = "causal") -> str:
    """A random scenario file: numbers of moderate size, so float64 rounding stays near 1e-16."""
    doc = {"tokens": [f"t{i}" for i in range(n)],
           "embeddings": rng.normal(size=(n, d_model)).round(6).tolist(),
           "positional": positional, "heads": heads, "mask": mask,
           "W_Q": rng.normal(size=(d_model, heads * d_k)).round(6).tolist(),
           "W_K": rng.normal(size=(d_model, heads * d_k)).round(6).tolist(),
           "W_V": rng.normal(size=(d_model, heads * d_v)).round(6).tolist()}
    if w_o:
        doc["W_O"] = rng.normal(size=(heads * d_v, d_model)).round(6).tolist()
    if score == "additive":
        doc["score"], doc["w_a"] = "additive", rng.normal(size=d_k).round(6).tolist()
    if qk_norm:
        doc["qk_norm"] = True
    return yaml.safe_dump(doc)


def oracle(text: str, mode: str) -> dict:
    """The whole layer by tests/reference.py, straight from the file's numbers."""
    doc = yaml.safe_load(text)
    E = np.array(doc["embeddings"], dtype=float)
    n, d_model = E.shape
    X = E + (sinusoidal_positions(n, d_model) if doc["positional"] == "sinusoidal" else 0.0)
    mask = doc["mask"]
    allowed = np.tril(np.ones((n, n), bool)) if mask == "causal" else np.array(mask, bool)
    W_O = np.array(doc["W_O"]) if "W_O" in doc else None
    return attention(X, X, *(np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")), allowed,
                     mode=mode, heads=doc["heads"], W_O=W_O, kind=doc.get("score", "dot"),
                     w_a=doc.get("w_a"), qk_norm=doc.get("qk_norm", False))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 9), d_model=st.integers(1, 6),
       heads=st.integers(1, 4), d_k=st.integers(1, 4), d_v=st.integers(1, 4),
       positional=st.sampled_from(["none", "sinusoidal"]), score=st.sampled_from(["dot", "additive"]),
       qk_norm=st.booleans(), w_o=st.booleans(), mode=st.sampled_from(["scaled", "unscaled", "uniform"]))
def test_every_step_equals_its_row_of_the_causal_walk_and_of_an_independent_layer(
        seed, n, d_model, heads, d_k, d_v, positional, score, qk_norm, w_o, mode) -> None:
    text = scenario_yaml(np.random.default_rng(seed), n, d_model, heads, d_k, d_v, positional=positional,
                         score=score, qk_norm=qk_norm, w_o=w_o)
    dec = decode(scenario_from_text(text, "random.yaml"), mode)
    ref = oracle(text, mode)
    assert [step.t for step in dec.steps] == list(range(1, n + 1))
    for step in dec.steps:
        i = step.t - 1
        for h, head in enumerate(step.heads):
            walk_Z = dec.walk.matrix("Z", h)
            assert np.max(np.abs(head.z - walk_Z[i])) <= 1e-12
            assert np.max(np.abs(head.z - ref["heads"][h]["Z"][i])) <= 1e-12
            # the cache holds exactly tokens 1 … t's keys and values, and a_t is row t of A
            assert head.K_cache.shape == (step.t, d_k) and head.V_cache.shape == (step.t, d_v)
            assert np.max(np.abs(head.K_cache - ref["heads"][h]["K"][:step.t]), initial=0) <= 1e-12
            assert np.max(np.abs(head.V_cache - ref["heads"][h]["V"][:step.t]), initial=0) <= 1e-12
            assert np.max(np.abs(head.a - ref["heads"][h]["A"][i, :step.t])) <= 1e-12
            assert np.all(ref["heads"][h]["A"][i, step.t:] == 0)  # nothing after t was needed
        if w_o:
            assert np.max(np.abs(step.o - ref["O"][i])) <= 1e-12
        assert step.difference <= 1e-12
    assert dec.difference <= 1e-12


def test_earlier_cache_rows_are_read_as_they_were_made_never_recomputed() -> None:
    text = scenario_yaml(np.random.default_rng(7), 6, 4, 2, 3, 2, positional="sinusoidal")
    dec = decode(scenario_from_text(text, "r.yaml"))
    for before, after in zip(dec.steps, dec.steps[1:]):
        for h in range(2):
            # the same float64 bits: step t + 1 appends one row and leaves the others as step t left them
            assert np.array_equal(after.heads[h].K_cache[:before.t], before.heads[h].K_cache)
            assert np.array_equal(after.heads[h].V_cache[:before.t], before.heads[h].V_cache)
            assert np.array_equal(after.heads[h].K_cache[-1], after.heads[h].k)
        assert after.reused == before.t


# -- the work, counted -----------------------------------------------------------------------


def counted(n: int, d_model: int, heads: int, d_k: int, d_v: int, allowed: np.ndarray,
            w_o: bool) -> list[tuple[int, int]]:
    """(with the cache, without) multiply-adds of each step, counted one product at a time over the
    loops of a matrix product: with the cache, token t alone is projected and scored against the
    keys it may read; without it, the layer is rerun on tokens 1 … t, every row."""
    def project(rows: int) -> int:
        count = 0
        for _ in range(rows):
            for width in (heads * d_k, heads * d_k, heads * d_v):  # W_Q, W_K, W_V
                for _col in range(width):
                    count += d_model
        return count

    def attend(queries: range, t: int) -> int:
        count = 0
        for _h in range(heads):
            for i in queries:
                for j in range(t):
                    if allowed[i, j]:
                        count += d_k + d_v  # q · k, then a_j · v_j
        return count

    out = []
    for t in range(1, n + 1):
        output = heads * d_v * d_model if w_o else 0
        cached = project(1) + attend(range(t - 1, t), t) + output
        rerun = project(t) + attend(range(t), t) + t * output
        out.append((cached, rerun))
    return out


@pytest.mark.parametrize("shape, w_o, mask", [
    ((3, 3, 1, 2, 2), False, "causal"),
    ((6, 6, 2, 2, 2), True, "causal"),
    ((5, 4, 3, 2, 1), False, [[j <= i and i - j < 2 for j in range(5)] for i in range(5)]),  # a window
])
def test_the_work_with_and_without_the_cache_is_counted_right(shape, w_o, mask) -> None:
    n, d_model, heads, d_k, d_v = shape
    text = scenario_yaml(np.random.default_rng(3), *shape, w_o=w_o, mask=mask)
    allowed = np.tril(np.ones((n, n), bool)) if mask == "causal" else np.array(mask)
    expected = counted(n, d_model, heads, d_k, d_v, allowed, w_o)
    dec = decode(scenario_from_text(text, "w.yaml"))
    assert [(s.cached.total, s.rerun.total) for s in dec.steps] == expected
    path_json = run_json(text)
    assert [(s["work"]["cached"]["total"], s["work"]["rerun"]["total"]) for s in path_json["steps"]] == expected


def test_the_causal_mask_lesson_costs_what_a_hand_count_says() -> None:
    # lesson 003 §9: 3 tokens, d_model 3, one head of d_k = d_v = 2. With the cache step t projects
    # one token (3 × (2 + 2 + 2) = 18) and scores t keys (2t + 2t); without it, t tokens and
    # t(t + 1)/2 pairs: 18t + 4·t(t + 1)/2.
    out = runner.invoke(app, ["decode", "causal_mask", "--no-pause"], env=ENV).stdout
    cached = [18 + 4 * t for t in (1, 2, 3)]
    rerun = [18 * t + 2 * t * (t + 1) for t in (1, 2, 3)]
    assert (cached, rerun) == ([22, 26, 30], [22, 48, 78])
    summary = out[out.index("Step 4 / 4"):]
    for t, (c, r) in enumerate(zip(cached, rerun), 1):
        assert any(line.split()[:1] == [str(t)] and line.split()[3:5] == [str(c), str(r)]
                   for line in summary.splitlines())
    assert f"{sum(cached)} multiply-adds with the cache, {sum(rerun)} without" in " ".join(summary.split())


# -- the lesson's numbers --------------------------------------------------------------------


def test_causal_mask_decodes_to_the_lessons_numbers() -> None:
    # lesson 003 §9: A = [[1, 0, 0], [0.33, 0.67, 0], [0.25, 0.25, 0.50]], Z ≈ [[1, 0], [0.33, 1.34],
    # [1.75, 1.00]] (the lesson rounds the weights first: 0.25 × [1, 0] + 0.25 × [0, 2] + 0.5 × [3, 1]
    # = [1.75, 1.0]); unrounded Z[T3] = [1.759, 1.000]
    dec = decode(load_scenario("causal_mask"))
    weights = [[1.0], [0.33, 0.67], [0.25, 0.25, 0.50]]
    for step, a in zip(dec.steps, weights):
        assert np.allclose(step.heads[0].a, a, atol=0.005)
    assert np.allclose(dec.steps[1].heads[0].z, [0.33, 1.34], atol=0.005)
    assert np.allclose(dec.steps[2].heads[0].z, [1.759, 1.000], atol=5e-4)
    e = math.exp(1 / math.sqrt(2))  # T2: scores 0 and 1/√2 over the cache
    assert dec.steps[1].heads[0].a[1] == pytest.approx(e / (1 + e), abs=1e-15)


def test_kv_cache_lesson_numbers_are_what_its_notes_say() -> None:
    dec = decode(load_scenario("kv_cache"))
    w = math.exp(math.sqrt(2))  # head 1: every query scores 小猫 at 2/√2, every other key at 0
    for step in dec.steps:
        assert step.heads[0].a[0] == pytest.approx(w / (w + step.t - 1), abs=1e-15)
    assert [round(w / (w + t - 1), 2) for t in range(1, 7)] == [1.0, 0.80, 0.67, 0.58, 0.51, 0.45]
    last = w / (w + 5)
    assert np.allclose(dec.steps[5].heads[0].z, [last, 4 * (1 - last) / 5], atol=1e-15)
    assert [round(x, 4) for x in dec.steps[5].heads[0].z] == [0.4513, 0.4389]
    # head 2: 鱼's query [0, 2] scores 吃's key [1, 1] at 2/√2; the other five keys score 0
    assert dec.steps[5].heads[1].a[4] == pytest.approx(last, abs=1e-15)
    assert [round(x, 4) for x in dec.steps[5].heads[1].z] == [round(2 * (1 - last) / 5, 4), 0.4513]
    # the description's totals, counted as the loops run: 6 steps of one token's projections
    # (6 × 2 × (2 + 2 + 2) = 72) and 2 heads × t keys × (2 + 2), against t tokens' projections and
    # 2 heads × t(t + 1)/2 pairs × (2 + 2)
    cached, rerun = map(sum, zip(*counted(6, 6, 2, 2, 2, np.tril(np.ones((6, 6), bool)), False)))
    assert (cached, rerun) == (600, 1960)
    doc = yaml.safe_load(open(load_scenario("kv_cache").path, encoding="utf-8"))
    assert "600 multiply-adds with it and 1,960" in " ".join(doc["description"]["en"].split())
    assert "600 次乘加" in doc["description"]["zh"] and "1,960 次" in doc["description"]["zh"]


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("name, words", [
    ("river_bank", "decode needs a causal mask (mask: causal)"),
    ("cross_attention", "decode needs self-attention"),
])
def test_a_scenario_without_a_causal_mask_is_refused_in_one_line(name, words) -> None:
    result = runner.invoke(app, ["decode", name, "--no-pause"], env=ENV)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"attnwalk: {name} (built-in)") and words in lines[0]
    assert "Traceback" not in result.output


def test_the_refusal_says_why_a_cache_needs_the_mask_and_names_the_line(tmp_path) -> None:
    text = scenario_yaml(np.random.default_rng(1), 3, 2, 1, 2, 2, mask="none")
    path = tmp_path / "open.yaml"
    path.write_text(text, encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.startswith("mask:"))
    result = runner.invoke(app, ["decode", "--scenario", str(path)], env=ENV)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"attnwalk: {path}:{line}: mask: decode needs a causal mask")
    assert "not generated yet" in result.stderr


def test_a_mask_that_lets_a_token_read_a_later_one_is_refused(tmp_path) -> None:
    mask = [[True, False, True], [True, True, False], [True, True, True]]  # token 1 reads token 3
    with pytest.raises(ScenarioError, match="lets token 1 read token 3"):
        decode(scenario_from_text(scenario_yaml(np.random.default_rng(2), 3, 2, 1, 1, 1, mask=mask), "m.yaml"))


def test_a_window_inside_the_causal_mask_decodes_and_hides_the_old_keys() -> None:
    mask = [[j <= i and i - j < 2 for j in range(4)] for i in range(4)]
    text = scenario_yaml(np.random.default_rng(5), 4, 3, 1, 2, 2, mask=mask)
    dec = decode(scenario_from_text(text, "window.yaml"))
    ref = oracle(text, "scaled")
    last = dec.steps[-1].heads[0]
    assert last.K_cache.shape == (4, 2) and last.a[0] == last.a[1] == 0.0  # kept, but not read
    assert np.max(np.abs(last.z - ref["heads"][0]["Z"][3])) <= 1e-12


# -- the command -----------------------------------------------------------------------------


def run_json(text: str, *args: str) -> dict:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(text, encoding="utf-8")
        result = runner.invoke(app, ["decode", "-s", str(path), "--format", "json", *args], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_with_one_head_lists_each_steps_cache_weights_and_output() -> None:
    text = scenario_yaml(np.random.default_rng(11), 4, 3, 1, 2, 3)
    data, ref = run_json(text), oracle(text, "scaled")
    assert [s["t"] for s in data["steps"]] == [1, 2, 3, 4]
    for step in data["steps"]:
        t = step["t"]
        assert {"t", "K_cache", "V_cache", "a", "z"} <= set(step) and "heads" not in step
        assert np.array(step["K_cache"]).shape == (t, 2) and np.array(step["V_cache"]).shape == (t, 3)
        assert np.allclose(step["K_cache"], ref["K"][:t], atol=1e-12)
        assert np.allclose(step["V_cache"], ref["V"][:t], atol=1e-12)
        assert np.allclose(step["a"], ref["heads"][0]["A"][t - 1, :t], atol=1e-12)
        assert np.allclose(step["z"], ref["heads"][0]["Z"][t - 1], atol=1e-12)
        assert step["token"] == f"t{t - 1}" and len(step["s"]) == t
    assert data["difference"] <= 1e-12 and data["shape"]["heads"] == 1


def test_json_with_several_heads_keeps_full_width_rows_and_each_heads_own() -> None:
    text = scenario_yaml(np.random.default_rng(12), 3, 4, 2, 2, 3, w_o=True)
    data, ref = run_json(text, "--mode", "unscaled"), oracle(text, "unscaled")
    assert data["mode"] == "unscaled"
    for step in data["steps"]:
        t = step["t"]
        assert np.array(step["K_cache"]).shape == (t, 4) and np.array(step["V_cache"]).shape == (t, 6)
        assert np.allclose(step["K_cache"], ref["K"][:t], atol=1e-12)  # both heads' columns, as export's K
        assert "a" not in step and len(step["heads"]) == 2
        assert np.allclose(step["z"], ref["concat"][t - 1], atol=1e-12)
        assert np.allclose(step["o"], ref["O"][t - 1], atol=1e-12)
        for h, head in enumerate(step["heads"]):
            assert np.allclose(head["K_cache"], ref["heads"][h]["K"][:t], atol=1e-12)
            assert np.allclose(head["a"], ref["heads"][h]["A"][t - 1, :t], atol=1e-12)
            assert np.allclose(head["z"], ref["heads"][h]["Z"][t - 1], atol=1e-12)


def test_json_writes_a_masked_score_as_null() -> None:
    mask = [[j <= i and i - j < 2 for j in range(3)] for i in range(3)]
    data = run_json(scenario_yaml(np.random.default_rng(4), 3, 2, 1, 2, 2, mask=mask))
    last = data["steps"][2]
    assert last["s"][0] is None and last["a"][0] == 0.0 and last["s"][1] is not None


def test_the_printed_steps_show_the_cache_growing_and_the_check() -> None:
    result = runner.invoke(app, ["decode", "causal_mask", "--no-pause"], env=ENV)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert [f"Step {i} / 4" in out for i in range(1, 5)] == [True] * 4
    step3 = out[out.index("Step 3 / 4"):out.index("Step 4 / 4")]
    assert "T1 (cache, step 1)" in step3 and "T2 (cache, step 2)" in step3 and "T3 (new)" in step3
    assert "the k and v rows of T1, T2" in " ".join(step3.split())
    assert "largest difference 0" in step3
    z_rows = [line.split() for line in step3.splitlines()
              if line.split()[:1] in (["z_t"], ["Z"]) and "=" not in line]  # the table's rows, not its caption
    assert z_rows[0][-2:] == z_rows[1][-2:] == ["1.7587", "1.0000"]  # lesson 003: [1.759, 1.000]


def test_decode_speaks_chinese_and_keeps_the_cache_per_head() -> None:
    zh = runner.invoke(app, ["decode", "kv_cache", "--no-pause", "--lang", "zh"], env=ENV).stdout
    assert "第 6 / 7 步" in zh and "鱼（新）" in zh and "小猫（缓存，第 1 步）" in zh
    assert zh.count("第 1 / 2 个头") == 6 and zh.count("第 2 / 2 个头") == 6  # each head's cache, each step
    one = runner.invoke(app, ["decode", "kv_cache", "--no-pause", "--head", "2"], env=ENV).stdout
    assert "head 2 / 2" in one and "head 1 / 2" not in one
    bad = runner.invoke(app, ["decode", "kv_cache", "--head", "3"], env=ENV)
    assert bad.exit_code == 2 and "--head 3" in bad.stderr


def test_decode_in_ascii_and_in_every_mode() -> None:
    for mode in ("scaled", "unscaled", "uniform"):
        result = runner.invoke(app, ["decode", "kv_cache", "--no-pause", "--ascii", "--mode", mode], env=ENV)
        assert result.exit_code == 0, result.output
        assert "largest difference 0" in result.stdout
        assert all(ord(ch) < 128 for ch in result.stdout.replace("小猫", "").replace("饿", "").replace("了", "")
                   .replace("想", "").replace("吃", "").replace("鱼", ""))


# -- stepping --------------------------------------------------------------------------------


def test_decode_steps_in_a_terminal_with_the_walks_keys() -> None:
    from appdriver import drive

    from attnwalk.app.pages import PagesApp
    from attnwalk.commands.decodepages import DecodePages
    from attnwalk.render.options import ViewOptions

    opts = ViewOptions()
    app = PagesApp(DecodePages(decode(load_scenario("causal_mask")), opts, None), opts)
    d = drive("", ["n", "n", "b", "g", *"4", "enter", "m", "g", *"9", "enter", "escape", "b", "b", "b", "b",
                          "q"],
              size=(100, 40), app=app)
    shown = [screen.splitlines()[0].split("   ")[0].strip() for screen in d.screens if screen is not None]
    assert shown[:7] == ["Step 1 / 4", "Step 2 / 4", "Step 3 / 4", "Step 2 / 4", "Step 2 / 4", "Step 2 / 4",
                         "Step 4 / 4"]  # g opens a prompt: the step stays until Enter
    after_m = d.screens[7]
    assert "Mode: unscaled" in after_m
    assert app.pages.dec.mode.name == "unscaled"  # decoded again in the new mode, same step
    assert "No such step: 9; choose 1–4" in d.screens[10]
    assert "Jump to step (1–4):" in d.screens[10]  # asked again, until a step or Esc
    assert "Already at the first step." in d.screens[-2]
    assert "q quit" in d.screens[-2].splitlines()[-1] and d.code == 0
    assert d.screens[-1] is None  # q ended it


def test_decode_steps_in_a_real_terminal() -> None:
    pexpect = pytest.importorskip("pexpect")
    from test_pty import TIMEOUT, finish, spawn

    child = spawn("decode", "causal_mask", rows=40, cols=110)
    child.expect("Step 1 / 4", timeout=TIMEOUT)
    child.send("n")
    child.expect("Step 2 / 4")
    child.expect("T2 \\(new\\)")
    child.send("g")
    child.expect("Jump to step")
    child.send("4\r")
    child.expect("Step 4 / 4")
    child.send("q")
    assert finish(child) == 0
    assert pexpect is not None


def test_a_json_too_big_to_write_is_refused_before_it_is_built(tmp_path) -> None:
    # 600 tokens: the steps' caches add up to 600 · 601 / 2 = 180,300 rows of 8 + 8 numbers
    n = 600
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump({
        "tokens": [f"w{i}" for i in range(n)], "mask": "causal",
        "embeddings": {"random": {"seed": 1, "rows": n, "cols": 8}},
        **{w: {"random": {"seed": s, "rows": 8, "cols": 8}} for s, w in enumerate(("W_Q", "W_K", "W_V"), 2)}}),
        encoding="utf-8")
    assert 180_300 * 16 > 2_097_152  # more than an export writes
    result = runner.invoke(app, ["decode", "-s", str(path), "--format", "json"], env=ENV)
    assert result.exit_code == 2 and result.stdout == ""
    line = next(i for i, row in enumerate(path.read_text().splitlines(), 1) if row.startswith("tokens:"))
    assert f"{path}:{line}: tokens: decode's JSON for 600 tokens holds about" in result.stderr
    assert "decode fewer tokens" in result.stderr


def test_a_model_layers_biases_are_added_to_each_tokens_projections() -> None:
    # the hook for `attnwalk model` layers, whose Scenario carries b_Q, b_K, b_V and b_O: set here
    # on a file's scenario, and checked against the layer written out in the test
    import dataclasses

    rng = np.random.default_rng(9)
    text = scenario_yaml(rng, 4, 3, 2, 2, 2, w_o=True)
    scn = scenario_from_text(text, "biased.yaml")
    b = {key: rng.normal(size=size) for key, size in (("b_Q", 4), ("b_K", 4), ("b_V", 4), ("b_O", 3))}
    scn = dataclasses.replace(scn, params=b)
    doc = yaml.safe_load(text)
    X = np.array(doc["embeddings"])
    Q, K, V = (X @ np.array(doc[w]) + b[f"b_{w[2]}"] for w in ("W_Q", "W_K", "W_V"))
    dec = decode(scn)
    for step in dec.steps:
        i = step.t - 1
        heads = []
        for h in range(2):
            q, k, v = Q[i, 2 * h:2 * h + 2], K[:i + 1, 2 * h:2 * h + 2], V[:i + 1, 2 * h:2 * h + 2]
            s = k @ q / math.sqrt(2)
            a = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            heads.append(a @ v)
            assert np.max(np.abs(step.heads[h].z - heads[-1])) <= 1e-12
        o = np.concatenate(heads) @ np.array(doc["W_O"]) + b["b_O"]
        assert np.max(np.abs(step.o - o)) <= 1e-12


def test_the_pagers_j_and_d_scroll_its_page() -> None:
    """decode's pager scrolls its one page with the walk's keys (PaneScroll): j a line, d a page."""
    import asyncio

    from attnwalk.app.pages import PagesApp
    from attnwalk.commands.decodepages import DecodePages
    from attnwalk.render.options import ViewOptions

    opts = ViewOptions()
    app = PagesApp(DecodePages(decode(load_scenario("kv_cache")), opts, None), opts)

    async def run() -> tuple[list[float], int]:
        seen = []
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            page = app.query_one("#page")
            for key in ("j", "d", "k"):
                await pilot.press(key)
                await pilot.pause()
                seen.append(page.scroll_y)
            return seen, max(page.size.height - 1, 1)

    seen, height = asyncio.run(run())
    assert seen == [1, 1 + height, height]


@pytest.mark.parametrize("lang, says", [("en", "↓ d scroll"), ("zh", "↓ d 滚动")])
def test_the_pagers_footer_lists_its_scroll_keys(lang: str, says: str) -> None:
    """A decode step is taller than 80 × 24: the footer names ↓ and d beside n, b, g, m, ?, q."""
    from appdriver import drive

    from attnwalk.app.pages import PagesApp
    from attnwalk.commands.decodepages import DecodePages
    from attnwalk.render.options import ViewOptions

    opts = ViewOptions(lang=lang)
    app = PagesApp(DecodePages(decode(load_scenario("kv_cache")), opts, None), opts)
    d = drive("", ["n"], size=(80, 24), app=app)
    footer = d.screens[-1].rstrip("\n").splitlines()[-1]
    assert says in footer and footer.rstrip().endswith(("q quit", "q 退出")), footer


@pytest.mark.parametrize("name", [n for n in builtin_names() if refusal(load_scenario(n)) is None])
def test_every_causal_built_in_decodes_to_its_whole_walk(name: str) -> None:
    """Decoding is the same graph evaluated a row at a time: every step's z (and o with W_O) is
    the whole causal walk's row, to 1e-12 of its size, in every head."""
    dec = decode(load_scenario(name))
    assert len(dec.steps) == dec.walk.scenario.n
    for step in dec.steps:
        for h, head in enumerate(step.heads):
            Z = dec.walk.matrix("Z", h)
            assert np.max(np.abs(head.z - Z[step.t - 1])) <= 1e-12 * max(1.0, float(np.abs(Z).max()))
        assert step.difference <= 1e-12 * max(1.0, float(np.abs(dec.walk.mats.get("O", Z)).max()))


def test_decoding_next_token_shows_o_t_the_likeliest_word_and_counts_w_u() -> None:
    """next_token (one head, W_O, a tied table): o_t = z_t · W_O between z_t and LN_f(o_t); each
    step names argmax p_t (numpy, from the whole walk's p); the work counts E_vocab's d_model × |vocab|."""
    from attnwalk.layer.walk import compute

    scn = load_scenario("next_token")
    p = compute(scn).mats["p"]
    vocab = ["I", "sat", "by", "the", "river", "bank", "money", "water"]  # scenarios/next_token.yaml
    out = runner.invoke(app, ["decode", "next_token", "--no-pause"], env={**ENV, "COLUMNS": "200"}).stdout
    steps = re.split(r"^Step \d+ / \d+ ", out, flags=re.M)[1:]
    assert len(steps) >= scn.n
    for t, step in enumerate(steps[:scn.n], start=1):
        assert step.index("o_t = z_t · W_O") < step.index("LN_f(o_t)")
        best = int(np.argmax(p[t - 1]))
        assert f"The likeliest token after {scn.tokens[t - 1]}: {vocab[best]}, p_t = {p[t - 1, best]:.4f}" in step
        after = re.search(r"after the output, a row each · E_vocab +(\d+) +(\d+)", step)
        assert after and int(after.group(1)) == 4 * len(vocab) and int(after.group(2)) == t * 4 * len(vocab)
