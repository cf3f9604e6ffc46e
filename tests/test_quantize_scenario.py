"""A scenario that quantizes its own weight matrices (`quantize: q4_1 | q8_0`, features/quantize.py),
its worked cell, `compare NAME --quantize`, and the quantized lesson.

The references are apart from attnwalk: gguf-py's own gguf.quants (the library llama.cpp
publishes) where it is installed, and tests/reference.py's block-by-block quantizer, itself checked
here against gguf-py to 0 difference. The lesson's numbers are recomputed from its file with them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer import quants
from attnwalk.layer.kvcache import decode
from attnwalk.scenario.builtins import builtin_path
from attnwalk.scenario.load import scenario_from_text
from reference import attention
from reference import quantized as reference_quantized

runner = CliRunner()
ENV = {"COLUMNS": "100", "NO_COLOR": "1"}


def gguf_round_trip(W: np.ndarray, kind: str) -> np.ndarray:
    """W (in × out) through gguf.quants: each column a GGUF row, blocks of 32 along the inputs."""
    gguf = pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'attnwalk[gguf]'")
    qtype = gguf.GGMLQuantizationType[kind.upper()]
    rows = np.ascontiguousarray(W.T, dtype=np.float32)  # (out, in)
    return gguf.quants.dequantize(gguf.quants.quantize(rows, qtype), qtype).reshape(rows.shape).T.astype(np.float64)


def lesson() -> dict:
    return yaml.safe_load(builtin_path("quantized").read_text(encoding="utf-8"))


def load(doc: dict, name: str = "q.yaml"):
    return scenario_from_text(yaml.safe_dump(doc, allow_unicode=True), name)


def layer(doc: dict, kind: str) -> dict:
    """The lesson's layer from its file, its weights at float ("none") or read back from `kind`."""
    X = np.array(doc["embeddings"], dtype=float)
    W = {w: np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")}
    if kind != "none":
        W = {w: reference_quantized(M, kind) for w, M in W.items()}
    out = attention(X, X, W["W_Q"], W["W_K"], W["W_V"], np.ones((len(X), len(X)), bool))
    return {**W, "Q": out["Q"], "K": out["K"], **out["heads"][0]}


def matrix(rng, rows: int, cols: int) -> np.ndarray:
    W = rng.normal(size=(rows, cols)) * rng.choice([1e-3, 0.1, 1, 40])
    W[rng.integers(rows), rng.integers(cols)] *= 25  # an outlier
    W[:min(rows, 32), 0] = 0.375  # a block of one value: d = 0
    W[1, -1], W[2, -1] = 0.5, -0.5
    return W


# -- the quantizer against gguf-py ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["q4_1", "q8_0"])
@pytest.mark.parametrize("seed", range(6))
def test_the_quantizer_is_gguf_bit_for_bit(kind: str, seed: int) -> None:
    W = matrix(np.random.default_rng(seed), 64, 7)  # two blocks down each column
    want = gguf_round_trip(W, kind)
    assert np.array_equal(quants.quantized(W, kind), want)
    assert np.array_equal(reference_quantized(W, kind), want)  # the tests' own oracle, too


@pytest.mark.parametrize("kind", ["q4_1", "q8_0"])
def test_a_scale_that_underflows_float16_keeps_gguf_s_signs_of_zero(kind: str) -> None:
    # issue 39: weights of 1e-9 make d = max|w| / 127 underflow float16 to 0; gguf-py reads each
    # weight back as q · 0, −0.0 where q is negative, and the layer wrote +0.0 (d·q + 0 for Q8_0)
    W = np.random.default_rng(7).normal(size=(32, 5)) * 1e-9
    want = gguf_round_trip(W, kind)
    got = quants.quantized(W, kind)
    assert np.all(want == 0)
    if kind == "q8_0":
        assert np.signbit(want).any() and not np.signbit(want).all()  # both zeros: the case is real
    assert np.array_equal(np.signbit(got), np.signbit(want)) and np.array_equal(got, want)


@pytest.mark.parametrize("kind", ["q4_1", "q8_0"])
def test_a_column_shorter_than_32_is_one_block_of_its_own(kind: str) -> None:
    # a block's values repeated 8 times make a 32-weight block with the same min, max and d:
    # gguf quantizes each copy as the short block's own weight
    W = matrix(np.random.default_rng(9), 4, 3)
    tiled = np.tile(W, (8, 1))  # (32, 3)
    assert np.array_equal(quants.quantized(W, kind), gguf_round_trip(tiled, kind)[:4])
    assert np.array_equal(reference_quantized(W, kind), quants.quantized(W, kind))


def test_a_block_shows_the_fields_gguf_stores() -> None:
    W = lesson()["W_K"]
    W = np.array(W, dtype=float)
    block = quants.block(W, "q4_1", 0, 0)
    assert block.fields == {"d": 0.25, "m": 0.0} and block.qs == (2, 2, 0, 15) and block.q == 2
    assert block.value == 0.5 and block.size == 4 and block.first == 0
    assert block.fields["d"] * block.q + block.fields["m"] == block.value
    q8 = quants.block(W, "q8_0", 0, 0)
    assert q8.fields["d"] == float(np.float16(np.float32(3.75) / np.float32(127)))
    assert q8.qs == (20, 14, 0, 127) and q8.value == q8.fields["d"] * 20


# -- the scenario key ---------------------------------------------------------------------------------


def test_a_64_wide_layer_multiplies_by_the_numbers_gguf_reads_back() -> None:
    rng = np.random.default_rng(3)
    doc = {"tokens": ["a", "b", "c"], "embeddings": rng.normal(size=(3, 64)).tolist(), "heads": 2,
           "W_Q": matrix(rng, 64, 4).tolist(), "W_K": matrix(rng, 64, 4).tolist(), "W_V": matrix(rng, 64, 2).tolist(),
           "W_O": rng.normal(size=(2, 64)).tolist(),  # h·d_v = 2 rows: one block of 2 a column
           "quantize": "q4_1"}
    scn = load(doc)
    for key in ("W_Q", "W_K", "W_V"):
        assert np.array_equal(scn.param(key), gguf_round_trip(np.array(doc[key]), "q4_1")), key
    assert np.array_equal(scn.W_O, reference_quantized(np.array(doc["W_O"]), "q4_1"))
    X = np.array(doc["embeddings"])
    want = attention(X, X, scn.W_Q, scn.W_K, scn.W_V, np.ones((3, 3), bool), heads=2, W_O=scn.W_O)
    from attnwalk.layer.walk import compute

    assert np.allclose(compute(scn).mats["O"], want["O"], atol=1e-9)


def test_the_walk_export_and_decode_multiply_by_the_quantized_weights(tmp_path) -> None:
    doc = lesson()
    data = export("quantized")
    want = layer(doc, "q4_1")
    for key in ("Q", "K", "S", "A", "Z"):
        assert np.allclose(data["stages"][key], want[key], atol=1e-12), key
    for key in ("W_Q", "W_K", "W_V"):
        assert np.array_equal(np.array(data["weights"][key]), want[key]), key
        assert data["quantize"]["float_weights"][key] == doc[key]
    assert data["quantize"]["type"] == "Q4_1" and data["quantize"]["block"] == 4
    causal = load({**{k: v for k, v in doc.items() if k != "notes"}, "mask": "causal"})
    dec = decode(causal)
    for step in dec.steps:
        assert np.max(np.abs(step.heads[0].z - dec.walk.matrix("Z", 0)[step.t - 1])) <= 1e-12


def export(ref: str, *more: str) -> dict:
    result = runner.invoke(app, ["export", ref, "--format", "json", *more], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("value, message", [
    ("q3", "quantize: expected one of none | q4_1 | q8_0, got 'q3'"),
    ("Q4_K", "quantize: expected one of none | q4_1 | q8_0"),
    (4, "quantize: expected one of none | q4_1 | q8_0, got the number 4"),
    (["q4_1"], "quantize: expected one of none | q4_1 | q8_0, got a list"),
])
def test_a_bad_quantize_is_one_line_naming_the_file_line_and_field(tmp_path, value, message: str) -> None:
    doc = {k: v for k, v in lesson().items() if k != "notes"}
    doc["quantize"] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    line = path.read_text(encoding="utf-8").splitlines().index(
        next(l for l in path.read_text(encoding="utf-8").splitlines() if l.startswith("quantize:"))) + 1
    result = runner.invoke(app, ["run", str(path), "--no-pause"], env=ENV)
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert (f"bad.yaml:{line}:" in err or f"bad.yaml:{line + 1}:" in err) and message in err, err  # a list's item


@pytest.mark.parametrize("change, message", [
    ({"d_model": 40}, "quantize: q4_1 cuts each column of W_Q into blocks of 32, but W_Q has 40 rows (d_model); "
                      "give d_model a multiple of 32, or under 32"),
    ({"big": 1e6}, "W_K has a weight of 1e+06, too large for q4_1, whose block scales are float16 (at most 65504)"),
])
def test_a_layer_the_blocks_cannot_hold_is_refused(change: dict, message: str) -> None:
    rng = np.random.default_rng(0)
    d = change.get("d_model", 4)
    doc = {"tokens": ["a", "b"], "embeddings": rng.normal(size=(2, d)).tolist(), "W_Q": rng.normal(size=(d, 2)).tolist(),
           "W_K": rng.normal(size=(d, 2)).tolist(), "W_V": rng.normal(size=(d, 2)).tolist(), "quantize": "q4_1"}
    if "big" in change:
        doc["W_K"][0][0] = -change["big"]
    with pytest.raises(ScenarioError) as info:
        load(doc)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("q.yaml:")


def test_quantize_none_is_the_float_layer() -> None:
    doc = {**{k: v for k, v in lesson().items() if k != "notes"}, "quantize": "none"}
    scn = load(doc)
    assert np.array_equal(scn.W_K, np.array(doc["W_K"], dtype=float)) and scn.setting("quantize") is None


# -- the worked cell ------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang, words", [
    ("en", ["the file wrote it as:", "W_K[:, 1] = [0.6000, 0.4000, 0.0000, 3.7500]",
            "How W_K[1, 1] is stored (Q4_1): in blocks of 4 weights down its column, W_K[1–4, 1] here",
            "this column has only 4, so here the whole column is one block"]),
    ("zh", ["文件里写的是：", "W_K[:, 1] = [0.6000, 0.4000, 0.0000, 3.7500]", "是怎样存储的（Q4_1）", "整列算一块"]),
])
def test_a_key_cell_shows_its_block_and_the_arithmetic(lang: str, words: list[str]) -> None:
    result = runner.invoke(app, ["explain", "quantized", "K", "it", "1", "--lang", lang], env=ENV)
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.replace("│", " ").split())
    assert "W_K[:, 1] = [0.5000, 0.5000, 0.0000, 3.7500]" in out  # what the layer multiplies by
    assert "d = 0.25, m = 0; q = [2, 2, 0, 15]" in out
    assert "W_K[1, 1] = d·q + m = 0.25 × 2 + 0 = 0.5" in out  # 0.6 came back as 0.5
    for word in words:
        assert " ".join(word.split()) in out, word


