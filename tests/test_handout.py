"""Handouts: every stage's matrix with labels, formula and explanation, in Markdown, LaTeX and CSV.

Numbers are lesson 002's (女生撩刘海), typed in from ../shared/seeds/002.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attnwalk.scenario.builtins import builtin_names
from attnwalk.cli import app
from attnwalk.export.handout import CSV_HEADER, _csv_field, handout
from attnwalk.text import text
from attnwalk.export.latex import latex_text, math_text
from attnwalk.layer.walk import compute
from attnwalk.render.screens import walk_steps
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.load import load_scenario, scenario_from_text

runner = CliRunner()

NASTY = """
name: nasty_one
title: "50% of A & B_c {x} #1 ~ $5 ^ \\\\ end"
tokens: ["a_b", "c&d", "50%", "{x}"]
embeddings: [[1, 0], [0, 1], [1, 1], [2, 0]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0], [0, 1]]
W_V: [[1, 0], [0, 1]]
mask: causal
heads: 2
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for var in ("NO_COLOR", "FORCE_COLOR", "ATTNWALK_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)


def walk_of(name: str, mode: str = "scaled"):
    return compute(load_scenario(name), mode)


def nasty_walk():
    return compute(scenario_from_text(NASTY, "nasty.yaml"), "scaled")


# -- Markdown ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_markdown_has_every_stage_in_order_with_its_explanation(lang):
    walk = walk_of("girl_bangs")
    md = handout(walk, "markdown", ViewOptions(lang=lang))
    tx = text(lang)
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert len(headings) == len(walk_steps(walk))
    for heading, (stage, _) in zip(headings, walk_steps(walk)):
        assert tx.stage(stage.key, "title") in heading
        for field in ("what", "why", "mistake"):
            assert tx.stage(stage.key, field) in md
        assert f"`{stage.formula_in(walk.scenario)}`" in md


def test_markdown_tables_carry_lesson_002_numbers_with_labels():
    md = handout(walk_of("girl_bangs"), "markdown", ViewOptions())
    assert "| token | 女生 | 撩 | 刘海 |" in md
    assert "| 撩 | 4.5140 | 5.4184 | 7.2868 |" in md  # QKᵀ, lesson 002
    assert "| 撩 | 3.1919 | 3.8314 | 5.1526 |" in md  # S
    assert "| 女生 | 0.0551 | 0.1371 | 0.8078 |" in md  # A
    assert "| 撩 | 1.6145 | 2.4204 |" in md  # Z
    assert "| 0 | 女生 | 1258 |" in md  # tokens: position, token, id
    assert "# 女生撩刘海: every matrix by hand, from lookup to Z" in md  # the title, as a heading


def test_markdown_escapes_pipes_and_shows_masked_scores():
    md = handout(nasty_walk(), "markdown", ViewOptions())
    assert "−∞" in md and "head 2 / 2" in md
    weird = scenario_from_text(NASTY.replace('"{x}"]', '"a|b"]'), "w.yaml")
    assert "| a\\|b |" in handout(compute(weird), "markdown", ViewOptions())


def test_markdown_precision():
    md = handout(walk_of("girl_bangs"), "markdown", ViewOptions(precision=2))
    assert "| 撩 | 4.51 | 5.42 | 7.29 |" in md


# -- LaTeX ------------------------------------------------------------------------------------


def environments_balance(tex: str) -> bool:
    stack = []
    for kind, name in re.findall(r"\\(begin|end)\{([^}]*)\}", tex):
        if kind == "begin":
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def test_latex_is_a_whole_document_with_tabular_and_bmatrix():
    walk = walk_of("girl_bangs")
    tex = handout(walk, "latex", ViewOptions())
    assert tex.startswith("% Written by attnwalk")
    assert "xelatex" in tex.splitlines()[1]  # Chinese tokens: the first lines say how to compile
    assert "\\usepackage[UTF8,scheme=plain]{ctex}" in tex
    assert environments_balance(tex)
    matrices = len([s for s, _ in walk_steps(walk) if s.key != "tokens"])
    assert tex.count("\\begin{bmatrix}") == matrices + 3  # and W_Q, W_K, W_V
    assert tex.count("\\begin{tabular}") == len(walk_steps(walk)) + 3
    assert "4.5140 & 5.4184 & 7.2868" in tex
    assert "撩 & $4.5140$ & $5.4184$ & $7.2868$ \\\\" in tex
    assert "$QK^{\\top}[i,\\ j] = q_i \\cdot k_j$" in tex
    assert "$S = QK^{\\top} / \\sqrt{d_k}$" in tex


def test_latex_masked_scores_are_minus_infinity():
    tex = handout(walk_of("causal_mask"), "latex", ViewOptions())
    assert "0.7071 & -\\infty & -\\infty" in tex  # in the bmatrix
    assert "$0.7071$ & $-\\infty$ & $-\\infty$" in tex  # in the labelled table


def test_latex_escapes_user_text_and_tokens():
    tex = handout(nasty_walk(), "latex", ViewOptions())
    assert environments_balance(tex)
    assert "\\section*{50\\% of A \\& B\\_c \\{x\\} \\#1 \\textasciitilde{} \\$5 \\textasciicircum{} " \
           "\\textbackslash{} end}" in tex
    assert "& a\\_b & c\\&d & 50\\% & \\{x\\} \\\\" in tex
    body = tex.split("\\begin{document}")[1]
    assert "a_b" not in body and "c&d" not in body


@pytest.mark.parametrize("name", ["river_bank", "causal_mask", "savings_bank"])
def test_an_english_handout_without_chinese_is_plain_ascii(name):
    tex = handout(walk_of(name), "latex", ViewOptions(lang="en"))
    assert all(ord(ch) < 128 for ch in tex), {ch for ch in tex if ord(ch) >= 128}
    assert "ctex" not in tex and "pdflatex" in tex.splitlines()[1]


@pytest.mark.parametrize("name", builtin_names())
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_only_cjk_letters_are_left_for_the_engine(name, lang):
    tex = handout(walk_of(name), "latex", ViewOptions(lang=lang))
    left = {ch for ch in tex if ord(ch) >= 128 and unicodedata.east_asian_width(ch) not in ("W", "F")}
    assert left == set()
    assert environments_balance(tex)


def test_formulas_become_math():
    assert math_text("S = QKᵀ / √d_k") == "S = QK^{\\top} / \\sqrt{d_k}"
    assert math_text("O = concat · W_O") == "O = \\mathrm{concat} \\cdot W_O"
    assert math_text("S + M,  M[i, j] = 0 or −∞") == "S + M,\\ M[i,\\ j] = 0\\ \\mathrm{or} -\\infty"
    assert "\\sin (\\mathrm{pos}/10000^{2i/d_{\\mathrm{model}}})" in math_text(
        "P[pos, 2i] = sin(pos/10000^(2i/d_model))")
    assert latex_text("W_Q is a parameter; e^−∞ = 0") == "$W_Q$ is a parameter; $e^{-\\infty}$ = 0"
    assert latex_text("d_k 维被求和消掉") == "$d_k$ 维被求和消掉"
    assert latex_text("my_scenario", math=False) == "my\\_scenario"


def test_straight_double_quotes_become_tex_quotes_and_chinese_quotes_stay():
    assert latex_text('9527 is not "more" than 875') == "9527 is not ``more'' than 875"
    assert latex_text('"W_Q" and "a & b"', math=False) == "``W\\_Q'' and ``a \\& b''"
    assert latex_text('decide "is this worth\nattending to?"') == "decide ``is this worth\nattending to?''"
    assert latex_text("并不比 875「大」") == "并不比 875「大」"
    tex = handout(walk_of("girl_bangs"), "latex", ViewOptions())
    assert "not ``more'' than 875" in tex  # stage tokens, the common mistake
    assert "女生撩刘海 (``the girl brushes her bangs'')" in tex  # the scenario's description
    assert '"' not in tex.split("\\begin{document}")[1]


ENGINES = [engine for engine in ("xelatex", "pdflatex") if shutil.which(engine)]


@pytest.mark.skipif(not ENGINES, reason="no LaTeX engine on this machine")
@pytest.mark.parametrize("name, lang, engine", [
    ("girl_bangs", "zh", "xelatex"), ("girl_bangs", "en", "xelatex"), ("causal_mask", "en", "pdflatex"),
    ("river_bank", "zh", "xelatex"),
])
def test_latex_compiles(tmp_path, name, lang, engine):
    if not shutil.which(engine):
        pytest.skip(f"{engine} is not installed")
    (tmp_path / "handout.tex").write_text(handout(walk_of(name), "latex", ViewOptions(lang=lang)),
                                         encoding="utf-8")
    out = subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", "handout.tex"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    log = (tmp_path / "handout.log").read_text(encoding="utf-8", errors="replace")
    assert out.returncode == 0, log[-3000:]
    assert (tmp_path / "handout.pdf").stat().st_size > 0
    assert "Missing character" not in log


@pytest.mark.skipif(not shutil.which("xelatex"), reason="xelatex is not installed")
def test_latex_with_awkward_text_compiles(tmp_path):
    (tmp_path / "handout.tex").write_text(handout(nasty_walk(), "latex", ViewOptions()), encoding="utf-8")
    out = subprocess.run(["xelatex", "-interaction=nonstopmode", "-halt-on-error", "handout.tex"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:]


# -- CSV --------------------------------------------------------------------------------------


def test_csv_is_long_format_at_full_precision():
    walk = walk_of("causal_mask")
    rows = list(csv.DictReader(io.StringIO(handout(walk, "csv", ViewOptions()))))
    assert tuple(rows[0]) == CSV_HEADER
    scn = walk.scenario
    weights = {"W_Q": scn.W_Q, "W_K": scn.W_K, "W_V": scn.W_V}
    expected = sum(walk.matrix(s.key, h).size for s, h in walk_steps(walk) if s.key != "tokens")
    assert len(rows) == expected + sum(W.size for W in weights.values())
    for r in rows:
        stage, head = r["stage"], int(r["head"]) if r["head"] else 0
        M = weights[stage] if stage in weights else walk.matrix(stage, head)
        assert float(r["value"]) == M[int(r["row"]), int(r["col"])]
    sm = [r for r in rows if r["stage"] == "S+M" and r["row_label"] == "T1" and r["col_label"] == "T3"]
    assert sm[0]["value"] == "-inf" and sm[0]["head"] == "0"
    assert (sm[0]["row"], sm[0]["col"]) == ("0", "2")
    e = next(r for r in rows if r["stage"] == "E")
    assert e["head"] == ""  # shared by every head


def test_csv_keeps_heads_apart():
    walk = nasty_walk()
    rows = list(csv.DictReader(io.StringIO(handout(walk, "csv", ViewOptions()))))
    a = {(r["head"], r["row"], r["col"]): float(r["value"]) for r in rows if r["stage"] == "A"}
    for h in (0, 1):
        M = walk.matrix("A", h)
        assert np.array_equal([[a[(str(h), str(i), str(j))] for j in range(4)] for i in range(4)], M)
    assert {r["row_label"] for r in rows if not r["stage"].startswith("W_")} == {"a_b", "c&d", "50%", "{x}"}


def test_csv_labels_with_commas_and_quotes_read_back():
    walk = compute(scenario_from_text(NASTY.replace('"{x}"]', "'say \"hi\", x']"), "q.yaml"), "scaled")
    rows = list(csv.DictReader(io.StringIO(handout(walk, "csv", ViewOptions()))))
    assert {r["row_label"] for r in rows if r["stage"] == "A"} == {"a_b", "c&d", "50%", 'say "hi", x'}
    assert all(len(r) == len(CSV_HEADER) and None not in r for r in rows)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab ,"\n\r;\'女')), max_size=8))
def test_csv_fields_are_quoted_as_the_csv_module_quotes_them(label):
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(["x", label, "y"])
    assert out.getvalue() == f"x,{_csv_field(label)},y\n"


def test_csv_indices_count_from_0_like_the_json_lists_and_labels_are_the_tables():
    # lesson 002: E[女生] = [3.0, 1.0], QKᵀ[撩, 刘海] = 7.2868, W_Q = [[-0.6, 0.9], [0.8, -0.5]].
    # row and col index the JSON lists (from 0); the labels are what the tables print (from 1)
    lines = handout(walk_of("girl_bangs"), "csv", ViewOptions()).splitlines()
    assert "E,,0,女生,0,1,3.0" in lines and "E,,0,女生,1,2,1.0" in lines
    assert "W_Q,,0,1,1,2,0.9" in lines and "W_Q,,1,2,0,1,0.8" in lines
    qk = next(line.split(",") for line in lines if line.startswith("QK^T,"))
    assert qk[:6] == ["QK^T", "0", "0", "女生", "0", "女生"]  # head 0: the only head
    cell = next(line.split(",") for line in lines if line.startswith("QK^T,0,1,撩,2,"))
    assert cell[5] == "刘海" and round(float(cell[6]), 4) == 7.2868


# -- the command ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt, marker", [("markdown", "## 8. QKᵀ — Raw scores"), ("latex", "\\begin{bmatrix}"),
                                         ("csv", "stage,head,row,row_label,col,col_label,value")])
