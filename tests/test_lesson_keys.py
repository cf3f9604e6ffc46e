"""A scenario's own words: named dimensions and stage notes (scenario keys `dimensions` and `notes`),
and the lesson that opens every walk."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.scenario.load import scenario_from_text
from attnwalk.text import pick

runner = CliRunner()
ENV = {"COLUMNS": "100", "NO_COLOR": "1", "ATTNWALK_LANG": None, "LANG": "C.UTF-8", "LANGUAGE": None,
       "LC_ALL": None, "LC_MESSAGES": None}

BASE = """\
title: {en: "Two words", zh: "两个词"}
description: {en: "A tiny lesson.", zh: "一个很小的例子。"}
tokens: [river, bank]
embeddings: [[2, 0], [0.5, 1]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0], [0, 1]]
W_V: [[1, 0], [0, 1]]
"""
NAMED = BASE + """\
dimensions:
  d_model: {en: [geography, finance], zh: [地理, 金融]}
  d_v: [place, money]
notes:
  A: {en: "bank looks mostly at river", zh: "bank 主要看向 river"}
  qkt: "only in English"
"""


def walk_text(tmp_path, yaml: str, *args: str) -> str:
    path = tmp_path / "lesson.yaml"
    path.write_text(yaml, encoding="utf-8")
    result = runner.invoke(app, ["step", "--scenario", str(path), "--no-pause", *args], env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_names_and_notes_are_read_in_each_language() -> None:
    scn = scenario_from_text(NAMED, "lesson.yaml")
    assert scn.dimension_names("d_model", "zh") == ("地理", "金融")
    assert scn.dimension_names("d_model", "fr") == ("geography", "finance")  # else English
    assert scn.dimension_names("d_v", "zh") == ("place", "money")  # one list serves every language
    assert scn.dimension_names("d_k", "en") is None
    assert pick(scn.notes["A"], "zh") == "bank 主要看向 river" and pick(scn.notes["QK^T"], "zh") == "only in English"
    assert pick(scn.notes.get("Z"), "en") == ""


@pytest.mark.parametrize("extra, message", [
    ("dimensions:\n  d_model: [one]\n",
     "lesson.yaml:9: dimensions.d_model has 1 names, but d_model is 2; give one name per column"),
    ("dimensions:\n  d_model:\n    en: [a, b]\n    zh: [甲]\n",
     "lesson.yaml:11: dimensions.d_model.zh has 1 names, but d_model is 2"),
    ("dimensions:\n  d_q: [a, b]\n", "lesson.yaml:9: dimensions.d_q: unknown key"),
    ("notes:\n  Attention: x\n", "lesson.yaml:9: notes.Attention: 'Attention' is not a stage; choose "
     "one of: {stages}"),
    ("notes:\n  S+M: x\n", "lesson.yaml:9: notes.S+M: this scenario has no S+M stage; its stages "
     "are: {stages}"),
    ("notes: [A]\n", "lesson.yaml:8: notes: expected a mapping of stage to note"),
])
def test_a_wrong_name_or_note_says_where_and_what(extra: str, message: str) -> None:
    # a note names a stage this scenario's layer shows: the message lists them, read from its graph
    stages = ", ".join(s.key for s in scenario_from_text(BASE, "lesson.yaml").graph if s.shown)
    with pytest.raises(ScenarioError) as err:
        scenario_from_text(BASE + extra, "lesson.yaml")
    assert str(err.value).startswith(message.format(stages=stages))
    assert "S+M" not in stages  # no mask: the second case names a stage of another layer


def test_the_walk_opens_with_the_lesson(tmp_path) -> None:
    out = walk_text(tmp_path, NAMED)
    first = out[:out.index("Stage 2 / 11")]
    for words in ("Two words", "A tiny lesson.", "What each column of E means: 1 = geography · 2 = finance"):
        assert words in first
    assert first.index("Stage 1 / 11") < first.index("Two words") < first.index("river")
    zh = walk_text(tmp_path, NAMED, "--lang", "zh")
    assert "两个词" in zh and "一个很小的例子。" in zh and "E 每一列的含义：1 = 地理 · 2 = 金融" in zh


def test_named_columns_label_the_tables_and_the_worked_cells(tmp_path) -> None:
    out = walk_text(tmp_path, NAMED)
    e_screen = out[out.index("Stage 2 / 11"):out.index("Stage 3 / 11")]
    header = e_screen.splitlines()[5]  # the table's column labels, under the stage's header
    assert header.split() == ["geography", "finance"]
    assert "E[bank, geography] = 0.5000" in e_screen
    z_screen = out[out.index("Stage 11 / 11"):]
    assert "Z[bank, place] = " in z_screen  # d_v names label V and Z
    q_screen = out[out.index("Stage 5 / 11"):out.index("Stage 6 / 11")]
    assert q_screen.splitlines()[5].split() == ["1", "2"]  # d_k is unnamed: numbers from 1


def test_notes_show_on_their_stage_only(tmp_path) -> None:
    out = walk_text(tmp_path, NAMED)
    a_screen = out[out.index("Stage 10 / 11"):out.index("Stage 11 / 11")]
    assert "What to notice: bank looks mostly at river" in a_screen
    assert out.count("bank looks mostly at river") == 1
    assert "What to notice: only in English" in out[out.index("Stage 8 / 11"):out.index("Stage 9 / 11")]
    assert "留意：bank 主要看向 river" in walk_text(tmp_path, NAMED, "--lang", "zh")


def test_explain_takes_a_dimension_by_name_or_index(tmp_path) -> None:
    path = tmp_path / "lesson.yaml"
    path.write_text(NAMED, encoding="utf-8")
    by_name = runner.invoke(app, ["explain", str(path), "E", "bank", "Geography"], env=ENV)
    by_index = runner.invoke(app, ["explain", str(path), "E", "bank", "1"], env=ENV)  # from 1
    assert by_name.exit_code == by_index.exit_code == 0
    assert "E[bank, geography] = 0.5000" in by_name.stdout and by_name.stdout == by_index.stdout
    second = runner.invoke(app, ["explain", str(path), "E", "bank", "2"], env=ENV)
    assert "E[bank, finance] = 1.0000" in second.stdout  # embeddings row 2, value 2
    zero = runner.invoke(app, ["explain", str(path), "E", "bank", "0"], env=ENV)
    assert zero.exit_code == 2
    assert "no column 0: columns are numbered from 1, so the first is column 1; give 1–2 " \
           "(geography, finance)" in zero.stderr
    bad = runner.invoke(app, ["explain", str(path), "E", "bank", "weather"], env=ENV)
    assert bad.exit_code == 2
    assert "no column 'weather': this stage's columns are dimensions 1–2 (geography, finance)" in bad.stderr


def test_handouts_carry_the_names_and_the_notes(tmp_path) -> None:
    path = tmp_path / "lesson.yaml"
    path.write_text(NAMED, encoding="utf-8")
    md = runner.invoke(app, ["export", str(path), "--format", "markdown"], env=ENV).stdout
    assert "What each column of E means: 1 = geography · 2 = finance" in md
    assert "- **What to notice**: bank looks mostly at river" in md
    assert "| geography | finance |" in md.replace("  ", " ")


def test_notes_in_another_mode_say_whose_numbers_they_quote(tmp_path) -> None:
    scaled = walk_text(tmp_path, NAMED)
    assert "What to notice: bank looks mostly at river" in scaled
    for args in (("--mode", "unscaled"), ("--mode", "uniform")):
        other = walk_text(tmp_path, NAMED, *args)
        assert "What to notice (its numbers are those of the scaled mode): bank looks" in other
        assert "What to notice: " not in other
    zh = walk_text(tmp_path, NAMED, "--mode", "uniform", "--lang", "zh")
    assert "留意（其中的数字来自「缩放」模式）：bank 主要看向 river" in zh


def test_the_masked_scores_work_a_hidden_cell_beside_an_allowed_one() -> None:
    result = runner.invoke(app, ["run", "causal_mask", "--no-pause"], env=ENV)
    screen = result.stdout[result.stdout.index("Stage 10 / 12"):result.stdout.index("Stage 11 / 12")]
    # the focus row T2 may read T1 and T2; T3 comes after it (lesson 003 §9's mask)
    assert "(S + M)[T2, T3] = −∞" in screen and "S + M = 0.7071 + (−∞) = −∞" in screen
    assert "S + M = 0.7071 + 0 = 0.7071" in screen
    unmasked = runner.invoke(app, ["run", "girl_bangs", "--no-pause"], env=ENV).stdout
    assert "−∞" not in unmasked


def test_additive_scores_are_not_explained_as_dot_products() -> None:
    out = runner.invoke(app, ["run", "additive_score", "--no-pause"], env=ENV).stdout
    screen = out[out.index("Stage 8 / 11"):out.index("Stage 9 / 11")]
    assert "Raw scores (additive)" in screen and "tanh(q_i + k_j) · w_a" in screen
    assert "Every query is dotted with every key" not in screen
    assert "|q| |k| cos θ" not in screen
