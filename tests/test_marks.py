"""Meaning that survives without colour (issue 15, point 7): tied runners-up are listed like tied
tops under A; a masked weight carries a mark, not 0.0000 told apart only by grey; TERM=dumb prints
the walk once, as piped, instead of stacking redrawn screens.

Golden numbers are worked here by hand from causal_mask's inputs (the source lesson's Q = K =
[[1, 0], [0, 1], [1, 1]], a causal mask): T3's scores are q3·k = [1, 1, 2] / √2, so T1 and T2 tie
for second place with 1 / (2 + e^(1/√2)) each.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from attnwalk.render.bars import attention_bars
from attnwalk.render.heatmap import heat_table
from attnwalk.render.options import ViewOptions
from attnwalk.layer.stages import WEIGHTS

ROOT = Path(__file__).resolve().parent.parent

# causal_mask, worked independently: T3 gives T1 and T2 the same weight, T3 itself the rest
_E = math.exp(1 / math.sqrt(2))
T3_SECOND = 1 / (2 + _E)  # 0.2483
T3_TOP = _E / (2 + _E)  # 0.5035
T2_ROW = (1 / (1 + _E), _E / (1 + _E))  # 0.3302, 0.6698 (T3 masked)
MASKED = {(0, 1), (0, 2), (1, 2)}  # (row, col) above the diagonal: a key later than its query


def render(renderable, width: int = 100) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False)
    console.print(renderable)
    return console.file.getvalue()


def attnwalk(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The program as a learner pipes it: stdout not a terminal, NO_COLOR and the rest as given."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("FORCE_COLOR", "COLUMNS", "LINES", "ATTNWALK_LANG", "TERM")}
    environ.update(LANG="C.UTF-8", COLUMNS="100", **env)
    return subprocess.run([sys.executable, "-m", "attnwalk", *args], capture_output=True, text=True,
                          encoding="utf-8", env=environ, cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL)


def section(out: str, start: str, end: str) -> str:
    """The text from the line holding `start` up to the next line holding `end`."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    last = next(i for i in range(first + 1, len(lines)) if end in lines[i])
    return "\n".join(lines[first:last])


# -- 1. runner-up ties ---------------------------------------------------------------------------


def test_the_worked_numbers_really_tie() -> None:
    assert round(100 * T3_SECOND) == 25 and round(100 * T3_TOP) == 50
    assert abs(2 * T3_SECOND + T3_TOP - 1) < 1e-15


@pytest.mark.parametrize("lang, expected", [
    ("en", "50% (next: T1, T2 25% each, 2-way tie)"),
    ("zh", "50% （其次：T1、T2 各 25%，2 个并列）"),
])
def test_causal_mask_lists_both_runners_up_of_t3(lang: str, expected: str) -> None:
    run = attnwalk("run", "causal_mask", "--no-pause", "--lang", lang, NO_COLOR="1")
    assert run.returncode == 0, run.stderr
    t3 = [line for line in run.stdout.splitlines() if re.match(r"T3 +→ T3 ", line)]
    assert len(t3) == 1 and expected in t3[0]
    # T2's runner-up is alone: it is named as before, with no tie
    t2 = next(line for line in run.stdout.splitlines() if re.match(r"T2 +→ T2 ", line))
    alone = "(next: T1 33%)" if lang == "en" else "（其次：T1 33%）"
    assert t2.rstrip().endswith(alone) and round(100 * T2_ROW[0]) == 33


KEYS = ["下雨", "街道", "行人", "黄狗", "它"]


@pytest.mark.parametrize("lang, expected", [
    ("en", "(next: 下雨, 街道, 行人, 黄狗 8% each, 4-way tie)"),
    ("zh", "（其次：下雨、街道、行人、黄狗 各 8%，4 个并列）"),
])
def test_four_keys_tied_at_8_percent_are_all_named(lang: str, expected: str) -> None:
    """The issue's case: four keys tie at 8.1% behind the top one (here 它 at 67.6%)."""
    A = np.array([[0.081, 0.081, 0.081, 0.081, 0.676]])
    out = render(attention_bars(A, ["它"], KEYS, ViewOptions(lang=lang)))
    assert expected in out and "68%" in out


