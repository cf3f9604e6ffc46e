"""`attnwalk compare`: the numbers per mode against lesson 002/004, the JSON, the text, the CLI's errors.

Golden numbers are typed in from ../shared/seeds/002_* (女生撩刘海) and 004_* (river bank).
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.layer.compare import compare, comparison_data, mode_result, modes_to_show
from attnwalk.errors import UsageError
from attnwalk.render.compareview import compare_view
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.load import load_scenario, scenario_from_text

runner = CliRunner()

# Lesson 002, §4.2 and §5: the first row (女生) of S, and of A scaled and unscaled.
S_ROW0 = [3.5002, 4.4115, 6.1849]
QKT_ROW0 = [4.9500, 6.2388, 8.7467]
SCALED_ROW0 = [0.0551, 0.1371, 0.8078]
UNSCALED_ROW0 = [0.0203, 0.0738, 0.9059]  # the lesson prints [0.020, 0.074, 0.906]
UNSCALED_ROW0_LESSON = [0.020, 0.074, 0.906]
# Lesson 002 §3.1: V
V_GIRL = np.array([[2.2000, 0.9000], [1.8254, 1.6276], [1.4758, 2.8460]])
# Lesson 004 step 4: bank's weights, about [0.11, 0.07, 0.69, 0.14]
BANK_ROW = [0.11, 0.07, 0.69, 0.14]


@pytest.fixture(autouse=True)
def _plain_env(monkeypatch):
    for var in ("NO_COLOR", "FORCE_COLOR", "ATTNWALK_LANG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C")


@pytest.fixture(scope="module")
def girl():
    return load_scenario("girl_bangs")


def ref_softmax(row):
    e = [math.exp(x) for x in row]
    return [x / sum(e) for x in e]


def render(cmp, width=100, **view):
    console = Console(width=width, file=io.StringIO(), color_system=None, highlight=False, emoji=False)
    console.print(compare_view(cmp, ViewOptions(width=width, **view)))
    return console.file.getvalue()


# ---------------------------------------------------------------- the numbers


def test_first_row_under_each_mode_matches_lesson_002(girl):
    cmp = compare(girl)
    assert [m.name for m in cmp.modes] == ["scaled", "unscaled", "uniform"]
    A = {r.mode.name: r.A for r in cmp.results}
    np.testing.assert_allclose(A["scaled"][0], SCALED_ROW0, atol=5e-5)
    np.testing.assert_allclose(A["unscaled"][0], UNSCALED_ROW0, atol=5e-5)
    np.testing.assert_allclose(A["unscaled"][0], UNSCALED_ROW0_LESSON, atol=5e-4)
    np.testing.assert_allclose(A["uniform"][0], [1 / 3] * 3, atol=1e-15)


def test_uniform_row_has_entropy_log2_3_and_no_signal_and_still_carries_content(girl):
    r = mode_result(girl, "uniform")
    np.testing.assert_allclose(r.entropy, [math.log2(3)] * 3, rtol=1e-12)
    assert r.signal.tolist() == [0.0, 0.0, 0.0]
    # The mean of the V rows: not zero information
    np.testing.assert_allclose(r.Z[0], V_GIRL.mean(axis=0), atol=1e-4)
    assert np.all(np.abs(r.Z) > 1)


def test_entropy_peak_and_signal_against_an_independent_oracle(girl):
    r = mode_result(girl, "scaled")
    a = ref_softmax(S_ROW0)
    assert r.entropy[0] == pytest.approx(-sum(p * math.log2(p) for p in a), abs=1e-4)
    assert r.peak[0] == pytest.approx(0.8078, abs=5e-5)
    assert r.peak_index[0] == 2  # 刘海
    # The softmax Jacobian by central differences of a softmax written here; signal is its largest entry
    h = 1e-6
    J = np.zeros((3, 3))
    for j in range(3):
        up, down = list(S_ROW0), list(S_ROW0)
        up[j] += h
        down[j] -= h
        J[:, j] = (np.array(ref_softmax(up)) - np.array(ref_softmax(down))) / (2 * h)
    assert r.signal[0] == pytest.approx(J.max(), abs=2e-4)


def test_amplify_8_saturates_the_first_row_as_the_lesson_says(girl):
    r = mode_result(girl, "scaled", amplify=8)
    np.testing.assert_allclose(np.round(r.A[0], 2), [0, 0, 1])
    assert r.signal[0] < 0.01
    assert r.entropy[0] < 0.01
    # the same from the scores typed in from the lesson
    np.testing.assert_allclose(r.A[0], ref_softmax([8 * s for s in S_ROW0]), atol=1e-4)


@pytest.mark.parametrize("mode", ["scaled", "unscaled"])
def test_signal_shrinks_as_amplify_grows(girl, mode):
    signals = [mode_result(girl, mode, amplify=k).signal[0] for k in (0.5, 1, 2, 4, 8, 16)]
    assert all(a > b for a, b in zip(signals, signals[1:])), signals


def test_amplify_leaves_uniform_alone_and_hard_on_the_same_key(girl):
    for mode in ("uniform", "hard"):
        plain, loud = mode_result(girl, mode), mode_result(girl, mode, amplify=8)
        np.testing.assert_array_equal(plain.A, loud.A)


def test_hard_is_one_hot_at_the_argmax_with_no_signal(girl):
    r = mode_result(girl, "hard")
    assert r.A[0].tolist() == [0.0, 0.0, 1.0]  # argmax of S's first row [3.5002, 4.4115, 6.1849]
    assert int(np.argmax(S_ROW0)) == int(np.argmax(QKT_ROW0)) == 2
    assert np.all(r.A.sum(axis=1) == 1) and np.all((r.A == 0) | (r.A == 1))
    assert r.signal.tolist() == [0.0] * 3 and r.entropy.tolist() == [0.0] * 3
    np.testing.assert_allclose(r.Z[0], V_GIRL[2], atol=1e-4)  # exactly one V row comes back


def test_bank_row_of_river_bank_matches_lesson_004():
    scn = load_scenario("river_bank")
    np.testing.assert_allclose(mode_result(scn, "scaled").A[3], BANK_ROW, atol=0.006)


def test_uniform_under_a_causal_mask_is_the_mean_of_allowed_rows_only():
    r = mode_result(load_scenario("causal_mask"), "uniform")
    np.testing.assert_allclose(r.A, [[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(r.entropy, [0, 1, math.log2(3)], atol=1e-12)


@pytest.mark.parametrize("asked, shown", [
    ((), ("scaled", "unscaled", "uniform")),
    (("unscaled",), ("scaled", "unscaled")),
    (("uniform",), ("scaled", "uniform")),
    (("hard",), ("scaled", "hard")),
    (("scaled",), ("scaled",)),
    (("uniform", "unscaled", "uniform"), ("unscaled", "uniform")),
    (("hard", "scaled", "unscaled", "uniform"), ("scaled", "unscaled", "uniform", "hard")),
])
def test_modes_to_show(asked, shown):
    assert tuple(m.name for m in modes_to_show(asked)) == shown


@pytest.mark.parametrize("k", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_amplify_is_a_usage_error(girl, k):
    with pytest.raises(UsageError, match="--amplify"):
        compare(girl, amplify=k)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["girl_bangs", "river_bank", "causal_mask", "yellow_dog"]),
       mode=st.sampled_from(["scaled", "unscaled", "uniform", "hard"]),
       k=st.floats(min_value=0.01, max_value=50))
def test_row_statistics_stay_in_their_ranges(name, mode, k):
    scn = load_scenario(name)
    r = mode_result(scn, mode, amplify=k)
    allowed = scn.allowed.sum(axis=1)
    assert np.all((r.signal >= 0) & (r.signal <= 0.25 + 1e-12))
    assert np.all((r.entropy >= -1e-12) & (r.entropy <= np.log2(allowed) + 1e-9))
    assert np.all(r.peak >= 1 / allowed - 1e-12)
    assert np.all(scn.allowed[np.arange(scn.n), r.peak_index])


# ---------------------------------------------------------------- JSON


def test_json_carries_the_same_numbers_at_full_precision(girl):
    out = runner.invoke(app, ["compare", "girl_bangs", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["scenario"] == "girl_bangs" and data["amplify"] == 1.0
    assert list(data["modes"]) == ["scaled", "unscaled", "uniform"]
    modes = data["modes"]
    np.testing.assert_allclose(modes["scaled"]["A"][0], SCALED_ROW0, atol=5e-5)
    np.testing.assert_allclose(modes["unscaled"]["A"][0], UNSCALED_ROW0, atol=5e-5)
    assert modes["uniform"]["A"][0] == [1 / 3] * 3
    assert modes["uniform"]["entropy"][0] == pytest.approx(math.log2(3), rel=1e-12)
    assert modes["uniform"]["signal"] == [0.0] * 3
    assert modes["scaled"]["peak"][0] == pytest.approx(0.8078, abs=5e-5)
    assert modes["scaled"]["peak_key"] == ["刘海", "刘海", "刘海"]
    for mode, r in zip(modes, compare(girl).results):
        for key in ("A", "Z", "entropy", "peak", "signal"):
            assert modes[mode][key] == getattr(r, key).tolist(), (mode, key)  # float64, not rounded


def test_json_with_amplify_and_hard():
    data = json.loads(runner.invoke(app, ["compare", "girl_bangs", "-f", "json", "--amplify", "8",
                                          "--mode", "hard"]).stdout)
    assert data["amplify"] == 8.0
    assert list(data["modes"]) == ["scaled", "hard"]
    assert np.round(data["modes"]["scaled"]["A"][0], 2).tolist() == [0, 0, 1]
    assert data["modes"]["scaled"]["signal"][0] < 0.01
    assert data["modes"]["hard"]["A"][0] == [0.0, 0.0, 1.0]


def test_multi_head_picks_a_head_and_cross_attention_uses_source_tokens(tmp_path):
    mh = tmp_path / "mh.yaml"
    mh.write_text("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nheads: 2\n"
                  "W_Q: [[1, 0, 2, 0], [0, 1, 0, 3]]\nW_K: [[1, 0, 1, 0], [0, 1, 0, 1]]\n"
                  "W_V: [[1, 0, 5, 0], [0, 1, 0, 7]]\n", encoding="utf-8")
    data = json.loads(runner.invoke(app, ["compare", "-s", str(mh), "--head", "2", "-f", "json"]).stdout)
    assert data["head"] == 2
    # head 2: q = [2, 0] and [0, 3]; k = e_1, e_2; scaled by √2; v = [5, 0], [0, 7]
    row0 = ref_softmax([2 / math.sqrt(2), 0.0])
    np.testing.assert_allclose(data["modes"]["scaled"]["A"][0], row0, atol=1e-12)
    np.testing.assert_allclose(data["modes"]["scaled"]["Z"][0], [5 * row0[0], 7 * row0[1]], atol=1e-12)
    bad = runner.invoke(app, ["compare", "-s", str(mh), "--head", "3"])
    assert bad.exit_code == 2 and "--head 3" in bad.stderr and "2 heads" in bad.stderr

    cross = scenario_from_text("tokens: [x]\nembeddings: [[1, 0]]\nsource:\n  tokens: [s1, s2]\n"
                               "  embeddings: [[0, 1], [3, 0]]\nW_Q: [[1, 0], [0, 1]]\n"
                               "W_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", "cross.yaml")
    data = comparison_data(compare(cross))
    assert data["key_tokens"] == ["s1", "s2"]
    assert data["modes"]["scaled"]["peak_key"] == ["s2"]
    assert "s2" in render(compare(cross))


# ---------------------------------------------------------------- text


def test_text_shows_each_modes_first_row_with_entropy_and_signal(girl):
    out = render(compare(girl), width=120)
    for number in ("0.0551", "0.1371", "0.8078", "0.0203", "0.0738", "0.9059", "0.3333", "1.5850"):
        assert number in out
    for label in ("entropy", "(bits)", "signal", "peak", "scaled", "unscaled", "uniform"):
        assert label in out
    prose = " ".join(out.split())  # the explanations wrap at the console's width
    assert "Ignores the query" in prose and "not zero information" in prose
    assert "sharpens toward one-hot" in prose and "spread near 1" in prose
    assert "scores ×" not in out  # no amplify, no amplify legend


def test_text_states_amplify_in_the_header_and_explains_it(girl):
    out = render(compare(girl, amplify=8), width=120)
    head = out.splitlines()[:3]
    assert any("scores × 8" in line for line in head), head
    assert "8² times larger" in out
    # the first row's signal is tiny, and shown as such rather than as 0.0000
    tiny = max(p * (1 - p) for p in ref_softmax([8 * x for x in S_ROW0]))
    assert tiny < 1e-5 and f"{tiny:.1e}" in out


def test_wide_console_puts_panels_side_by_side(girl):
    out = render(compare(girl), width=200)
    assert any("scaled" in line and "unscaled" in line and "uniform" in line and "╭" in line
               for line in out.splitlines())
    assert max(cell_len(line) for line in out.splitlines()) <= 200


def test_middle_width_puts_as_many_panels_on_a_line_as_fit(girl):
    lines = render(compare(girl), width=120).splitlines()
    tops = [line for line in lines if "╭" in line and "direct form costs" not in line]  # the modes'
    assert len(tops) == 2
    assert "scaled" in tops[0] and "unscaled" in tops[0] and tops[0].count("╭") == 2
    assert "uniform" in tops[1] and tops[1].count("╭") == 1
    assert max(cell_len(line.rstrip()) for line in lines) <= 120


@pytest.mark.parametrize("width", [30, 60, 80])
def test_narrow_console_stacks_panels_and_squeezes_nothing(girl, width):
    out = render(compare(girl), width=width)
    lines = out.splitlines()
    assert max(cell_len(line.rstrip()) for line in lines) <= width
    titles = [line for line in lines if line.startswith("╭")]
    assert len(titles) == 4 and all(line.count("╭") == 1 for line in titles)  # 3 modes, then the cost
    for number in ("0.0551", "0.1371", "0.8078", "0.9059", "1.5850"):  # whole, never cut to "0.80…"
        assert number in out
    assert "…" not in out  # girl_bangs is small: nothing is hidden, so nothing may be cut


def test_chinese_and_ascii(girl):
    zh = render(compare(girl), lang="zh")
    for word in ("熵", "信号", "缩放", "不缩放", "均匀", "各模式说明"):
        assert word in zh
    plain = render(compare(girl, ["hard"]), ascii=True)
    assert not set("╭│▲→×√∂") & set(plain)
    assert "hard (argmax)" in plain and "->" in plain


# ---------------------------------------------------------------- the command


def test_compare_mode_unscaled_needs_no_scenario_and_keeps_scaled():
    out = runner.invoke(app, ["compare", "--mode", "unscaled"], env={"COLUMNS": "120"})
    assert out.exit_code == 0, out.output
    assert "river_bank" in out.stdout
    assert "scaled" in out.stdout.replace("unscaled", "") and "unscaled" in out.stdout
    assert "uniform" not in out.stdout.split("What each mode shows")[0]
    data = json.loads(runner.invoke(app, ["compare", "-m", "unscaled", "-f", "json"]).stdout)
    assert data["scenario"] == "river_bank" and list(data["modes"]) == ["scaled", "unscaled"]


def test_mode_repeats():
    data = json.loads(runner.invoke(app, ["compare", "girl_bangs", "-f", "json", "--mode", "uniform",
                                          "--mode", "unscaled", "-m", "hard"]).stdout)
    assert list(data["modes"]) == ["unscaled", "uniform", "hard"]


@pytest.mark.parametrize("k", ["0", "-1", "nan", "-inf"])
def test_bad_amplify_exits_2_with_one_line(k):
    out = runner.invoke(app, ["compare", "girl_bangs", f"--amplify={k}"])
    assert out.exit_code == 2
    assert out.stderr.count("\n") == 1 and "--amplify" in out.stderr
    assert "Traceback" not in out.output


def test_other_mistakes_exit_2():
    for args in (["compare", "girl_bangs", "--mode", "soft"], ["compare", "girl_bnags"],
                 ["compare", "girl_bangs", "-s", "x.yaml"], ["compare", "--lang", "fr"],
                 ["compare", "girl_bangs", "--amplify", "1e308"]):
        out = runner.invoke(app, args)
        assert out.exit_code == 2, args
        assert "Traceback" not in out.output


def test_piped_output_has_no_escape_codes():
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    out = subprocess.run([sys.executable, "-m", "attnwalk", "compare", "girl_bangs", "--amplify", "8"],
                         capture_output=True, text=True, env=dict(env, COLUMNS="120"), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "0.8078" not in out.stdout and "scores × 8" in out.stdout