def test_cli_export_formats(fmt, marker):
    result = runner.invoke(app, ["export", "girl_bangs", "--format", fmt])
    assert result.exit_code == 0, result.output
    assert marker in result.stdout


def test_cli_export_speaks_chinese_by_flag_and_by_locale():
    zh = text("zh")
    by_flag = runner.invoke(app, ["export", "girl_bangs", "-f", "markdown", "--lang", "zh"]).stdout
    by_locale = runner.invoke(app, ["export", "girl_bangs", "-f", "markdown"], env={"LANG": "zh_CN.UTF-8"}).stdout
    assert by_flag == by_locale
    for stage in ("tokens", "E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z"):
        assert zh.stage(stage, "what") in by_flag
    english = runner.invoke(app, ["export", "girl_bangs", "-f", "markdown"], env={"LANG": "C.UTF-8"}).stdout
    assert text("en").stage("A", "what") in english


def test_cli_export_json_is_unchanged_and_bad_language_is_one_line():
    result = runner.invoke(app, ["export", "girl_bangs"])
    assert result.stdout.startswith('{"name": "girl_bangs"')
    bad = runner.invoke(app, ["export", "girl_bangs", "-f", "latex", "--lang", "fr"])
    assert bad.exit_code == 2 and "choose en or zh" in bad.stderr