def test_more_runners_up_than_shown_end_in_an_ellipsis_as_top_ties_do() -> None:
    keys = ["a", "b", "c", "d", "e", "f"]
    A = np.array([[0.5, 0.1, 0.1, 0.1, 0.1, 0.1]])
    out = render(attention_bars(A, ["q"], keys, ViewOptions()))
    assert "(next: b, c, d, … 10% each, 5-way tie)" in out
    ascii_out = render(attention_bars(A, ["q"], keys, ViewOptions(ascii=True)))
    assert "(next: b, c, d, ... 10% each, 5-way tie)" in ascii_out


def test_a_tie_split_only_by_float_rounding_is_a_tie_and_a_real_gap_is_not() -> None:
    third = 0.15
    A = np.array([[0.7, third, third + 1e-17, 0.0],  # equal but for the last bit: one tie
                  [0.7, 0.151, 0.149, 0.0]])  # 15.1% and 14.9%: one runner-up
    out = render(attention_bars(A, ["x", "y"], ["a", "b", "c", "d"], ViewOptions()))
    lines = out.splitlines()
    assert "(next: b, c 15% each, 2-way tie)" in next(line for line in lines if line.startswith("x"))
    y = next(line for line in lines if line.startswith("y"))
    assert "(next: b 15%)" in y and "tie" not in y


def test_a_top_tie_of_every_key_has_no_runner_up() -> None:
    out = render(attention_bars(np.full((1, 3), 1 / 3), ["q"], ["a", "b", "c"], ViewOptions()))
    assert "each (3-way tie)" in out and "next" not in out


# -- 2. masked cells carry a mark ------------------------------------------------------------------


