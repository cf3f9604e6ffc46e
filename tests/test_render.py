"""The stage screens, the heat tables and `attnwalk explain`, rendered to a fixed colourless console.

Golden numbers are typed in from lesson 002 (女生撩刘海), ../shared/seeds/002_*.txt, never taken
from attnwalk's output. Where the lesson's own arithmetic is off in the last digit, the test says
so and checks against math.exp / plain multiplication of the lesson's printed inputs instead.

The golden screens in tests/golden/girl_bangs/ were generated once and read number by number
against the lesson; regenerate with ATTNWALK_UPDATE_GOLDEN=1 and read them again.
"""

from __future__ import annotations

import io
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.layer.walk import compute
from attnwalk.render import style
from attnwalk.render.heatmap import heat_table
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import stage_screen, walk_renderables, walk_steps
from attnwalk.layer.axes import default_cell, dim_labels
from attnwalk.render.worked import worked_cell
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.features import stage_named
from attnwalk.layer.stages import SIGNED

GOLDEN = Path(__file__).parent / "golden" / "girl_bangs"

# Lesson 002's inputs, section by section: 1.1 tokens and ids, 1.2 E, 2.2 sinusoidal P, 3.1 W_Q/K/V.
LESSON_002 = """\
name: girl_bangs
tokens: [女生, 撩, 刘海]
ids: [1258, 875, 9527]
embeddings: [[3, 1], [2, 2], [2, 4]]
positional: sinusoidal
W_Q: [[-0.6, 0.9], [0.8, -0.5]]
W_K: [[0.6, 0.1], [-0.1, 1.4]]
W_V: [[1.0, -0.5], [-0.4, 1.2]]
focus: 撩
"""

# What the lesson prints for each stage, typed in from its text.
LESSON_VALUES = {
    "tokens": ["女生", "撩", "刘海", "1258", "875", "9527"],
    "E": ["3.0000", "1.0000", "2.0000", "4.0000"],
    "P": ["0.0000", "1.0000", "0.8415", "0.5403", "0.9093", "-0.4161"],
    "X": ["3.0000", "2.0000", "2.8415", "2.5403", "2.9093", "3.5839"],
    "Q": ["-0.2000", "1.7000", "0.3274", "1.2872", "1.1215", "0.8264"],
    "K": ["1.6000", "3.1000", "1.4509", "3.8406", "1.3872", "5.3083"],
    "V": ["2.2000", "0.9000", "1.8254", "1.6276", "1.4758", "2.8460"],
    "QK^T": ["4.9500", "6.2388", "8.7467", "4.5140", "5.4184", "7.2868", "4.3564", "4.8011",
             "5.9428"],
    "S": ["3.5002", "4.4115", "6.1849", "3.1919", "3.8314", "5.1526", "3.0804", "3.3949",
          "4.2022"],
    "A": ["0.0551", "0.1371", "0.8078", "0.1000", "0.1896", "0.7104", "0.1838", "0.2518",
          "0.5644"],
    "Z": ["1.5636", "2.5716", "1.6145", "2.4204", "1.6969", "2.1815"],
}

BOX_DRAWING = re.compile("[\u2500-\u259f]")  # box drawing and block elements


def render(renderable, width: int = 100) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False)
    console.print(renderable)
    return console.file.getvalue()


def golden_name(key: str) -> str:
    return key.replace("^", "").replace("+", "_") + ".txt"


@pytest.fixture(scope="module")
def walk():
    return compute(scenario_from_text(LESSON_002, "girl_bangs.yaml"))


@pytest.fixture(scope="module")
def screens(walk) -> dict[str, str]:
    """Each stage's screen as text, keyed by stage key."""
    steps = walk_steps(walk)
    opts = ViewOptions()
    return {stage.key: render(stage_screen(walk, stage, head, opts, index=i, count=len(steps)))
            for i, (stage, head) in enumerate(steps, start=1)}


# -- the lesson, stage by stage ---------------------------------------------------------------------