def big_walk(n: int = 20, d: int = 14):
    rng = np.random.default_rng(0)
    rows = lambda r, c: "[" + ", ".join("[" + ", ".join(f"{x:.3f}" for x in row) + "]"  # noqa: E731
                                        for row in rng.normal(size=(r, c))) + "]"
    yaml = (f"tokens: [{', '.join(f'w{i}' for i in range(n))}]\nembeddings: {rows(n, d)}\n"
            f"W_Q: {rows(d, d)}\nW_K: {rows(d, d)}\nW_V: {rows(d, d)}\n")
    return compute(scenario_from_text(yaml, "big.yaml"), "scaled")


def test_big_matrices_keep_first_and_last_rows_and_columns_but_csv_keeps_all():
    walk = big_walk()
    opts = ViewOptions()
    md = handout(walk, "markdown", opts)
    assert "| token | 1 | 2 | 3 | 4 | 5 | 6 | … | 9 | 10 | 11 | 12 | 13 | 14 |" in md
    assert "| ⋮ | ⋮ | ⋮ | ⋮ | ⋮ | ⋮ | ⋮ | ⋱ |" in md and "| w19 |" in md and "| w10 |" not in md
    tex = handout(walk, "latex", opts)
    assert "\\vdots & \\vdots" in tex and "\\ddots" in tex and "\\cdots" in tex
    assert "\\resizebox{\\linewidth}{!}{$\\displaystyle" in tex and environments_balance(tex)
    rows = list(csv.DictReader(io.StringIO(handout(walk, "csv", opts))))
    assert sum(1 for r in rows if r["stage"] == "A") == 20 * 20


