"""Predict, then see (issue 14, point 1): `run --predict` asks before S, A and Z (and S + M with a
mask) and sets the learner's answer beside the truth, answers piped on stdin one per stage.

Golden numbers are lesson 002's (女生撩刘海, ../shared/seeds/002): S[撩, 刘海] = 5.1526,
QKᵀ[撩, 刘海] = 7.2868, row 撩 of A = [0.1000, 0.1896, 0.7104], Z[撩] = [1.6145, 2.4204].
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.commands.quiz import LineAnswers
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import load_scenario
from attnwalk.text import text
from attnwalk.tutor.predict import Predictor, prediction

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for var in ("NO_COLOR", "FORCE_COLOR", "ATTNWALK_LANG"):
        monkeypatch.delenv(var, raising=False)


def walk_lines(script: str, *args: str) -> list[str]:
    result = runner.invoke(app, ["run", "girl_bangs", "--predict", "--no-pause", *args], input=script,
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_a_scripted_predict_walk_judges_s_a_and_z():
    out = walk_lines("5.15\n刘海\n1.7\n")
    verdicts = [line for line in out if line.startswith("Your prediction:")]
    assert verdicts == ["Your prediction: 5.15 · the walk: 5.1526 · right",
                        "Your prediction: 刘海 · the walk: 刘海 · right",
                        "Your prediction: 1.7 · the walk: 1.6145 · off"]
    # each question comes before its stage's screen, each verdict after it
    order = [i for i, line in enumerate(out) if line.startswith(("Predict S ", "Stage 9 / 11", "Your prediction: 5.15",
                                                                "Predict A ", "Stage 10 / 11", "Predict Z ",
                                                                "Stage 11 / 11"))]
    labels = [out[i].split()[0:2] for i in order]
    assert labels == [["Predict", "S"], ["Stage", "9"], ["Your", "prediction:"], ["Predict", "A"],
                      ["Stage", "10"], ["Predict", "Z"], ["Stage", "11"]]
    assert "What will S[撩, 刘海] be? QKᵀ[撩, 刘海] = 7.2868, d_k = 2. (±0.052)" in out


def test_a_wrong_prediction_is_diagnosed():
    out = "\n".join(walk_lines("7.2868\n女生\n\n"))  # QKᵀ itself: √d_k forgotten
    assert "Your prediction: 7.2868 · the walk: 5.1526 · off" in out
    assert "7.2868 is what you get without dividing by √d_k." in out
    assert "Your prediction: 女生 · the walk: 刘海 · off" in out
    assert "No prediction; the walk: 1.6145" in out  # an empty line skips


def test_in_the_unscaled_mode_the_question_names_the_mode_and_the_scaled_answer_is_diagnosed():
    """A new user in the unscaled mode answered S with the scaled 5.1526 and was told only "off":
    the question now names the mode, and the scaled value is named as the mistake it is."""
    out = "\n".join(walk_lines("5.1526\n\n\n", "--mode", "unscaled"))
    assert "What will S[撩, 刘海] be in the unscaled mode? QKᵀ[撩, 刘海] = 7.2868, d_k = 2." in out
    assert "Your prediction: 5.1526 · the walk: 7.2868 · off" in out
    assert "5.1526 is the scaled value, divided by √d_k. This walk is in the unscaled mode" in out
    zh = "\n".join(walk_lines("5.1526\n\n\n", "--mode", "unscaled", "--lang", "zh"))
    assert "在不缩放模式下，S[撩, 刘海] 会是多少？QKᵀ[撩, 刘海] = 7.2868，d_k = 2。" in zh
    assert "5.1526 是除以 √d_k 之后的值。现在是不缩放模式" in zh
    scaled = "\n".join(walk_lines("7.2868\n\n\n"))
    assert "is the scaled value" not in scaled and "without dividing by √d_k" in scaled


def test_predictions_speak_chinese_and_stop_when_input_ends():
    out = "\n".join(walk_lines("5.1526\n", "--lang", "zh"))
    assert "你的预测：5.1526 · 实际：5.1526 · 对了" in out
    assert out.count("先预测一下") == 2  # S asked and answered; A asked, then input ended
    assert "阶段 11 / 11" in out  # the walk still prints to its end


def test_with_a_mask_s_plus_m_is_predicted_too():
    walk = compute(load_scenario("causal_mask"))
    asked = [k for k in ("S", "S+M", "A", "Z") if prediction(walk, k) is not None]
    assert asked == ["S", "S+M", "A", "Z"]
    q = prediction(walk, "S+M")
    row = walk.scenario.focus if walk.scenario.focus is not None else walk.scenario.n - 1
    assert q.answer == walk.scenario.n - 1 - row  # a causal mask hides every later key
    con = Console(width=200, file=io.StringIO(), color_system=None)
    p = Predictor(walk, con, LineAnswers(io.StringIO(f"{q.answer}\n"), con))
    p.before("S+M", 0)
    p.after("S+M", 0)
    assert p.judged == [("S+M", True)]
    assert prediction(compute(load_scenario("girl_bangs")), "S+M") is None  # no mask, no S + M


def test_without_predict_nothing_is_asked():
    result = runner.invoke(app, ["run", "girl_bangs", "--no-pause"], input="5\n")
    assert "Predict" not in result.stdout and "Your prediction" not in result.stdout
    assert text("en").t("quiz.predict.intro") not in result.stdout


def test_the_installed_program_predicts_in_a_real_terminal(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    import os
    import shutil
    import sys

    exe = shutil.which("attnwalk")
    program = [exe] if exe else [sys.executable, "-m", "attnwalk"]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "ATTNWALK_LANG")}
    env.update(NO_COLOR="1", LANG="C.UTF-8", XDG_STATE_HOME=str(tmp_path / "state"))
    child = pexpect.spawn(program[0], program[1:] + ["run", "girl_bangs", "--predict"], env=env,
                          encoding="utf-8", timeout=20, dimensions=(40, 100))
    child.expect(r"q(?:\x1b\[[0-9;]*[A-Za-z])* quit")  # the footer: the walk reads keys now
    child.send("n" * 8)  # to the QKᵀ screen; the next step is S
    child.expect_exact("What will S[撩, 刘海] be?")
    child.send("5.15\r")
    child.expect_exact("Your prediction: 5.15 · the walk: 5.1526 · right")
    child.send("n")
    child.expect_exact("Which key will 撩 attend to most?")
    child.send("女生\r")
    child.expect_exact("Your prediction: 女生 · the walk: 刘海 · off")
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
