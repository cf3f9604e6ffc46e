"""`attnwalk compare A B`: two scenarios stage by stage, against an oracle written here.

river_bank and savings_bank (seed 004) share W_Q, W_K, W_V and the bank row; only the neighbours
differ. Which matrices come out identical is computed below with numpy straight from the two YAML
files (never from attnwalk), so the test holds whatever weights the files settle on; the seed's
own figures for the bank row are typed in from ../shared/seeds/004_*.
"""

from __future__ import annotations

import io
import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
import yaml
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import UsageError
from attnwalk.layer.pair import (DIFFERENT, IDENTICAL, LEFT_ONLY, RIGHT_ONLY, ROUNDING, check_shapes,
                                 compare_pair, difference, merged_stages, pair_data)
from attnwalk.render.options import ViewOptions
from attnwalk.render.pairview import pair_view
from attnwalk.scenario.load import load_scenario, scenario_from_text

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
ENV = {"COLUMNS": "80", "NO_COLOR": "1", "ATTNWALK_LANG": "en", "LANG": "C"}

# Seed 004, step 3–5: bank's scores, weights and output in "by the river bank".
BANK_S = [0.46, 0, 2.3, 0.69]
BANK_A = [0.11, 0.07, 0.69, 0.14]
BANK_Z_RIVER = [1.43, 0.06, 0.14, 0]
BANK = 3  # bank is the fourth token in both


# ---------------------------------------------------------------- the oracle


def oracle(name: str) -> dict[str, np.ndarray]:
    """Every matrix of a one-head, unmasked, position-free dot-product scenario, from its YAML."""
    doc = yaml.safe_load((ROOT / "scenarios" / f"{name}.yaml").read_text(encoding="utf-8"))
    assert doc.get("positional", "none") == "none" and doc.get("mask", "none") == "none"
    assert doc.get("heads", 1) == 1 and "source" not in doc and doc.get("score", "dot") == "dot"
    E = np.array(doc["embeddings"], dtype=np.float64)
    W = {k: np.array(doc[k], dtype=np.float64) for k in ("W_Q", "W_K", "W_V")}
    X = E + 0.0  # P = 0
    Q, K, V = X @ W["W_Q"], X @ W["W_K"], X @ W["W_V"]
    QKT = np.array([[sum(q[t] * k[t] for t in range(len(q))) for k in K] for q in Q])
    S = QKT / np.sqrt(Q.shape[1])
    e = np.exp(S - S.max(axis=1, keepdims=True))
    A = e / e.sum(axis=1, keepdims=True)
    return {"tokens": doc["tokens"], "E": E, "P": np.zeros_like(E), "X": X, "Q": Q, "K": K, "V": V,
            "QK^T": QKT, "S": S, "A": A, "Z": A @ V, **W}


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=0, atol=1e-12))


def differing_rows(a: np.ndarray, b: np.ndarray) -> list[int]:
    return [int(i) for i in np.flatnonzero((np.abs(a - b) > 1e-9).any(axis=1))]


@pytest.fixture(scope="module")
def ora():
    return oracle("river_bank"), oracle("savings_bank")


@pytest.fixture(scope="module")
def pair():
    return compare_pair(load_scenario("river_bank"), load_scenario("savings_bank"))


MATRICES = ("E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z")


# ---------------------------------------------------------------- the numbers


def test_the_seed_holds_in_both_bank_rows(ora):
    river, savings = ora
    for side in (river, savings):
        assert side["tokens"][BANK] == "bank"
        np.testing.assert_allclose(side["S"][BANK], BANK_S, atol=5e-3)
        np.testing.assert_allclose(side["A"][BANK], BANK_A, atol=6e-3)
    np.testing.assert_allclose(river["Z"][BANK], BANK_Z_RIVER, atol=6e-3)
    for key in ("W_Q", "W_K", "W_V"):  # "the same W_Q, W_K, W_V" (the scenarios' own claim)
        assert np.array_equal(river[key], savings[key]), key
    assert np.array_equal(river["E"][BANK], savings["E"][BANK])