def test_a_q8_0_cell_is_d_times_q(tmp_path) -> None:
    doc = {**{k: v for k, v in lesson().items() if k != "notes"}, "quantize": "q8_0"}
    path = tmp_path / "q8.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = runner.invoke(app, ["explain", str(path), "K", "cat", "1", "--ascii"], env=ENV)
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    d = float(np.float16(np.float32(3.75) / np.float32(127)))  # 0.029525757
    assert f"d = {d:.8g}; q = [20, 14, 0, 127]" in out
    assert f"W_K[1, 1] = d.q = {d:.8g} x 20 = {d * 20:.8g}" in out


# -- compare --quantize ------------------------------------------------------------------------------------


def test_compare_sets_the_lesson_beside_its_float_layer() -> None:
    result = runner.invoke(app, ["compare", "quantized", "--quantize", "none", "--format", "json"], env=ENV)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["left"]["scenario"] == "quantized · Q4_1" and data["right"]["scenario"] == "quantized · float"
    q4, fl = layer(lesson(), "q4_1"), layer(lesson(), "none")
    for key in ("Q", "K", "S", "A", "Z"):
        assert np.allclose(data["stages"][key]["left"], q4[key], atol=1e-12), key
        assert np.allclose(data["stages"][key]["right"], fl[key], atol=1e-12), key
    result = runner.invoke(app, ["compare", "quantized", "--quantize", "none"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "quantized · Q4_1 beside quantized · float" in result.stdout
    assert "W_K: different" in result.stdout and "Identical in both: tokens, E, P, X" in result.stdout


def test_compare_quantizes_a_float_lesson_and_two_scenarios_alike() -> None:
    result = runner.invoke(app, ["compare", "river_bank", "--quantize", "q8_0", "--format", "json"], env=ENV)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    doc = yaml.safe_load(builtin_path("river_bank").read_text(encoding="utf-8"))
    assert data["right"]["scenario"] == "river_bank · Q8_0"
    assert np.array_equal(np.array(data["weights"]["W_Q"]["right"]), reference_quantized(doc["W_Q"], "q8_0"))
    assert np.array_equal(np.array(data["weights"]["W_Q"]["left"]), np.array(doc["W_Q"], dtype=float))
    result = runner.invoke(app, ["compare", "river_bank", "savings_bank", "--quantize", "q4_1"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "river_bank · Q4_1 beside savings_bank · Q4_1" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["quantized", "--quantize", "q4_1"], "--quantize q4_1: quantized is already Q4_1; give none or q8_0"),
    (["river_bank", "--quantize", "none"], "--quantize none: river_bank is already float"),
    (["quantized", "--quantize", "q3"], "--quantize q3: choose one of none, q4_1, q8_0"),
])
def test_compare_quantize_refuses_in_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["compare", *args], env=ENV)
    assert result.exit_code == 2
    assert message in result.stderr and "\n" not in result.stderr.strip()


