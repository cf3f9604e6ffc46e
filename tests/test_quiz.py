"""The quiz: questions from the scenario's own numbers, answers read generously, a scripted run.

Golden numbers are lesson 002's (女生撩刘海), typed in from ../shared/seeds/002; the others are
checked against tests/reference.py, an attention layer written apart from attnwalk.layer.walk.
"""

from __future__ import annotations

import functools
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
from attnwalk.layer.axes import token_labels
from attnwalk.text import text
from attnwalk.layer.walk import compute
from attnwalk.tutor.quiz import (CHOICE, LETTERS, MISTAKES, NUMBER, SHAPE, TOKEN, Question, check, unreadable,
                           parse_choice, parse_number, parse_shape, parse_token, tolerance)
from attnwalk.tutor.questions import questions
from attnwalk.commands.quiz import LineAnswers, run_quiz
from attnwalk.scenario.load import load_scenario, scenario_from_text

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
    cells = {q.cell[0]: q for q in qs if q.kind == NUMBER and not q.mode and q.topic == "cell"}
    # the focus row 撩 (lesson 002), off the cells the walk works out on screen (撩 → 刘海, Z[撩, 0]):
    # S[撩, :] = [3.1919, 3.8314, 5.1526], A[撩, :] = [0.1000, 0.1896, 0.7104], Z[撩] = [1.6145, 2.4204]
    assert cells["QK^T"].cell[2:] == (1, 0) and cells["QK^T"].answer == pytest.approx(3.1919 * 2 ** 0.5, abs=2e-4)
    assert cells["S"].cell[2:] == (1, 0) and round(cells["S"].answer, 4) == 3.1919
    assert cells["A"].cell[2:] == (1, 0) and round(cells["A"].answer, 4) == 0.1000
    assert cells["Z"].cell[2:] == (1, 1) and round(cells["Z"].answer, 4) == 2.4204
    assert "QKᵀ[2, 1] (撩 → 女生)" in cells["QK^T"].text and "±0.005" in cells["QK^T"].text
    # the inputs are stated, as the lesson's tables give them: the whole of S for A (so a softmax
    # down the column can be committed), the whole of A and V for Z
    assert cells["A"].given == ("Given: S = [[3.5002, 4.4115, 6.1849], [3.1919, 3.8314, 5.1526], "
                                "[3.0804, 3.3949, 4.2022]] (rows 女生, 撩, 刘海; columns 女生, 撩, 刘海)")
    assert "[[0.0551, 0.1371, 0.8078], [0.1000, 0.1896, 0.7104], [0.1838, 0.2518, 0.5644]]" in cells["Z"].given
    assert "V = [[2.2000, 0.9000], [1.8254, 1.6276], [1.4758, 2.8460]]" in cells["Z"].given
    shape = next(q for q in qs if q.kind == SHAPE)
    assert shape.answer == (3, 3)
    argmax = next(q for q in qs if q.topic == "argmax")  # not the focus row: its A screen shows it
    assert argmax.tokens[argmax.answer] == "刘海" and "女生" in argmax.text  # A[女生] = [0.0551, 0.1371, 0.8078]
    look = next(q for q in qs if q.topic == "look")  # from q_撩 and the keys: QKᵀ[撩] = [4.5140, 5.4184, 7.2868]
    assert look.tokens[look.answer] == "刘海" and "q_撩 = [0.3274, 1.2872]" in look.given


