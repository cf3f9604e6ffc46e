"""One numbering: rows and dimension columns count from 1 wherever a learner reads or types them.

Each test would fail on an off-by-one: the cells asked for have neighbours with other values, and
the golden numbers are lesson 002's (女生撩刘海, ../shared/seeds/002): Q = [[-0.2000, 1.7000],
[0.3274, 1.2872], [1.1215, 0.8264]], V[撩] = [1.8254, 1.6276], Z[女生] = [1.5636, 2.5716].
The positional formula alone counts from 0, and says so.
"""

from __future__ import annotations

import math
import re

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.tutor.questions import questions
from attnwalk.tutor.quiz import NUMBER

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def explain(*args: str):
    return runner.invoke(app, ["explain", "girl_bangs", *args], env=ENV)


# -- explain: what is typed is what the table labels --------------------------------------------


@pytest.mark.parametrize("stage, col, value", [
    ("Q", "1", "0.3274"), ("Q", "2", "1.2872"),  # lesson 002: Q撩 = [0.3274, 1.2872]
    ("V", "1", "1.8254"), ("V", "2", "1.6276"),
])
def test_explain_takes_dimension_columns_from_1(stage: str, col: str, value: str) -> None:
    result = explain(stage, "撩", col)
    assert result.exit_code == 0, result.output
    assert f"{stage}[撩, {col}] = {value}" in result.stdout  # the result line, labelled as typed
    assert f"W_{stage}[:, {col}] = " in result.stdout  # the weight's column, the same number


def test_explain_of_row_2_column_1_is_the_second_token_and_the_first_dimension() -> None:
    by_number, by_token = explain("Q", "2", "1"), explain("Q", "撩", "1")
    assert by_number.stdout == by_token.stdout and "Q[撩, 1] = 0.3274" in by_number.stdout


