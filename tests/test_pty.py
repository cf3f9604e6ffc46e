"""The interactive walk in a real pseudo-terminal: the program as a learner starts it, keys pressed
one at a time, the screen read back. A CliRunner cannot do this: it is not a terminal.

Golden numbers from lesson 002: QKᵀ[撩, 刘海] = 0.3274×1.3872 + 1.2872×5.3083 = 7.2868 (the lesson's
products, 0.4542 + 6.8326, are of rounded operands, so the test checks the operands and the sum).
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
    exe = shutil.which("attnwalk")
    return (exe, []) if exe else (sys.executable, ["-m", "attnwalk"])


def spawn(*args: str, rows: int = 40, cols: int = 120):
    program, prefix = attnwalk_command()
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "LINES", "ATTNWALK_LANG")}
    env.update(TERM="xterm-256color", NO_COLOR="1", LANG="C.UTF-8")
    child = pexpect.spawn(program, prefix + list(args), dimensions=(rows, cols), env=env, encoding="utf-8",
                          timeout=TIMEOUT, cwd=str(Path(__file__).resolve().parent.parent))
    return child


def finish(child) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


def test_keys_move_work_a_cell_and_quit_with_0() -> None:
    child = spawn("run", "girl_bangs")
    child.expect(r"\b1 / 11\b")
    child.expect("q quit")  # the footer lists the keys, and the walk waits for one
    child.send("n")
    child.expect(r"\b2 / 11\b")
    child.send("b")
    child.expect(r"\b1 / 11\b")
    child.send("g")
    child.expect_exact("(1–11): ")
    child.send("8\r")
    child.expect(r"\b8 / 11\b")
    child.send("c")
    child.expect_exact("Row (index or token): ")
    child.send("2\r")
    child.expect_exact("Column (index or token): ")
    child.send("刘海\r")
    child.expect_exact("0.3274 × 1.3872")  # q_撩 · k_刘海, the lesson's operands
    child.expect_exact("7.2868")
    child.send("q")
    assert finish(child) == 0
    assert "Traceback" not in (child.before or "")


def test_ctrl_c_quits_with_130_and_no_traceback() -> None:
    child = spawn("run", "girl_bangs")
    child.expect(r"\b1 / 11\b")
    child.expect("q quit")
    child.send("n")
    child.expect(r"\b2 / 11\b")
    child.sendintr()
    assert finish(child) == 130
    assert "Traceback" not in (child.before or "")


def test_ctrl_c_at_a_prompt_quits_with_130() -> None:
    child = spawn("run", "girl_bangs")
    child.expect("q quit")
    child.send("g")
    child.expect_exact("(1–11): ")
    child.send("3")
    child.sendintr()
    assert finish(child) == 130
    assert "Traceback" not in (child.before or "")


def test_ctrl_d_ends_the_walk_with_0() -> None:
    child = spawn("step", "girl_bangs")
    child.expect("q quit")
    child.sendeof()
    assert finish(child) == 0


def test_resizing_the_terminal_draws_the_stage_again() -> None:
    child = spawn("run", "girl_bangs")
    child.expect(r"\b1 / 11\b")
    child.expect("q quit")
    child.setwinsize(30, 80)
    child.expect(r"\b1 / 11\b")  # redrawn without a key press
    child.expect("q quit")
    child.send("q")
    assert finish(child) == 0


def test_no_pause_prints_everything_without_waiting() -> None:
    child = spawn("run", "girl_bangs", "--no-pause")
    child.expect(r"\b11 / 11\b")
    assert finish(child) == 0