@pytest.mark.parametrize("name", builtin_names())
def test_every_quiz_covers_every_mistake_the_lessons_list_that_its_scenario_has(name):
    walk = walk_of(name)
    scn = walk.scenario
    qs = questions(walk)
    covered = {m for q in qs for m in q.covers}
    divides = scn.score == "dot"  # additive scores are never divided by √d_k: no question on it
    assert covered == set(MISTAKES) - (set() if scn.heads > 1 else {"heads_repeat"}) - (
        set() if divides else {"scale_detail"})
    topics = {q.topic for q in qs}
    assert {"softmax_axis", "k_vs_v", "read_a", "params", "qkv", "output", "shape"} <= topics
    asks_a = any(q.cell and q.cell[0] == "A" and not q.mode for q in qs)  # (100 keys: no softmax by hand)
    assert ("scale" in topics) == divides
    # the what-if asks an unscaled weight, on the first cell where cellquiz.fair can judge it (on
    # saturation most unscaled weights are 0 or 1, as a misreading gives them too: another cell)
    assert ("what_if" not in topics) or (divides and asks_a)
    if divides and asks_a and "what_if" not in topics:
        # issue 37: no cell whose answer is not given away: every row of head 1's QKᵀ is level over
        # the keys it may read (without √d_k nothing changes: the question states its own answer),
        # or reads every key (the mask forgotten gives the same number: alibi's last row)
        # or, unscaled, hides keys whose weights are all but 0 already (saturation: forgetting the
        # mask moves no weight of the unscaled layer by a thousandth of itself)
        QK = walk.heads[0].mats["QK^T"]
        e = lambda S: np.exp(S - S.max(axis=1, keepdims=True))  # noqa: E731
        masked = e(np.where(scn.allowed, QK, -np.inf))
        masked /= masked.sum(axis=1, keepdims=True)
        free = e(QK) / e(QK).sum(axis=1, keepdims=True)
        assert all(_level(walk, r) or np.all(np.abs(free[r] - masked[r])[scn.allowed[r]]
                                             <= 1e-3 * masked[r][scn.allowed[r]]) for r in range(scn.n)), name
    assert ("mask" in topics) == (not scn.allowed.all())  # only about what the scenario has
    assert ("heads" in topics) == (scn.heads > 1 and scn.groups == scn.heads)  # not "own W_K" under GQA
    assert ("gqa" in topics) == (scn.groups < scn.heads)
    assert ("alibi" in topics) == (scn.bias == "alibi")
    assert ("cross" in topics) == (scn.source is not None)
    assert "uniform" not in topics  # uniform belongs to compare's context, not the walk's
    # S = QKᵀ for additive scores: its QKᵀ question already asks S
    by_hand = scn.m <= 32  # a row of A or a column of V short enough to give: else no A or Z cell
    dots = {"QK^T"} if scn.d_k <= 8 else set()  # q and k short enough to give (shapes: d_k = 64)
    expected = dots | ({"A", "Z"} if by_hand else set()) | (
        {"S"} if divides else set()) | ({"tiled"} if scn.tiles else set())  # tiled: m and l after a block
    asked = {q.cell[0] for q in qs if q.cell}
    if "Z" not in asked and by_hand:  # issue 37: every Z cell of head 1 would be a mistake's number too
        mats = walk.heads[0].mats
        for r in range(scn.n):
            for c in range(mats["V"].shape[1]):
                assert (_level(walk, r) or mats["Z"][r, c] == 0
                        or np.isclose(mats["Z"][r, c], mats["A"][r], atol=5e-5).any()  # a one-hot V: a given weight
                        or (mats["K"].shape == mats["V"].shape and np.array_equal(mats["K"][:, c], mats["V"][:, c]))), (name, r, c)
        asked.add("Z")
    if not {"QK^T", "S"} & asked and expected & {"QK^T", "S"}:  # every cell 0 but the one worked on screen
        QK = walk.heads[0].mats["QK^T"]
        assert np.count_nonzero(QK[scn.allowed]) <= 1, name
        asked |= expected & {"QK^T", "S"}
    assert asked == expected


def _level(walk, r: int) -> bool:
    """Row r of head 1's A is given away by a mistake whatever the cell: its scores are level over
    the keys it may read (uniform weights, and no √d_k, give the same row), or it reads every key
    of a masked layer (the mask forgotten gives the same row)."""
    scn = walk.scenario
    seen = walk.heads[0].mats["QK^T"][r][scn.allowed[r]]
    return np.ptp(seen) < 1e-12 or (scn.allowed[r].all() and not scn.allowed.all())


@pytest.mark.parametrize("name", builtin_names())
def test_numeric_answers_agree_with_the_reference_layer(name):
    scn = load_scenario(name)
    walk = compute(scn, "scaled")

    def ref(mode):
        return reference.attention_of(scn, mode)["heads"]

    refs = {"": ref("scaled"), "unscaled": ref("unscaled")}  # the what-if asks A without √d_k
    for seed in (None, 1, 2, 3):
        for q in questions(walk, seed=seed):
            if q.cell is not None and q.topic != "tiled":  # m and l: tests/test_tiled.py
                key, head, row, col = q.cell  # head is 0-based; the shapes lesson has 8
                assert q.answer == pytest.approx(refs[q.mode][head][key][row, col], abs=1e-9)
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
                if q.topic in ("params", "scale", "softmax_axis", "k_vs_v", "output"):  # no tokens in them
                    assert q.choices[q.answer] == tx.t(f"quiz.{q.topic}.answer")
                assert len(set(q.choices)) == 3
                assert q.why[q.answer] == "" and all(q.why[i] for i in range(3) if i != q.answer)
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
        if q.cell and not q.mode:
            assert q.text.startswith(f"head {q.cell[1] + 1} / 2 · ")
            key, head, row, col = q.cell
            assert q.answer == walk.matrix(key, head)[row, col]