def test_compare_refuses_rows_the_blocks_cannot_split(tmp_path) -> None:
    rng = np.random.default_rng(1)
    doc = {"tokens": ["a", "b"], "embeddings": rng.normal(size=(2, 40)).tolist(),
           **{w: rng.normal(size=(40, 2)).tolist() for w in ("W_Q", "W_K", "W_V")}}
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = runner.invoke(app, ["compare", "-s", str(path), "--quantize", "q8_0"], env=ENV)
    assert result.exit_code == 2
    assert "W_Q has 40 rows (d_model); give d_model a multiple of 32, or under 32" in result.stderr


# -- the lesson's numbers -------------------------------------------------------------------------------


def test_the_lessons_numbers() -> None:
    doc = lesson()
    fl, q4, q8 = layer(doc, "none"), layer(doc, "q4_1"), layer(doc, "q8_0")
    t = doc["tokens"]
    cat, mat, it = t.index("cat"), t.index("mat"), t.index("it")
    W_K = np.array(doc["W_K"], dtype=float)
    assert W_K[:, 0].tolist() == [0.6, 0.4, 0, 3.75]
    assert np.all(np.array(doc["embeddings"])[:, 3] == 0)  # the rare feature: no word here has it
    assert q4["W_K"][:, 0].tolist() == [0.5, 0.5, 0, 3.75]  # d = 3.75 / 15 = 0.25, q = [2, 2, 0, 15]
    assert np.max(np.abs(q4["W_K"][:, 1] - W_K[:, 1])) < 0.0004
    assert (q4["W_Q"][1, 0]).round(4) == 2.3994
    assert [f"{v:.2f}" for v in (fl["A"][it, cat], fl["A"][it, mat], fl["S"][it, cat], fl["S"][it, mat])] == \
        ["0.44", "0.30", "1.68", "1.31"]
    assert q4["K"][cat, 0] == q4["K"][mat, 0] == 0.5
    assert [f"{v:.2f}" for v in (q4["A"][it, mat], q4["A"][it, cat], q4["S"][it, mat], q4["S"][it, cat])] == \
        ["0.40", "0.34", "1.57", "1.41"]
    assert np.argmax(fl["A"][it]) == cat and np.argmax(q4["A"][it]) == mat  # the ranking flips
    assert np.allclose(q4["A"][cat, [cat, mat, it]], q4["A"][cat, cat], atol=1e-15)  # cat's row goes flat
    assert f"{q4['A'][cat, cat]:.2f}" == "0.30"
    assert f"{3.75 / 127:.2f}" == "0.03"
    assert [f"{v:.2f}" for v in (q8["A"][it, cat], q8["A"][it, mat])] == ["0.42", "0.31"]
    assert [f"{v:.4f}" for v in fl["A"][it]] == ["0.4357", "0.0480", "0.3027", "0.2137"]
    assert [f"{v:.4f}" for v in q4["A"][it]] == ["0.3387", "0.0485", "0.3970", "0.2158"]
    assert [f"{v:.4f}" for v in q4["A"][cat]] == ["0.2988", "0.1035", "0.2988", "0.2988"]
    assert [f"{v:.4f}" for v in q4["Q"][cat]] == ["2.9993", "0.0000"]
    assert [f"{v:.4f}" for v in fl["Z"][it]] == ["0.6472", "0.5665"] and fl["V"][cat].tolist() == [1, 0]
    assert [f"{v:.4f}" for v in q4["Z"][it]] == ["0.5521", "0.6634"] and fl["V"][mat].tolist() == [0, 1]
    assert f"{np.max(np.abs(q4['V'] - fl['V'])):.4f}" == "0.0003"
    said = {"en": ["0.44", "0.30", "1.68", "1.31", "0.40", "0.34", "1.57", "1.41", "2.3994", "0.03", "0.42",
                   "0.31", "[0.5, 0.5, 0, 3.75]", "q = [2, 2, 0, 15]", "0.0004", "0.4357, 0.0480, 0.3027, 0.2137",
                   "0.3387, 0.0485, 0.3970, 0.2158", "0.2988, 0.1035, 0.2988, 0.2988", "[2.9993, 0]",
                   "[0.6472, 0.5665]", "[0.5521, 0.6634]", "0.0003"]}
    said["zh"] = said["en"]
    for lang in ("en", "zh"):
        text = "".join([doc["description"][lang], *(doc["notes"][k][lang] for k in ("K", "A", "Z"))])
        for number in said[lang]:
            assert number in text, (lang, number)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_lessons_own_questions(lang: str) -> None:
    from attnwalk.layer.walk import compute
    from attnwalk.scenario.load import load_scenario
    from attnwalk.text import text
    from attnwalk.tutor.lessonquiz import lesson_questions

    asked = lesson_questions(compute(load_scenario("quantized")), text(lang))
    assert [q.qid for q in asked] == ["lesson:quantized:collapsed", "lesson:quantized:finer"]
    collapsed, finer = ("\n".join([q.text, *q.choices, *q.why]) for q in asked)
    w = reference_quantized(np.array(lesson()["W_K"], dtype=float), "q8_0")[:, 0]
    assert (f"{w[0]:.2f}", f"{w[1]:.2f}") == ("0.59", "0.41") and round(0.25 / (3.75 / 127)) == 8
    for said in ("[0.6, 0.4, 0, 3.75]", "0.25", "q = 2", "0.04"):  # without the outlier: 0 to 0.6, d = 0.04
        assert said in collapsed, said
    for said in ("0.03", "0.59", "0.41", "8"):
        assert said in finer, said
    assert asked[1].choices[0].startswith("cat") and all(c.startswith("mat") for c in asked[1].choices[1:])
    if lang == "en":
        assert "The outlier 3.75 stretches the block" in collapsed and "spans 0 to 0.6, d would be 0.04" in collapsed
        assert "cat, as at float: steps of 0.03 keep 0.6 and 0.4 apart (0.59 and 0.41)" in finer


def test_the_walk_and_the_handouts_in_both_languages() -> None:
    for lang, words in (("en", ["Quantized (Q4_1): W_Q, W_K and W_V are not the numbers the file wrote",
                                "attnwalk compare quantized --quantize none"]),
                        ("zh", ["量化（Q4_1）", "attnwalk compare quantized --quantize none"])):
        result = runner.invoke(app, ["run", "quantized", "--no-pause", "--lang", lang], env=ENV)
        assert result.exit_code == 0, result.output
        out = " ".join(result.stdout.replace("│", " ").split())
        for word in words:
            assert " ".join(word.split()) in out, (lang, word)
    result = runner.invoke(app, ["export", "quantized", "--format", "latex"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "0.25" in result.stdout