def a_table(out: str, heading: str) -> list[str]:
    """The A table's three rows (T1, T2, T3) from a piped walk: the first after `heading`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    return [line for line in lines[start:] if re.match(r"^[ |]*T[123][ |]+[\d×x]", line)][:3]


@pytest.mark.parametrize("lang, heading, legend", [
    ("en", "Stage 11 / 12", "× masked: weight 0"),
    ("zh", "阶段 11 / 12", "× 已屏蔽：权重为 0"),
])
def test_causal_mask_a_marks_masked_weights_under_no_color(lang: str, heading: str, legend: str) -> None:
    run = attnwalk("run", "causal_mask", "--no-pause", "--lang", lang, NO_COLOR="1")
    assert run.returncode == 0, run.stderr
    assert "\x1b[" not in run.stdout  # no colour at all: the mark is all that tells them apart
    rows = a_table(run.stdout, heading)
    assert [row.split()[0] for row in rows] == ["T1", "T2", "T3"]
    for r, row in enumerate(rows):
        assert row.count("×") == sum((r, c) in MASKED for c in range(3))
        assert "0.0000" not in row  # a masked weight is not printed as a number
    assert f"{T2_ROW[0]:.4f}" in rows[1] and f"{T2_ROW[1]:.4f}" in rows[1]
    assert rows[2].count(f"{T3_SECOND:.4f}") == 2 and f"{T3_TOP:.4f}" in rows[2]
    # the marks sit in the masked columns: right-aligned where the numbers end
    t2 = rows[1]
    assert t2.index("×") > t2.index(f"{T2_ROW[1]:.4f}")
    after = run.stdout[run.stdout.index(rows[2]):]
    assert legend in after.splitlines()[1]  # said right under the table
    # the scores before softmax still say −∞ themselves, with no mark
    s_plus_m = section(run.stdout, heading.replace("11", "10"), heading)
    assert s_plus_m.count("−∞") >= len(MASKED) and "×" not in "".join(a_table(s_plus_m, heading[:-7]))


def test_ascii_spells_the_mark_x() -> None:
    run = attnwalk("run", "causal_mask", "--no-pause", "--ascii", NO_COLOR="1")
    assert run.returncode == 0, run.stderr
    assert run.stdout.isascii()
    rows = a_table(run.stdout, "Stage 11 / 12")
    cells = [[c.strip() for c in row.strip("|").split("|")[1:]] for row in rows]
    expected = [["x" if (r, c) in MASKED else None for c in range(3)] for r in range(3)]
    for r in range(3):
        for c in range(3):
            if expected[r][c]:
                assert cells[r][c] == "x"
            else:
                assert cells[r][c].rstrip(" *") and cells[r][c][0].isdigit()
    assert "x masked: weight 0" in run.stdout


def test_exports_keep_the_numbers_of_masked_weights() -> None:
    run = attnwalk("export", "causal_mask", "--format", "json")
    assert run.returncode == 0, run.stderr
    A = json.loads(run.stdout)["stages"]["A"]
    for r, c in MASKED:
        assert A[r][c] == 0.0
    run = attnwalk("export", "causal_mask", "--format", "csv")
    assert run.returncode == 0, run.stderr
    rows = [line.split(",") for line in run.stdout.splitlines() if line.startswith("A,")]
    for r, c in MASKED:
        assert any(int(x[2]) == r and int(x[4]) == c and float(x[6]) == 0.0 for x in rows)


def test_only_an_exact_zero_is_marked_and_only_then_is_the_mark_explained() -> None:
    allowed = np.array([[True, False], [True, False]])
    W = np.array([[1.0, 0.0], [0.75, 0.25]])  # row 2 breaks the mask: its weight must stay visible
    out = render(heat_table(W, ["a", "b"], ["a", "b"], WEIGHTS, ViewOptions(), allowed=allowed))
    lines = out.splitlines()
    a, b = ([line for line in lines if line.split()[:1] == [label] and len(line.split()) > 2][0]
            for label in ("a", "b"))
    assert a.split()[1:] == ["1.0000", "×"] and b.split()[1:] == ["0.7500", "0.2500"]
    assert "× masked: weight 0" in out
    plain = render(heat_table(W, ["a", "b"], ["a", "b"], WEIGHTS, ViewOptions()))
    assert "×" not in plain and "masked" not in plain and plain.count("0.0000") == 1


def test_compare_marks_the_masked_weight_of_its_row_table() -> None:
    run = attnwalk("compare", "causal_mask", NO_COLOR="1")
    assert run.returncode == 0, run.stderr
    modes = [line for line in run.stdout.splitlines()[:20] if re.match(r"^ +(scaled|unscaled|uniform) ", line)]
    assert len(modes) == 3
    for line in modes:  # row 2 (T2): T3 is masked in every mode
        assert line.split()[3] == "×"
    assert "× masked: weight 0" in run.stdout


# -- 3. TERM=dumb ----------------------------------------------------------------------------------


def test_term_dumb_is_not_a_terminal_to_step_in(monkeypatch: pytest.MonkeyPatch) -> None:
    from attnwalk.terminal import console

    class Tty:  # stdin and stdout as a terminal's: the only difference left is TERM
        def __init__(self, fd: int) -> None:
            self.fd = fd

        def fileno(self) -> int:
            return self.fd

    monkeypatch.setattr(console.sys, "stdin", Tty(0))
    monkeypatch.setattr(console.sys, "stdout", Tty(1))
    monkeypatch.setattr(console.os, "isatty", lambda fd: fd in (0, 1))
    monkeypatch.setenv("TERM", "xterm-256color")
    assert console.interactive()
    monkeypatch.setenv("TERM", "dumb")
    assert not console.interactive()


def test_term_dumb_prints_every_stage_once_without_waiting_or_clearing() -> None:
    pexpect = pytest.importorskip("pexpect")
    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("pseudo-terminals are POSIX only")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "LINES", "ATTNWALK_LANG", "NO_COLOR")}
    env.update(TERM="dumb", LANG="C.UTF-8")
    child = pexpect.spawn(sys.executable, ["-m", "attnwalk", "run", "girl_bangs"], dimensions=(24, 100),
                          env=env, encoding="utf-8", codec_errors="replace", timeout=30, cwd=str(ROOT))
    child.expect(pexpect.EOF)  # no key is pressed: a walk that waited would time out here
    child.close()
    out = child.before
    assert child.exitstatus == 0
    for index in range(1, 12):
        assert len(re.findall(rf"\bStage {index} / 11\b", out)) == 1
    assert "\x1b" not in out  # no clearing, no cursor moves, no colour
    assert "TERM=dumb" in out  # the note on stderr says why it did not step
    assert "q quit" not in out  # no footer of keys that do nothing