def test_questions_speak_chinese():
    qs = questions(walk_of("girl_bangs"), "zh")
    assert "是多少" in qs[0].text
    assert any("W_Q 是训练学到的" in c for q in qs for c in q.choices)


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


def test_tolerance_comes_from_the_precision_asked():
    """Half a unit of the second decimal; of the third significant digit for large numbers; one
    place finer when a misconception's number would otherwise be inside it."""
    assert tolerance(7.2868) == 0.005 and tolerance(0.1) == 0.005 and tolerance(0.0) == 0.005
    assert tolerance(72.868) == 0.05 and tolerance(-250.0) == 0.5 and tolerance(1234.5) == 5
    assert tolerance(0.2483, 1) == 0.0005 and tolerance(72.868, 1) == 0.005


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
    q = questions(walk_of("girl_bangs"))[0]  # QKᵀ[撩, 女生] = 3.1919 × √2 = 4.5140 ± 0.005
    assert check(q, "4.51") and check(q, "4.514") and check(q, "4.518")
    assert check(q, "4.5") is False and check(q, "4.45") is False and check(q, "5") is False
    assert check(q, "seven") is None
    a_cell = next(q for q in questions(walk_of("girl_bangs")) if q.cell and q.cell[0] == "A")  # 0.1000
    assert check(a_cell, "10%") and check(a_cell, "0.1") and not check(a_cell, "9%")


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
    assert "1.60000" in out and "3.10000" in out  # k_女生 = X_女生 · W_K = [3, 2] · W_K (lesson 002)
    assert "= 4.51401" in out and "Answer: 4.5140" in out
    assert "Q is 3 × 2 and Kᵀ is 2 × 3" in out and "Answer: 3 × 3" in out
    assert "Score: 0 / 2" in out


def test_end_of_input_stops_early_and_still_scores():
    walk = walk_of("girl_bangs")
    qs = questions(walk)
    con = console()
    result = run_quiz(walk, qs, con, LineAnswers(io.StringIO("4.51\n3x3\n"), con))
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

    def ask(self, prompt, question=None):
        self.prompts.append(prompt)
        return self.lines.pop(0) if self.lines else None