def test_each_stage_is_marked_as_the_oracle_finds_it(pair, ora):
    river, savings = ora
    marks = {p.stage.key: p.diff for p in pair.stages}
    assert list(marks) == [s.key for s in pair.left.stages if s.key in marks]  # the walk's order
    assert set(marks) == {"tokens", *MATRICES}  # no mask, one head, no W_O
    for key in MATRICES:
        d = marks[key]
        if same(river[key], savings[key]):
            assert d.status in (IDENTICAL, ROUNDING) and d.rows == () and d.same, key
        else:
            assert d.status == DIFFERENT and not d.same, key
            assert list(d.rows) == differing_rows(river[key], savings[key]), key
            assert d.max_diff == pytest.approx(np.abs(river[key] - savings[key]).max(), abs=1e-12), key
            r, c = d.max_at
            assert abs(river[key][r, c] - savings[key][r, c]) == pytest.approx(d.max_diff, abs=1e-12)
    for p in pair.stages:
        if p.weight is not None:
            assert p.weight.status == IDENTICAL, p.weight.key
    assert marks["tokens"].status == DIFFERENT
    assert list(marks["tokens"].rows) == [i for i, (x, y) in enumerate(zip(river["tokens"], savings["tokens"]))
                                         if x != y]


def test_issue_13_s_and_a_identical_v_and_z_different(pair, ora):
    """What issue 13 says, checked against the oracle: S and A identical, V and Z different. The
    bank row of S and A is identical whatever W_K is (the same bank row, the same weights, and
    keys that score the same); whether the whole S and A are depends on the keys, so that part
    asserts only what the oracle finds, and the program must agree (previous test)."""
    river, savings = ora
    marks = {p.stage.key: p.diff for p in pair.stages}
    for key in ("S", "A"):
        assert same(river[key][BANK], savings[key][BANK])
        assert BANK not in marks[key].rows
    for key in ("V", "Z"):
        assert not same(river[key], savings[key])
        assert marks[key].status == DIFFERENT
    # V differs only where the tokens differ in meaning; Z, a mix of every V, differs in bank's row
    assert list(marks["V"].rows) == differing_rows(river["E"], savings["E"])
    assert BANK in marks["Z"].rows


def test_difference_statuses():
    a = np.array([[1.0, 2.0], [3.0, -np.inf]])
    assert difference("x", a, a.copy()).status == IDENTICAL  # −∞ meets −∞: equal
    tiny = a.copy()
    tiny[0, 1] = np.nextafter(2.0, 3.0)
    d = difference("x", a, tiny)
    assert d.status == ROUNDING and d.rows == () and d.cells == () and 0 < d.max_diff < 1e-15
    big = a.copy()
    big[1, 0] = 3.5
    d = difference("x", a, big)
    assert d.status == DIFFERENT and d.rows == (1,) and d.cells == ((1, 0),)
    assert d.max_diff == 0.5 and d.max_at == (1, 0)
    masked = a.copy()
    masked[1, 1] = 0.0
    assert difference("x", a, masked).max_diff == np.inf


def test_a_mask_on_one_side_only_adds_its_stage_in_order():
    base = "tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n"
    plain, causal = scenario_from_text(base, "p.yaml"), scenario_from_text(base + "mask: causal\n", "c.yaml")
    pair = compare_pair(plain, causal)
    keys = [p.stage.key for p in pair.stages]
    assert keys.index("S") < keys.index("S+M") < keys.index("A")
    assert {p.stage.key: p.diff.status for p in pair.stages}["S+M"] == RIGHT_ONLY
    assert pair.mask.status == DIFFERENT and pair.mask.cells == ((0, 1),)  # a may not see b
    assert [s.key for s in merged_stages(pair.right.stages, pair.left.stages)] == keys
    flipped = compare_pair(causal, plain)
    assert {p.stage.key: p.diff.status for p in flipped.stages}["S+M"] == LEFT_ONLY


# ---------------------------------------------------------------- shapes