@pytest.mark.parametrize("args, message", [
    (("Q", "2", "0"), "no column 0: columns are numbered from 1, so the first is column 1; give 1–2"),
    (("A", "2", "0"), "no column 0: columns are numbered from 1, so the first, 女生, is column 1"),
    (("A", "0", "1"), "no row 0: rows are numbered from 1, so the first, 女生, is row 1"),
    (("Q", "2", "3"), "no column '3': this stage's columns are dimensions 1–2"),
])
def test_zero_and_one_past_the_end_are_refused_saying_where_numbering_starts(args, message) -> None:
    result = explain(*args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == f"attnwalk: {message}" or message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_explain_help_says_columns_count_from_1() -> None:
    out = " ".join(runner.invoke(app, ["explain", "--help"], env=ENV).stdout.split())
    assert "counted from 1" in out and "a dimension 1 … d" in out
    assert "0 … d" not in out and "d-1" not in out


# -- the positional encoding: the one place that counts from 0, and says so ----------------------


def test_p_worked_cell_labels_the_formulas_zero_based_pos_and_dimension() -> None:
    # row 2 (撩) stands at pos = 1; column 1 is the formula's dimension 2i = 0: sin(1) = 0.8415
    first = " ".join(explain("P", "2", "1").stdout.split())
    assert "row 2 is position pos = 1, and column 1 is dimension 2i = 0" in first
    assert f"P[pos = 1, 2i = 0] = sin(1 / 10000^(0/2)) = sin(1) = {math.sin(1):.4f}" in first
    assert f"P[撩, 1] = {math.sin(1):.4f}" in first
    # row 1 (女生) stands at pos = 0; column 2 is 2i+1 = 1: cos(0) = 1, the lesson's "cos 0 = 1"
    second = " ".join(explain("P", "1", "2").stdout.split())
    assert "row 1 is position pos = 0, and column 2 is dimension 2i+1 = 1" in second
    assert "P[女生, 2] = 1.0000" in second
    zh = "".join(explain("P", "2", "2", "--lang", "zh").stdout.split())
    assert "第2行的位置是pos=1，第2列对应公式里的维度2i+1=1" in zh and f"P[撩,2]={math.cos(1):.4f}" in zh


# -- the walk's tables and worked cells ------------------------------------------------------------


def test_walk_tables_label_dimensions_from_1() -> None:
    out = runner.invoke(app, ["run", "girl_bangs", "--no-pause"], env=ENV).stdout
    z = out[out.index("Stage 11 / 11"):]
    header = next(line for line in z.splitlines() if line.split() == ["1", "2"])
    row = next(line for line in z.splitlines()[z.splitlines().index(header):] if "女生" in line)
    assert row.split()[1:] == ["1.5636", "2.5716"]  # lesson 002: Z女生, under columns 1 and 2


def test_multi_head_blocks_and_summaries_count_columns_from_1(tmp_path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("tokens: [a, b, c]\nembeddings: [[1, 0], [0, 1], [1, 1]]\nheads: 2\n"
                    "W_Q: [[1, 0, 0.5, 1], [0, 1, 1, 0]]\nW_K: [[1, 0, 0, 1], [0, 1, 1, 0.5]]\n"
                    "W_V: [[1, 0, 1, 1], [0, 1, 0, 2]]\n", encoding="utf-8")
    out = " ".join(runner.invoke(app, ["step", "--scenario", str(path), "--no-pause"], env=ENV).stdout.split())
    assert "head 1 = columns 1–2 · head 2 = columns 3–4" in out
    # Q[b] = X[b] · W_Q = [0, 1, 1, 0]: column 3 of Q is head 2's first, worked as such
    q = runner.invoke(app, ["explain", str(path), "Q", "b", "3"], env=ENV).stdout
    assert "head 2 / 2, column 1 of its 2" in " ".join(q.split()) and "Q[b, 3] = 1.0000" in q


# -- the quiz --------------------------------------------------------------------------------------


def test_quiz_names_a_dimension_cell_by_its_label_from_1() -> None:
    walk = compute(load_scenario("girl_bangs"))
    asked = [q for seed in range(12) for q in questions(walk, "en", seed)
             if q.kind == NUMBER and q.cell and not walk.stage(q.cell[0]).square]
    assert asked, "no dimension cell asked in 12 seeds"
    for q in asked:
        key, head, row, col = q.cell
        assert f"[{walk.scenario.tokens[row]}, {col + 1}]" in q.text, (q.text, q.cell)
        assert q.answer == pytest.approx(walk.matrix(key, head)[row, col])


# -- handouts ----------------------------------------------------------------------------------------


def test_handout_tokens_table_has_row_numbers_from_1_and_positions_from_0() -> None:
    md = runner.invoke(app, ["export", "girl_bangs", "--format", "markdown"], env=ENV).stdout
    assert "| # | pos | token | id |" in md
    assert "| 1 | 0 | 女生 | 1258 |" in md and "| 3 | 2 | 刘海 | 9527 |" in md
    assert "The # column counts rows from 1" in md
    assert "| token | 1 | 2 |" in md and "| 0 | 1 |" not in md


# -- scenario files: the error messages ------------------------------------------------------------

BASE = {"tokens": "[cat, sat]", "embeddings": "[[1, 0], [0, 1]]", "W_Q": "[[1, 0], [0, 1]]",
        "W_K": "[[1, 0], [0, 1]]", "W_V": "[[1, 0], [0, 1]]"}


def refused(**fields: str) -> str:
    doc = "".join(f"{key}: {value}\n" for key, value in {**BASE, **fields}.items())
    with pytest.raises(ScenarioError) as err:
        scenario_from_text(doc, "s.yaml")
    return str(err.value)


@pytest.mark.parametrize("fields, where", [
    ({"embeddings": "[[1, 0], [0, x]]"}, "embeddings row 2, value 2: "),
    ({"embeddings": "[[1, x], [0, 1]]"}, "embeddings row 1, value 2: "),
    ({"embeddings": "[[1, 0], [x, 1]]"}, "embeddings row 2, value 1: "),
    ({"W_V": "[[1, 0], [0, 1, 2]]"}, "W_V row 2 has 3 numbers, but row 1 has 2"),
    ({"tokens": "[cat, [sat]]"}, "tokens item 2: "),
    ({"ids": "[1, -1]"}, "ids item 2: "),
    ({"mask": "[[true, false], [true, maybe]]"}, "mask row 2, entry 2: "),
    ({"mask": "[[true, false], [false, false]]"}, "mask row 2 ('sat') allows no key"),
    ({"score": "additive", "w_a": "[1, x]"}, "w_a value 2: "),
])
def test_yaml_errors_count_rows_and_values_from_1(fields: dict[str, str], where: str) -> None:
    message = refused(**fields)
    assert re.match(r"s\.yaml:\d+: ", message) and where in message, message
    assert not re.search(r"\[\d+\]\[?", message.split(": ", 2)[1]), message  # no [1][1] paths


def test_the_parsers_own_place_is_counted_from_1_too(tmp_path) -> None:
    # found while parsing (nesting too deep), named as the loader names fields: tokens' item 1
    path = tmp_path / "deep.yaml"
    path.write_text("tokens: " + "[" * 40 + "]" * 40 + "\n", encoding="utf-8")
    result = runner.invoke(app, ["export", str(path)], env=ENV)
    assert result.exit_code == 2 and f"{path}:1: tokens item 1, item 1" in result.stderr


def test_quiz_reads_a_token_by_its_number_from_1_and_says_so_for_0() -> None:
    from attnwalk.text import text
    from attnwalk.tutor.quiz import TOKEN, check, unreadable

    walk = compute(load_scenario("girl_bangs"))
    q = next(q for seed in range(12) for q in questions(walk, "en", seed) if q.kind == TOKEN)
    right = q.answer + 1  # the token's number, as the tokens table's # column shows it
    assert check(q, str(right)) is True and check(q, q.token_text[q.answer]) is True
    assert check(q, str(right - 1 or 2)) is False  # its 0-based index names another token
    assert check(q, "0") is None
    assert "counted from 1: 1–3" in unreadable(q, text("en"), "0")
    assert "从 1 数起" in unreadable(q, text("zh"), "0")


# -- one numbering function --------------------------------------------------------------------------


def test_every_number_a_person_reads_is_counted_from_1_in_one_place() -> None:
    """A 0-based index is written for a person through attnwalk/numbering.py alone: a `+ 1` inside
    an f-string or a str() elsewhere is a second numbering, the one that printed R[sat, 0] under a
    header counting from 1."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "attnwalk"
    pattern = re.compile(r"\{[^{}]*\+ ?1\}|str\([^()]*\+ ?1\)"  # f"{i + 1}", str(i + 1), and a text's
                         r"|\b(?:head|row|col|index|kv_head|kv|layer|block|step|j|start|k_start|v_start|sub)"
                         r"=[^,=]*? \+ 1\b")  # placeholder given i + 1
    found = [f"{path.relative_to(root)}:{n}: {line.strip()}"
             for path in sorted(root.rglob("*.py")) if path.name != "numbering.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not found, "count from 1 with attnwalk.numbering: " + "; ".join(found)


def test_numbering_writes_ranges_and_runs_from_1() -> None:
    from attnwalk.numbering import runs, shown, span

    assert shown(0) == 1 and span(0, 2) == "1–3" and span(4, 4) == "5"
    assert runs([0, 1, 2, 4, 6, 7], "-") == "1-3, 5, 7-8"


def test_explain_names_the_head_it_works_out_counted_from_1() -> None:
    """explain on a per-head stage without --head works head 1 out, and says so (it said "head None")."""
    result = runner.invoke(app, ["explain", "alibi", "B", "它", "小猫"], env=ENV)
    assert result.exit_code == 0 and "head 1 / 4" in result.stdout and "None" not in result.stdout
    result = runner.invoke(app, ["explain", "alibi", "B", "它", "小猫", "--head", "3"], env=ENV)
    assert result.exit_code == 0 and "head 3 / 4" in result.stdout
