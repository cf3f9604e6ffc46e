"""Everything beyond one head and one sequence, as a learner sees it: the shapes lesson (003 §12),
the per-head screens, cross-attention's source, additive and QK-norm scores, and their errors.

Numbers are checked against tests/reference.py in test_pipeline.py; here the question is whether
the walk, compare and export show what each scenario does.
"""

from __future__ import annotations

import io
import json
import re
import time

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.features import catalog
from attnwalk.features import stage_named

STAGES = catalog()  # every stage any layer can have
from snippets import SMALL

TWO_HEADS = """\
tokens: [the, cat, sat]
embeddings: [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]
heads: 2
W_Q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]]
W_K: [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]]
W_V: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
W_O: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
"""

# French queries reading an English source: keys and values belong to the source's tokens.
CROSS = """\
tokens: [le, chat]
embeddings: [[1, 0], [0, 1]]
source:
  tokens: [the, black, cat]
  embeddings: [[1, 1], [0, 2], [2, 0]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0], [0, 1]]
W_V: [[1, 0], [0, 1]]
"""



def walk_text(tmp_path, text: str, *args: str) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["step", "--scenario", str(path), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def screen(text: str, index: int) -> str:
    """Step `index` of a printed walk, from its header to the next one."""
    parts = re.split(r"(?m)^(?=Stage \d+ / \d+)", text)
    return next(p for p in parts if p.startswith(f"Stage {index} /"))


def headers(text: str) -> list[str]:
    return re.findall(r"(?m)^Stage \d+ / \d+ .*$", text)


# -- the shapes lesson ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shapes_walk() -> tuple[str, float]:
    start = time.perf_counter()
    result = CliRunner().invoke(app, ["run", "shapes"])  # not a terminal: printed whole, no pausing
    elapsed = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    return result.stdout, elapsed


@pytest.fixture(scope="module")
def shapes_all() -> str:
    result = CliRunner().invoke(app, ["run", "shapes", "--head", "all"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_run_shapes_piped_shows_the_lesson_shapes_first(shapes_walk) -> None:
    text, _ = shapes_walk
    overview = text[:text.index("Stage 2 /")]  # the first screen: the shapes before any numbers
    assert "d_model = 512" in overview and "h = 8" in overview and "d_head = d_k = d_v = 64" in overview
    for shape in ("100 × 64", "100 × 100 = n × n", "100 × 512 = n × h·d_v", "100 × 512 = n × d_model"):
        assert shape in overview, shape
    assert "split into 8 heads of 100 × 64 each" in overview
    assert "more rows" in text and "more columns" in text


def test_run_shapes_piped_shows_head_1_in_full_and_every_head_in_a_summary(shapes_walk) -> None:
    # A printed walk shows one head's screens, not all eight heads' (that was 41 screens and ~2,300
    # lines): head 1 in full, then one summary screen of every head, then concat and O. Stage
    # numbers stay the stepper's, so --resume and `g` mean the same stage.
    text, elapsed = shapes_walk
    lines = text.splitlines()
    assert len(lines) < 1000, len(lines)
    assert max(len(line) for line in lines) <= 80
    found = headers(text)
    assert len(found) == 13  # 7 shared, head 1's QKᵀ, S, A and Z, concat, O
    assert sum("head 1 / 8" in line for line in found) == 4
    assert not any(f"head {h} / 8" in line for line in found for h in range(2, 9))
    assert "Stage 40 / 41   concat" in text and "Stage 41 / 41   O" in text
    assert "100 × 64 = n × d_v" in screen(text, 11)  # head 1's Z
    assert "100 × 512 = n × h·d_v" in screen(text, 40)
    assert elapsed < 10  # generous for a loaded machine; `time attnwalk run shapes | cat` is ~0.5 s


def test_heads_summary_shows_where_the_query_looks_in_every_head(shapes_walk) -> None:
    text, _ = shapes_walk
    summary = text[text.index("All 8 heads at a glance"):text.index("Stage 40 /")]
    assert "Where does query t100 (row 100) look in each?" in " ".join(summary.split())
    walk = compute(load_scenario("shapes"))
    for h in range(8):
        a = walk.heads[h].mats["A"][99]  # the last query: shapes has no focus
        p = a[a > 0]
        bits = float(-(p * np.log2(p)).sum())  # entropy, written out here
        top = int(np.argmax(a))  # its token is t{top + 1}: shapes names its tokens t1 … t100, as rows count
        mark = "   shown in full above" if h == 0 else ""
        assert re.search(rf"(?m)^ +{h + 1} +{64 * h + 1}–{64 * h + 64} +t{top + 1} +{a[top]:.4f} +{bits:.2f}"
                         rf"{mark}", summary), h
    assert "6.64 bits when it is spread evenly over the 100 keys" in " ".join(summary.split())
    assert "--head N" in summary and "--head all" in summary


def test_run_shapes_head_all_prints_every_head(shapes_all) -> None:
    text = shapes_all
    found = headers(text)
    assert len(found) == 41  # 7 shared, 8 heads × (QKᵀ, S, A, Z), concat, O
    for h in range(1, 9):
        assert sum(f"head {h} / 8" in line for line in found) == 4
    assert "All 8 heads at a glance" not in text
    assert len(text.splitlines()) < 3000


def test_shapes_later_heads_point_back_instead_of_repeating_the_text(shapes_all) -> None:
    text = shapes_all
    assert "Common mistake" in screen(text, 8)  # head 1's QKᵀ explains
    later = " ".join(screen(text, 12).split())  # head 2's QKᵀ, its lines joined
    assert "Common mistake" not in later and "see stage 8 (head 1)" in later


def test_head_option_prints_that_head_in_full(tmp_path) -> None:
    text = walk_text(tmp_path, TWO_HEADS, "--head", "2")
    found = headers(text)
    assert [line.split("   ")[-1] for line in found if "head" in line] == ["head 2 / 2"] * 4
    qkt_2 = " ".join(screen(text, 12).split())
    assert "Head 2 / 2 takes columns 3–4 of Q and K" in qkt_2
    assert "Common mistake" in qkt_2  # the first head printed explains in full
    summary = text[text.index("All 2 heads at a glance"):text.index("Stage 16 /")]
    assert re.search(r"(?m)^ +2 +3–4 .*shown in full above", summary)
    assert "Head 2 is printed in full above" in " ".join(summary.split())


@pytest.mark.parametrize("value, says", [("3", "--head 3: scenario has 2 heads, numbered from 1: give 1 to 2, or all"),
                                         ("two", "--head two: scenario has 2 heads, numbered from 1: give 1 to 2, or all"),
                                         ("0", "--head 0: scenario has 2 heads")])
def test_bad_head_option_is_one_line_exit_2(tmp_path, value, says) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(TWO_HEADS, encoding="utf-8")
    result = CliRunner().invoke(app, ["step", "--scenario", str(path), "--head", value])
    assert result.exit_code == 2
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_shapes_export_has_eight_heads_of_100_by_64() -> None:
    result = CliRunner().invoke(app, ["export", "shapes", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    stages = data["stages"]
    assert data["shape"] == {"n": 100, "m": 100, "d_model": 512, "d_k": 64, "d_v": 64, "heads": 8}
    assert np.shape(stages["Q"]) == (100, 512)  # the full, unsplit projection
    assert len(stages["heads"]) == 8
    Q = np.array(stages["Q"])
    for h, head in enumerate(stages["heads"]):
        assert np.shape(head["Q"]) == (100, 64) and np.shape(head["A"]) == (100, 100)
        np.testing.assert_array_equal(head["Q"], Q[:, 64 * h:64 * (h + 1)])  # contiguous blocks
    assert np.shape(stages["concat"]) == (100, 512) and np.shape(stages["O"]) == (100, 512)


def test_random_matrices_are_seeded_and_checked() -> None:
    def scn(embeddings: str):
        return scenario_from_text(f"tokens: [a, b]\nembeddings: {embeddings}\n"
                                  "W_Q: [[1], [1], [1]]\nW_K: [[1], [1], [1]]\nW_V: [[1], [1], [1]]\n",
                                  "r.yaml")

    one = scn("{random: {seed: 7, rows: 2, cols: 3}}").main.E
    assert one.shape == (2, 3)
    np.testing.assert_array_equal(one, scn("{random: {seed: 7, rows: 2, cols: 3}}").main.E)
    assert not np.array_equal(one, scn("{random: {seed: 8, rows: 2, cols: 3}}").main.E)
    half = scn("{random: {seed: 7, rows: 2, cols: 3, scale: 0.5}}").main.E
    np.testing.assert_allclose(half, one * 0.5)
    for bad, says in (("{random: {seed: -1, rows: 2, cols: 3}}", "seed: must be at least 0"),
                      ("{random: {seed: 1, rows: 2}}", "cols"),
                      ("{random: {seed: 1, rows: 3000, cols: 3000}}", "more than the 4,194,304"),
                      ("{random: {seed: 1, rows: 2, cols: 3, scale: -2}}", "standard deviation"),
                      ("{random: {seed: 1, rows: 2, cols: 3, sede: 1}}", "did you mean 'seed'"),
                      ("{random: {seed: 1, rows: 3, cols: 3}}", "3 rows, but there are 2 tokens")):
        with pytest.raises(ScenarioError, match=re.escape(says)):
            scn(bad)


# -- several heads ---------------------------------------------------------------------------------


def test_two_heads_walk_names_the_head_in_every_per_head_header(tmp_path) -> None:
    text = walk_text(tmp_path, TWO_HEADS, "--head", "all")
    found = headers(text)
    assert [line.split("   ")[-1] for line in found if "head" in line] == \
        ["head 1 / 2"] * 4 + ["head 2 / 2"] * 4
    assert found[-2].endswith("concat  Heads concatenated") and found[-1].endswith("O  Output projection")
    assert "Q = X · W_Q = [Q_1 | Q_2]" in text and "concat = [Z_1 | Z_2]" in text
    assert "Q holds 2 heads side by side: head 1 = columns 1–2 · head 2 = columns 3–4" in text
    qkt_2 = screen(text, 12)
    assert "Multi-head attention · head 2 / 2" in qkt_2
    assert "Head 2 / 2 takes columns 3–4 of Q and K" in qkt_2 and "not the same attention repeated" in qkt_2
    assert "3 × 2 = n × d_v" in screen(text, 11)  # one head's Z is n × d_v, not n × h·d_v
    assert "3 × 4 = n × h·d_v" in screen(text, 16)  # concat


def test_head_key_shows_the_next_heads_screen(tmp_path) -> None:
    from appdriver import drive, typed

    path = tmp_path / "two.yaml"
    path.write_text(TWO_HEADS, encoding="utf-8")
    d = drive(str(path), ["g", *typed("A"), "h"])  # jump to head 1's A, then the next head
    assert "Stage 10 / 17   A  Attention weights   head 1 / 2" in d.screens[-2]
    assert "Stage 14 / 17   A  Attention weights   head 2 / 2" in d.screen


# -- cross-attention -------------------------------------------------------------------------------


def test_cross_attention_labels_keys_and_values_with_source_tokens(tmp_path) -> None:
    text = walk_text(tmp_path, CROSS)
    first = screen(text, 1)
    assert "source: the 3 tokens whose keys and values the queries read" in first
    assert "X_src, the source's X: 3 × 2 = m × d_model" in screen(text, 4)
    q, k, v = screen(text, 5), screen(text, 6), screen(text, 7)
    assert "Q comes from the main sequence" in q and "2 × 2 = n × d_k" in q
    for shown, symbol in ((k, "K"), (v, "V")):
        assert f"{symbol} = X_src · W_{symbol}" in shown and "3 × 2 = m × d_" in shown
        rows = [line.split()[0] for line in shown.splitlines()
                if re.match(r"^ (the|black|cat|le|chat) ", line)]
        assert rows == ["the", "black", "cat"], shown  # one row per source token, none for queries
        assert "comes from the source, not from X" in shown and "X_src[black]" in shown
    a = screen(text, 10)
    assert re.search(r"(?m)^ +the +black +cat *$", a)  # A's columns: the source tokens
    assert "2 × 3 = n × m" in a


def test_cross_attention_causal_mask_is_refused_with_the_reason(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CROSS + "mask: causal\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--scenario", str(path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "no 'future'" in result.stderr
    assert "n × m mask" in result.stderr


# -- other scores ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("extra", "shown"), [
    ("score: additive\nw_a: [0.5, -1]\n", "QKᵀ[i, j] = tanh(q_i + k_j) · w_a"),
    ("qk_norm: true\nqk_scale: 2.5\n", "QKᵀ[i, j] = 2.5 × (q̂_i · k̂_j),  q̂ = q / RMS(q)"),
    ("qk_norm: true\n", "QKᵀ[i, j] = q̂_i · k̂_j,  q̂ = q / RMS(q)"),
    ("score: additive\nw_a: [1, 1]\nqk_norm: true\nqk_scale: 3\n",
     "QKᵀ[i, j] = 3 × tanh(q̂_i + k̂_j) · w_a"),
])
def test_score_variants_show_their_formula(tmp_path, extra: str, shown: str) -> None:
    text = walk_text(tmp_path, SMALL + extra)
    assert shown in screen(text, 8)
    scaled = "formula  S = QKᵀ / √d_k" in screen(text, 9)
    assert scaled == ("additive" not in extra)  # additive scores are never divided by √d_k


def test_compare_names_the_score_and_the_source(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SMALL + "score: additive\nw_a: [0.5, -1]\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["compare", "--scenario", str(path)])
    assert result.exit_code == 0, result.output
    assert "scores: QKᵀ[i, j] = tanh(q_i + k_j) · w_a" in result.stdout
    assert "scaled and unscaled agree" in result.stdout
    path.write_text(CROSS, encoding="utf-8")
    result = CliRunner().invoke(app, ["compare", "--scenario", str(path)])
    assert "keys and values from the 3 source tokens" in " ".join(result.stdout.split())


def test_formula_varies_only_where_the_scenario_does() -> None:
    plain = scenario_from_text(SMALL, "s.yaml")
    for stage in STAGES:
        if stage.key != "P":  # SMALL has no positional encoding: P = 0 (tests/test_stages.py)
            assert stage.formula_in(plain) == stage.equation(plain)
    assert stage_named("S").formula_in(plain, "unscaled") == "S = QKᵀ"
    two = scenario_from_text(TWO_HEADS.replace("heads: 2", "heads: 4"), "t.yaml")
    assert stage_named("concat").formula_in(two) == "concat = [Z_1 | Z_2 | … | Z_4]"


# -- errors, one line and exit 2 ---------------------------------------------------------------------


@pytest.mark.parametrize(("change", "says"), [
    (lambda t: t.replace("heads: 2", "heads: 0"), "heads: must be at least 1, got 0"),
    (lambda t: t.replace("heads: 2", "heads: 3"), "3 heads cannot split evenly"),
    (lambda t: t.replace("W_O: [[1, 0, 0, 0], ", "W_O: ["), "W_O is 3 × 4, but it must be (h·d_v) × d_model = 4 × 4"),
])
def test_head_errors_are_one_line_exit_2(tmp_path, change, says) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(change(TWO_HEADS), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--scenario", str(path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    assert "Traceback" not in result.output


def test_source_with_another_d_model_is_one_line_exit_2(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(CROSS.replace("[[1, 1], [0, 2], [2, 0]]", "[[1, 1, 0], [0, 2, 0], [2, 0, 0]]"),
                    encoding="utf-8")
    result = CliRunner().invoke(app, ["export", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "source.embeddings has 3 columns, but the main sequence's d_model is 2" in result.stderr