@pytest.mark.parametrize("other, says", [("girl_bangs", "has 4 tokens, girl_bangs has 3 tokens"),
                                         ("causal_mask", "has 4 tokens, causal_mask has 3 tokens")])
def test_scenarios_of_other_shapes_cannot_be_paired(other, says):
    if load_scenario(other).n == 4:
        pytest.skip(f"{other} now has 4 tokens")
    with pytest.raises(UsageError, match=says):
        check_shapes(load_scenario("river_bank"), load_scenario(other))


def test_a_mismatch_exits_2_with_one_line():
    out = runner.invoke(app, ["compare", "river_bank", "girl_bangs"], env=ENV)
    assert out.exit_code == 2
    assert out.stderr.count("\n") == 1 and out.stdout == ""
    assert "river_bank" in out.stderr and "girl_bangs" in out.stderr and "same number of tokens" in out.stderr
    assert "Traceback" not in out.output


def test_same_tokens_other_d_model_is_refused_too(tmp_path):
    wide = tmp_path / "wide.yaml"
    wide.write_text("tokens: [by, the, river, bank]\nembeddings: [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], "
                    "[0, 0, 1, 0, 0], [0, 0, 0, 1, 0]]\nW_Q: {random: {seed: 1, rows: 5, cols: 4}}\n"
                    "W_K: {random: {seed: 2, rows: 5, cols: 4}}\nW_V: {random: {seed: 3, rows: 5, cols: 4}}\n",
                    encoding="utf-8")
    out = runner.invoke(app, ["compare", "river_bank", "-s", str(wide)], env=ENV)
    assert out.exit_code == 2 and out.stderr.count("\n") == 1
    assert "river_bank has d_model 4, wide has d_model 5" in out.stderr


@pytest.mark.parametrize("args, says", [
    (["river_bank", "savings_bank", "girl_bangs"], "not 3"),
    (["river_bank", "savings_bank", "-m", "scaled", "-m", "uniform"], "one --mode"),
    (["river_bank", "savings_bank", "--head", "2"], "--head 2"),
    (["river_bank", "savings_bank", "--amplify", "0"], "--amplify"),
])
def test_other_mistakes_with_two_scenarios_exit_2(args, says):
    out = runner.invoke(app, ["compare", *args], env=ENV)
    assert out.exit_code == 2, out.output
    assert out.stderr.count("\n") == 1 and says in out.stderr


# ---------------------------------------------------------------- JSON


def test_json_contract(ora):
    river, savings = ora
    out = runner.invoke(app, ["compare", "river_bank", "savings_bank", "--format", "json"], env=ENV)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert set(data) == {"left", "right", "mode", "amplify", "stages", "weights", "mask"}
    assert data["left"] == {"scenario": "river_bank", "tokens": river["tokens"], "key_tokens": river["tokens"]}
    assert data["right"]["scenario"] == "savings_bank" and data["right"]["tokens"] == savings["tokens"]
    assert data["mode"] == "scaled" and data["amplify"] == 1.0
    assert list(data["stages"]) == ["tokens", *MATRICES]
    tokens = data["stages"]["tokens"]
    assert tokens["left"] == river["tokens"] and tokens["right"] == savings["tokens"]
    for key in MATRICES:
        entry = data["stages"][key]
        assert set(entry) == {"status", "rows", "cells", "max_difference", "max_at", "left", "right",
                              "reordered"}
        assert entry["reordered"] is False  # the tokens differ, not only in order
        np.testing.assert_allclose(entry["left"], river[key], atol=1e-12)
        np.testing.assert_allclose(entry["right"], savings[key], atol=1e-12)
        if same(river[key], savings[key]):
            assert entry["status"] in ("identical", "rounding") and entry["cells"] == []
        else:
            assert entry["status"] == "different"
            assert entry["rows"] == differing_rows(river[key], savings[key])
            cells = np.argwhere(np.abs(river[key] - savings[key]) > 1e-9).tolist()
            assert entry["cells"] == cells
            assert entry["max_difference"] == pytest.approx(np.abs(river[key] - savings[key]).max(), abs=1e-12)
    assert {k: v["status"] for k, v in data["weights"].items()} == dict.fromkeys(("W_Q", "W_K", "W_V"), "identical")
    np.testing.assert_array_equal(data["weights"]["W_K"]["left"], river["W_K"])
    assert data["mask"]["status"] == "identical" and data["mask"]["left"] == [[True] * 4] * 4


