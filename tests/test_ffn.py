"""The rest of the block (issue 41, part 1): the residual (`residual: true`), the feed-forward network
(`ffn: gelu | relu | silu | swiglu`) and where the norms stand (`norm_placement: pre | post`).

Forward: every stage against tests/reference.py's block(), loops written from the papers' formulas.
Backward: every parameter's gradient (W_1, b_1, W_2, b_2, W_gate, both norms' γ and β, W_Q, W_O)
against central differences of the loss through attnwalk's forward pass. Then decode against the
walk, bad files, the exports and the printed walk, and the lesson `block`'s numbers.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.features.target import loss
from attnwalk.layer import roles
from attnwalk.layer.backward import backward
from attnwalk.layer.kvcache import decode
from attnwalk.layer.walk import compute
from attnwalk.scenario.builtins import builtin_path
from attnwalk.scenario.load import load_scenario, scenario_from_text
from gradcheck import numeric as differenced
from reference import attention_of

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1", "ATTNWALK_LANG": None, "LANG": "C.UTF-8", "LANGUAGE": None,
       "LC_ALL": None, "LC_MESSAGES": None}
N, D, D_FF = 4, 4, 6
BLOCK_STAGES = ("res_attn", "LN", "LN2", "U", "G", "F", "res_ffn")


def doc(kind: str = "gelu", norm: str | None = "layer", placement: str | None = None, seed: int = 0,
        biases: bool = True, heads: int = 1, target: bool = False) -> dict:
    """A small random block: 4 tokens, d_model 4, d_ff 6, a causal mask."""
    rng = np.random.default_rng(seed)

    def m(*shape: int) -> list:
        return np.round(rng.normal(0, 0.7, shape), 3).tolist()

    out: dict = {"name": "blk", "tokens": ["a", "b", "c", "d"], "embeddings": m(N, D), "positional": "none",
                 "mask": "causal", "heads": heads, "W_Q": m(D, 2 * heads), "W_K": m(D, 2 * heads),
                 "W_V": m(D, 2 * heads), "W_O": m(2 * heads, D), "residual": True, "ffn": kind,
                 "W_1": m(D, D_FF), "W_2": m(D_FF, D)}
    if kind == "swiglu":
        out["W_gate"] = m(D, D_FF)
    if biases:
        out["b_1"], out["b_2"] = m(D_FF), m(D)
    if norm is not None:
        out["norm"] = norm
        out["norm_gamma"], out["ffn_norm_gamma"] = (np.round(1 + rng.normal(0, 0.2, D), 3).tolist() for _ in "12")
        if norm == "layer":
            out["norm_beta"], out["ffn_norm_beta"] = m(D), m(D)
    if placement is not None:
        out["norm_placement"] = placement
    if target:
        out["target"] = {"output": m(N, D)}
    return out


def load(d: dict):
    return scenario_from_text(yaml.safe_dump(d), "blk.yaml")


def block_reference(scn) -> dict:
    """tests/reference.py's block, loop by loop, of a scenario whose unembedding (the lesson's
    ending) is left out: it reads the block's output and changes none of its numbers; the tests
    that need the next-token numbers compute them here from that output."""
    return attention_of(scn.with_setting("unembed", None))


CASES = [("relu", None, None), ("gelu", "layer", "pre"), ("silu", "rms", None), ("swiglu", "layer", None),
         ("swiglu", "rms", "pre"), ("gelu", "layer", "post"), ("silu", "rms", "post"), ("swiglu", None, None)]


@pytest.mark.parametrize("kind, norm, placement", CASES)
def test_every_stage_matches_the_reference_written_apart(kind, norm, placement) -> None:
    scn = load(doc(kind, norm, placement, biases=kind != "relu"))
    walk = compute(scn)
    expected = attention_of(scn)
    keys = [k for k in BLOCK_STAGES if k in expected]
    assert {"res_attn", "U", "G", "F", "res_ffn"} <= set(keys)
    for key in keys:
        np.testing.assert_allclose(walk.mats[key], expected[key], atol=1e-12, err_msg=key)
    # the residual adds X itself, not the normalised rows the projections read
    np.testing.assert_allclose(walk.mats["res_attn"], walk.mats["X"] + walk.mats["O"], atol=0)
    end = roles.block_output(walk.computed).key
    assert end == ("LN2" if placement == "post" and norm else "res_ffn")
    assert roles.output(walk.computed).key == "O"


def test_post_placement_reads_x_and_normalises_each_sum() -> None:
    scn = load(doc("gelu", "layer", "post"))
    graph = scn.graph
    assert roles.projected_from(graph).key == "X"  # no norm in front of the projections
    order = [s.key for s in graph if s.shown]
    assert order[-7:] == ["O", "res_attn", "LN", "U", "G", "F", "res_ffn"] or order[-8:] == [
        "O", "res_attn", "LN", "U", "G", "F", "res_ffn", "LN2"]
    assert [s.key for s in graph][-1] == "LN2"
    assert scn.graph[[s.key for s in graph].index("res_ffn")].reads == ("LN", "F")


def test_several_heads_without_w_o_add_concat_to_x() -> None:
    d = doc("relu", None, biases=False, heads=2)
    d.pop("W_O")
    scn = load(d)  # 2 heads × d_v 2 = d_model 4
    walk = compute(scn)
    np.testing.assert_allclose(walk.mats["res_attn"], walk.mats["X"] + walk.mats["concat"], atol=0)
    np.testing.assert_allclose(walk.mats["res_ffn"], attention_of(scn)["res_ffn"], atol=1e-12)
    assert scn.graph[[s.key for s in scn.graph].index("res_attn")].formula_in(scn) == "H = X + concat"


# -- the backward pass against finite differences --------------------------------------------------


PARAMS = ("W_1", "b_1", "W_2", "b_2", "W_gate", "norm_gamma", "norm_beta", "ffn_norm_gamma", "ffn_norm_beta",
          "W_Q", "W_O", "W_V")


@pytest.mark.parametrize("kind, norm, placement", [("gelu", "layer", None), ("swiglu", "rms", None),
                                                   ("relu", "layer", "post"), ("silu", None, None)])
def test_every_gradient_matches_finite_differences(kind, norm, placement) -> None:
    scn = load(doc(kind, norm, placement, seed=3, target=True))
    walk = compute(scn)
    L = loss(walk)
    assert L.reads == "LN2" if placement == "post" else L.reads == "res_ffn"  # the target reads the block's end
    grads = backward(walk, L.seeds, L.value)
    checked = [name for name in PARAMS if name in grads.params]
    assert {"W_1", "W_2", "W_Q", "W_O"} <= set(checked)
    for name in checked:
        analytic = grads.params[name]
        cells = list(np.ndindex(*analytic.shape))
        numeric = differenced(scn, "scaled", name, None, analytic.shape, True, cells)  # tests/gradcheck.py
        np.testing.assert_allclose(analytic, numeric, atol=1e-6, rtol=1e-5, err_msg=name)


def test_relu_passes_no_gradient_through_a_silent_unit() -> None:
    scn = load(doc("relu", "layer", seed=5, target=True))
    walk = compute(scn)
    L = loss(walk)
    grads = backward(walk, L.seeds, L.value)
    silent = walk.mats["U"] <= 0
    assert silent.any() and (~silent).any()
    assert np.all(grads.mats["U"][silent] == 0)
    np.testing.assert_array_equal(grads.params["W_2"][silent.all(axis=0)], 0)  # a unit off for every token


def test_grad_and_train_go_through_the_block(tmp_path) -> None:
    path = tmp_path / "blk.yaml"
    path.write_text(yaml.safe_dump(doc("swiglu", "layer", seed=3, target=True)), encoding="utf-8")
    out = runner.invoke(app, ["grad", str(path), "--format", "json"], env=ENV)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    text = json.dumps(data)
    for name in ("W_1", "W_2", "W_gate", "b_1", "ffn_norm_gamma"):
        assert f'"{name}"' in text
    walked = runner.invoke(app, ["grad", str(path), "--no-pause"], env=ENV)
    assert walked.exit_code == 0, walked.output
    for title in ("Gradient of the block's output Y", "Gradient of W_gate", "Gradient of the residual stream H"):
        assert title in walked.stdout
    # X completes once, after both its readers (the residual and the norm) have passed back
    assert len(re.findall(r"^Stage \d+ / \d+   ∂L/∂X  ", walked.stdout, re.M)) == 1
    assert "(Y[i, c] − T[i, c])²" in walked.stdout
    path.write_text(yaml.safe_dump(doc("gelu", "layer", seed=3, target=True)), encoding="utf-8")
    trained = runner.invoke(app, ["train", str(path), "--steps", "30", "--lr", "0.01", "--format", "json"], env=ENV)
    assert trained.exit_code == 0, trained.output
    steps = json.loads(trained.stdout)["steps"]
    assert steps[-1]["loss"] < steps[0]["loss"]


# -- decode, exports, the printed walk --------------------------------------------------------------


@pytest.mark.parametrize("kind, norm, placement", [("gelu", "layer", None), ("swiglu", "rms", "post")])
def test_decode_makes_each_row_of_the_block_as_the_walk_does(kind, norm, placement) -> None:
    scn = load(doc(kind, norm, placement))
    dec = decode(scn)
    walk = compute(scn)
    for step in dec.steps:
        assert set(step.block) >= {"res_attn", "U", "G", "F", "res_ffn"}
        for key, row in step.block.items():
            np.testing.assert_allclose(row, walk.mats[key][step.t - 1], atol=1e-12)
    assert dec.difference < 1e-12
    out = runner.invoke(app, ["decode", "block", "--format", "json"], env=ENV)
    assert out.exit_code == 0, out.output
    last = json.loads(out.stdout)["steps"][-1]
    np.testing.assert_allclose(last["res_ffn"], compute(load_scenario("block")).mats["res_ffn"][-1], atol=1e-12)
    shown = runner.invoke(app, ["decode", "block", "--no-pause"], env=ENV).stdout
    assert "Y = H + F" in shown and "Y row 4, whole layer" in shown


def test_the_json_export_and_the_printed_walk_have_the_stages() -> None:
    data = json.loads(runner.invoke(app, ["export", "block", "--format", "json"], env=ENV).stdout)
    walk = compute(load_scenario("block"))
    for key in ("res_attn", "LN2", "U", "G", "F", "res_ffn"):
        np.testing.assert_array_equal(np.array(data["stages"][key]), walk.mats[key])
    assert {"W_1", "W_2"} <= set(data["weights"])
    walked = runner.invoke(app, ["run", "block", "--no-pause"], env=ENV).stdout
    order = re.findall(r"^Stage (\d+) / \d+   (\S+)", walked, re.M)
    assert [s for _, s in order][-9:-2] == ["O", "H", "RMSNorm₂(H)", "U", "G", "F", "Y"]  # then ℓ and p
    assert [s for _, s in order].index("Z") < [s for _, s in order].index("O")  # O after the heads
    zh = runner.invoke(app, ["run", "block", "--no-pause"], env={**ENV, "ATTNWALK_LANG": "zh"}).stdout
    for title in ("残差连接", "升维投影", "激活函数：ReLU", "降维投影", "块的输出"):
        assert title in zh


def test_a_worked_cell_checks_with_its_own_digits(tmp_path) -> None:
    for kind in ("gelu", "silu", "swiglu"):
        path = builtin_path("block")
        text = path.read_text(encoding="utf-8").replace("ffn: relu", f"ffn: {kind}")
        if kind == "swiglu":
            text += "W_gate:\n  - [0, 1]\n  - [1, 0]\n  - [1, 0]\n  - [0, 0]\n"
        scn = scenario_from_text(text, "block.yaml")
        walk = compute(scn)
        g = walk.mats["G"][3, 0]
        path = tmp_path / f"{kind}.yaml"
        path.write_text(text, encoding="utf-8")
        out = runner.invoke(app, ["explain", str(path), "G", "4", "1"], env=ENV)
        assert out.exit_code == 0, out.output
        assert f"= {g:.4f}" in out.stdout
        # the last equation's operands, as printed, give the printed result
        assert f"G[bank, 1] = {g:.4f}" in out.stdout


# -- bad files: one line, the file, the line and the field ------------------------------------------


@pytest.mark.parametrize("change, field, message", [
    ({"ffn": "tanh"}, "ffn", "expected one of gelu | relu | silu | swiglu"),
    ({"W_1": [[1, 2], [3, 4]]}, "W_1", "W_1 is 2 × 2, but it must be d_model × d_ff"),
    ({"W_2": [[1, 2, 3, 4] for _ in range(5)]}, "W_2", "W_2 is 5 × 4, but it must be d_ff × d_model = 6 × 4"),
    ({"b_1": [0, 0]}, "b_1", "b_1 has 2 numbers, but it must have d_ff"),
    ({"W_gate": [[0] * 6 for _ in range(4)]}, "W_gate", "W_gate is SwiGLU's gate: use ffn: swiglu"),
    ({"ffn": "swiglu"}, "ffn", "ffn: swiglu needs W_gate"),
    ({"residual": False}, "ffn", "add residual: true"),
    ({"residual": "yes"}, "residual", "expected true or false"),
    ({"norm_placement": "middle"}, "norm_placement", "expected one of pre | post"),
])
def test_a_bad_block_is_one_line_naming_the_file_line_and_field(tmp_path, change, field, message) -> None:
    d = doc("gelu", "layer")
    d.update(change)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith(f"{field}:"))
    out = runner.invoke(app, ["run", str(path), "--no-pause"], env=ENV)
    assert out.exit_code == 2
    said = out.output.strip()
    assert "\n" not in said and "Traceback" not in said
    # the line of the key, or of its value's first row (a matrix written as a block list)
    assert re.match(rf"attnwalk: {re.escape(str(path))}:({line}|{line + 1}): ", said), said
    assert message in said and field in said


@pytest.mark.parametrize("change, remove, field, message", [
    ({"ffn_norm_gamma": [1, 1, 1, 1]}, ("norm", "norm_gamma", "norm_beta", "ffn_norm_beta"), "ffn_norm_gamma",
     "there is no norm"),
    ({"norm_placement": "post"}, ("residual", "ffn", "W_1", "W_2", "b_1", "b_2"), "norm_placement", "add residual: true"),
    ({}, ("residual", "ffn", "W_2", "b_1", "b_2", "ffn_norm_gamma", "ffn_norm_beta"), "W_1", "add ffn:"),
])
def test_keys_that_need_another_are_refused(change, remove, field, message) -> None:
    d = doc("gelu", "layer")
    d.update(change)
    for key in remove:
        d.pop(key)
    with pytest.raises(ScenarioError) as info:
        load(d)
    assert message in str(info.value) and field in str(info.value) and str(info.value).startswith("blk.yaml:")


def test_the_residual_refuses_an_output_narrower_than_x() -> None:
    d = doc("gelu", None)
    d.pop("W_O")  # one head of d_v 2, and d_model 4
    with pytest.raises(ScenarioError) as info:
        load(d)
    assert "Z has h·d_v = 2 columns and X has d_model = 4" in str(info.value)


# -- the lesson's numbers, as its text quotes them ---------------------------------------------------


def test_the_lesson_text_is_true_to_its_numbers() -> None:
    scn = load_scenario("block")
    ref = block_reference(scn)  # written apart from the walk
    source = yaml.safe_load(builtin_path("block").read_text(encoding="utf-8"))
    bank, river = 3, 2
    A = ref["heads"][0]["A"]
    H, U, F, Y = ref["res_attn"], ref["U"], ref["F"], ref["res_ffn"]

    def row(v) -> str:
        return "[" + ", ".join(f"{x:.4f}".rstrip("0").rstrip(".") if abs(x - round(x)) < 1e-12 else f"{x:.4f}"
                               for x in v) + "]"

    quoted = [f"{A[bank, river]:.4f}", f"{ref['O'][bank, 1]:.4f}", row(H[bank]), f"{U[bank, 0]:.4f}",
              f"{U[bank, 1]:.4f}", f"{F[bank, 0]:.4f}",
              f"+{F[bank, 3]:.4f}", row(Y[bank]), f"{Y[bank, 0]:.4f}"]
    for lang in ("en", "zh"):
        text = source["description"][lang]
        for number in quoted:
            assert number in text, (lang, number)
    assert (U[:3, 0] < 0).all() and U[bank, 0] > 0  # only bank's shore unit fires
    assert U[bank, 1] < 0 and (ref["G"][:3] == 0).all()  # its money unit is silent; nothing fires elsewhere
    np.testing.assert_array_equal(Y[:3], H[:3])  # their Y is their H
    assert np.argmax(A[bank]) == river


def test_the_lessons_notes_are_true_to_its_numbers() -> None:
    scn = load_scenario("block")
    ref = block_reference(scn)
    notes = yaml.safe_load(builtin_path("block").read_text(encoding="utf-8"))["notes"]
    bank, river, the = 3, 2, 1
    head = ref["heads"][0]
    A, V, LN2, U, G = head["A"], head["V"], ref["LN2"], ref["U"], ref["G"]

    def f(x: float) -> str:
        return f"{x:.4f}"

    w, land = float(f(LN2[bank, 1])), float(f(LN2[bank, 0]))  # money and land are equal in bank's row
    assert f(LN2[bank, 2]) == f(LN2[bank, 0])
    shore, money = float(f(U[bank, 0])), float(f(U[bank, 1]))
    assert f(w + land - 2.2) == f(shore) and f(land - w) == f(money)  # each equation, from its digits
    part = float(f(A[bank, river])) * float(f(V[river, 0]))
    expected = {
        "A": [f(A[bank, river]), f(A[bank, the]), f(A[bank, 0]), f(A[bank, bank])],
        "Z": [f(head["Z"][bank, 0]), f"{f(A[bank, river])} × {f(V[river, 0])} = {f(part)}",
              f"O[bank] = [0, {f(ref['O'][bank, 1])}, 0, 0]"],
        "res_attn": [f"[0, {f(ref['O'][bank, 1])}, 0, 0] = [1, {f(ref['res_attn'][bank, 1])}, 1, 0]"],
        "U": [f"U[bank, 1] = {f(w)} + {f(land)} − 2.2 = {f(shore)}", f"U[bank, 2] = {f(land)} − {f(w)} = "
              f"{f(money)}"],
        "G": [f(G[bank, 0])],
        "F": [f"{f(G[bank, 0])} × [-2, 0, 0, 4] = [{f(-2 * float(f(G[bank, 0])))}, 0, 0, "
              f"{f(4 * float(f(G[bank, 0])))}]"],
        "res_ffn": ["[" + ", ".join(f"{x:.4f}".rstrip("0").rstrip(".") if x == round(x) else f(x)
                              for x in ref["res_ffn"][bank]) + "]"],
    }
    np.testing.assert_allclose(ref["F"][bank], [-2 * G[bank, 0], 0, 0, 4 * G[bank, 0]], atol=1e-12)
    assert A[bank, 0] == pytest.approx(A[bank, bank]) and A[bank, the] > A[bank, 0]
    assert np.count_nonzero(G) == 1 and G.size == 8
    for stage, numbers in expected.items():
        for lang in ("en", "zh"):
            for number in numbers:
                assert number in notes[stage][lang], (stage, lang, number)


def test_the_app_walks_to_the_block_output_and_works_its_cell() -> None:
    from appdriver import drive, typed

    d = drive("block", ["g", *typed("Y")], size=(120, 50))
    assert "Stage 20 / 22   Y  The block's output" in d.screen
    assert "Y[bank, money] = H[bank, money] + F[bank, money] = 1.0000 + (-0.4934) = 0.5066" in d.screen
    d = drive("block", ["g", *typed("G")], size=(120, 50))
    assert "Activation: ReLU" in d.screen and "max(0.2467, 0) = 0.2467" in d.screen


def test_the_lesson_ends_on_the_next_word_as_its_text_says() -> None:
    scn = load_scenario("block")
    ref = block_reference(scn)  # the block loop by loop; the head written here
    source = yaml.safe_load(builtin_path("block").read_text(encoding="utf-8"))
    vocab, W_U = source["vocab"], np.array(source["W_U"], dtype=float)
    bank = 3

    def softmax(row: np.ndarray) -> np.ndarray:
        e = np.exp(row - row.max())
        return e / e.sum()

    logits = ref["res_ffn"][bank] @ W_U  # no final norm in this lesson
    p = softmax(logits)
    without = softmax(ref["res_attn"][bank] @ W_U)  # Y = H: the FFN left out
    word = {w: i for i, w in enumerate(vocab)}
    walk = compute(scn)
    np.testing.assert_allclose(walk.mats["logits"][bank], logits, atol=1e-12)
    np.testing.assert_allclose(walk.mats["p"][bank], p, atol=1e-12)
    assert [vocab[i] for i in np.argsort(-p)[:3]] == ["mud", "grass", "account"]
    assert vocab[int(np.argmax(without))] == "account" and without[word["account"]] > without[word["mud"]]
    quoted = [f"{logits[word[w]]:.4f}" for w in ("mud", "grass", "account")] + [
        f"{p[word[w]]:.4f}" for w in ("mud", "grass", "account")] + [
        f"{without[word['account']]:.4f}", f"{without[word['mud']]:.4f}"]
    for lang in ("en", "zh"):
        for number in quoted:
            assert number in source["description"][lang], (lang, number)
        assert f"ℓ[bank, mud] = {logits[word['mud']]:.4f}" in source["notes"]["logits"][lang]
        for w in ("mud", "grass", "account"):
            assert f"{w} {p[word[w]]:.4f}" in source["notes"]["p"][lang]
    assert ref["res_ffn"][bank, 0] == pytest.approx(0.5066, abs=5e-5)  # "took half of it away": 1 → 0.5066
    T = {0.5: softmax(logits / 0.5), 2: softmax(logits / 2)}
    assert T[0.5][word["mud"]] > p[word["mud"]] > T[2][word["mud"]]  # sharper at 0.5, flatter at 2


def test_the_lessons_own_questions_ask_its_numbers() -> None:
    from attnwalk.text import text
    from attnwalk.tutor.lessonquiz import lesson_questions

    walk = compute(load_scenario("block"))
    ref = block_reference(load_scenario("block"))
    asked = {q.qid: q for q in lesson_questions(walk, text("en"))}
    kept, silent = asked["lesson:block:kept"], asked["lesson:block:silent"]
    h = "[" + ", ".join(f"{x:.2f}".rstrip("0").rstrip(".") for x in ref["res_attn"][3]) + "]"
    assert kept.shown.startswith(f"{h}:") and "X[bank] = [1, 0, 1, 0]" in kept.text
    assert f"U = {ref['U'][3, 1]:.2f}" in silent.text and ref["U"][3, 1] < 0
    assert silent.shown.startswith("Nothing: ReLU turns")
    gelu = builtin_path("block").read_text(encoding="utf-8").replace("ffn: relu", "ffn: gelu")
    scn = scenario_from_text(gelu, "block.yaml")
    from attnwalk.features.ffn import QUESTIONS
    assert QUESTIONS["block"]["silent"](compute(scn)) is None  # GELU lets a negative part through


def test_the_reference_reads_the_unembedding_after_the_block() -> None:
    scn = load_scenario("block")
    ref = attention_of(scn)  # tests/reference.py, the unembedding included
    walk = compute(scn)
    np.testing.assert_allclose(ref["logits"], walk.mats["logits"], atol=1e-12)
    np.testing.assert_allclose(ref["p"], walk.mats["p"], atol=1e-12)
    dec = decode(scn)  # decode goes on to p_t, row by row
    assert "p" in dec.steps[-1].block and dec.difference < 1e-12


def test_decodes_size_is_counted_with_the_block_rows() -> None:
    from attnwalk.export.decodedata import decode_data, decode_numbers

    def count(x) -> int:
        if isinstance(x, list):
            return sum(count(v) for v in x)
        if isinstance(x, dict):
            return sum(count(v) for v in x.values())
        return 1 if isinstance(x, (int, float)) or x is None else 0

    for scn in (load_scenario("block"), load(doc("swiglu", "layer", "post"))):
        written = count(decode_data(decode(scn))["steps"])
        block = sum(len(row) for step in decode(scn).steps for row in step.block.values())
        assert block > 0 and decode_numbers(scn) >= written


def test_post_placements_text_follows_the_graph() -> None:
    from attnwalk.layer.gradwalk import grad_stages
    from attnwalk.text import stage_text

    scn = load(doc("gelu", "layer", "post", target=True))
    by = {s.key: s for s in scn.graph}
    assert stage_text("en", by["res_ffn"], scn) == "The FFN's residual sum"
    assert stage_text("en", by["LN2"], scn) == "The block's output, normalised"
    assert stage_text("en", by["LN"], scn) == "The residual sum, normalised"
    grads = {s.key: s for s in grad_stages(scn)}
    assert stage_text("en", grads["dLN"], scn).startswith("Gradient of the normalised residual sum")
    pre = load(doc("gelu", "layer", target=True))
    assert stage_text("en", {s.key: s for s in pre.graph}["res_ffn"], pre) == "The block's output"


def test_formulas_are_written_from_what_each_stage_reads() -> None:
    for kind, formula in (("relu", "G = ReLU(U)"), ("swiglu", "G = SiLU(LN₂(H) · W_gate) ⊙ U"),
                          ("gelu", "G = GELU(U),  GELU(u) = ½ u (1 + tanh(√(2/π) (u + 0.044715 u³)))")):
        scn = load(doc(kind, "layer"))
        by = {s.key: s for s in scn.graph}
        assert by["G"].formula_in(scn) == formula
        assert by["U"].formula_in(scn) == "U = LN₂(H) · W_1 + b_1"
        assert by["LN2"].formula_in(scn).startswith("LN₂(H) = (H − μ) / σ · γ₂ + β₂")
        assert by["res_ffn"].formula_in(scn) == "Y = H + F"
    scn = load(doc("silu", "rms", "post", biases=False))
    by = {s.key: s for s in scn.graph}
    assert by["U"].formula_in(scn) == "U = RMSNorm(H) · W_1"
    assert by["LN2"].formula_in(scn).startswith("RMSNorm₂(Y) = Y / RMS · γ₂")
    assert by["res_ffn"].formula_in(scn) == "Y = RMSNorm(H) + F"


def test_decodes_work_counts_the_products_after_the_output() -> None:
    scn = load_scenario("block")
    dec = decode(scn)
    sizes = sum(np.size(scn.param(w)) for w in ("W_1", "W_2", "W_U"))  # d_model·d_ff + d_ff·d_model + d_model·|vocab|
    assert sizes == 4 * 2 + 2 * 4 + 4 * 8
    for step in dec.steps:
        assert step.cached.after == sizes and step.rerun.after == step.t * sizes
    data = json.loads(runner.invoke(app, ["decode", "block", "--format", "json"], env=ENV).stdout)
    cached = data["steps"][0]["work"]["cached"]
    assert cached["after"] == sizes and cached["total"] == sum(v for k, v in cached.items() if k != "total")