@pytest.mark.skipif(not shutil.which("xelatex"), reason="xelatex is not installed")
def test_big_latex_fits_the_page(tmp_path):
    (tmp_path / "handout.tex").write_text(handout(big_walk(), "latex", ViewOptions()), encoding="utf-8")
    subprocess.run(["xelatex", "-interaction=nonstopmode", "-halt-on-error", "handout.tex"],
                   cwd=tmp_path, capture_output=True, timeout=300, check=True)
    assert "Overfull" not in (tmp_path / "handout.log").read_text(encoding="utf-8", errors="replace")


# -- the weights: the parameters beside the activations ---------------------------------------

# Lesson 002, step three: W_Q, W_K and W_V as "| row | col 1 | col 2 |" rows of a 4-decimal table,
# rows and columns numbered from 1 as every table numbers them.
LESSON_002_WEIGHTS = {"W_Q": ("| 1 | -0.6000 | 0.9000 |", "| 2 | 0.8000 | -0.5000 |"),
                      "W_K": ("| 1 | 0.6000 | 0.1000 |", "| 2 | -0.1000 | 1.4000 |"),
                      "W_V": ("| 1 | 1.0000 | -0.5000 |", "| 2 | -0.4000 | 1.2000 |")}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_markdown_shows_each_weight_before_the_matrix_it_makes(lang):
    md = handout(walk_of("girl_bangs"), "markdown", ViewOptions(lang=lang))
    tx = text(lang)
    for key, (name, dim) in {"Q": ("W_Q", "d_k"), "K": ("W_K", "d_k"), "V": ("W_V", "d_v")}.items():
        section = md.split(f"## {'5' if key == 'Q' else '6' if key == 'K' else '7'}. {key} — ", 1)[1]
        section = section.split("\n## ", 1)[0]
        caption = tx.t("handout.weight", name=name, shape=f"2 × 2 = d_model × {dim}")
        assert caption in section
        first, second = LESSON_002_WEIGHTS[name]
        assert f"| {tx.t('handout.dim')} | 1 | 2 |" in section
        assert section.index(caption) < section.index(first) < section.index(second) < section.index("| 女生 |")
    assert "W_O" not in md  # lesson 002 has no output projection