def test_json_matrices_keep_full_precision(pair):
    data = pair_data(pair)
    export = json.loads(runner.invoke(app, ["export", "savings_bank", "-f", "json"], env=ENV).stdout)
    for key in MATRICES:
        assert data["stages"][key]["right"] == export["stages"][key], key


def test_one_name_still_compares_modes():
    data = json.loads(runner.invoke(app, ["compare", "savings_bank", "-f", "json"], env=ENV).stdout)
    assert data["scenario"] == "savings_bank" and list(data["modes"]) == ["scaled", "unscaled", "uniform"]


# ---------------------------------------------------------------- text


def invoke(*args: str, columns: int = 80, lang: str = "en") -> str:
    out = runner.invoke(app, ["compare", *args, "--lang", lang], env=dict(ENV, COLUMNS=str(columns)))
    assert out.exit_code == 0, out.output
    return out.stdout


def summary_items(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(label))
    return [item.strip() for item in line[len(label):].split(",")]


def test_text_states_what_is_identical_and_what_differs(ora):
    river, savings = ora
    out = invoke("river_bank", "savings_bank", columns=200)
    identical = [k for k in MATRICES if same(river[k], savings[k])]
    different = [k for k in MATRICES if k not in identical]
    symbol = {"QK^T": "QKᵀ"}
    got_same = summary_items(out, "Identical in both:")
    got_diff = summary_items(out, "Different:")
    assert sorted(got_same) == sorted([symbol.get(k, k) for k in identical] + ["W_Q", "W_K", "W_V"])
    assert sorted(got_diff) == sorted(["tokens"] + [symbol.get(k, k) for k in different])
    # each stage's block says it too, and where: V differs in the river / savings row
    blocks = re.split(r"\nStage \d+ / \d+ {3}", out)
    verdicts = {block.split("\n")[0].split()[0]: block.split("\n")[1] for block in blocks[1:]}
    assert verdicts["S"].startswith("= identical") == same(river["S"], savings["S"])
    assert verdicts["A"].startswith("= identical") == same(river["A"], savings["A"])
    row = differing_rows(river["V"], savings["V"])[0]
    assert verdicts["V"].startswith("≠ different") and f"row {row + 1} (river / savings)" in verdicts["V"]
    assert verdicts["Z"].startswith("≠ different")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_80_columns_fit_and_keep_numbers_whole(lang):
    out = invoke("river_bank", "savings_bank", columns=80, lang=lang)
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert "…" not in out  # four tokens: nothing is hidden, so nothing may be cut
    for number in ("2.3000", "0.6854", "1.4337"):  # bank's query, its weight on river, Z[bank, 0]
        assert number in out
    # too narrow for two 4-column tables side by side: one above the other, each titled
    both = [line for line in out.splitlines() if "river_bank" in line and "savings_bank" in line]
    assert len(both) == 2  # only the heading and the tokens table's header name both
    assert sum(line.split() == ["river_bank"] for line in out.splitlines()) == len(MATRICES)  # titles


def test_wide_terminal_puts_the_two_matrices_side_by_side():
    out = invoke("river_bank", "savings_bank", columns=200)
    lines = out.splitlines()
    assert max(cell_len(line) for line in lines) <= 200
    titled = [line for line in lines if line.startswith("river_bank ") and "savings_bank" in line
              and "beside" not in line]
    assert len(titled) == len(MATRICES)  # every matrix stage: one line holds both titles