@pytest.mark.parametrize("key", list(LESSON_VALUES))
def test_screen_matches_golden(screens: dict[str, str], key: str) -> None:
    path = GOLDEN / golden_name(key)
    got = "\n".join(line.rstrip() for line in screens[key].splitlines()) + "\n"
    if os.environ.get("ATTNWALK_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("key", list(LESSON_VALUES))
def test_screen_shows_the_lessons_numbers(screens: dict[str, str], key: str) -> None:
    for value in LESSON_VALUES[key]:
        assert value in screens[key], f"{key} screen lacks the lesson's {value}"


def test_walk_has_the_lessons_eleven_stages(walk) -> None:
    assert [s.key for s, _ in walk_steps(walk)] == list(LESSON_VALUES)


def test_screen_header_names_position_title_shape_and_mode(screens: dict[str, str]) -> None:
    text = screens["QK^T"]
    assert "Stage 8 / 11" in text
    assert "QKᵀ" in text and "Raw scores" in text
    assert "3 × 3 = n × n" in text
    assert "mode" in text and "scaled" in text
    assert "3 × 2 = n × d_k" in screens["Q"]


def test_screens_explain_what_why_and_mistake(screens: dict[str, str]) -> None:
    for key in ("E", "QK^T", "A"):
        for label in ("What", "Why", "Common mistake"):
            assert label in screens[key]


# -- worked cells ----------------------------------------------------------------------------------


def cell(walk, key: str, row: int, col: int, **kw) -> str:
    opts = ViewOptions(**kw)
    return render(worked_cell(walk.view(0), key, row, col, opts), width=opts.width)


def flat(panel: str) -> str:
    """A worked panel's lines as one, its borders gone: the arithmetic across its line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", panel).split())


def lesson_scores() -> np.ndarray:
    """S computed the way lesson 002's own Python code (section 7.2) does, apart from attnwalk."""
    E = np.array([[3.0, 1.0], [2.0, 2.0], [2.0, 4.0]])
    P = np.array([[math.sin(pos), math.cos(pos)] for pos in range(3)])  # d = 2: angle = pos
    X = E + P
    Q = X @ np.array([[-0.6, 0.9], [0.8, -0.5]])
    K = X @ np.array([[0.6, 0.1], [-0.1, 1.4]])
    return Q @ K.T / math.sqrt(2)


def test_default_cell_is_focus_row_and_its_most_attended_key(walk) -> None:
    assert default_cell(walk, "QK^T") == (1, 2)  # 撩 → 刘海
    assert default_cell(walk, "Q") == (1, 0)


def test_worked_scores_cell_is_the_lessons_example(screens: dict[str, str], walk) -> None:
    # Lesson 4.1: 0.3274×1.3872 + 1.2872×5.3083 = 0.4542 + 6.8326 = 7.2868. Its middle step is off
    # in the last digit: 0.3274×1.3872 = 0.45417 and 1.2872×5.3083 = 6.83284, which add up to
    # 7.2870, not 7.2868: at 4 decimals the rounding of q and k moves the sum. attnwalk works this
    # cell to 5 decimals, so that each product is of the factors shown and the sum lands on 7.2868.
    text = flat(cell(walk, "QK^T", 1, 2))
    assert "q_撩 = [0.32736, 1.28717]" in screens["QK^T"]  # the walk's screen works the same cell
    m = re.search(r"q_撩 · k_刘海 = (\S+) × (\S+) \+ (\S+) × (\S+) = (\S+) \+ (\S+) = (\S+)", text)
    assert m, text
    q0, k0, q1, k1, p0, p1, total = (float(x) for x in m.groups())
    assert [round(q0, 4), round(q1, 4), round(k0, 4), round(k1, 4)] == [0.3274, 1.2872, 1.3872, 5.3083]
    assert abs(q0 * k0 - p0) <= 5e-6 and abs(q1 * k1 - p1) <= 5e-6  # products of the shown factors
    assert round(p0 + p1, 5) == total and round(total, 4) == 7.2868  # landing on the lesson's value
    assert "QKᵀ[撩, 刘海] = 7.2868" in text


def test_worked_projection_uses_x_row_and_w_column(walk) -> None:
    # Lesson 3.1: Q女生 = [3×(-0.6) + 2×0.8, …] = [-0.2000, …]; K女生[0] = 3×0.6 + 2×(-0.1) = 1.6
    text = cell(walk, "Q", 0, 0)
    assert "3.0000 × (-0.6000) + 2.0000 × 0.8000" in text and "-0.2000" in text
    text = cell(walk, "K", 0, 0)
    assert "3.0000 × 0.6000 + 2.0000 × (-0.1000)" in text and "1.6000" in text


def test_worked_embedding_and_position(walk) -> None:
    assert "EmbeddingTable[875] = [2.0000, 2.0000]" in cell(walk, "E", 1, 0)
    # Lesson 2.3: PE(2, 0) = sin(2) = 0.9093, PE(2, 1) = cos(2) = -0.4161
    assert "sin(2) = 0.9093" in cell(walk, "P", 2, 0)
    assert "cos(2) = -0.4161" in cell(walk, "P", 2, 1)
    # Lesson 2.4: 撩 [2, 2] + [0.8415, 0.5403] = [2.8415, 2.5403]
    assert "[2.0000, 2.0000] + [0.8415, 0.5403] = [2.8415, 2.5403]" in cell(walk, "X", 1, 0)


def test_worked_scaling_divides_by_root_dk(walk) -> None:
    # Lesson 4.2: √2 ≈ 1.4142; S[撩, 刘海] = 5.1526
    assert "7.2868 / √2 = 7.2868 / 1.4142 = 5.1526" in cell(walk, "S", 1, 2)


def test_worked_softmax_row_of_the_lesson(walk) -> None:
    text = cell(walk, "A", 0, 2)
    # Lesson 5: e^3.5002 = 33.12 and A[女生, 刘海] = 0.8078. The lesson's other exponentials
    # (82.42, 485.6, row sum 601.1) are off: e^4.4115 is 82.39 and e^6.1849 is 485.4. attnwalk
    # exponentiates the scores as shown (the lesson's own code gives them to 4 decimals), so
    # each line checks on a calculator: 33.12 + 82.39 + 485.4 = 600.91, 485.4 / 600.9 = 0.8078.
    assert "e^3.5002 = 33.12" in text
    S = lesson_scores()[0]
    for s in S:
        assert f"e^{s:.4f} = {math.exp(round(s, 4)):#.4g}" in text
    assert "e^6.1849 = 485.4" in text  # it printed 485.3, e^ of the unrounded 6.184860
    assert f"row sum = 33.12 + 82.39 + 485.4 = {33.12 + 82.39 + 485.4:#.4g}" in text
    assert f"485.4 / 600.9 = {485.4 / 600.9:.4f}" in text and "= 0.8078" in text
    assert "e^(3.5002 − 6.1849)" in text  # the stable form, after subtracting the row max


def test_worked_output_is_the_weighted_sum_of_v_rows(walk) -> None:
    # Lesson 6: Z女生 = 0.0551 × [2.2000, 0.9000] + 0.1371 × [1.8254, 1.6276] + 0.8078 × [1.4758,
    # 2.8460]; the first dimension (column 1) = 1.5636, the second = 2.5716. The lesson's line does not add up at 4
    # decimals: 0.0551 × 0.9 + 0.1371 × 1.6276 + 0.8078 × 2.846 = 2.5717. attnwalk works the cell
    # to 5 decimals, where it does: the weights and values shown round to the lesson's.
    text = flat(cell(walk, "Z", 0, 0, width=200))
    m = re.search(r"A\[女生\] · V\[:, 1\] = (\S+) × (\S+) \+ (\S+) × (\S+) \+ (\S+) × (\S+) = ", text)
    assert m, text
    a, v = [float(x) for x in m.groups()[::2]], [float(x) for x in m.groups()[1::2]]
    assert np.allclose(a, [0.0551, 0.1371, 0.8078], rtol=0, atol=5e-5 + 1e-12)  # 0.80775 ≈ 0.8078
    assert np.allclose(v, [2.2, 1.8254, 1.4758], rtol=0, atol=5e-5 + 1e-12)
    whole = re.search(r"Z\[女生\] = .* = \[(\S+), (\S+)\]", text)
    assert whole and np.allclose([float(x) for x in whole.groups()], [1.5636, 2.5716], rtol=0,
                                 atol=5e-5 + 1e-12)
    assert round(float(whole[1]), 5) == round(sum(x * y for x, y in zip(a, v)), 5)
    assert "Z[女生, 1] = 1.5636" in text  # the first column, as the table labels it


def test_worked_cell_in_other_modes() -> None:
    scn = scenario_from_text(LESSON_002, "girl_bangs.yaml")
    assert "no division" in cell(compute(scn, "unscaled"), "S", 1, 2)
    uniform = cell(compute(scn, "uniform"), "A", 1, 2)
    assert "1 / 3 = 0.3333" in uniform
    hard = cell(compute(scn, "hard"), "A", 1, 2)
    assert "A[撩, 刘海] = 1.0000" in hard


def test_overflowing_scores_show_only_the_stable_form() -> None:
    scn = scenario_from_text("tokens: [a, b]\nembeddings: [[30, 0], [29, 1]]\n"
                             "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n",
                             "hot.yaml")
    text = cell(compute(scn, "unscaled"), "A", 0, 1)  # scores 900 and 870: e^900 is inf
    assert "e^900.0000 would overflow" in text
    # 9.4e-14 is below what 4 decimals show: the table writes it as 9.3576e-14, and the
    # exponential is given to as many digits as agree with it
    assert f"e^(870.0000 − 900.0000) = {math.exp(-30):.4e}" in text
    assert "inf =" not in text and "nan" not in text


def test_long_dot_products_are_elided_with_a_count() -> None:
    d = 64
    rng = np.random.default_rng(1)
    rows = lambda r, c: "[" + ", ".join(  # noqa: E731
        "[" + ", ".join(f"{x:.3f}" for x in row) + "]" for row in rng.normal(size=(r, c))) + "]"
    scn = scenario_from_text(f"tokens: [a, b]\nembeddings: {rows(2, d)}\nW_Q: {rows(d, d)}\n"
                             f"W_K: {rows(d, d)}\nW_V: {rows(d, d)}\n", "wide.yaml")
    text = cell(compute(scn), "QK^T", 1, 1)
    assert "… (58 more terms) …" in text


# -- heat tables -----------------------------------------------------------------------------------


def test_wide_matrix_is_split_not_squeezed() -> None:
    rng = np.random.default_rng(7)
    M = rng.normal(size=(3, 12)) * 100
    opts = ViewOptions(width=60)
    text = render(heat_table(M, ["女生", "撩", "刘海"], dim_labels(12), SIGNED, opts), width=60)
    # each piece is titled with the columns it holds, counted from 1 as they are labelled
    lines = text.splitlines()
    titles = [(k, *map(int, m.groups())) for k, line in enumerate(lines)
              if (m := re.search(r"columns (\d+)–(\d+) of 12", line))]
    assert len(titles) > 1 and titles[0][1] == 1 and titles[-1][2] == 12, text
    assert all(prev[2] + 1 == this[1] for prev, this in zip(titles, titles[1:])), titles
    for k, first, last in titles:  # under each title, the header names exactly its columns
        assert lines[k + 1].split() == [str(j) for j in range(first, last + 1)], (lines[k + 1], first, last)
    for value in M.ravel():
        assert f"{value:.4f}" in text
    assert all(cell_len(line.rstrip()) <= 60 for line in text.splitlines())


def test_huge_matrix_shows_head_and_tail_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    number = style.number
    monkeypatch.setattr(style, "number", lambda x, o: calls.append(x) or number(x, o))
    M = np.arange(300 * 300, dtype=float).reshape(300, 300)
    labels = [f"t{i}" for i in range(300)]
    start = time.process_time()  # CPU time: its own work, whatever else the machine runs
    text = render(heat_table(M, labels, [str(j) for j in range(300)], SIGNED, ViewOptions()))
    assert time.process_time() - start < 1.0
    assert "… 284 more rows …" in text
    # hidden columns anyway: as many head and tail columns as fit one 100-wide table, not two
    assert re.search(r"… 29\d more columns …", text) and "columns 1–" not in text
    assert all(cell_len(line.rstrip()) <= 100 for line in text.splitlines())
    assert "0.0000" in text and f"{299 * 300 + 299:.4f}" in text  # first and last cells
    assert "t0" in text and "t299" in text and "t150" not in text
    assert len(calls) <= 16 * 12  # only the shown cells were formatted


def test_chinese_tokens_keep_columns_aligned(screens: dict[str, str]) -> None:
    rows = {tok: line for line in screens["QK^T"].splitlines()
            for tok in ("女生", "撩", "刘海") if line.lstrip().startswith(tok + " ")}
    values = {"女生": ("4.9500", "6.2388", "8.7467"), "撩": ("4.5140", "5.4184", "7.2868"),
              "刘海": ("4.3564", "4.8011", "5.9428")}
    edges = {tok: [cell_len(line[:line.index(v) + len(v)]) for v in values[tok]]
             for tok, line in rows.items()}
    assert len(edges) == 3 and len({tuple(e) for e in edges.values()}) == 1, edges


def test_row_max_is_marked_without_colour(screens: dict[str, str]) -> None:
    assert "0.8078 ▲" in screens["A"] and "0.7104 ▲" in screens["A"]
    assert "0.0551 ▲" not in screens["A"]


def test_bars_say_where_each_token_looks(screens: dict[str, str]) -> None:
    # Lesson 5: 女生 gives 80.8 % to 刘海, 撩 71 %, 刘海 56 % to itself.
    text = screens["A"]
    assert re.search(r"女生 +→ 刘海 +█+ +81%", text)
    assert re.search(r"撩 +→ 刘海 +█+ +71%", text)
    assert re.search(r"刘海 +→ 刘海 +█+ +56%", text)


def test_masked_cells_show_minus_infinity() -> None:
    walk = compute(load_scenario("causal_mask"))
    texts = [render(r) for r in walk_renderables(walk, ViewOptions())]
    masked = next(t for t in texts if "Masked scores" in t)
    assert "−∞" in masked
    ascii_masked = render(stage_screen(walk, stage_named("S+M"), 0, ViewOptions(ascii=True),
                                       index=1, count=1))
    assert "-inf" in ascii_masked and "−∞" not in ascii_masked


@pytest.mark.parametrize("name", ["girl_bangs", "causal_mask", "river_bank"])
def test_ascii_mode_draws_only_ascii_besides_tokens(name: str) -> None:
    walk = compute(load_scenario(name))
    for renderable in walk_renderables(walk, ViewOptions(ascii=True)):
        text = render(renderable)
        assert not BOX_DRAWING.search(text)
        for tok in walk.scenario.tokens:
            text = text.replace(tok, "")
        assert text.isascii(), sorted({c for c in text if not c.isascii()})


def test_every_built_in_and_mode_renders() -> None:
    for name in ("girl_bangs", "causal_mask", "river_bank", "savings_bank", "yellow_dog"):
        for mode in ("scaled", "unscaled", "uniform", "hard"):
            walk = compute(load_scenario(name), mode)
            for renderable in walk_renderables(walk, ViewOptions(lang="zh")):
                assert render(renderable)


def test_multi_head_screens_name_their_head() -> None:
    scn = scenario_from_text(
        "tokens: [the, cat, sat, the]\n"
        "embeddings: [[1, 0, 0.5, 0], [0, 1, 0, 0.5], [0.5, 0, 1, 0], [1, 0, 0.5, 0]]\n"
        "heads: 2\nmask: causal\n"
        "W_Q: [[1,0,0,1],[0,1,1,0],[1,1,0,0],[0,0,1,1]]\n"
        "W_K: [[0,1,0,1],[1,0,1,0],[1,0,0,1],[0,1,1,0]]\n"
        "W_V: [[1,0,2,0],[0,1,0,2],[1,1,0,0],[0,0,1,1]]\n"
        "W_O: [[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]\n", "heads.yaml")
    walk = compute(scn)
    texts = [render(r) for r in walk_renderables(walk, ViewOptions())]
    assert len(texts) == len(walk_steps(walk))
    assert any("head 2 / 2" in t for t in texts)
    assert any("the#4" in t for t in texts)  # the repeated token is told apart
    assert "concat" in texts[-2] and "O = concat · W_O" in texts[-1]


# -- attnwalk explain ------------------------------------------------------------------------------


def explain(*args: str):
    return CliRunner().invoke(app, ["explain", *args])


def test_explain_works_out_one_cell() -> None:
    result = explain("girl_bangs", "A", "撩", "刘海")
    assert result.exit_code == 0, result.output
    assert "0.7104" in result.stdout  # lesson 5: A[撩][刘海] = 0.7104
    result = explain("girl_bangs", "QKT", "2", "3", "--ascii")
    assert result.exit_code == 0, result.output
    # lesson 4.1: q撩 = [0.3274, 1.2872], k刘海 = [1.3872, 5.3083], worked to 5 decimals
    assert "0.32736 x 1.38719 + 1.28717 x 5.30832" in result.stdout and "7.2868" in result.stdout


@pytest.mark.parametrize("args, hint", [
    (("girl_bangs", "nope", "1", "1"), "choose one of: E, P, X, Q, K, V, QK^T, S, A, Z"),
    (("quantized", "W_K", "1", "1"), "'W_K' is a weight, not a stage: each cell of K is worked out from a column of it"),
    (("girl_bangs", "w_v", "1", "1"), "each cell of V is worked out from a column of it; choose one of: E, P,"),
    (("girl_bangs", "A", "9", "1"), "1–3"),
    (("girl_bangs", "A", "撩", "狗"), "女生, 撩, 刘海"),
    (("girl_bangs", "Q", "1", "7"), "dimensions 1–2"),
    (("girl_bangs", "Q", "1", "3"), "dimensions 1–2"),  # d_k is 2: column 3 is one past the end
    (("girl_bangs", "Q", "1", "0"), "no column 0: columns are numbered from 1"),
    (("girl_bangs", "A", "2", "0"), "no column 0: columns are numbered from 1, so the first, 女生, is column 1"),
    (("girl_bangs", "A", "0", "1"), "no row 0: rows are numbered from 1"),
    (("girl_bangs", "A", "4", "1"), "no row '4': give a row number 1–3"),
    (("girl_bangs", "S+M", "1", "1"), "no S+M stage"),
    (("girl_bangs", "tokens", "1", "1"), "no cells"),
    (("girl_bangs", "A", "1", "1", "--head", "2"), "1 head"),
])
def test_explain_rejects_bad_cells_in_one_line(args: tuple[str, ...], hint: str) -> None:
    result = explain(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnwalk: ") and hint in lines[0]


def test_explain_asks_for_the_index_of_a_repeated_token(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("tokens: [the, cat, the]\nembeddings: [[1, 0], [0, 1], [1, 1]]\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n",
                    encoding="utf-8")
    result = explain(str(path), "A", "the", "cat")
    assert result.exit_code == 2 and "rows 1, 3" in result.stderr
    assert explain(str(path), "A", "3", "cat").exit_code == 0
    assert explain(str(path), "A", "the#3", "cat").exit_code == 0


# -- the explanation panel -------------------------------------------------------------------------

HEADS_2 = ("tokens: [the, cat, sat, the]\n"
           "embeddings: [[1, 0, 0.5, 0], [0, 1, 0, 0.5], [0.5, 0, 1, 0], [1, 0, 0.5, 0]]\n"
           "heads: 2\nmask: causal\n"
           "W_Q: [[1,0,0,1],[0,1,1,0],[1,1,0,0],[0,0,1,1]]\n"
           "W_K: [[0,1,0,1],[1,0,1,0],[1,0,0,1],[0,0,1,1]]\n"
           "W_V: [[1,0,2,0],[0,1,0,2],[1,1,0,0],[0,0,1,1]]\n"
           "W_O: [[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]\n")


def panel_rows(walk, key: str, opts: ViewOptions) -> list[tuple[str, str]]:
    """The explanation panel of stage `key` as (label, text) rows, wrapped lines joined."""
    from attnwalk.render.screens import explanation

    out = render(explanation(walk, stage_named(key), opts), width=opts.width)
    rows: list[list[str]] = []
    for line in out.splitlines()[1:-1]:
        inner = line[2:-2]
        label, body = inner[:16].strip(), inner[16:].strip()
        if label or not rows:
            rows.append([label, body])
        else:
            rows[-1][1] += " " + body
    return [(label, body) for label, body in rows]


def test_extra_notes_sit_under_note_not_common_mistake() -> None:
    scn = scenario_from_text(LESSON_002, "girl_bangs.yaml")
    from attnwalk.text import text

    tx = text("en")
    for mode, key in (("unscaled", "S"), ("uniform", "A"), ("hard", "A")):
        rows = panel_rows(compute(scn, mode), key, ViewOptions())
        labels = [label for label, _ in rows]
        assert labels[:3] == ["What", "Why", "Common mistake"]
        assert labels[3:] == ["Note"], (mode, rows)  # the mode's explanation is a note
        assert rows[3][1] == tx.t(f"mode.{mode}.explain")
        assert tx.t(f"mode.{mode}.explain") not in rows[2][1]


def test_no_text_twice_in_one_panel() -> None:
    walk = compute(scenario_from_text(HEADS_2, "heads.yaml"))
    for key in ("Q", "concat", "O"):
        rows = panel_rows(walk, key, ViewOptions())
        sentences = [s.strip() for _, body in rows for s in body.split(". ") if s.strip()]
        assert len(sentences) == len(set(sentences)), (key, rows)
    concat = dict(panel_rows(walk, "concat", ViewOptions()))
    assert "Heads are not the same attention repeated" not in " ".join(concat.values())
    assert concat["Note"].startswith("Each head returns an n × 2 output")
    o = panel_rows(walk, "O", ViewOptions())
    assert [label for label, _ in o] == ["What", "Why", "Common mistake"]  # nothing restating What


def test_chinese_explanations_break_between_characters(walk) -> None:
    """Rich broke only at spaces: "X = E +⏎P，逐元素相加", "把 E⏎的行打乱", "S = QKᵀ /⏎√d_k：…"."""
    opts = ViewOptions(lang="zh", width=80)
    steps = walk_steps(walk)
    screens_zh = {stage.key: render(stage_screen(walk, stage, head, opts, index=i, count=len(steps)),
                                    width=80)
                  for i, (stage, head) in enumerate(steps, start=1)}
    assert "X = E + P，逐元素相加" in screens_zh["X"]
    assert "把 E 的行打乱" in screens_zh["P"]
    assert "S = QKᵀ / √d_k：" in screens_zh["S"]
    for text_ in screens_zh.values():  # a panel line ends short only where its text ends
        lines = text_.splitlines()
        for line, after in zip(lines, lines[1:]):
            if line.startswith("│ ") and after.startswith("│ ") and after[2:12].strip() == "":
                body = line[12:-1].rstrip()  # this line's text, continued on the next
                assert cell_len(line[:12] + body) >= 80 - 4 - 12, (line, after)


def test_chinese_prose_breaks_between_characters_in_compare_and_head_panels() -> None:
    from attnwalk.layer.compare import compare
    from attnwalk.render.compareview import compare_view
    from attnwalk.render.overview import head_intro

    zh = ViewOptions(lang="zh", width=80)
    out = render(compare_view(compare(scenario_from_text(LESSON_002, "girl_bangs.yaml")), zh), 80)
    assert "若 q、k 各分量大致独立" in out  # Rich put "各分量…" on the next line
    assert "此时 softmax 的雅可比矩阵" in out.replace("\n", "")  # no line left ending "此时 softmax"
    walk = compute(scenario_from_text(HEADS_2, "heads.yaml"))
    intro = render(head_intro(walk.view(0), zh), 80)
    assert "每个头有自己那一份 W_Q、W_K、W_V，" in intro


# -- narrow terminals, signs, ties, precision, names of cells --------------------------------------


def a_screen(walk, opts: ViewOptions) -> str:
    steps = walk_steps(walk)
    i, (stage, head) = next((i, s) for i, s in enumerate(steps, start=1) if s[0].key == "A")
    return render(stage_screen(walk, stage, head, opts, index=i, count=len(steps)), width=opts.width)


@pytest.mark.parametrize("width", [40, 45, 50, 60, 72])
def test_narrow_terminals_stack_the_exponentials_instead_of_cutting_them(walk, width) -> None:
    """COLUMNS=50 cut the softmax table to "…   e^3.1919 = 24…"."""
    out = render(worked_cell(walk.view(0), "A", 1, 2, ViewOptions(width=width)), width=width)
    assert "…" not in out
    # the exponentials carry a fifth digit here: 172.9 / 243.4 = 0.7104 but 1.000 / 1.408 = 0.7102;
    # e^(s − max) a sixth, as every weight of the row needs (one precision along the row)
    for number in ("e^3.1919 = 24.335", "e^5.1526 = 172.88", "e^(3.1919 − 5.1526) = 0.140760",
                   "172.88 / 243.34 = 0.7104", "A[撩, 刘海] = 0.7104"):
        # whole, though a line may fold at a space (at 40 columns "… =" / "0.140760")
        joined = " ".join(" ".join(line.strip("│ ").split()) for line in out.splitlines())
        assert number in joined, (width, number)
    assert max(cell_len(line) for line in out.splitlines()) <= width


@pytest.mark.parametrize("width", [40, 45, 50, 60, 72])
def test_narrow_terminals_shrink_the_bars_instead_of_cutting_the_runner_up(walk, width) -> None:
    """COLUMNS=50 cut the bars to "(next: 撩 14…"."""
    out = a_screen(walk, ViewOptions(width=width))
    bars = out[out.index("Where each token looks"):out.index("╭─ Attention weights")]
    assert "…" not in bars
    for line in ("女生 → 刘海", "81%", "(next: 撩 14%)", "71%", "(next: 撩 19%)", "56%", "(next: 撩 25%)"):
        assert line in bars, (width, line)
    assert max(cell_len(line) for line in out.splitlines()) <= width


@pytest.mark.parametrize("name", ["girl_bangs", "causal_mask", "river_bank", "savings_bank", "yellow_dog"])
def test_no_worked_cell_or_bar_is_cut_at_forty_columns(name: str) -> None:
    walk = compute(load_scenario(name))
    opts = ViewOptions(width=40)
    for i, (stage, head) in enumerate(walk_steps(walk), start=1):
        out = render(stage_screen(walk, stage, head, opts, index=i, count=len(walk_steps(walk))), width=40)
        start = out.find("Where each token looks") if stage.key == "A" else out.find("╭─ Worked")
        assert start >= 0 or stage.key == "tokens"
        assert "…" not in out[max(start, 0):] or stage.key == "tokens", (name, stage.key, out)


def test_a_negative_number_after_an_operator_is_bracketed(walk) -> None:
    k = cell(walk, "K", 1, 0)  # lesson 3.1 writes 3×(-0.6), 2×(-0.5)
    assert "2.8415 × 0.6000 + 2.5403 × (-0.1000) = 1.7049 + (-0.2540) = 1.4509" in k
    q = cell(walk, "Q", 2, 0)  # Q[撩, 0] is worked to 5 decimals: -1.7049 + 2.0322 would be 0.3273
    assert "2.9093 × (-0.6000) + 3.5839 × 0.8000 = -1.7456 + 2.8671 = 1.1215" in q
    x = cell(walk, "X", 2, 1)
    assert "4.0000 + (-0.4161) = 3.5839" in x
    assert "x (-0.1000) = 1.7049 + (-0.2540)" in cell(walk, "K", 1, 0, ascii=True)
    for key in ("Q", "K", "V", "X", "Z"):
        for row in range(3):
            assert not re.search(r"[×+−x] -\d", cell(walk, key, row, 1)), (key, row)


def test_every_tied_maximum_is_marked_and_the_bars_say_it_is_a_tie() -> None:
    river = compute(load_scenario("river_bank"))  # the row "the" scores 0 against every key
    out = a_screen(river, ViewOptions())
    the_row = next(line for line in out.splitlines() if line.startswith(" the "))
    assert the_row.count("▲") == 4
    assert re.search(r"the +→ by, the, river, bank +█+ +25% each \(4-way tie\)", out)
    assert "every one where several tie" in out
    zh = a_screen(river, ViewOptions(lang="zh"))
    assert re.search(r"the +→ by、the、river、bank +█+ +25% （4 个并列）", zh)
    uniform = a_screen(compute(scenario_from_text(LESSON_002, "girl_bangs.yaml"), "uniform"),
                       ViewOptions())
    rows = [line for line in uniform.splitlines() if line.startswith((" 女生", " 撩", " 刘海"))]
    assert [row.count("▲") for row in rows] == [3, 3, 3]
    assert "女生 → 女生, 撩, 刘海 ███████              33% each (3-way tie)" in uniform
    assert "(next:" not in uniform
    scaled = a_screen(compute(scenario_from_text(LESSON_002, "girl_bangs.yaml")), ViewOptions())
    assert "tie" not in scaled  # no tie, no word of one


def test_worked_arithmetic_keeps_two_decimals_at_precision_zero(walk) -> None:
    """--precision 0 read "172.9 / 243.3 = 1" and "A[撩, 刘海] = 1"; lesson 5: 0.7104."""
    a = cell(walk, "A", 1, 2, precision=0)
    # the scores as shown, 3.19, 3.83, 5.15, exponentiated: e^3.19 = 24.29, e^5.15 = 172.4
    assert "e^3.19 = 24.29" in a and "e^5.15 = 172.4" in a
    assert "172.4 / 242.8 = 0.71" in a and "A[撩, 刘海] = 0.71" in a
    assert "(worked to 2 decimals; the tables show 0)" in a
    table = heat_table(walk.matrix("A"), ["女生", "撩", "刘海"], ["女生", "撩", "刘海"], "weights",
                       ViewOptions(precision=0), mark_row_max=True)
    assert "0.71" not in render(table)  # the tables print as asked
    assert "worked to" not in cell(walk, "A", 1, 2, precision=4)


def test_worked_cells_are_named_by_their_labels(walk) -> None:
    """"Worked cell: E[2, 0]: 撩, dimension 0" over "position 1" mixed 1- and 0-based numbers."""
    assert "Worked cell: E[撩, 1] " in cell(walk, "E", 1, 0)  # columns count from 1, as rows do
    assert "Worked cell: QKᵀ[撩, 刘海] " in cell(walk, "QK^T", 1, 2)
    assert "Worked cell: Z[撩, 1] " in cell(walk, "Z", 1, 0)
    assert "Worked cell: Z[撩, 2] " in cell(walk, "Z", 1, 1)
    assert "单格演算：A[撩, 刘海] " in cell(walk, "A", 1, 2, lang="zh")
    heads = compute(scenario_from_text(HEADS_2, "heads.yaml"))
    assert "Worked cell: A[the#4, cat] " in cell(heads, "A", 3, 1)


def test_tokens_table_numbers_rows_from_one_and_positions_from_zero(screens: dict[str, str]) -> None:
    lines = screens["tokens"].splitlines()
    header = next(line for line in lines if "token" in line and "pos" in line)
    assert header.split()[:2] == ["#", "pos"]
    rows = [line.split() for line in lines if line.strip().startswith(("1 ", "2 ", "3 "))]
    assert rows == [["1", "0", "女生", "1258"], ["2", "1", "撩", "875"], ["3", "2", "刘海", "9527"]]
    assert "# counts rows from 1, as c and explain do" in screens["tokens"]
    # explain takes the # column: row 2 is 撩, the lesson's 第 2 行 (§4.1: 撩 → 刘海 is row 2, column 3)
    assert "A[撩, 刘海] = 0.7104" in explain("girl_bangs", "A", "2", "3").stdout


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_token_labels_are_never_split_across_lines(lang: str) -> None:
    """Worked cells and bars break at their spaces only: 刘海 never ends one line as 刘 and starts
    the next as 海 (Chinese prose around them may break between characters: the lesson, its notes
    and the explanations above the bars and the worked cell are prose, and are not read here)."""
    for name in ("girl_bangs", "yellow_dog"):
        walk = compute(load_scenario(name))
        tokens = [t for t in walk.scenario.tokens if len(t) > 1]
        for width in range(40, 62, 3):
            opts = ViewOptions(width=width, lang=lang)
            marks = (style.say(opts, "ui.bars_heading"), style.say(opts, "ui.worked_cell"))
            for i, (stage, head) in enumerate(walk_steps(walk), start=1):
                out = render(stage_screen(walk, stage, head, opts, index=i, count=len(walk_steps(walk))),
                             width=width)
                lines, inside = [], False
                for raw in out.splitlines():  # the bars (to their blank line) and the worked cell's box
                    line = raw.strip("│╭╮╰╯─ ")
                    inside = line.startswith(marks) or (inside and bool(line) and not raw.startswith("╰"))
                    if inside:
                        lines.append(line)
                for line, after in zip(lines, lines[1:]):
                    for token in tokens:
                        for k in range(1, len(token)):
                            assert not (line.endswith(token[:k]) and after.startswith(token[k:])), \
                                (name, width, stage.key, line, after)


def test_the_stable_softmax_weight_is_its_own_line_and_never_split_at_80_columns() -> None:
    """`explain river_bank A 3 2` at 80 columns broke "…row sum = 1.483, 0.1353" / "/ 1.483 =
    0.0912" (a new user's review): the sum and the weight are two lines now, as in the e^s form.
    river_bank's row river: S = [0.2, 0, 2, 0.3] (QKᵀ / √4), so the key the has e^(0 − 2)."""
    out = CliRunner().invoke(app, ["explain", "river_bank", "A", "3", "2"], env={"COLUMNS": "80"}).stdout
    lines = [line.strip("│ ") for line in out.splitlines()]
    # (five digits: 1.4833, as every weight of river's row needs, one precision along the row)
    assert "exponentials (after subtracting the row max 2.0000): row sum = 1.4833" in lines
    assert "the: 0.13534 / 1.4833 = 0.0912" in lines
    assert abs(math.exp(-2) - 0.1353) < 5e-5 and abs(math.exp(-2) / (math.exp(-1.8) + math.exp(-2) + 1 + math.exp(-1.7)) - 0.0912) < 5e-5


@pytest.mark.parametrize("weight, shown", [(1 / 512, "0.2%"), (0.004, "0.4%"), (0.0094, "0.9%"),
                                           (0.0096, "1%"), (0.0004, "0%"), (0.0, "0%"), (0.5, "50%"),
                                           (1.0, "100%")])
def test_a_bar_s_percent_below_one_is_to_a_tenth_in_four_characters(weight, shown) -> None:
    """A 512-way tie of uniform weights (1/512) read "0% each" beside a bar (QA at 200 × 60)."""
    from attnwalk.render.bars import _percent

    assert _percent(weight) == shown and len(shown) <= len("100%")


def test_worked_softmax_says_why_its_exponentials_carry_more_digits(walk) -> None:
    """causal_mask's A[T2, T2]: S's row is [0, 1/√2, −∞] (its seed: K·Q over √2). Worked from
    exponentials to the lessons' 4 significant digits, the row's other weight would come out
    0.3303, not the table's 0.3302 (computed here); so it carries 6 and says why."""
    row = np.array([0.0, 0.7071])  # S + M as printed, masked key left out
    exact = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    four = np.array([float(f"{x:.4g}") for x in np.exp(row - row.max())])
    assert f"{four[0] / float(f'{four.sum():.4g}'):.4f}" != f"{exact[0]:.4f}"  # 4 digits miss
    text = flat(cell(compute(load_scenario("causal_mask")), "A", 1, 1, width=80))
    assert "0.493072" in text
    assert "(exponentials to 6 significant digits, not the lessons' 4: with 4, a weight of this row would not" in text
