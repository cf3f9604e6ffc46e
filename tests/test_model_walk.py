"""`attnwalk model`: a real layer walked as a scenario (commands/model.py, layer/headfocus.py).

The layers are small random ones built by tests/modelwalk_layers.py as the models package hands
them over; every stage's numbers are checked against numpy written here, apart from attnwalk's
code, and the command is driven through the CLI with the loader replaced by those layers.
"""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.commands import model as model_command
from attnwalk.commands.model import model_data, scenario_from_model
from attnwalk.layer import headfocus
from attnwalk.layer.axes import axes
from attnwalk.layer.walk import compute
from attnwalk.render.headmaps import looks_label
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import explain_view, walk_steps
from attnwalk.text import stage_text
from modelwalk_layers import random_layer

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
MODEL_STAGES = ("E_seg", "E_sum", "H", "LN_stats", "glance", "R", "Y")


# -- an oracle, written apart from attnwalk ----------------------------------------------------------


def layer_norm(x, gamma, beta, eps):
    mu = x.mean(axis=1, keepdims=True)
    sigma = np.sqrt(x.var(axis=1, keepdims=True) + eps)
    return (x - mu) / sigma * gamma + beta, mu[:, 0], sigma[:, 0]


def softmax_rows(S):
    e = np.exp(S - S.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def oracle(layer) -> dict:
    """Every number of the layer as the model computes it, head by head."""
    out = {"E_sum": layer.E_tok + layer.E_pos + (layer.E_seg if layer.E_seg is not None else 0)}
    x_in = out["E_sum"] if layer.layer == 0 else layer.norm_in.x
    out["X"], mu, sigma = layer_norm(x_in, layer.norm_in.gamma, layer.norm_in.beta, layer.norm_in.eps)
    out["LN_stats"] = np.stack([mu, sigma], axis=1)
    H, d = layer.info.n_heads, layer.info.d_head
    n = out["X"].shape[0]
    heads = []
    for h in range(H):
        cols = slice(h * d, (h + 1) * d)
        Q = out["X"] @ layer.W_Q[:, cols] + layer.b_Q[cols]
        K = out["X"] @ layer.W_K[:, cols] + layer.b_K[cols]
        V = out["X"] @ layer.W_V[:, cols] + layer.b_V[cols]
        S = Q @ K.T / np.sqrt(d)
        if layer.causal:
            S = np.where(np.tril(np.ones((n, n), dtype=bool)), S, -np.inf)
        A = softmax_rows(S)
        heads.append({"Q": Q, "K": K, "V": V, "A": A, "Z": A @ V})
    out["heads"] = heads
    out["O"] = np.concatenate([hd["Z"] for hd in heads], axis=1) @ layer.W_O + layer.b_O
    out["R"] = (out["X"] if layer.norm_after is not None else x_in) + out["O"]
    if layer.norm_after is not None:
        out["Y"] = layer_norm(out["R"], *layer.norm_after)[0]
    return out


LAYERS = [("bert", 0), ("bert", 2), ("gpt2", 0), ("gpt2", 1)]


@pytest.mark.parametrize("family,index", LAYERS)
def test_every_stage_agrees_with_numpy(family: str, index: int) -> None:
    layer = random_layer(family, layer=index, seed=3)
    walk = compute(scenario_from_model(layer))
    want = oracle(layer)
    for key in ("E_sum", "LN_stats", "X", "O", "R") + (("Y",) if family == "bert" else ()):
        np.testing.assert_allclose(walk.mats[key], want[key], rtol=0, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(walk.mats["X"], layer.X, rtol=0, atol=1e-12)  # the models package's X
    for h, head in enumerate(want["heads"]):
        for key in ("Q", "K", "V", "A", "Z"):
            np.testing.assert_allclose(walk.heads[h].mats[key], head[key], rtol=0, atol=1e-12,
                                       err_msg=f"head {h + 1} {key}")
    glance = walk.mats["glance"]  # (n, h): each head's entropy per query, in bits
    for h, head in enumerate(want["heads"]):
        A = head["A"]
        bits = -np.sum(np.where(A > 0, A * np.log2(np.where(A > 0, A, 1)), 0), axis=1)
        np.testing.assert_allclose(glance[:, h], bits, atol=1e-12)
    keys = [s.key for s in walk.stages]
    assert ("E_seg" in keys) == (family == "bert") and ("Y" in keys) == (family == "bert")
    assert ("H" in keys) == (index > 0) and ("S+M" in keys) == (family == "gpt2")


def test_what_the_text_says_about_the_biases_holds() -> None:
    """K's text: b_K never changes A; V's: every output row receives b_V whole."""
    layer = random_layer("bert", seed=5)
    walk = compute(scenario_from_model(layer))
    d = layer.info.d_head
    from dataclasses import replace

    no_bk = compute(scenario_from_model(replace(layer, b_K=np.zeros_like(layer.b_K))))
    no_bv = compute(scenario_from_model(replace(layer, b_V=np.zeros_like(layer.b_V))))
    for h in range(layer.info.n_heads):
        np.testing.assert_allclose(no_bk.heads[h].mats["A"], walk.heads[h].mats["A"], atol=1e-12)
        shift = walk.heads[h].mats["Z"] - no_bv.heads[h].mats["Z"]
        np.testing.assert_allclose(shift, np.tile(layer.b_V[h * d:(h + 1) * d], (shift.shape[0], 1)),
                                   atol=1e-12)


# -- where a head looks most ------------------------------------------------------------------------

PLAIN = (False,) * 5


def one_hot(tops: list[int]) -> np.ndarray:
    A = np.full((len(tops), 5), 0.05)
    for i, j in enumerate(tops):
        A[i, j] = 0.8
    return A


@pytest.mark.parametrize("tops,special,want", [
    ([0, 0, 1, 2, 3], PLAIN, ("previous", None, 4)),
    ([0, 1, 2, 3, 4], PLAIN, ("itself", None, 5)),
    ([1, 2, 3, 4, 4], PLAIN, ("next", None, 4)),
    ([4, 4, 4, 4, 4], (True, False, False, False, True), ("special", 4, 5)),  # [SEP]
    ([0, 0, 0, 0, 0], (True, False, False, False, True), ("special", 0, 5)),  # [CLS]
    ([0, 0, 0, 0, 0], PLAIN, ("first", 0, 3)),  # rows 0 and 1: itself, the previous token
    ([3, 3, 3, 3, 3], PLAIN, ("token", 3, 2)),  # rows 2, 3, 4: next, itself, previous
])
def test_looks_most_at_names_the_commonest_top_key(tops, special, want) -> None:
    focus = headfocus.looks_most_at(one_hot(tops), special)
    assert (focus.kind, focus.key, focus.count, focus.of) == (*want, 5)


def test_a_row_whose_top_weight_is_shared_has_no_one_key() -> None:
    A = np.full((5, 5), 0.2)  # uniform: every key ties
    A[0] = [0.4, 0.4, 0.1, 0.05, 0.05]
    focus = headfocus.looks_most_at(A, PLAIN)
    assert (focus.kind, focus.key, focus.count) == ("tie", None, 5)
    assert looks_label(focus, ("a",) * 5, ViewOptions()) == "no one key, the top weight shared (5 of 5 queries)"


def test_looks_labels_read_in_both_languages() -> None:
    labels = ("[CLS]", "the", "river", "bank", "[SEP]")
    focus = headfocus.Focus("previous", None, 4, 5)
    assert looks_label(focus, labels, ViewOptions()) == "the previous token (4 of 5 queries)"
    assert looks_label(headfocus.Focus("special", 4, 5, 5), labels, ViewOptions()) == "[SEP] (5 of 5 queries)"
    assert looks_label(headfocus.Focus("first", 0, 3, 5), labels, ViewOptions(lang="zh")) == (
        "第一个词 [CLS]（5 个查询中有 3 个）")


# -- the command ------------------------------------------------------------------------------------


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch):
    """The loader replaced by a random layer: --model gpt2 gives a GPT-2-like one, else BERT-like."""
    made = {}

    def load(sentence: str, model: str | None, layer: int):
        if not 1 <= layer <= 3:
            from attnwalk.models.data import ModelError

            raise ModelError(f"--layer {layer}: tiny has 3 layers, numbered 1 to 3")
        made["layer"] = random_layer("gpt2" if model == "gpt2" else "bert", layer=layer - 1, seed=7)
        return made["layer"]

    monkeypatch.setattr(model_command, "load_layer", load)
    return made


def invoke(*args: str, input: str | None = None, code: int = 0):
    result = runner.invoke(app, ["model", "I sat by the river banks", *args], env=ENV, input=input)
    assert result.exit_code == code, result.output
    return result


def test_the_walk_opens_with_the_model_and_the_tokenization(tiny) -> None:
    out = invoke("--no-pause").stdout
    assert "tiny-bert · layer 1 of 3 · 4 heads" in out
    assert "12,345 parameters · 48.2 KiB on disk · d_model 16 · 4 heads of 4 · vocabulary 500" in out
    assert "found: /tmp/tiny" in out
    assert "[CLS] · i · sat · by · the · river · bank · ##s · [SEP]" in out  # the pieces
    assert "i · sat · by · the · river · banks" in out  # the words
    assert "[CLS], [SEP]" in out and "banks → bank + ##s" in out
    for stage in ("Segment embeddings", "Each token's mean and spread", "Input to attention: LayerNorm",
                  "All heads at a glance", "Residual connection", "LayerNorm after attention"):
        assert stage in out
    assert "Q = X · W_Q + b_Q" in out and "O = concat · W_O + b_O" in out
    assert "These rows have 16 dimensions; the vectors show 1–3, 14–16" in out


@pytest.mark.parametrize("lang, says", [
    ("en", "tiny-bert · layer 2 of 3 · 4 heads. What the model is"),
    ("zh", "tiny-bert · 第 2 层，共 3 层 · 4 个头。模型的介绍")])
def test_the_interactive_walks_first_screen_names_the_model_and_layer(lang: str, says: str) -> None:
    """At 80 × 24 the opening panel is below the fold: the first message names the model and the
    layer, as the printed walk's first lines do."""
    from appdriver import drive

    from attnwalk.app.walk import WalkApp
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions

    opts = ViewOptions(lang=lang)
    walk = compute(model_command.scenario_from_model(random_layer("bert", layer=1, seed=7)))
    d = drive("", [], size=(80, 24), app=WalkApp(walk, opts))
    assert says in " ".join(line.strip() for line in d.screen.splitlines()), d.screen


def test_the_walk_in_chinese_and_in_ascii(tiny) -> None:
    zh = invoke("--no-pause", "--lang", "zh").stdout
    assert "tiny-bert · 第 1 层，共 3 层 · 4 个头" in zh and "分词器添加" in zh and "所有头一览" in zh
    plain = invoke("--no-pause", "--ascii").stdout
    assert plain.isascii(), sorted({ch for ch in plain if not ch.isascii()})


def test_gpt2_walks_its_mask_and_the_stream_before_ln_1(tiny) -> None:
    out = invoke("--no-pause", "--model", "gpt2", "--layer", "2").stdout
    assert "GPT-2 family" in out and "Input to attention: ln_1" in out
    assert "H = R_1 + MLP(ln_2(R_1))" in out and "R = H + O" in out
    assert "Masked scores" in out and "LayerNorm after attention" not in out


def test_head_picks_the_head_printed_in_full(tiny) -> None:
    out = invoke("--no-pause", "--head", "3").stdout
    assert "Raw scores   head 3 / 4" in out and "Raw scores   head 1 / 4" not in out
    assert "All 4 heads at a glance" in out  # the summary after the head shown in full
    assert "Worked cell: Q[bank, 9]" in out and "head 3 / 4, column 1 of its 4" in out  # its block
    assert "Worked cell: heads[bank, 3]" in out  # its entropy


def test_json_export_keeps_the_contract_for_the_chosen_head(tiny) -> None:
    data = json.loads(invoke("--format", "json", "--head", "2").stdout)
    layer = tiny["layer"]
    want = oracle(layer)
    stages = data["stages"]
    assert set(stages) >= {"E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z", "heads",
                           "E_seg", "E_sum", "LN_stats", "glance", "concat", "O", "R", "Y"}
    for key in ("Q", "K", "V", "A", "Z"):  # the chosen head's (2), as transformers would give them
        np.testing.assert_allclose(stages[key], want["heads"][1][key], atol=1e-12, err_msg=key)
        np.testing.assert_allclose(stages["heads"][3][key], want["heads"][3][key], atol=1e-12)
    assert len(stages["heads"]) == 4
    np.testing.assert_allclose(stages["X"], layer.X, atol=1e-12)
    np.testing.assert_allclose(stages["E"], layer.E_tok, atol=0)
    np.testing.assert_allclose(stages["P"], layer.E_pos, atol=0)
    assert data["tokens"] == list(layer.tokens.pieces) and data["ids"] == list(layer.tokens.ids)
    assert data["model"]["name"] == "tiny-bert" and data["model"]["layer"] == 1
    assert data["model"]["head"] == 2 and data["model"]["n_params"] == 12345
    assert data["tokenization"]["special"][0] is True and data["tokenization"]["word_of"][7] == 5
    assert set(data["weights"]) >= {"W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O",
                                    "LN_in", "LN_after"}
    np.testing.assert_array_equal(data["weights"]["b_Q"], layer.b_Q)
    assert data["mask"] == [[True] * 9] * 9


def test_csv_markdown_and_latex_hold_the_model_stages(tiny) -> None:
    rows = list(csv.DictReader(io.StringIO(invoke("--format", "csv").stdout)))
    assert {"E_seg", "E_sum", "LN_stats", "glance", "R", "Y"} <= {r["stage"] for r in rows}
    markdown = invoke("--format", "markdown").stdout
    assert "Each token's mean and spread" in markdown and "R = X + O" in markdown
    assert "All heads at a glance" in invoke("--format", "latex").stdout


@pytest.mark.parametrize("family,index", LAYERS)
def test_every_model_stage_is_walked_and_explained(family: str, index: int) -> None:
    """As tests/test_stage_definitions.py checks the built-in lessons' stages."""
    walk = compute(scenario_from_model(random_layer(family, layer=index)))
    steps = [s for s, _ in walk_steps(walk)]
    opts = ViewOptions(width=120)
    from rich.console import Console

    for stage in walk.stages:
        assert stage in steps
        assert stage_text("en", stage, walk.scenario, walk.mode)
        if stage.compute is None:
            continue
        M = walk.matrix(stage.key)
        cols = axes(walk, stage)[1]  # the column as its label names it (heads: 1 … h)
        console = Console(width=120, file=io.StringIO(), color_system=None)
        console.print(explain_view(walk, stage.key, "2", cols[1], 1, opts))
        assert f"= {M[1, 1]:.4f}".replace("-0.0000", "0.0000") in \
            console.file.getvalue().replace("-0.0000", "0.0000"), stage.key
    assert {s.key for s in walk.stages} & set(MODEL_STAGES)


def test_compare_shows_the_modes_for_a_real_head(tiny) -> None:
    out = invoke("--compare", "--head", "2").stdout
    for mode in ("scaled", "unscaled", "uniform"):
        assert mode in out
    assert "head 2" in out.lower()


def test_quiz_asks_about_the_layer(tiny) -> None:
    result = invoke("--quiz", "--count", "2", input="1\n1\n")
    assert "2" in result.stdout


@pytest.mark.parametrize("args,message", [
    (("--layer", "0"), "--layer 0: layers are numbered from 1"),
    (("--layer", "4"), "--layer 4: tiny has 3 layers"),
    (("--head", "5"), "--head 5: tiny-bert L1 has 4 heads, numbered from 1: give 1 to 4"),
    (("--quiz", "--compare"), "give at most one of --compare, --quiz and --decode"),
    (("--compare", "--format", "latex"), "--compare --format latex: compare is written as json only"),
    (("--quiz", "--format", "csv"), "--quiz --format csv: quiz is written as json or markdown only"),
    (("-o", "x.json"), "--output writes what --format prints: add --format"),
    (("--count", "2"), "--count sets how many questions --quiz asks: add --quiz"),
])
def test_a_bad_option_is_one_line_and_exit_2(tiny, args, message) -> None:
    result = invoke(*args, code=2)
    assert message in result.output and "Traceback" not in result.output


def test_model_data_is_the_walks_own_numbers() -> None:
    walk = compute(scenario_from_model(random_layer("gpt2", seed=2)))
    data = model_data(walk, 0)
    np.testing.assert_array_equal(data["stages"]["A"], walk.heads[0].mats["A"])
    assert data["model"]["family"] == "gpt2" and "LN_after" not in data["weights"]


def test_the_quiz_writes_the_projections_with_their_biases() -> None:
    from attnwalk.scenario.load import load_scenario
    from attnwalk.tutor.questions import questions

    asked = {q.topic: q for q in questions(compute(scenario_from_model(random_layer("bert"))), "en")}
    assert asked["params"].shown.endswith(") W_Q and b_Q are learned in training; Q = X · W_Q + b_Q is computed for each input")
    assert "K = X · W_K + b_K" in asked["qkv"].hint
    lesson = {q.topic: q for q in questions(compute(load_scenario("girl_bangs")), "en")}
    assert lesson["params"].shown.endswith(") W_Q is learned in training; Q = X · W_Q is computed for each input")


def test_roberta_positions_and_token_type_are_said_as_it_numbers_them(tiny) -> None:
    walk = compute(scenario_from_model(random_layer("bert", model_type="roberta")))
    opts = ViewOptions(width=200)
    from rich.console import Console

    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(explain_view(walk, "P", "2", "1", 1, opts))
    shown = console.file.getvalue()
    assert "W_pos[1]" not in shown and "start just after the padding id's" in shown
    assert walk.stage("P").formula_in(walk.scenario) == "P = W_pos[pos_ids]"
    assert stage_text("en", walk.stage("E_seg"), walk.scenario) == "Token-type embedding"
    assert stage_text("en", walk.stage("P"), walk.scenario, field="what").startswith(
        "P holds one learned vector per position, rows of")
    bert = compute(scenario_from_model(random_layer("bert")))
    assert bert.stage("P").formula_in(bert.scenario) == "P = W_pos[0 … n−1]"
    assert stage_text("en", bert.stage("E_seg"), bert.scenario) == "Segment embeddings"


def test_format_says_how_compare_quiz_and_decode_are_written_and_o_where(tiny, tmp_path: Path) -> None:
    # --compare --format json is compare's JSON contract (it was refused as a clash)
    data = json.loads(invoke("--compare", "--format", "json", "--head", "2").stdout)
    assert data["head"] == 2 and set(data["modes"]) == {"scaled", "unscaled", "uniform"}
    # -o writes what --format prints, for each of them (--decode ignored it: 746 KB on stdout)
    for args, name in ((("--model", "gpt2", "--decode", "--format", "json"), "steps.json"),
                       (("--compare", "--format", "json"), "compare.json"),
                       (("--quiz", "--format", "markdown"), "quiz.md"), (("--format", "csv"), "layer.csv")):
        target = tmp_path / name
        result = invoke(*args, "-o", str(target))
        assert result.stdout == "" and target.stat().st_size > 100, args
    assert json.loads((tmp_path / "steps.json").read_text())["steps"][0]["t"] == 1
    assert (tmp_path / "quiz.md").read_text().startswith("# Quiz")


def test_y_cell_divides_by_the_sigma_it_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    # MiniLM's Y cell printed σ = √(0.31504 + 1e-12) = 0.56128, then divided by 0.56129 (σ's
    # unrounded 0.5612866): the cell's σ and μ are the ones its own lines arrive at. This layer
    # and precision printed σ = 1.6348 and divided by 1.6349 before the fix.
    monkeypatch.setattr(model_command, "load_layer", lambda s, m, l: random_layer("bert", layer=l - 1, seed=2))
    out = invoke("--no-pause", "--precision", "3").stdout
    cell = out[out.index("Worked cell: Y["):]
    sigma = re.search(r"σ = √\(var \+ ε\) = √\([^)]*\) = (-?[\d.]+)", cell).group(1)
    mu = re.search(r"μ = [-\d.]+ / \d+ = (-?[\d.]+)", cell).group(1)
    y = re.search(r"Y\[[^\]]+\] = \((-?[\d.]+) − \(?(-?[\d.]+)\)?\) / (-?[\d.]+) ×", cell)
    assert (y.group(2), y.group(3)) == (mu, sigma)