def test_chinese_has_no_untranslated_labels(ora):
    out = invoke("river_bank", "savings_bank", columns=100, lang="zh")
    for word in ("两者完全相同", "两者不同", "阶段", "最大差值", "token 序列"):
        assert word in out
    # Remove what the scenarios themselves spell in English (names, tokens, titles), the stage
    # symbols and W_Q etc.; no English word may be left.
    rest = out
    for scn in ("river_bank", "savings_bank"):
        title = load_scenario(scn).title
        rest = rest.replace(title["zh"] if isinstance(title, dict) else title, " ")
        rest = rest.replace(scn, " ")
    for token in {*ora[0]["tokens"], *ora[1]["tokens"]}:
        rest = re.sub(rf"\b{token}\b", " ", rest)
    rest = re.sub(r"W_[QKVO]|QKᵀ|float64", " ", rest)
    rest = rest.replace("token", " ")  # the Chinese lessons say token too (seed 002: 「每个 token」)
    words = set(re.findall(r"[A-Za-z]{2,}", rest))
    assert words == set(), words


def test_pair_strings_are_translated():
    en = tomllib.loads((ROOT / "attnwalk" / "text" / "en.toml").read_text(encoding="utf-8"))["pair"]
    zh = tomllib.loads((ROOT / "attnwalk" / "text" / "zh.toml").read_text(encoding="utf-8"))["pair"]
    assert set(en) == set(zh)
    for key, value in zh.items():
        english = re.sub(r"\{\w+\}|float64|token", "", value)
        assert not re.search(r"[A-Za-z]{3,}", english), (key, value)
        assert value != en[key]


def test_ascii_and_no_colour():
    out = invoke("river_bank", "savings_bank", "--ascii")
    assert "≠" not in out and "!=" in out and "\x1b" not in out
    assert not set("─│╭ᵀ▲…") & set(out)


def test_two_files_and_a_name_with_a_file(tmp_path):
    text = (ROOT / "scenarios" / "savings_bank.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    doc["W_V"] = [[2 * x for x in row] for row in doc["W_V"]]  # every value twice as large
    doubled = tmp_path / "doubled.yaml"
    doubled.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    original = tmp_path / "savings.yaml"
    original.write_text(text, encoding="utf-8")
    for args in (["-s", str(original), "-s", str(doubled)], ["savings_bank", "-s", str(doubled)],
                 ["savings_bank", str(doubled)]):
        data = json.loads(runner.invoke(app, ["compare", *args, "-f", "json"], env=ENV).stdout)
        assert data["weights"]["W_V"]["status"] == "different"
        assert data["weights"]["W_Q"]["status"] == data["weights"]["W_K"]["status"] == "identical"
        assert data["stages"]["A"]["status"] == "identical"  # the weights never read V
        V = np.array(data["stages"]["V"]["left"])
        assert data["stages"]["V"]["rows"] == [i for i in range(4) if np.abs(V[i]).max() > 0]
        np.testing.assert_allclose(data["stages"]["Z"]["right"], 2 * np.array(data["stages"]["Z"]["left"]))


def render(pair, width: int, lang: str = "en") -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, highlight=False, emoji=False)
    console.print(pair_view(pair, ViewOptions(width=width, lang=lang)))
    return console.file.getvalue()


def test_multi_head_marks_its_head_and_cross_shapes_are_checked():
    base = ("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nheads: 2\nW_Q: [[1, 0, 2, 0], [0, 1, 0, {q}]]\n"
            "W_K: [[1, 0, 1, 0], [0, 1, 0, 1]]\nW_V: [[1, 0, 5, 0], [0, 1, 0, 7]]\n")
    left, right = (scenario_from_text(base.format(q=q), f"{q}.yaml") for q in (3, 4))
    pair = compare_pair(left, right, head=0)
    marks = {p.stage.key: p.diff.status for p in pair.stages}
    assert marks["S"] == IDENTICAL  # head 1 reads columns 1–2 of W_Q, which agree
    assert compare_pair(left, right, head=1).stages[[p.stage.key for p in pair.stages].index("S")].diff.status == DIFFERENT
    assert marks["Q"] == DIFFERENT  # the full Q holds both heads
    out = render(compare_pair(left, right, head=1), 80)
    assert "head 2 / 2" in out and max(cell_len(line) for line in out.splitlines()) <= 80
