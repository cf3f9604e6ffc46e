"""Tiles and decode with every variant, and on model walks (issue 18 points 2–3, issue 19 point 7).

The references are written here from the formulas, apart from attnwalk.layer:
- decode: a decoder written as a loop over tokens. At step t (position p = t − 1, from 0) it makes
  q_t = x_t W_Q and k_t = x_t W_K for each head, rotates both by p · base^(−2i/d) under RoPE (pair
  (i, i + d/2), or (2i, 2i + 1)), appends the rotated k and v to the cache of the K/V head it
  belongs to (query head h reads K/V head h // (heads / g)), scores q_t against the cached keys,
  adds −m_h · (t − j) under ALiBi (the paper's slopes), hides the keys outside a window
  (0 ≤ t − j < w), takes the softmax and the weighted sum of the cached values.
- tiles: tests/reference.py's layer (rope, kv_heads, alibi) with tests/variants_reference.py's
  window, and the online recurrence written here (m, α, l, Õ) over blocks of B keys.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.commands import model as model_command
from attnwalk.commands.model import scenario_from_model
from attnwalk.errors import ScenarioError
from attnwalk.export.data import walk_data
from attnwalk.layer.kvcache import decode
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import scenario_from_text
from attnwalk.features.tiles import with_tiles
from modelwalk_layers import random_layer
from reference import attention, normalized
from variants_reference import paper_slopes, window_allowed

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1", "LANG": "C.UTF-8"}
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- random modern scenarios -------------------------------------------------------------------


def modern_doc(rng: np.random.Generator, n: int, heads: int, kv_heads: int, d_k: int, d_v: int, *,
               rope: str | None = None, base: float = 10000.0, alibi: bool = False,
               window: int | None = None, w_o: bool = False, tiles: int | None = None,
               d_model: int = 4, scale: float = 1.0, norm: str | None = None) -> dict:
    def matrix(rows: int, cols: int) -> list:
        return np.round(rng.normal(0, scale, (rows, cols)), 4).tolist()

    doc = {"tokens": [f"t{i}" for i in range(n)], "embeddings": matrix(n, d_model),
           "W_Q": matrix(d_model, heads * d_k), "W_K": matrix(d_model, kv_heads * d_k),
           "W_V": matrix(d_model, kv_heads * d_v), "heads": heads,
           "mask": "causal" if window is None else {"causal": True, "window": window}}
    if kv_heads != heads:
        doc["kv_heads"] = kv_heads
    if rope is not None:
        doc["positional"], doc["rope"] = "rope", {"base": base, "pairing": rope}
    if alibi:
        doc["bias"] = "alibi"
    if w_o:
        doc["W_O"] = matrix(heads * d_v, d_model)
    if tiles is not None:
        doc["tiles"] = tiles
    if norm is not None:  # a norm before the projections, with its own γ (and β)
        doc["norm"], doc["norm_gamma"] = norm, matrix(1, d_model)[0]
        if norm == "layer":
            doc["norm_beta"] = matrix(1, d_model)[0]
    return doc


def projected(doc: dict) -> np.ndarray:
    """What the projections read: the embeddings, each row normalised where the doc has a norm."""
    X = np.array(doc["embeddings"], dtype=float)
    if "norm" not in doc:
        return X
    return normalized(X, doc["norm"], doc["norm_gamma"], doc.get("norm_beta"))


def load(doc: dict):
    return scenario_from_text(yaml.safe_dump(doc), "modern.yaml")


@st.composite
def modern(draw, tiles: bool = False) -> dict:
    heads, kv_heads = draw(st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (3, 3),
                                            (6, 3), (6, 2)]))
    rope = draw(st.sampled_from([None, "half", "interleaved"]))
    d_k = draw(st.sampled_from([2, 4] if rope else [1, 2, 3]))
    n = draw(st.integers(1, 8))
    window = draw(st.one_of(st.none(), st.integers(1, n + 1)))
    return modern_doc(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), n, heads, kv_heads, d_k,
                      draw(st.integers(1, 3)), rope=rope, base=draw(st.sampled_from([10.0, 100.0, 10000.0])),
                      alibi=draw(st.booleans()), window=window, w_o=draw(st.booleans()),
                      tiles=draw(st.integers(1, n + 2)) if tiles else None,
                      scale=draw(st.sampled_from([0.5, 1.0, 3.0])), norm=draw(st.sampled_from([None, "layer", "rms"])))


# -- the decoder, written from the formulas ----------------------------------------------------


def turn(x: np.ndarray, position: int, base: float, pairing: str) -> np.ndarray:
    d = len(x)
    out = np.array(x, dtype=float)
    for i in range(d // 2):
        a, b = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
        phi = position * base ** (-2 * i / d)
        out[a] = x[a] * math.cos(phi) - x[b] * math.sin(phi)
        out[b] = x[a] * math.sin(phi) + x[b] * math.cos(phi)
    return out


def decoded(doc: dict, mode: str = "scaled") -> list[dict]:
    """Each step of a decoder with a KV cache: the caches (one per K/V head), and per query head
    q, the bias row, the weights and z."""
    X = projected(doc)  # each row normalised on its own: row t the same in a step as in the whole
    W_Q, W_K, W_V = (np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V"))
    heads, g = doc["heads"], doc.get("kv_heads", doc["heads"])
    d_k, d_v = W_Q.shape[1] // heads, W_V.shape[1] // g
    rope = doc.get("rope")
    window = doc["mask"]["window"] if isinstance(doc["mask"], dict) else None
    slopes = paper_slopes(heads) if doc.get("bias") == "alibi" else [0.0] * heads
    K_cache = [[] for _ in range(g)]
    V_cache = [[] for _ in range(g)]
    steps = []
    for p, x in enumerate(X):  # p = t − 1
        q_all, k_all, v_all = x @ W_Q, x @ W_K, x @ W_V
        for kv in range(g):
            k = k_all[kv * d_k:(kv + 1) * d_k]
            K_cache[kv].append(turn(k, p, rope["base"], rope["pairing"]) if rope else k)
            V_cache[kv].append(v_all[kv * d_v:(kv + 1) * d_v])
        step = {"K": [np.array(c) for c in K_cache], "V": [np.array(c) for c in V_cache], "heads": []}
        for h in range(heads):
            kv = h // (heads // g)
            q = q_all[h * d_k:(h + 1) * d_k]
            q = turn(q, p, rope["base"], rope["pairing"]) if rope else q
            seen = [j for j in range(p + 1) if window is None or p - j < window]
            bias = [-slopes[h] * (p - j) for j in range(p + 1)]
            if mode == "uniform":
                weights = {j: 1 / len(seen) for j in seen}
            else:
                s = {j: float(q @ K_cache[kv][j]) / (1 if mode == "unscaled" else math.sqrt(d_k)) + bias[j]
                     for j in seen}
                top = max(s.values())
                total = sum(math.exp(v - top) for v in s.values())
                weights = {j: math.exp(s[j] - top) / total for j in seen}
            a = np.array([weights.get(j, 0.0) for j in range(p + 1)])
            step["heads"].append({"q": q, "b": np.array(bias), "a": a, "z": a @ np.array(V_cache[kv])})
        steps.append(step)
    return steps


@SETTINGS
@given(modern(), st.sampled_from(["scaled", "unscaled", "uniform"]))
def test_decode_with_every_variant_equals_the_decoder_and_the_causal_walk(doc, mode) -> None:
    scn = load(doc)
    dec = decode(scn, mode)
    ref = decoded(doc, mode)
    g = doc.get("kv_heads", doc["heads"])
    for step, want in zip(dec.steps, ref):
        i = step.t - 1
        for h, head in enumerate(step.heads):
            assert np.max(np.abs(head.z - dec.walk.matrix("Z", h)[i])) <= 1e-12  # the whole causal walk
            assert np.max(np.abs(head.z - want["heads"][h]["z"])) <= 1e-12
            assert np.max(np.abs(head.a - want["heads"][h]["a"])) <= 1e-12
            assert np.max(np.abs(head.q - want["heads"][h]["q"])) <= 1e-12
            kv = h // (doc["heads"] // g)
            assert head.kv == kv
            # the cache: the ROTATED keys, each at its own position, and the K/V head's values
            assert np.max(np.abs(head.K_cache - want["K"][kv]), initial=0) <= 1e-12
            assert np.max(np.abs(head.V_cache - want["V"][kv]), initial=0) <= 1e-12
            if doc.get("bias") == "alibi":  # the bias is among the rows between the scores and a_t
                b = head.scores["B"]
                assert np.array_equal(b, want["heads"][h]["b"]) or np.max(np.abs(b - want["heads"][h]["b"])) <= 1e-15
                assert list(head.scores) == ["S", "B", "S+B"]
            else:
                assert list(head.scores) == ["S"]
        # z_t to 1e-12 above; o_t = concat · W_O (hundreds with scale 3) to 1e-12 of its size
        big = max(1.0, float(np.abs(dec.walk.mats["O"]).max())) if "O" in dec.walk.mats else 1.0
        assert step.difference <= 1e-12 * big
        # the memory is g K/V heads', not h
        assert sum(c.size for c in want["K"]) + sum(c.size for c in want["V"]) == \
            step.t * g * (scn.d_k + scn.d_v)


def test_rope_caches_each_key_rotated_once_at_its_own_position_and_never_again() -> None:
    doc = modern_doc(np.random.default_rng(3), 6, 2, 2, 4, 2, rope="half", base=10.0)
    dec = decode(load(doc))
    K = np.array(doc["embeddings"]) @ np.array(doc["W_K"])
    for before, after in zip(dec.steps, dec.steps[1:]):
        for h in range(2):
            assert np.array_equal(after.heads[h].K_cache[:before.t], before.heads[h].K_cache)  # same bits
    last = dec.steps[-1].heads[1].K_cache
    for j in range(6):
        assert np.allclose(last[j], turn(K[j, 4:8], j, 10.0, "half"), atol=1e-12)
        if j < 5:  # turning it by the last query's position instead gives another key
            assert not np.allclose(last[j], turn(K[j, 4:8], 5, 10.0, "half"), atol=1e-6)


def test_gqa_shares_one_cache_per_group_and_counts_g_heads_in_memory_and_work(tmp_path) -> None:
    doc = modern_doc(np.random.default_rng(4), 5, 4, 2, 2, 3, w_o=True)
    scn = load(doc)
    dec = decode(scn)
    step = dec.steps[-1]
    assert step.heads[0].K_cache is step.heads[1].K_cache.base or \
        np.shares_memory(step.heads[0].K_cache, step.heads[1].K_cache)  # one cache, read by both
    assert not np.shares_memory(step.heads[1].K_cache, step.heads[2].K_cache)
    # one token's projections, counted a column at a time: 4 query heads of 2, 2 K/V heads of 2 + 3
    d_model = 4
    projections = sum(d_model for _ in range(4 * 2)) + sum(d_model for _ in range(2 * (2 + 3)))
    assert step.cached.projections == projections == 72
    assert step.rerun.projections == 5 * projections
    out = runner.invoke(app, ["decode", "-s", _file(doc, tmp_path), "--no-pause"], env=ENV).stdout
    assert "in each of the 2 K/V heads, shared by the 4 query heads: 50 numbers (without sharing, 100)" in flat(out)
    assert "K_cache_g ← [K_cache_g; k_t,g]" in out and "(g = 1 … 2)" in out
    assert "reads K/V head 2 of 2, one cache shared by query heads 3, 4" in out
    assert "2 keys and values per token, not 4: 50 numbers after 5 tokens instead of 100" in flat(out)
    assert "each of the 2 K/V heads; one K and V per query head would be 100)" in flat(out)  # the summary


def test_gqa_json_writes_the_g_caches_full_width_and_each_heads_kv(tmp_path) -> None:
    doc = modern_doc(np.random.default_rng(5), 4, 4, 2, 2, 3)
    data = _json(tmp_path, doc)
    ref = decoded(doc)
    assert data["shape"]["kv_heads"] == 2
    for step, want in zip(data["steps"], ref):
        t = step["t"]
        assert np.array(step["K_cache"]).shape == (t, 2 * 2) and np.array(step["V_cache"]).shape == (t, 2 * 3)
        assert np.allclose(step["K_cache"], np.concatenate(want["K"], axis=1), atol=1e-12)
        assert len(step["k"]) == 4 and len(step["q"]) == 8
        assert [head["kv"] for head in step["heads"]] == [0, 0, 1, 1]


def test_alibi_json_carries_the_bias_of_each_cached_key(tmp_path) -> None:
    doc = modern_doc(np.random.default_rng(6), 5, 4, 4, 2, 2, alibi=True, window=3)
    data = _json(tmp_path, doc)
    last = data["steps"][-1]
    for h, head in enumerate(last["heads"]):
        m = 2 ** (-8 * (h + 1) / 4)
        # t = 5: key j (1-based) is 5 − j back; keys 1 and 2 are outside the window of 3
        assert head["b"][:2] == [None, None] and head["s"][:2] == [None, None]
        assert head["b"][2:] == pytest.approx([-2 * m, -1 * m, 0.0], abs=1e-15)
    out = runner.invoke(app, ["decode", "-s", _file(doc, tmp_path), "--no-pause"], env=ENV).stdout
    assert "s_t + b_t" in out and "ALiBi's bias −0.25 · (t − j)" in out


def test_a_window_keeps_old_keys_at_weight_zero_and_says_what_a_rolling_buffer_keeps(tmp_path) -> None:
    doc = modern_doc(np.random.default_rng(7), 6, 1, 1, 2, 2, window=2)
    dec = decode(load(doc))
    last = dec.steps[-1]
    assert last.heads[0].K_cache.shape == (6, 2) and np.all(last.heads[0].a[:4] == 0.0)
    assert last.cached.scores == 2 * 2  # two visible keys of d_k = 2, not six
    out = flat(runner.invoke(app, ["decode", "-s", _file(doc, tmp_path), "--no-pause"], env=ENV).stdout)
    # 6 rows of K and V (2 + 2 numbers each) kept here; the last 2 rows are all a decoder needs
    assert "all 6 rows are kept here, but only the last 2 are read: a decoder may keep just those, 8 numbers" in out
    assert "a rolling buffer of 2 rows" in out and "only 8 numbers" not in out
    assert "8 numbers here after 6 tokens instead of 24" in out


def test_a_symmetric_window_looks_ahead_and_is_refused_in_one_line(tmp_path) -> None:
    doc = modern_doc(np.random.default_rng(8), 4, 1, 1, 2, 2, window=2)
    doc["mask"] = {"window": 2}
    with pytest.raises(ScenarioError, match=r"decode needs a window that looks back only"):
        decode(load(doc))
    result = runner.invoke(app, ["decode", "-s", _file(doc, tmp_path)], env=ENV)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "causal: true" in result.stderr and "Traceback" not in result.output


def test_the_variants_screens_speak_both_languages(tmp_path) -> None:
    doc = modern_doc(np.random.default_rng(9), 4, 4, 2, 4, 2, rope="interleaved", alibi=True, window=3)
    for lang, words in (("en", ("rotated at its position 3", "never turned again", "Grouped-query heads")),
                        ("zh", ("按它的位置 3 旋转过", "之后再也不转", "分组查询"))):
        result = runner.invoke(app, ["decode", "-s", _file(doc, tmp_path), "--no-pause", "--lang", lang], env=ENV)
        assert result.exit_code == 0, result.output
        for word in words:
            assert word in result.stdout, (lang, word)
    formula = runner.invoke(app, ["decode", "-s", _file(doc, tmp_path), "--no-pause"], env=ENV).stdout
    assert "q_t = R(t−1) · x_t · W_Q" in formula and "− m_h · (t − j)" in formula
    assert "j = max(1, t − 2) … t" in formula


# -- --head and --save ---------------------------------------------------------------------------


def test_head_keeps_one_heads_entries_in_the_json(tmp_path) -> None:
    doc = modern_doc(np.random.default_rng(10), 4, 4, 2, 2, 2)
    data = _json(tmp_path, doc, "--head", "3")
    ref = decoded(doc)
    assert data["head"] == 3
    for step, want in zip(data["steps"], ref):
        assert "heads" not in step
        assert np.allclose(step["z"], want["heads"][2]["z"], atol=1e-12)
        assert np.allclose(step["K_cache"], want["K"][1], atol=1e-12) and step["kv"] == 1
    assert _json(tmp_path, doc, "--head", "all")["steps"][0]["heads"]
    bad = runner.invoke(app, ["decode", "-s", _file(doc, tmp_path), "--format", "json", "--head", "5"], env=ENV)
    assert bad.exit_code == 2 and "Traceback" not in bad.output


@pytest.mark.parametrize("suffix, start", [(".txt", "Step 1 / "), (".svg", "<svg"), (".html", "<!DOCTYPE html>")])
def test_decode_save_writes_every_step_and_says_where_and_how_big(tmp_path, suffix, start) -> None:
    path = tmp_path / f"steps{suffix}"
    result = runner.invoke(app, ["decode", "causal_mask", "--no-pause", "--save", str(path)], env=ENV)
    assert result.exit_code == 0, result.output
    saved = path.read_text(encoding="utf-8")
    assert saved.lstrip().startswith(start)
    if suffix == ".txt":
        assert saved.count("Step ") >= 4 and "All steps" in saved
    assert str(path) in result.stderr and ("bytes" in result.stderr or "KiB" in result.stderr)


def test_decode_save_refuses_a_bad_path_before_any_work(tmp_path) -> None:
    result = runner.invoke(app, ["decode", "causal_mask", "--save", str(tmp_path / "x.pdf")], env=ENV)
    assert result.exit_code == 2 and "'.pdf' is not a format" in result.stderr
    result = runner.invoke(app, ["decode", "causal_mask", "--format", "json", "--save", str(tmp_path / "x.txt")],
                           env=ENV)
    assert result.exit_code == 2 and "redirect" in result.stderr and not (tmp_path / "x.txt").exists()


# -- tiles with every variant ---------------------------------------------------------------------


def online(S: np.ndarray, ok: np.ndarray, V: np.ndarray, B: int) -> tuple[np.ndarray, list[bool], float]:
    """One row by the recurrence: Õ / l, which blocks were skipped, and the final m."""
    m, l, O = -math.inf, 0.0, np.zeros(V.shape[1])
    skipped = []
    for start in range(0, len(S), B):
        idx = [j for j in range(start, min(start + B, len(S))) if ok[j]]
        skipped.append(not idx)
        if not idx:
            continue
        m_new = max(m, max(S[j] for j in idx))
        alpha = math.exp(m - m_new) if m > -math.inf else 0.0
        l = alpha * l + sum(math.exp(S[j] - m_new) for j in idx)
        O = alpha * O + sum(math.exp(S[j] - m_new) * V[j] for j in idx)
        m = m_new
    return O / l, skipped, m


@SETTINGS
@given(modern(tiles=True))
def test_tiles_with_every_variant_equal_the_reference_layer(doc) -> None:
    scn = load(doc)
    walk = compute(scn)
    n, B = len(doc["tokens"]), doc["tiles"]
    window = doc["mask"]["window"] if isinstance(doc["mask"], dict) else None
    allowed = window_allowed(n, window, True) if window else np.tril(np.ones((n, n), bool))
    X = projected(doc)
    rope = (doc["rope"]["base"], doc["rope"]["pairing"]) if "rope" in doc else None
    ref = attention(X, X, *(np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")), allowed,
                    heads=doc["heads"], kv_heads=doc.get("kv_heads"), rope=rope, alibi=doc.get("bias") == "alibi")
    data = walk_data(walk)
    for h, head in enumerate(walk.heads):
        want = ref["heads"][h]
        big = max(1.0, np.abs(want["Z"]).max())
        assert np.max(np.abs(head.mats["tiled"] - want["Z"])) <= 1e-12 * big
        rows = data["tiled"]["rows"] if doc["heads"] == 1 else data["stages"]["heads"][h]["tiled"]["rows"]
        for i in range(n):
            # the recurrence reads S + B (ALiBi), the rotated scores (RoPE), the group's V (GQA)
            out, skipped, m = online(want["S+B"][i], allowed[i], want["V"], B)
            assert np.max(np.abs(head.mats["tiled"][i] - out)) <= 1e-12 * big
            assert [blk["skipped"] for blk in rows[i]] == skipped  # blocks outside the window: skipped
            assert rows[i][-1]["m"] == pytest.approx(m, abs=1e-12)


def test_a_window_skips_the_blocks_it_hides_and_the_screen_says_so(tmp_path) -> None:
    doc = modern_doc(np.random.default_rng(11), 8, 1, 1, 2, 2, window=2, tiles=2, alibi=True)
    rows = walk_data(compute(load(doc)))["tiled"]["rows"]
    assert [blk["skipped"] for blk in rows[7]] == [True, True, True, False]  # keys 1–6 are outside
    assert [blk["skipped"] for blk in rows[4]] == [True, False, False, True]  # keys 4, 5; 7, 8 are later
    out = runner.invoke(app, ["run", "-s", _file(doc, tmp_path), "--no-pause"], env=ENV).stdout
    assert "Z_tiled" in out


@pytest.mark.parametrize("name, words", [
    ("alibi", "the blocks hold S + B"),
    ("rope", "rotated queries and keys (Q_rot, K_rot)"),
    ("grouped_query", "the 2 query heads of a group read the same blocks of K and V"),
    ("sliding_window", "Under the sliding window of 3 every block outside a row's window"),
])
def test_the_tiled_stage_says_what_its_blocks_hold_under_each_variant(name, words) -> None:
    result = runner.invoke(app, ["run", name, "--tiles", "2", "--no-pause"], env=ENV)
    assert result.exit_code == 0, result.output
    assert words in flat(result.stdout)
    assert words not in flat(runner.invoke(app, ["run", "causal_mask", "--tiles", "2", "--no-pause"],
                                           env=ENV).stdout)


# -- model walks ----------------------------------------------------------------------------------


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch):
    """The loader replaced by a random layer: --model gpt2 gives a GPT-2-like one, else BERT-like."""
    made = {}

    def load_layer(sentence: str, model: str | None, layer: int):
        made["layer"] = random_layer("gpt2" if model == "gpt2" else "bert", layer=layer - 1, seed=7)
        return made["layer"]

    monkeypatch.setattr(model_command, "load_layer", load_layer)
    return made


def model_reference(layer) -> list[dict]:
    """Each head's q, k, v (with the biases), A and Z of a GPT-2-like layer, from numpy alone."""
    X, d = layer.X, layer.info.d_head
    n = len(X)
    out = []
    for h in range(layer.info.n_heads):
        cols = slice(h * d, (h + 1) * d)
        Q, K, V = (X @ W[:, cols] + b[cols] for W, b in ((layer.W_Q, layer.b_Q), (layer.W_K, layer.b_K),
                                                         (layer.W_V, layer.b_V)))
        S = np.where(np.tril(np.ones((n, n), bool)), Q @ K.T / math.sqrt(d), -np.inf)
        A = np.exp(S - S.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        out.append({"K": K, "V": V, "S": S, "A": A, "Z": A @ V})
    return out


def model(*args: str, code: int = 0):
    result = runner.invoke(app, ["model", "I sat by the river bank", *args], env=ENV)
    assert result.exit_code == code, result.output
    return result


def test_model_decode_steps_the_real_layers_cache(tiny) -> None:
    out = model("--model", "gpt2", "--decode", "--no-pause").stdout
    assert "Step 1 / 7" in out and "All steps" in out and "x_t = X[t]" in out
    assert "Each of the 4 heads keeps its own cache" in flat(out)
    assert "x_t = e_t + p_t" not in out  # a model's x_t is its norm's output, not e_t + p_t
    assert "row t of the walk's X" in flat(out)
    data = json.loads(model("--model", "gpt2", "--decode", "--format", "json").stdout)
    ref = model_reference(tiny["layer"])
    assert [s["t"] for s in data["steps"]] == list(range(1, 7))
    for step in data["steps"]:
        t = step["t"]
        for h, head in enumerate(step["heads"]):
            assert np.allclose(head["K_cache"], ref[h]["K"][:t], atol=1e-12)
            assert np.allclose(head["a"], ref[h]["A"][t - 1, :t], atol=1e-12)
            assert np.allclose(head["z"], ref[h]["Z"][t - 1], atol=1e-12)
        concat = np.concatenate([r["Z"][t - 1] for r in ref])
        layer = tiny["layer"]
        assert np.allclose(step["o"], concat @ layer.W_O + layer.b_O, atol=1e-12)
    assert data["difference"] <= 1e-12
    one = json.loads(model("--model", "gpt2", "--decode", "--format", "json", "--head", "2").stdout)
    assert one["head"] == 2 and np.allclose(one["steps"][-1]["z"], ref[1]["Z"][-1], atol=1e-12)


def test_model_decode_refuses_a_bidirectional_model_in_one_line(tiny) -> None:
    result = model("--decode", "--no-pause", code=2)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnwalk: model tiny-bert: decode needs a causal mask")
    assert "not generated yet" in lines[0] and "Traceback" not in result.output
    assert "decode needs a causal mask" in model("--decode", "--format", "json", code=2).stderr


@pytest.mark.parametrize("args, words", [
    (("--decode", "--compare"), "at most one of"),
    (("--decode", "--format", "csv"), "json only"),
    (("--at", "n=4096", "--format", "json"), "--at projects"),
    (("--decode", "--tiles", "2"), "--tiles works on the walk of the layer, not with --decode"),
    (("--decode", "--predict"), "--predict works on the walk"),
])
def test_model_option_clashes_are_one_line_errors(tiny, args, words) -> None:
    result = model("--model", "gpt2", *args, code=2)
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_model_tiles_walks_the_tiled_stage_on_a_real_head(tiny) -> None:
    out = model("--tiles", "2", "--no-pause", "--head", "3").stdout
    assert "Z_tiled" in out and "Õ / l" in out
    data = json.loads(model("--model", "gpt2", "--tiles", "4", "--format", "json", "--head", "2").stdout)
    ref = model_reference(tiny["layer"])
    assert data["tiled"]["block"] == 4 and data["tiled"] == data["stages"]["heads"][1]["tiled"]
    for h in range(4):
        rows = data["stages"]["heads"][h]["tiled"]["rows"]
        for i, row in enumerate(rows):
            ok = np.isfinite(ref[h]["S"][i])
            out_row, skipped, m = online(ref[h]["S"][i], ok, ref[h]["V"], 4)
            assert [blk["skipped"] for blk in row] == skipped
            assert np.allclose(np.array(row[-1]["O"]) / row[-1]["l"], ref[h]["Z"][i], atol=1e-12)
            assert np.allclose(np.array(row[-1]["O"]) / row[-1]["l"], out_row, atol=1e-12)
    walk = compute(with_tiles(scenario_from_model(random_layer("bert", seed=7)), 3))
    for h in range(4):
        assert np.max(np.abs(walk.heads[h].mats["tiled"] - walk.heads[h].mats["Z"])) <= 1e-12


def test_model_at_projects_the_cost_panel(tiny) -> None:
    out = model("--at", "n=4096", "--no-pause").stdout
    assert "The same layer at n=4096, d_model=16, heads=4" in out
    assert "4 × 4096 × 4096" in out  # the tiny layer's 4 heads of scores at 4096 tokens
    bad = model("--at", "q=3", "--no-pause", code=2)
    assert "Traceback" not in bad.output and len(bad.stderr.strip().splitlines()) == 1


def test_a_real_tiny_gpt2_decodes_and_tiles(tmp_path) -> None:
    from pathlib import Path

    folder = Path(__file__).parent / "fixtures" / "models" / "tiny-gpt2"
    result = runner.invoke(app, ["model", "The cat sat on the mat", "--model", str(folder), "--decode",
                                 "--format", "json"], env=ENV)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["difference"] <= 1e-12 and len(data["steps"]) == len(data["tokens"])
    result = runner.invoke(app, ["model", "The cat sat", "--model", str(folder), "--tiles", "2", "--no-pause"],
                           env=ENV)
    assert result.exit_code == 0 and "Z_tiled" in result.stdout


@pytest.mark.parametrize("name, kv_heads", [("tiny-llama", 2), ("tiny-qwen2", 1), ("tiny-mistral", 2)])
@pytest.mark.parametrize("layer", [1, 2])
def test_a_llama_family_model_decodes_to_transformers_numbers(name, kv_heads, layer) -> None:
    """Each step's cache and z_t against the transformers numbers committed with
    tests/fixtures/models/make_model_reference.py (the sentence is its SENTENCES[name][0]): the
    cache holds K_rot's rows, each key turned at its own position, and z_t is row t of Z. As in
    test_model_walk_llama.py, transformers turns q and k in float32, so the match is to 1e-5."""
    from pathlib import Path

    here = Path(__file__).parent
    ref = np.load(here / "reference" / f"{name}.npz")
    at = lambda key: ref[f"s0/L{layer - 1}/{key}"]  # noqa: E731
    args = ["model", "I sat by the river bank", "--model", str(here / "fixtures" / "models" / name),
            "--layer", str(layer), "--decode"]
    result = runner.invoke(app, args + ["--format", "json"], env=ENV)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    d, heads = data["shape"]["d_k"], data["shape"]["heads"]
    assert data["shape"]["kv_heads"] == kv_heads and len(data["steps"]) == len(ref["s0/ids"])
    for step in data["steps"]:
        t = step["t"]
        for h, head in enumerate(step["heads"]):
            kv = h // (heads // kv_heads)
            assert head["kv"] == kv
            for mine, theirs in ((head["K_cache"], at("K_rot")[:t, kv * d:(kv + 1) * d]),
                                 (head["V_cache"], at("V")[:t, kv * d:(kv + 1) * d]),
                                 (head["a"], at("A")[h, t - 1, :t]), (head["z"], at("Z")[t - 1, h * d:(h + 1) * d])):
                np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-5 * max(1.0, float(np.abs(theirs).max())))
        # the full-width cache is the g K/V heads' columns, as transformers' K_rot
        np.testing.assert_allclose(step["K_cache"], at("K_rot")[:t], rtol=0, atol=1e-5 * max(1.0, float(np.abs(at("K_rot")).max())))
    out = flat(runner.invoke(app, args + ["--no-pause"], env=ENV).stdout)
    assert "q_t = R(t−1) · x_t · W_Q" in out and f"in each of the {kv_heads} K/V heads" in out


