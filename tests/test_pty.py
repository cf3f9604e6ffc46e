"""The interactive walk in a real pseudo-terminal: the program as a learner starts it, keys pressed
one at a time, the screen read back. A CliRunner cannot do this: it is not a terminal.

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
    child.expect_exact("Row (number from 1, or token): ")
    child.send("2\r")
    child.expect_exact("Column (number from 1, or token): ")
    child.send("刘海\r")
    child.expect_exact("0.32736 × 1.38719")  # q_撩 · k_刘海: the lesson's 0.3274 × 1.3872, to 5 decimals
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
    child.expect("q quit")  # waiting for a key again
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


def next_frame(child) -> list[str]:
    """The lines of the next screen drawn: from the terminal being cleared to the footer's end."""
    import re

    child.expect_exact("\x1b[2J")
    child.expect("q quit")
    return re.sub(r"\x1b\[[0-9;]*[mH]", "", child.before).split("\r\n")  # styles (bold under NO_COLOR)


def test_a_screen_taller_than_the_terminal_scrolls_under_its_header() -> None:
    child = spawn("run", "girl_bangs", rows=20, cols=60)
    child.expect("q quit")
    child.send("g")
    child.expect_exact("(1–11): ")
    child.send("10\r")
    frame = next_frame(child)
    assert len(frame) <= 19 and frame[0].startswith("Stage 10 / 11   A  Attention weights")
    assert any(line.startswith("↓ ") and "more lines (j/↓)" in line for line in frame)
    # j, ↓, PgDn, PgUp, k, ↑: lines hidden above afterwards (None: more than a page)
    for key, above in (("j", 1), ("\x1b[B", 2), ("\x1b[6~", None), ("\x1b[5~", 2), ("k", 1), ("\x1b[A", 0)):
        child.send(key)
        frame = next_frame(child)  # scrolled: the header is still the first line, the formula below it
        assert len(frame) <= 19 and frame[0].startswith("Stage 10 / 11   A  Attention weights")
        assert frame[1].startswith("formula  A[i, :] = softmax")
        hidden = [line for line in frame if "above (k/↑)" in line]
        if above is None:
            assert hidden and int(hidden[0].split()[1]) > 2, frame
        else:
            assert hidden == [] if above == 0 else hidden[0].startswith(f"↑ {above} line"), frame
    child.send("n")
    frame = next_frame(child)
    assert frame[0].startswith("Stage 11 / 11") and not any("above (k/↑)" in line for line in frame)
    child.send("q")
    assert finish(child) == 0


def test_head_option_starts_the_stepper_at_that_head() -> None:
    child = spawn("run", "shapes", "--head", "3")
    child.expect(r"\b16 / 41\b")  # head 3's QKᵀ: 7 shared screens and 2 heads × 4 come before it
    child.expect_exact("head 3 / 8")
    child.expect("q quit")
    child.send("q")
    assert finish(child) == 0


def test_no_pause_prints_everything_without_waiting() -> None:
    child = spawn("run", "girl_bangs", "--no-pause")
    child.expect(r"\b11 / 11\b")
    assert finish(child) == 0


# -- TerminalKeys on a bare pseudo-terminal pair: what each byte sequence means -----------------


@pytest.fixture
def pty_pair():
    import pty

    import signal

    def too_slow(signum, frame):
        raise TimeoutError("TerminalKeys kept waiting for a key that was already sent")

    master, slave = pty.openpty()
    old = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(TIMEOUT)  # a broken reader would otherwise wait forever
    try:
        yield master, slave
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.close(master)
        os.close(slave)


def test_terminal_keys_decode_arrows_utf8_and_restore_the_settings(pty_pair) -> None:
    import io
    import termios

    from attnwalk.terminal import keys as K
    from attnwalk.terminal.keys import TerminalKeys

    master, slave = pty_pair
    before = termios.tcgetattr(slave)
    echo = io.StringIO()
    with TerminalKeys(fd=slave, out=echo) as keys:
        during = termios.tcgetattr(slave)
        assert not during[3] & termios.ICANON and not during[3] & termios.ECHO
        os.write(master, "n\x1b[Cb\x1b[D \rxg".encode())
        pressed = iter(keys)
        assert [next(pressed) for _ in range(8)] == [K.NEXT, K.NEXT, K.BACK, K.BACK, K.NEXT, K.NEXT, "x", K.JUMP]
        os.write(master, "刘x\x7f海\r".encode())
        assert keys.read_line("Row: ") == "刘海"
        assert echo.getvalue() == "Row: 刘x\b \b海\n"
        os.write(master, b"\x04")
        assert next(pressed) == K.QUIT
    assert termios.tcgetattr(slave) == before


def test_terminal_keys_ctrl_c_raises_and_still_restores(pty_pair) -> None:
    import io
    import termios

    from attnwalk.terminal.keys import TerminalKeys

    master, slave = pty_pair
    before = termios.tcgetattr(slave)
    with pytest.raises(KeyboardInterrupt):
        with TerminalKeys(fd=slave, out=io.StringIO()) as keys:
            # In a terminal Ctrl-C is a SIGINT (ISIG stays on); this bare pty has no process group
            # to signal, so turn ISIG off and check that the byte itself means the same.
            attrs = termios.tcgetattr(slave)
            attrs[3] &= ~termios.ISIG
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            os.write(master, b"12\x03")
            keys.read_line("Jump: ")
    assert termios.tcgetattr(slave) == before
