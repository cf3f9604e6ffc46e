"""The quiz: questions from the scenario's own numbers, answers read generously, a scripted run.

Golden numbers are lesson 002's (女生撩刘海), typed in from ../shared/seeds/002; the others are
checked against tests/reference.py, an attention layer written apart from attnwalk.layer.walk.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from attnwalk.scenario.builtins import builtin_names
from attnwalk.cli import app
from attnwalk.text import text
from attnwalk.layer.walk import compute
from attnwalk.tutor.quiz import (CHOICE, LETTERS, MISTAKES, NUMBER, SHAPE, TOKEN, Question, check, unreadable,
                           parse_choice, parse_number, parse_shape, parse_token, questions,
                           tolerance)
from attnwalk.commands.quiz import LineAnswers, run_quiz
from attnwalk.scenario.model import load_scenario, scenario_from_text

import reference

runner = CliRunner()

TWO_HEADS = """
tokens: [a, b, c]
embeddings: [[1, 0], [0, 1], [1, 1]]
heads: 2
W_Q: [[1, 0, 0.5, 1], [0, 1, 1, 0]]
W_K: [[1, 0, 0, 1], [0, 1, 1, 0.5]]
W_V: [[1, 0, 1, 1], [0, 1, 0, 2]]
mask: causal
"""


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for var in ("NO_COLOR", "FORCE_COLOR", "ATTNWALK_LANG"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "state" / "attnwalk" / "progress.json"


def walk_of(name: str):
    return compute(load_scenario(name), "scaled")


def right_answer(q: Question) -> str:
    """What a learner who knows would type."""
    if q.kind == NUMBER:
        return q.shown
    if q.kind == SHAPE:
        return "{}x{}".format(*q.answer)
    if q.kind == CHOICE:
        return LETTERS[q.answer]
    return q.shown


def wrong_answer(q: Question) -> str:
    if q.kind == NUMBER:
        return str(float(q.answer) + 10 * q.tolerance + 1)
    if q.kind == SHAPE:
        return "{}x{}".format(q.answer[0] + 1, q.answer[1])
    if q.kind == CHOICE:
        return LETTERS[(q.answer + 1) % len(q.choices)]
    return str((q.answer + 1) % len(q.tokens) + 1)


def console() -> Console:
    return Console(width=100, file=io.StringIO(), color_system=None)


# -- the questions ----------------------------------------------------------------------------


def test_lesson_002_numbers_are_the_answers():
    qs = questions(walk_of("girl_bangs"))
    cells = {q.cell[0]: q for q in qs if q.kind == NUMBER}
    # the focus row 撩 (lesson 002): QKᵀ[撩, 刘海], S[撩, 女生], A[撩, 刘海], Z[撩, 0]
    assert cells["QK^T"].cell[2:] == (1, 2) and round(cells["QK^T"].answer, 4) == 7.2868
    assert cells["S"].cell[2:] == (1, 0) and round(cells["S"].answer, 4) == 3.1919
    assert cells["A"].cell[2:] == (1, 2) and round(cells["A"].answer, 4) == 0.7104
    assert cells["Z"].cell[2:] == (1, 0) and round(cells["Z"].answer, 4) == 1.6145
    assert "QKᵀ[2, 3] (撩 → 刘海)" in cells["QK^T"].text and "±0.073" in cells["QK^T"].text
    shape = next(q for q in qs if q.kind == SHAPE)
    assert shape.answer == (3, 3)
    argmax = next(q for q in qs if q.kind == TOKEN)
    assert argmax.tokens[argmax.answer] == "刘海" and "撩" in argmax.text


@pytest.mark.parametrize("name", builtin_names())
def test_every_quiz_covers_every_mistake_the_lessons_list(name):
    qs = questions(walk_of(name))
    covered = {m for q in qs for m in q.covers}
    assert covered == set(MISTAKES)
    topics = {q.topic for q in qs}
    assert {"softmax_axis", "k_vs_v", "mask", "uniform", "scale", "read_a", "params", "qkv",
            "output", "heads", "shape"} <= topics
    assert {q.cell[0] for q in qs if q.cell} >= {"QK^T", "S", "A", "Z"}


@pytest.mark.parametrize("name", builtin_names())
def test_numeric_answers_agree_with_the_reference_layer(name):
    scn = load_scenario(name)
    walk = compute(scn, "scaled")
    ref = reference.attention(walk.mats["X"], walk.mats["X"], np.array(scn.W_Q), np.array(scn.W_K),
                              np.array(scn.W_V), scn.allowed, heads=scn.heads)["heads"]
    for seed in (None, 1, 2, 3):
        for q in questions(walk, seed=seed):
            if q.cell is not None:
                key, head, row, col = q.cell  # head is 0-based; the shapes lesson has 8
                assert q.answer == pytest.approx(ref[head][key][row, col], abs=1e-9)
                assert check(q, right_answer(q)) is True


def test_questions_are_deterministic_and_a_seed_varies_them():
    walk = walk_of("yellow_dog")
    assert questions(walk) == questions(walk)
    assert questions(walk, seed=5) == questions(walk, seed=5)
    runs = {tuple(q.cell for q in questions(walk, seed=s) if q.cell) for s in range(8)}
    assert len(runs) > 1
    assert [q.topic for q in questions(walk, count=3)] == [q.topic for q in questions(walk)][:3]


def test_choices_are_shuffled_but_the_right_one_is_the_lessons_answer():
    tx = text("en")
    positions = set()
    for seed in (None, 0, 1, 2, 3):
        for q in questions(walk_of("girl_bangs"), seed=seed):
            if q.kind == CHOICE:
                right = tx.t(f"quiz.{q.topic}.answer", row_token="撩", col_token="刘海")
                if q.topic != "read_a":
                    assert q.choices[q.answer] == right
                assert len(set(q.choices)) == 3
                positions.add(q.answer)
    assert positions == {0, 1, 2}


def test_a_masked_scenario_asks_for_a_masked_weight():
    qs = questions(walk_of("causal_mask"))
    masked = [q for q in qs if q.cell and q.cell[0] == "A" and q.answer == 0.0]
    assert masked and masked[0].cell[2:] == (0, 1)  # T1 may not look at T2
    assert "e^−∞" in masked[0].hint


def test_multi_head_questions_name_the_head(tmp_path):
    walk = compute(scenario_from_text(TWO_HEADS, "two.yaml"), "scaled")
    qs = questions(walk, seed=4)
    for q in qs:
        if q.cell:
            assert q.text.startswith(f"head {q.cell[1] + 1} / 2 · ")
            key, head, row, col = q.cell
            assert q.answer == walk.matrix(key, head)[row, col]


def test_questions_speak_chinese():
    qs = questions(walk_of("girl_bangs"), "zh")
    assert "是多少" in qs[0].text
    assert any("W_Q 是参数" in c for q in qs for c in q.choices)


FIVE_TOKENS = """
tokens: [a, b, c, d, e]
embeddings: [[1, 0], [0, 1], [1, 1], [2, 0], [0, 2]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0], [0, 1]]
W_V: [[1, 0], [0, 1]]
"""


def shape_spellings(rows: int, cols: int) -> list[str]:
    return [f"{rows}{sep}{cols}" for sep in ("x", "X", "×", " x ", " × ", "*", ", ", " by ")]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("walk", [walk_of("girl_bangs"), walk_of("causal_mask"), walk_of("river_bank"),
                                  compute(scenario_from_text(FIVE_TOKENS, "five.yaml"), "scaled")],
                         ids=["3x3", "causal", "4x4", "5x5, d_k 2"])
def test_the_shape_question_gives_no_shape_away(walk, lang):
    # girl_bangs is 3 tokens, so QKᵀ is 3 × 3 (lesson 002): its format hint once said "e.g. 3x3"
    shape = next(q for q in questions(walk, lang) if q.kind == SHAPE)
    scn = walk.scenario
    given_away = {(scn.n, scn.m), (scn.m, scn.n), (scn.n, scn.d_k), (scn.d_k, scn.m)}
    tx = text(lang)
    for said in (shape.text, tx.t("quiz.not_a_shape", example=shape.example)):
        for rows, cols in given_away:
            assert not any(s in said for s in shape_spellings(rows, cols)), said
    assert parse_shape(shape.example) not in given_away and parse_shape(shape.example) is not None
    assert shape.example in shape.text


def test_tolerance_is_stated_and_applied():
    assert tolerance(7.2868) == 0.073
    assert tolerance(0.1) == 0.005 and tolerance(0.0) == 0.005
    assert tolerance(-250.0) == 2.5


# -- reading answers --------------------------------------------------------------------------


@pytest.mark.parametrize("raw, value", [
    ("7.29", 7.29), (" -0.5 ", -0.5), ("−0.5", -0.5), ("1e-3", 0.001), ("７.２９", 7.29),
    ("0,81", 0.81), ("81%", 0.81), ("1/4", 0.25), (".5", 0.5), ("+3", 3.0),
])
def test_numbers(raw, value):
    assert parse_number(raw) == pytest.approx(value)


@pytest.mark.parametrize("raw", ["", "abc", "1/0", "1..2", "3x3", "nan", "inf", "1/2/3"])
def test_not_numbers(raw):
    assert parse_number(raw) is None


@pytest.mark.parametrize("raw", ["3x3", "3 × 3", "3X3", "3*3", "3,3", "(3, 3)", "3 by 3", "3 3", "３×３"])
def test_shapes(raw):
    assert parse_shape(raw) == (3, 3)


def test_choices_and_tokens():
    assert [parse_choice(s, 3) for s in ("a", "B", "(c)", "b)", "2", "d", "4", "")] == [0, 1, 2, 1, 1, None, None, None]
    tokens = ("女生", "撩", "刘海")
    assert parse_token("刘海", tokens, tokens) == 2 and parse_token("3", tokens, tokens) == 2
    assert parse_token("「刘海」", tokens, tokens) == 2 and parse_token("4", tokens, tokens) is None
    assert parse_token("River", ("by", "the", "river"), ("by", "the", "river")) == 2
    repeated, labels = ("the", "cat", "the"), ("the#1", "cat", "the#3")
    assert parse_token("the", repeated, labels) is None  # either row: its number is asked for
    assert parse_token("the#3", repeated, labels) == 2 and parse_token("3", repeated, labels) == 2
    assert parse_token("ＴＨＥ#1", repeated, labels) == 0  # full-width and any case, as typed


def test_a_repeated_token_is_asked_for_by_number():
    q = Question("argmax", TOKEN, "?", "", 2, "the#3", tokens=("the#1", "cat", "the#3"),
                 token_text=("the", "cat", "the"))
    assert check(q, "the") is None and check(q, "3") and check(q, "the#3") and not check(q, "1")
    assert unreadable(q, text("en"), "the") == "the appears more than once (rows 1, 3); type its row number instead"
    assert unreadable(q, text("zh"), "the") == "the 出现了不止一次（第 1、3 行）；请改输它的行号"
    assert unreadable(q, text("en"), "dog").startswith("Please type one of the tokens (the#1, cat, the#3)")


def test_check_uses_the_tolerance():
    q = questions(walk_of("girl_bangs"))[0]  # QKᵀ[撩, 刘海] = 7.2868 ± 0.073
    assert check(q, "7.29") and check(q, "7.3") and check(q, "7.2868")
    assert check(q, "7.2") is False and check(q, "8") is False
    assert check(q, "seven") is None
    a_cell = next(q for q in questions(walk_of("girl_bangs")) if q.cell and q.cell[0] == "A")
    assert check(a_cell, "71%") and check(a_cell, "0.71") and not check(a_cell, "70%")


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(builtin_names()), seed=st.integers(0, 10_000), lang=st.sampled_from(["en", "zh"]))
def test_the_right_answer_is_always_accepted_and_a_wrong_one_never(name, seed, lang):
    for q in questions(walk_of(name), lang, seed=seed):
        assert check(q, right_answer(q)) is True
        assert check(q, wrong_answer(q)) is False


# -- the quiz loop ----------------------------------------------------------------------------


def test_a_perfect_scripted_run_scores_n_of_n():
    walk = walk_of("girl_bangs")
    qs = questions(walk)
    con = console()
    script = "".join(right_answer(q) + "\n" for q in qs)
    result = run_quiz(walk, qs, con, LineAnswers(io.StringIO(script), con))
    out = con.file.getvalue()
    assert (result.score, result.answered) == (len(qs), len(qs))
    assert f"Score: {len(qs)} / {len(qs)}" in out
    assert out.count("Correct!") == len(qs)


def test_a_wrong_answer_gets_hint_worked_arithmetic_and_answer():
    walk = walk_of("girl_bangs")
    qs = questions(walk)[:2]
    con = console()
    result = run_quiz(walk, qs, con, LineAnswers(io.StringIO("7\n3x2\n"), con))
    out = con.file.getvalue()
    assert result.score == 0
    assert "Not quite. Hint: Apply QKᵀ[i, j] = q_i · k_j to that one cell only." in out
    assert "1.3872" in out and "5.3083" in out  # k_刘海, as lesson 002 writes it
    assert "= 7.2868" in out and "Answer: 7.2868" in out
    assert "Q is 3 × 2 and Kᵀ is 2 × 3" in out and "Answer: 3 × 3" in out
    assert "Score: 0 / 2" in out


def test_end_of_input_stops_early_and_still_scores():
    walk = walk_of("girl_bangs")
    qs = questions(walk)
    con = console()
    result = run_quiz(walk, qs, con, LineAnswers(io.StringIO("7.29\n3x3\n"), con))
    out = con.file.getvalue()
    assert (result.score, result.answered, result.questions) == (2, 2, len(qs))
    assert f"Stopped after 2 of {len(qs)} questions." in out and "Score: 2 / 2" in out


def test_q_stops_and_unreadable_lines_count_as_wrong_when_scripted():
    walk = walk_of("girl_bangs")
    qs = questions(walk)
    con = console()
    result = run_quiz(walk, qs, con, LineAnswers(io.StringIO("seven\n3x3\nq\n7\n"), con))
    out = con.file.getvalue()
    assert "Your answer: seven\n(not a number: counted as wrong)\nHint: " in out
    assert "Please type" not in out and "Not quite" not in out
    assert (result.score, result.answered) == (1, 2)  # "seven" is wrong, 3x3 right, then q


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_piped_answers_that_are_no_answer_read_sensibly(lang):
    walk = walk_of("girl_bangs")
    qs = questions(walk, lang)
    kinds = [NUMBER, SHAPE, CHOICE, TOKEN]
    picked = [next(q for q in qs if q.kind == kind) for kind in kinds] + [qs[0]]
    con = Console(width=300, file=io.StringIO(), color_system=None)  # the intro on one line
    result = run_quiz(walk, picked, con, LineAnswers(io.StringIO("seven\n3\nd\nzebra\n\n"), con), lang)
    out = con.file.getvalue()
    tx = text(lang)
    assert (result.score, result.answered) == (0, 5)
    assert out.startswith(tx.t("quiz.intro_piped", total=5))
    for key, values in (("number", {}), ("shape", {}), ("choice", {"choices": "a/b/c"}),
                        ("token", {"count": 3}), ("empty", {})):
        assert tx.t(f"quiz.piped_{key}", **values) in out
    assert out.count(tx.t("quiz.wrong", hint="").strip()) == 0  # no "Not quite." after no answer
    if lang == "en":
        assert "(not one of a/b/c: counted as wrong)" in out and "Please type" not in out
        assert "counts as wrong" in out.splitlines()[0]


class Typed:
    """A terminal-like source: a mistyped answer is asked for again."""

    interactive = True

    def __init__(self, lines):
        self.lines = list(lines)
        self.prompts = []

    def ask(self, prompt):
        self.prompts.append(prompt)
        return self.lines.pop(0) if self.lines else None


def test_on_a_terminal_a_mistyped_answer_is_asked_again():
    walk = walk_of("girl_bangs")
    qs = questions(walk)[:1]
    source = Typed(["seven", "", "7.29"])
    con = console()
    result = run_quiz(walk, qs, con, source)
    assert result.score == 1 and len(source.prompts) == 3


def test_a_terminal_still_says_what_to_type_and_asks_again():
    walk = walk_of("girl_bangs")
    q = next(q for q in questions(walk) if q.kind == CHOICE)
    source = Typed(["d", "", LETTERS[q.answer]])
    con = console()
    result = run_quiz(walk, [q], con, source)
    out = con.file.getvalue()
    assert out.startswith("Questions: 1. Type q to stop.")
    assert out.count("Please type one of a/b/c.") == 2 and "counted as wrong" not in out
    assert result.score == 1


# -- the command ------------------------------------------------------------------------------


def test_cli_quiz_reads_stdin_prints_the_score_and_records_it(isolated_state):
    qs = questions(walk_of("girl_bangs"))
    script = "".join(right_answer(q) + "\n" for q in qs[:-1]) + wrong_answer(qs[-1]) + "\n"
    result = runner.invoke(app, ["quiz", "girl_bangs"], input=script)
    assert result.exit_code == 0, result.output
    assert f"Score: {len(qs) - 1} / {len(qs)}" in result.stdout
    data = json.loads(isolated_state.read_text(encoding="utf-8"))
    last = data["scenarios"]["girl_bangs"]["quiz"]["last"]
    assert (last["score"], last["answered"], last["questions"]) == (len(qs) - 1, len(qs), len(qs))


def test_cli_quiz_options_and_language(tmp_path):
    result = runner.invoke(app, ["quiz", "river_bank", "--count", "2", "--seed", "7", "--lang", "zh"],
                           input="1\n")
    assert result.exit_code == 0, result.output
    assert "第 1 / 2 题" in result.stdout and "得分：" in result.stdout
    path = tmp_path / "mine.yaml"
    path.write_text(TWO_HEADS, encoding="utf-8")
    result = runner.invoke(app, ["quiz", "--scenario", str(path), "-n", "1"], input="2\n")
    assert result.exit_code == 0 and "head 1 / 2 · What is QKᵀ[3, 3]" in result.stdout
    assert "Score: 1 / 1" in result.stdout  # q_c · k_c = [1, 1] · [1, 1] = 2


def test_cli_quiz_errors_are_one_line():
    for args in (["quiz"], ["quiz", "nope"], ["quiz", "girl_bangs", "--count", "0"]):
        result = runner.invoke(app, args, input="")
        assert result.exit_code == 2 and "Traceback" not in result.output


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "ATTNWALK_LANG")}
    env.update(NO_COLOR="1", LANG="C.UTF-8", XDG_STATE_HOME=str(tmp_path / "state"))
    return env


def _program():
    exe = shutil.which("attnwalk")
    return [exe] if exe else [sys.executable, "-m", "attnwalk"]


def test_piped_stdin_in_a_real_process(tmp_path):
    out = subprocess.run([*_program(), "quiz", "girl_bangs"], input="7.29\n3x3\nb\n",
                         capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Your answer: 7.29" in out.stdout and "Correct!" in out.stdout
    assert "Score: 2 / 3" in out.stdout  # params: b is a wrong choice in the default order
    assert (tmp_path / "state" / "attnwalk" / "progress.json").is_file()


def test_a_terminal_prompts_reasks_and_q_quits(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    program = _program()
    child = pexpect.spawn(program[0], program[1:] + ["quiz", "girl_bangs"], env=_env(tmp_path),
                          encoding="utf-8", timeout=20, dimensions=(40, 100))
    child.expect_exact("Your answer: ")
    child.sendline("seven")
    child.expect_exact("Please type a number.")
    child.expect_exact("Your answer: ")  # asked again: a typo on a terminal is not an answer
    child.sendline("7.29")
    child.expect_exact("Correct!")
    child.expect_exact("Your answer: ")
    child.sendline("q")
    child.expect_exact("Score: 1 / 1")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_at_a_terminal_still_scores_records_and_exits_130(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    program = _program()
    child = pexpect.spawn(program[0], program[1:] + ["quiz", "girl_bangs", "--lang", "zh"],
                          env=_env(tmp_path), encoding="utf-8", timeout=20, dimensions=(40, 100))
    child.expect_exact("你的答案：")
    child.sendline("7.29")
    child.expect_exact("正确！")
    child.expect_exact("你的答案：")
    child.sendcontrol("c")
    child.expect_exact("得分：1 / 1")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    saved = json.loads((tmp_path / "state" / "attnwalk" / "progress.json").read_text(encoding="utf-8"))
    assert saved["scenarios"]["girl_bangs"]["quiz"]["last"]["answered"] == 1
