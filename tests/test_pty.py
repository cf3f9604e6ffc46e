"""The interactive walk in a real pseudo-terminal: the installed program as a learner starts it,
keys pressed one at a time, the screen read back. A CliRunner cannot do this (it is not a
terminal), and neither is Textual's pilot (tests/test_app.py): this is where the alternate screen,
the exit codes and the terminal's own keys (Ctrl-C, a resize) are checked.

Golden numbers from lesson 002: QKᵀ[撩, 刘海] = 0.3274×1.3872 + 1.2872×5.3083 = 7.2868 (the lesson's
6.8326 is not 1.2872 × 5.3083 = 6.8328: the products of the operands shown add up to 7.2870, so
attnwalk works that cell to 5 decimals; the test checks operands that round to the lesson's, and
the sum).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

if sys.platform == "win32":  # pragma: no cover
    pytest.skip("pseudo-terminals are POSIX only", allow_module_level=True)

TIMEOUT = 20


def attnwalk_command() -> tuple[str, list[str]]:
    """The installed program, or this interpreter running the package."""
    # the installed console script: beside this interpreter in a virtual environment, else on PATH
    beside = Path(sys.executable).parent / "attnwalk"
    exe = str(beside) if beside.is_file() else shutil.which("attnwalk")
    return (exe, []) if exe else (sys.executable, ["-m", "attnwalk"])


def spawn(*args: str, rows: int = 40, cols: int = 120):
    program, prefix = attnwalk_command()
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "LINES", "ATTNWALK_LANG")}
    env.update(TERM="xterm-256color", NO_COLOR="1", LANG="C.UTF-8")
    # codec_errors: Ctrl-C may cut the output inside a multi-byte character; that is not a failure.
    child = pexpect.spawn(program, prefix + list(args), dimensions=(rows, cols), env=env, encoding="utf-8",
                          codec_errors="replace", timeout=TIMEOUT,
                          cwd=str(Path(__file__).resolve().parent.parent))
    return child


def finish(child) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


ALT_ON, ALT_OFF = "\x1b[?1049h", "\x1b[?1049l"  # the alternate screen: entered, left
# The footer's "q quit": Textual draws the key and its description with styles between them.
QUIT_SHOWN = r"q(?:\x1b\[[0-9;]*[A-Za-z])* quit"


def ready(child, pattern: str = r"\b1 / 11\b") -> None:
    """Wait for the first screen, footer included: keys sent before the app reads them are lost."""
    child.expect(pattern)
    child.expect(QUIT_SHOWN)


def test_keys_move_work_a_cell_and_quit_with_0_leaving_the_alternate_screen() -> None:
    child = spawn("run", "girl_bangs")
    child.expect_exact(ALT_ON)  # the walk draws on the alternate screen
    ready(child)
    child.send("n")
    child.expect(r"\b2 / 11\b")
    child.send("b")
    child.expect(r"\b1 / 11\b")
    child.send("g")
    child.expect_exact("(1–11):")
    child.send("8\r")
    child.expect(r"\b8 / 11\b")
    child.send("c")
    child.expect_exact("Row (number from 1, or token):")
    child.send("2\r")
    child.expect_exact("Column (number from 1, or token):")
    child.send("刘海\r")
    child.expect_exact("0.32736 × 1.38719")  # q_撩 · k_刘海: the lesson's 0.3274 × 1.3872, to 5 decimals
    child.expect_exact("7.2868")
    child.send("q")
    child.expect_exact(ALT_OFF)  # back to the learner's own screen and scrollback
    assert finish(child) == 0
    assert "Traceback" not in (child.before or "")


def test_ctrl_c_quits_with_130_and_no_traceback() -> None:
    child = spawn("run", "girl_bangs")
    ready(child)
    child.send("n")
    child.expect(r"\b2 / 11\b")
    child.sendintr()
    assert finish(child) == 130
    assert "Traceback" not in (child.before or "")


def test_ctrl_c_at_a_prompt_quits_with_130() -> None:
    child = spawn("run", "girl_bangs")
    ready(child)
    child.send("g")
    child.expect_exact("(1–11):")
    child.send("3")
    child.sendintr()
    assert finish(child) == 130


def test_ctrl_d_ends_the_walk_with_0() -> None:
    child = spawn("step", "girl_bangs")
    ready(child)
    child.sendeof()
    assert finish(child) == 0


def test_resizing_the_terminal_draws_the_stage_again() -> None:
    child = spawn("run", "girl_bangs")
    ready(child)
    child.setwinsize(30, 80)
    ready(child)  # redrawn at the new size without a key press
    child.send("q")
    assert finish(child) == 0


def test_head_option_starts_the_walk_at_that_head() -> None:
    child = spawn("run", "shapes", "--head", "3")
    child.expect(r"\b16 / 41\b")  # head 3's QKᵀ: 7 shared screens and 2 heads × 4 come before it
    child.expect_exact("head 3 / 8")
    child.expect(QUIT_SHOWN)
    child.send("q")
    assert finish(child) == 0


def test_no_pause_prints_everything_without_waiting_or_the_alternate_screen() -> None:
    child = spawn("run", "girl_bangs", "--no-pause")
    child.expect(r"\b11 / 11\b")
    assert finish(child) == 0
    assert ALT_ON not in child.before


def test_the_quiz_asks_in_the_app_and_leaves_the_score_on_the_terminal() -> None:
    child = spawn("quiz", "girl_bangs", "--count", "2")
    child.expect_exact("Question 1 / 2")
    child.expect_exact("Your answer to question 1:")
    child.send("4.514\r")  # QKᵀ[撩, 女生] = 0.3274 × 1.6 + 1.2872 × 3.1 (lesson 002)
    child.expect_exact("Question 2 / 2")
    child.expect_exact("Your answer to question 2:")  # the prompt names it: it may be out of view
    child.send("3x3\r")
    child.expect_exact("The quiz is over")  # the last verdict stays in view until Enter
    child.send("\r")
    child.expect_exact(ALT_OFF)
    child.expect_exact("Score: 2 / 2")  # printed after the app, so it stays in the scrollback
    assert finish(child) == 0


def test_the_place_reached_is_kept_for_resume() -> None:
    child = spawn("run", "girl_bangs")
    ready(child)
    child.send("n")
    child.expect(r"\b2 / 11\b")
    child.send("n")
    child.expect(r"\b3 / 11\b")
    child.send("q")
    assert finish(child) == 0
    child = spawn("run", "girl_bangs", "--resume")
    ready(child, r"\b3 / 11\b")
    child.send("q")
    assert finish(child) == 0


def test_at_the_end_n_asks_then_leaves_and_what_to_try_next_stays_on_the_terminal() -> None:
    child = spawn("run", "girl_bangs")
    ready(child)
    child.send("g")
    child.expect_exact("(1–11):")
    child.send("11\r")
    child.expect(r"\b11 / 11\b")
    child.send("n")
    child.expect_exact("again leaves the walk")  # asked, not left
    child.send("n")
    child.expect_exact(ALT_OFF)
    child.expect_exact("End of the walk. What next:")  # printed after the alternate screen, so it stays
    child.expect_exact("attnwalk quiz girl_bangs")
    child.expect_exact("attnwalk run word_order")
    assert finish(child) == 0


def test_what_to_try_next_folds_chinese_between_characters_on_a_narrow_terminal() -> None:
    """Printed after the app, at 44 columns: a line breaks inside its Chinese, not at the space
    after "attnwalk quiz" (a bare Prose given to console.print lost its CJK breaking)."""
    child = spawn("run", "girl_bangs", "--lang", "zh", rows=24, cols=44)
    child.expect(r"\b1 / 11\b")  # not ready(): its wait for the footer's "quit" is English
    child.expect(r"\?(?:\x1b\[[0-9;]*m)* 帮")  # the footer (cut short at 44 columns), drawn in the first frame: keys are read from here on
    child.send("g")
    child.expect_exact("（1–11）")
    child.send("11\r")
    child.expect(r"\b11 / 11\b")
    child.send("n")
    child.expect_exact("再按")
    child.send("n")
    child.expect_exact(ALT_OFF)
    assert finish(child) == 0
    after = child.before.replace("\r", "")
    lines = [line for line in after.split("\n") if line.strip()]
    assert "  attnwalk quiz girl_bangs：用本场景自己的数" in lines, lines
    assert not any(line.rstrip() == "attnwalk quiz" or line.strip() == "attnwalk quiz" for line in lines)