def test_latex_and_csv_carry_the_weights_too():
    walk = walk_of("girl_bangs")
    tex = handout(walk, "latex", ViewOptions())
    assert "W_Q = \\begin{bmatrix}" in tex and "-0.6000 & 0.9000 \\\\" in tex
    assert "\\noindent $W_Q$ (2 $\\times$ 2 = $d_{\\mathrm{model}}$ $\\times$ $d_k$): a parameter" in tex
    matrices = len([s for s, _ in walk_steps(walk) if s.key != "tokens"])
    assert tex.count("\\begin{bmatrix}") == matrices + 3 and environments_balance(tex)
    lines = handout(walk, "csv", ViewOptions()).splitlines()
    # indices from 0 as in the JSON lists, labels from 1 as in the tables
    assert "W_Q,,0,1,0,1,-0.6" in lines and "W_Q,,1,2,1,2,-0.5" in lines
    assert "W_K,,1,2,1,2,1.4" in lines and "W_V,,1,2,0,1,-0.4" in lines
    assert lines.index("W_Q,,0,1,0,1,-0.6") < next(i for i, line in enumerate(lines) if line.startswith("Q,"))


def test_several_heads_and_w_o_name_their_dimensions():
    walk = compute(scenario_from_text(NASTY + "W_O: [[1, 0], [0, 1]]\n", "nasty.yaml"), "scaled")
    md = handout(walk, "markdown", ViewOptions())
    tx = text("en")
    assert tx.t("handout.weight", name="W_Q", shape="2 × 2 = d_model × h·d_k") in md
    assert tx.t("handout.weight", name="W_O", shape="2 × 2 = h·d_v × d_model") in md
    rows = list(csv.DictReader(io.StringIO(handout(walk, "csv", ViewOptions()))))
    assert sum(1 for r in rows if r["stage"] == "W_O" and r["head"] == "") == 4


# -- the mode: a handout never contradicts its own tables -------------------------------------


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
@pytest.mark.parametrize("mode", ["unscaled", "uniform", "hard"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_handout_in_another_mode_says_its_description_is_the_scaled_one(fmt, mode, lang):
    # girl_bangs' description quotes A[女生, 刘海] = 0.8078, the scaled weight (lesson 002)
    tx = text(lang)
    out = handout(walk_of("girl_bangs", mode), fmt, ViewOptions(lang=lang))
    name, scaled = tx.t(f"mode.{mode}.name"), tx.t("mode.scaled.name")
    settings = f"{tx.t('ui.mode')}{tx.t('ui.colon')}{name}"
    note = tx.t("handout.mode_note", mode=name, default=scaled)
    if fmt == "latex":
        settings, note = latex_text(settings, math=False), latex_text(note)
    header = out.split("\\section*" if fmt == "latex" else "# ", 1)[1].splitlines()[:3]
    assert any(settings in line for line in header)  # the mode, in the header
    assert out.count(note) == 1
    above, below = out.split(note)
    assert "0.8078" in above and "0.8078" not in below  # description above, tables below
    assert tx.t(f"mode.{mode}.explain").split(" ")[0] in below
    if mode == "unscaled":
        # softmax of lesson 002's QKᵀ row 女生, [4.9500, 6.2388, 8.7467], not divided by √2
        assert "0.9059" in below


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
def test_a_scaled_handout_states_its_mode_and_needs_no_note(fmt):
    out = handout(walk_of("girl_bangs"), fmt, ViewOptions())
    assert "mode: scaled" in out
    assert "default mode" not in out


def test_latex_sets_symbols_as_math_and_keeps_names_as_text() -> None:
    from attnwalk.export.latex import latex_text

    assert latex_text("run yellow_dog_length, then compare river_bank savings_bank") == (
        r"run yellow\_dog\_length, then compare river\_bank savings\_bank")
    assert latex_text("q̂ = q / RMS(q), k̂_j") == r"$\hat{q}$ = q / RMS(q), $\hat{k}_j$"
    assert latex_text("W_Q, d_model and X_src") == r"$W_Q$, $d_{\mathrm{model}}$ and $X_{\mathrm{src}}$"
