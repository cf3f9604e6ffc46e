"""`attnwalk grad` and `attnwalk train` as a learner and a script use them: the printed backward
walk and its worked cells, the two lessons' claims with their own numbers, the JSON contracts, and
what is refused (no target, a run too costly, gradient descent that overflows) in one line."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.layer.gradwalk import grad_stages
from attnwalk.scenario.load import load_scenario
from attnwalk.text import stage_text, text

ENV = {"COLUMNS": "100", "NO_COLOR": "1"}


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env=ENV)


def ok(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


def refused(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


# -- the printed backward walk -------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_grad_prints_every_screen_from_the_loss_back_to_the_weights(lang):
    out = ok("grad", "backprop", "--no-pause", "--lang", lang)
    scn = load_scenario("backprop")
    stages = grad_stages(scn)
    keys = [s.key for s in stages]
    assert keys == ["L", "dZ", "dV", "dA", "dS", "dQK^T", "dK", "dQ", "dW_V", "dW_K", "dW_Q", "dX"]
    header = "Stage {} / {}" if lang == "en" else "阶段 {} / {}"
    starts = [out.index(header.format(i, len(keys))) for i in range(1, len(keys) + 1)]
    assert starts == sorted(starts)
    for stage in stages:
        assert stage_text(lang, stage, scn) in out
    assert "∂L/∂(QKᵀ) = ∂L/∂S / √d_k" in out and "∂L/∂K = ∂L/∂(QKᵀ)ᵀ · Q" in out
    assert "∂L/∂X = ∂L/∂Q · W_Qᵀ + ∂L/∂K · W_Kᵀ + ∂L/∂V · W_Vᵀ" in out


def test_the_worked_cells_apply_the_chain_rule_with_the_lessons_numbers():
    out = ok("grad", "backprop", "--no-pause")
    assert "−1 / A[bank, river] = −1 / 0.6854 = -1.4590" in out  # the loss's own part of ∂L/∂A
    assert "L_bank = −log A[bank, river] = −log 0.68542 = 0.37772" in out
    assert "∂L/∂S[bank, river] / √d_k = -0.3146 / 2.0000 = -0.1573" in out
    assert "∂L/∂(QKᵀ)[:, bank] · Q[:, geography]" in out  # K's gradient reads bank's column
    assert re.search(r"from Q: -0\.2831\d*", out) and re.search(r"from K: 0\.1575\d*|from K: 0\.1576\d*", out)


def test_the_loss_is_the_sum_of_the_rows_shares_as_they_are_printed():
    # one asked row: L is its L_i, digit for digit; an output target: every row's share, added up
    out = squeeze(ok("grad", "backprop", "--no-pause"))
    assert "L_bank=−logA[bank,river]=−log0.68542=0.37772L=Σ_iL_i=0.37772" in out
    out = squeeze(ok("grad", "saturation", "--no-pause"))
    shares = re.search(r"L=Σ_iL_i=((?:\d\.\d+\+)+\d\.\d+)=(\d\.\d+)", out)
    terms = [float(x) for x in shares.group(1).split("+")]
    assert len(terms) == 4 and round(sum(terms), 5) == float(shares.group(2))


def squeeze(s: str) -> str:
    return re.sub(r"[\s\u2500-\u257f]", "", s)  # wrapped lines and panel borders joined up


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_masked_cell_is_exactly_zero_and_the_text_says_why(lang):
    out = ok("grad", "saturation", "--no-pause", "--lang", lang)
    screen = out[out.index("∂L/∂S  "):out.index("∂L/∂(QKᵀ)  ")]
    assert squeeze(text(lang).t("grad.masked")) in squeeze(screen)
    data = json.loads(ok("grad", "saturation", "--format", "json"))
    dS, allowed = np.array(data["grads"]["S"]), load_scenario("saturation").allowed
    assert np.all(dS[~allowed] == 0.0) and np.all(dS[1:][allowed[1:]] != 0.0)


def test_uniform_mode_says_no_gradient_reaches_the_scores():
    out = ok("grad", "saturation", "--no-pause", "--mode", "uniform")
    assert "Gradient of the scores: none" in out
    assert "∂L/∂S = 0" in out


def test_several_heads_show_each_heads_share_then_the_full_width(tmp_path):
    from attnwalk.scenario.builtins import builtin_path

    scn = load_scenario("grouped_query")
    path = tmp_path / "gqa.yaml"
    source = builtin_path("grouped_query").read_text(encoding="utf-8")
    rows = scn.W_O.shape[1] if scn.W_O is not None else scn.heads * scn.d_v
    target = "[" + ", ".join("[" + ", ".join(["0.5"] * rows) + "]" for _ in range(scn.n)) + "]"
    path.write_text(source + f"\ntarget: {{output: {target}}}\n", encoding="utf-8")
    keys = [s.key for s in grad_stages(load_scenario(str(path)))]
    assert keys.index("dK_h") < keys.index("dK") and keys.index("dQ_h") < keys.index("dQ")
    out = ok("grad", str(path), "--no-pause", "--head", "all")
    assert "∂L/∂K = [∂L/∂K_1 + ∂L/∂K_2 | ∂L/∂K_3 + ∂L/∂K_4]" in out  # the heads that share a K/V head, summed
    data = json.loads(ok("grad", str(path), "--format", "json"))
    assert len(data["grads"]["heads"]) == scn.heads
    assert np.array(data["grads"]["K"]).shape == (scn.n, scn.W_K.shape[1])  # g K/V heads wide, not h


# -- the lessons ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name, mode", [("backprop", "scaled"), ("backprop", "unscaled"),
                                        ("saturation", "scaled"), ("saturation", "unscaled")])
def test_trains_losses_never_rise_on_the_lessons_at_their_default_step(name, mode):
    data = json.loads(ok("train", name, "--mode", mode, "--format", "json"))
    losses = [s["loss"] for s in data["steps"]]
    target = load_scenario(name).settings["target"]
    assert len(losses) == target.steps + 1 and data["lr"] == target.lr
    assert all(b <= a for a, b in zip(losses, losses[1:])), losses


def test_the_saturated_unscaled_layer_barely_learns_while_the_scaled_one_does():
    data = json.loads(ok("train", "saturation", "--compare", "--format", "json"))
    fall = {mode: run["steps"][0]["loss"] - run["steps"][-1]["loss"] for mode, run in data["modes"].items()}
    assert fall["scaled"] > 0.3  # the seed's claim, shown by learning: 0.4439 → 0.0313
    assert 0 <= fall["unscaled"] < fall["scaled"] / 10  # the bar; it is ~1e-8 of it
    first = data["modes"]["unscaled"]["steps"][0]["A"]
    assert min(row[0] for row in first) > 0.9999  # saturated from the start: every row on <s>


def test_backprop_moves_w_q_and_w_k_but_never_w_v():
    data = json.loads(ok("grad", "backprop", "--format", "json"))
    grads = data["grads"]
    assert not np.any(grads["W_V"]) and np.any(grads["W_Q"]) and np.any(grads["W_K"])
    assert data["loss"] == pytest.approx(-np.log(0.685417926400983))
    trained = json.loads(ok("train", "backprop", "--format", "json"))
    assert trained["steps"][-1]["A"][3][2] > 0.98  # bank attends to river


def test_the_piped_training_table_shows_every_kth_step_and_both_modes():
    out = ok("train", "saturation", "--compare", "--no-pause", "--every", "20")
    rows = [line.split()[0] for line in out.splitlines() if re.match(r"\s+\d+\s+\d", line)]
    assert rows == ["0", "20", "40", "60"]
    assert "L scaled" in out and "L unscaled" in out
    assert "The unscaled layer's loss fell" in out
    out = ok("train", "backprop", "--no-pause", "--steps", "3", "--lr", "0.5", "--lang", "zh")
    assert "训练 backprop：梯度下降 3 步" in out and "A[bank, river]" in out


# -- refusals --------------------------------------------------------------------------------------


def test_a_scenario_without_a_target_is_refused_for_grad_and_train():
    for command in ("grad", "train"):
        message = refused(command, "river_bank")
        assert "has no target" in message and "target: {attend: {QUERY: KEY}}" in message


LARGE = """
tokens: {tokens}
embeddings: {{random: {{seed: 1, rows: 512, cols: 768}}}}
heads: 12
W_Q: {{random: {{seed: 2, rows: 768, cols: 768, scale: 0.036}}}}
W_K: {{random: {{seed: 3, rows: 768, cols: 768, scale: 0.036}}}}
W_V: {{random: {{seed: 4, rows: 768, cols: 768, scale: 0.036}}}}
W_O: {{random: {{seed: 5, rows: 768, cols: 768, scale: 0.036}}}}
mask: causal
target: {{output: {{random: {{seed: 6, rows: 512, cols: 768}}}}}}
"""


def test_a_run_too_costly_is_refused_from_its_shapes_before_any_work(tmp_path):
    path = tmp_path / "large.yaml"
    path.write_text(LARGE.format(tokens="[" + ", ".join(f"t{i}" for i in range(512)) + "]"), encoding="utf-8")
    message = refused("train", str(path), "--steps", "50")
    assert "billion multiply-adds" in message and "--steps" in message and f"{path}:2" in message
    assert "an export writes" in refused("grad", str(path), "--format", "json")


def test_gradient_descent_that_overflows_stops_with_one_line(tmp_path):
    path = tmp_path / "wild.yaml"
    path.write_text("tokens: [a, b]\nembeddings: [[3, 1], [1, 3]]\nW_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\n"
                    "W_V: [[1, 0], [0, 1]]\ntarget: {output: [[100, 0], [0, 100]]}\n", encoding="utf-8")
    message = refused("train", str(path), "--steps", "60", "--lr", "50", "--format", "json")
    assert "overflows float64" in message and "try --lr 5" in message


def test_train_json_is_step_zero_then_one_entry_per_step():
    data = json.loads(ok("train", "backprop", "--steps", "4", "--format", "json"))
    assert [s["step"] for s in data["steps"]] == [0, 1, 2, 3, 4]
    assert {"name", "tokens", "mode", "lr", "head", "steps"} <= set(data)
    assert np.array(data["steps"][0]["A"]).shape == (4, 4)


def test_a_vector_parameters_gradient_is_one_row_as_wide_as_its_dimension(tmp_path):
    # w_a has one number per dimension of q and k: ∂L/∂w_a is 1 × d_k, not 1 × n
    from attnwalk.scenario.builtins import builtin_path

    path = tmp_path / "additive.yaml"
    path.write_text(builtin_path("additive_score").read_text(encoding="utf-8")
                    + "\ntarget: {attend: {1: 2}}\n", encoding="utf-8")
    out = ok("grad", str(path), "--no-pause")
    screen = out[out.index("∂L/∂w_a  Gradient of w_a"):]
    assert re.search(r"shape\s+1 × \d+ = 1 × d_k", screen[:400])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_norm_lesson_walks_back_through_the_norm(lang):
    out = ok("grad", "layer_norm", "--no-pause", "--lang", lang)
    assert "∂L/∂X = (G − mean(G) − x̂ ⊙ mean(G ⊙ x̂)) / σ,  G = ∂L/∂LN(X) ⊙ γ" in out
    assert "∂L/∂γ = Σ_i ∂L/∂LN(X) ⊙ x̂" in out and "∂L/∂β = Σ_i ∂L/∂LN(X)" in out
    assert "∂L/∂LN(X) = ∂L/∂Q · W_Qᵀ + ∂L/∂K · W_Kᵀ + ∂L/∂V · W_Vᵀ" in out
    data = json.loads(ok("grad", "layer_norm", "--format", "json"))
    assert {"LN", "norm_gamma", "norm_beta"} <= set(data["grads"])
    assert np.allclose(np.sum(data["grads"]["X"], axis=1), 0.0, atol=1e-12)  # each row of ∂L/∂X sums to 0


def test_the_backward_walks_last_words_fold_at_words_and_name_the_scenario() -> None:
    """At 80 columns what follows the interactive backward walk breaks between words, never
    inside `attnwalk`, and says which scenario to train (it printed the placeholder NAME)."""
    pytest.importorskip("pexpect")
    from test_pty import ALT_OFF, finish, spawn

    child = spawn("grad", "backprop", rows=24, cols=80)
    child.expect(r"\b1 / (\d+)\b")
    last = child.match.group(1)
    child.expect(r"q(?:\x1b\[[0-9;]*[A-Za-z])* quit")
    child.send("g")
    child.expect_exact(f"(1–{last}):")
    child.send(f"{last}\r")
    child.expect(rf"\b{last} / {last}\b")
    child.send("n")
    child.expect_exact(ALT_OFF)
    assert finish(child) == 0
    after = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before.replace("\r", ""))  # Textual's mode resets
    lines = [line.strip() for line in after.split("\n") if line.strip()]
    said = " ".join(lines)
    assert "attnwalk train backprop" in said and "NAME" not in said, lines
    assert all(len(line) <= 80 for line in lines), lines
    assert not any(line.startswith("alk") or line.endswith("attnw") for line in lines), lines


def test_a_piped_backward_walk_with_predict_ends_by_summing_them_up():
    """Two predictions (∂L/∂S, ∂L/∂W_Q), both skipped with an empty line: asked, none right."""
    result = CliRunner().invoke(app, ["grad", "backprop", "--predict", "--no-pause"], input="\n\n",
                                env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("Your predictions: 0 right of 2.")