def test_on_a_terminal_a_mistyped_answer_is_asked_again():
    walk = walk_of("girl_bangs")
    qs = questions(walk)[:1]
    source = Typed(["seven", "", "4.51"])
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
    result = runner.invoke(app, ["quiz", "--scenario", str(path), "-n", "1"], input="1\n")
    # head 1's Q and K are the same ([1, 0], [0, 1], [1, 1]), so QKᵀ is symmetric: off the diagonal
    # reading it transposed gives the right number (issue 37). Row c works out QKᵀ[c, c] on screen,
    # so the quiz asks the diagonal's next cell, b → b
    assert result.exit_code == 0 and "head 1 / 2 · What is QKᵀ[2, 2]" in result.stdout
    assert "Score: 1 / 1" in result.stdout  # q_b · k_b = [0, 1] · [0, 1] = 1


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
    out = subprocess.run([*_program(), "quiz", "girl_bangs"], input="4.51\n3x3\na\n",
                         capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Your answer: 4.51" in out.stdout and "Correct!" in out.stdout
    assert "Score: 2 / 3" in out.stdout  # params: a is a wrong choice in the default order; its retry finds no line
    assert (tmp_path / "state" / "attnwalk" / "progress.json").is_file()


def test_a_terminal_prompts_reasks_and_q_quits(tmp_path):
    # in a terminal the quiz is the Textual app (app/quiz.py); its score is printed after it closes
    pexpect = pytest.importorskip("pexpect")
    program = _program()
    child = pexpect.spawn(program[0], program[1:] + ["quiz", "girl_bangs"], env=_env(tmp_path),
                          encoding="utf-8", timeout=20, dimensions=(40, 100))
    child.expect_exact("Your answer to question 1:")
    child.send("seven\r")
    child.expect_exact("Please type a number.")
    child.expect_exact("Your answer to question 1:")  # asked again: a typo on a terminal is not an answer
    child.send("4.51\r")
    child.expect_exact("Correct!")
    child.expect_exact("Your answer to question 2:")
    child.send("q\r")
    child.expect_exact("\x1b[?1049l")  # q stops the quiz and closes the app
    child.expect_exact("Score: 1 / 1")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_at_a_terminal_still_scores_records_and_exits_130(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    program = _program()
    child = pexpect.spawn(program[0], program[1:] + ["quiz", "girl_bangs", "--lang", "zh"],
                          env=_env(tmp_path), encoding="utf-8", timeout=20, dimensions=(40, 100))
    child.expect_exact("第 1 题，你的答案：")
    child.send("4.51\r")
    child.expect_exact("正确！")
    child.expect_exact("第 2 题，你的答案：")
    child.sendcontrol("c")
    child.expect_exact("得分：1 / 1")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    saved = json.loads((tmp_path / "state" / "attnwalk" / "progress.json").read_text(encoding="utf-8"))
    assert saved["scenarios"]["girl_bangs"]["quiz"]["last"]["answered"] == 1


# -- fair questions (issue 14, points 2 and 4) ------------------------------------------------

SEEDS = [None, *range(40)]


# Four tests read every quiz in English and two in Chinese: each language's are made once (this
# file's tests run on one worker, pyproject.toml's --dist loadfile) and read by each test.
# Questions are frozen; no test changes the tuple.
@functools.cache
def _every_quiz(lang):
    quizzes = []
    for name in builtin_names():
        walk = walk_of(name)
        for seed in SEEDS if name != "shapes" else SEEDS[:6]:
            quizzes.append((name, walk, seed, questions(walk, lang, seed=seed)))
    return tuple(quizzes)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_question_gives_its_answer_away(lang):
    from attnwalk.layer.axes import default_cell

    longest = first = choices = 0
    for name, walk, seed, qs in _every_quiz(lang):
        asked = set()
        for q in qs:
            assert q.qid not in asked  # no question twice
            asked.add(q.qid)
            if q.kind == CHOICE:
                # never two correct options: three different texts (a reading question on the
                # diagonal once offered "how much T3 attends to T3" twice), each wrong one explained
                assert len(set(q.choices)) == 3, (name, seed, q.choices)
                assert [w == "" for w in q.why] == [i == q.answer for i in range(3)]
                lengths = [len(c) for c in q.choices]
                longest += lengths.index(max(lengths)) == q.answer  # "always pick the longest"
                first += q.answer == 0  # "always pick a"
                choices += 1
            if q.kind == NUMBER and not q.mode:
                key, head, row, col = q.cell
                # not the cell the walk worked out on that stage's screen
                assert (row, col) != default_cell(walk, key, head), (name, seed, q.text)
                # (q · k = 0 is worth asking; its q or k may hold a 0). The running maximum m after
                # a block is by definition one of the scores given: the question is which one
                # A dot product equal to one of its entries (1 · 1 + 1 · 0 = 1) is still worked out, and
                # Z over a one-hot column of V still asks which weight lands there
                if abs(q.answer) > 1e-9 and not q.qid.startswith("tiled:m:") and key not in ("QK^T", "Z"):
                    assert q.shown not in q.given  # the answer is not among the inputs
                assert q.given or walk.scenario.n > 32, (name, seed, q.text)  # its inputs, to work it by hand
    assert longest / choices <= 1 / 3 + 0.10, longest / choices
    assert first / choices <= 1 / 3 + 0.10, first / choices


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_quiz_spreads_its_right_letters_over_a_b_and_c(lang):
    for name, walk, seed, qs in _every_quiz(lang):
        letters = [q.answer for q in qs if q.kind == CHOICE]
        counts = [letters.count(i) for i in range(3)]
        assert max(counts) - min(counts) <= 1, (name, seed, counts)


def test_inputs_come_before_the_questions_they_answer():
    """A number question states its inputs (S gives QKᵀ[i, j]); a seeded order still asks the
    stages in the layer's order, so no input is a later question's answer."""
    for name, walk, seed, qs in _every_quiz("en"):
        order = [q.cell[0] if not q.mode else "what_if" for q in qs if q.kind == NUMBER]
        rank = {"QK^T": 0, "S": 1, "A": 2, "what_if": 3, "Z": 4, "tiled": 5}
        assert order == sorted(order, key=rank.__getitem__), (name, seed, order)


def test_reading_questions_are_off_the_diagonal_and_on_allowed_cells():
    tx = text("en")
    for name, walk, seed, qs in _every_quiz("en"):
        for q in qs:
            if q.topic == "read_a":
                right, transposed = q.choices[q.answer], [c for c in q.choices if "as the query" in c]
                assert len(transposed) == 2 and right in transposed
        if not walk.scenario.allowed.all():
            mask = next(q for q in qs if q.topic == "mask")
            scn = walk.scenario
            rows, cols = token_labels(scn.tokens), token_labels(scn.key_tokens)  # the#5: a repeat
            masked = [(rows[r], cols[c]) for r, c in np.argwhere(~scn.allowed)]
            assert any(tx.t("quiz.mask.question", row_token=r, col_token=c) == mask.text for r, c in masked)


def test_a_wrong_choice_is_explained_then_tried_once_more():
    walk = walk_of("girl_bangs")
    q = next(q for q in questions(walk) if q.topic == "params")
    wrong = (q.answer + 1) % 3
    con = Console(width=400, file=io.StringIO(), color_system=None)
    result = run_quiz(walk, [q], con, Typed([LETTERS[wrong], LETTERS[q.answer]]))
    out = con.file.getvalue()
    assert f"Not quite: {q.why[wrong]}" in out and "One more try." in out
    assert "Right on the second try (scored as wrong)." in out
    assert result.score == 0 and result.missed == ("concept:params",)
    assert result.shown == ("params_vs_activations",)
    con = console()  # wrong twice: the answer is revealed
    result = run_quiz(walk, [q], con, Typed([LETTERS[wrong], LETTERS[wrong]]))
    out = con.file.getvalue()
    assert out.count("Not quite") == 2 and f"Answer: {q.shown}" in out


# -- worksheets (issue 14, point 5) -----------------------------------------------------------


def test_json_worksheet_holds_every_question_with_its_answer():
    result = runner.invoke(app, ["quiz", "girl_bangs", "--seed", "3", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    again = json.loads(runner.invoke(app, ["quiz", "girl_bangs", "--seed", "3", "--format", "json"]).stdout)
    assert data == again  # same seed, same set
    qs = data["questions"]
    assert len(qs) == len(questions(walk_of("girl_bangs"), seed=3))
    for q in qs:
        assert {"kind", "prompt", "answer", "tolerance"} <= set(q)
        if q["kind"] == "choice":
            assert len(q["options"]) == 3 and q["answer"] in ("a", "b", "c")
        if q["kind"] == "number":
            assert isinstance(q["answer"], float) and q["tolerance"] > 0
            assert all({"name", "value"} <= set(m) for m in q["mistakes"])
    letters = [q["answer"] for q in qs if q["kind"] == "choice"]
    assert set(letters) == {"a", "b", "c"}  # spread over a, b and c …
    longest = sum(max(q["options"], key=len) == q["options"]["abc".index(q["answer"])]
                  for q in qs if q["kind"] == "choice")
    assert longest <= len(letters) / 3 + 0.1 * len(letters)  # … and not the longest
    # lesson 002: A[刘海, :] = [0.1838, 0.2518, 0.5644], A[女生, 刘海] = 0.8078, QKᵀ[刘海, :] =
    # [4.3564, 4.8011, 5.9428]; seed 3 asks row 刘海
    a_cell = next(q for q in qs if q["kind"] == "number" and q["prompt"].startswith("What is A[3, 1]"))
    assert round(a_cell["answer"], 4) == 0.1838
    names = {m["name"]: m["value"] for m in a_cell["mistakes"]}
    assert round(names["transposed"], 4) == 0.8078  # A[女生, 刘海]
    raw = np.array([4.3564, 4.8011, 5.9428])
    assert names["no_scale"] == pytest.approx(np.exp(raw[0]) / np.exp(raw).sum(), abs=1e-4)


def test_markdown_worksheet_ends_with_the_answer_key():
    result = runner.invoke(app, ["quiz", "causal_mask", "--seed", "2", "--format", "markdown", "--lang", "zh"])
    assert result.exit_code == 0, result.output
    md = result.stdout
    assert md.startswith("# 测验：causal_mask") and "--seed 2" in md
    body, key = md.split("## 参考答案")
    qs = questions(walk_of("causal_mask"), "zh", seed=2)
    for i, q in enumerate(qs, 1):
        assert f"{i}. {q.text}" in body and f"\n{i}. " in key
        if q.kind == CHOICE:
            assert f"{i}. {q.shown}" in key
    assert "能看出错因的错误答案：" in key and "忘了掩码" in key  # the masked weight's mistake


def test_an_unknown_format_is_a_usage_error():
    result = runner.invoke(app, ["quiz", "girl_bangs", "--format", "xml"])
    assert result.exit_code == 2 and "json or markdown" in result.output


# -- memory (issue 14, point 6) ---------------------------------------------------------------


def test_progress_keeps_misconceptions_and_review_asks_the_missed_questions(isolated_state):
    qs = questions(walk_of("girl_bangs"))
    # the first question (QKᵀ[撩, 女生]) answered as the transposed cell QKᵀ[女生, 撩] = 6.2388
    # (lesson 002's QKᵀ), the shape right, then the params question wrong twice
    params = qs[2]
    wrong = LETTERS[(params.answer + 1) % 3]
    script = f"6.2388\n3x3\n{wrong}\n{wrong}\nq\n"
    result = runner.invoke(app, ["quiz", "girl_bangs"], input=script)
    assert result.exit_code == 0, result.output
    quiz = json.loads(isolated_state.read_text(encoding="utf-8"))["scenarios"]["girl_bangs"]["quiz"]
    assert quiz["last"]["missed"] == [qs[0].qid, params.qid]
    assert quiz["mistakes"] == {"transposed": 1, "params_vs_activations": 1}
    shown = runner.invoke(app, ["progress"], env={"COLUMNS": "200"})
    assert "read the matrix transposed" in shown.stdout and "W_Q and Q taken for the same kind" in shown.stdout
    review = runner.invoke(app, ["quiz", "girl_bangs", "--review"], input="4.51\n" + LETTERS[params.answer] + "\n")
    assert "Review: the 2 questions missed last time." in review.stdout
    assert review.stdout.count("Question 1 / 2") == 1 and "Score: 2 / 2" in review.stdout
    assert qs[0].text in review.stdout and params.text in review.stdout
    again = runner.invoke(app, ["quiz", "girl_bangs", "--review"], input="")
    assert "Nothing to review for girl_bangs" in again.stdout  # all right in the review


def test_review_with_no_quiz_yet_says_so():
    result = runner.invoke(app, ["quiz", "river_bank", "--review", "--lang", "zh"], input="")
    assert result.exit_code == 0 and "river_bank 没有需要重做的题" in result.stdout


def test_the_what_if_question_gives_the_row_of_qkt_not_of_s() -> None:
    """Without √d_k the softmax reads QKᵀ itself: its row was labelled "row 撩 of S", the same label
    an earlier question gave S's own (smaller) row."""
    import json

    from typer.testing import CliRunner

    from attnwalk.cli import app

    result = CliRunner().invoke(app, ["quiz", "girl_bangs", "--format", "json"])
    given = {q["topic"]: q["given"] for q in json.loads(result.stdout)["questions"] if q.get("given")}
    # the lesson's QKᵀ (seed 002: row 撩 is 4.5140, 5.4184, 7.2868), under its own name
    assert given["what_if"] == ("Given: QKᵀ = [[4.9500, 6.2388, 8.7467], [4.5140, 5.4184, 7.2868], "
                                "[4.3564, 4.8011, 5.9428]] (rows 女生, 撩, 刘海; columns 女生, 撩, 刘海)")


def test_the_quiz_wraps_chinese_between_characters_as_the_walk_does():
    """console.print joined the quiz's lines into plain Text before wrapping, so a diagnosis broke
    at the only space ("…行是发起查询的" / "token，列是键…") and left the line half empty."""
    from typer.testing import CliRunner

    from attnwalk.cli import app

    out = CliRunner().invoke(app, ["quiz", "girl_bangs", "--lang", "zh", "--count", "1"], input="6.2388\n",
                             env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("6.2388 是对角线另一侧的格子"))
    assert "行是发起查询的 token，列是键" in lines[at]  # the first line filled, not cut at the space