def test_a_real_tiny_gpt2_decodes_in_a_real_terminal() -> None:
    pytest.importorskip("pexpect")
    from pathlib import Path

    from test_pty import TIMEOUT, finish, spawn

    folder = Path(__file__).parent / "fixtures" / "models" / "tiny-gpt2"
    child = spawn("model", "The cat sat", "--model", str(folder), "--decode", rows=40, cols=110)
    child.expect("Step 1 / ", timeout=TIMEOUT)
    child.send("n")
    child.expect("Step 2 / ")
    child.expect("\\(new\\)")
    child.send("q")
    assert finish(child) == 0


# -- helpers --------------------------------------------------------------------------------------


def flat(out: str) -> str:
    """Printed text as one line of words: panel borders and line breaks gone."""
    import re

    return " ".join(re.sub(r"[│╭╮╰╯]", " ", out).split())


def _file(doc: dict, folder) -> str:
    path = folder / "modern.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def _json(folder, doc: dict, *args: str) -> dict:
    result = runner.invoke(app, ["decode", "-s", _file(doc, folder), "--format", "json", *args], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_window_decode_summary_says_what_its_own_work_table_shows() -> None:
    """Under a sliding window the summary said a cached step grows with t and a rerun with t²; the
    table beside it showed a constant and a linear column. The claim is checked against the counts."""
    result = CliRunner().invoke(app, ["decode", "sliding_window", "--no-pause"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "with t²" not in out and "stops growing once t reaches 3" in out
    rows = re.findall(r"^\s+(\d+)\s+\S+\s+\d+\s+([\d,]+)\s+([\d,]+)\s", result.stdout, flags=re.M)
    assert len(rows) == 8  # one per token of the lesson
    cached = [int(c.replace(",", "")) for _, c, _ in rows]
    rerun = [int(r.replace(",", "")) for _, _, r in rows]
    assert len(set(cached[2:])) == 1  # from t = 3 on, one query against 3 keys: the same work
    steps = {b - a for a, b in zip(rerun[2:], rerun[3:])}
    assert len(steps) == 1  # without a cache: a steady increase, linear in t


def test_the_decode_summary_of_a_model_keeps_its_work_columns_whole_at_80_columns() -> None:
    """A Llama tokenizer's <|begin_of_text|> took the width and cut "with the cache", "without" and
    the totals to "with…", "tot…"; the token is shortened instead."""
    folder = Path(__file__).parent / "fixtures" / "models" / "tiny-llama"
    result = CliRunner().invoke(app, ["model", "The cat sat on the mat", "--model", str(folder), "--decode",
                                      "--no-pause"], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    summary = result.stdout[result.stdout.index("All steps"):]
    header = next(line for line in summary.splitlines() if "with the cache" in line)
    assert "…" not in header and "without" in header and "rows reused" in header
    total = next(line for line in summary.splitlines() if line.strip().startswith("total"))
    assert "…" not in total
    assert all(len(line) <= 80 for line in summary.splitlines())
