"""Issue 27, point 4: a closed stdout, stdin or stderr ends in the right exit code and at most one
line wherever one can still be written, never a traceback; COLUMNS (and LINES) of 0, negative,
huge or not a number is ignored. terminal/streams.py is the policy; these run the program as a
shell runs it, the descriptor closed before it starts (`>&-`, `<&-`, `2>&-`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def closed(fd: int, *args: str, stdin: bytes | None = None, **env: str) -> subprocess.CompletedProcess:
    """`attnwalk ARGS` with descriptor `fd` closed before the program starts, as the shell's
    `>&-` leaves it; stdout and stderr captured where they are open."""
    def close() -> None:
        os.close(fd)

    environ = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "attnwalk", *args], input=stdin, capture_output=True,
                          preexec_fn=close, env=environ, timeout=120)


COMMANDS = [["list"], ["--help"], ["--version"], ["export", "girl_bangs"], ["decode", "kv_cache", "--no-pause"],
            ["run", "girl_bangs", "--no-pause"], ["compare", "girl_bangs", "-f", "json"], ["progress"],
            ["quiz", "girl_bangs", "--format", "markdown"], ["explain", "girl_bangs", "A", "1", "1"]]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_stdout_is_output_that_cannot_be_written(args: list[str]) -> None:
    out = closed(1, *args)
    assert out.returncode == 1, out.stderr
    assert out.stderr.decode() == "attnwalk: cannot write the output: stdout is closed\n"


def test_with_stdout_closed_no_file_opened_lands_on_descriptor_1(tmp_path: Path) -> None:
    # the scenario file, opened first, would get descriptor 1: what the walk prints went into it
    path = tmp_path / "mine.yaml"
    path.write_bytes(_builtin("girl_bangs"))
    before = path.read_bytes()
    out = closed(1, "export", str(path), "-f", "markdown", "-o", str(tmp_path / "h.md"))
    assert out.returncode == 0 and out.stderr == b""
    assert path.read_bytes() == before and (tmp_path / "h.md").read_text(encoding="utf-8").startswith("# ")


def _builtin(name: str) -> bytes:
    from attnwalk.scenario.builtins import builtin_path

    return builtin_path(name).read_bytes()


@pytest.mark.parametrize("args", [["quiz", "river_bank"], ["run", "girl_bangs", "--predict", "--no-pause"],
                                  ["quiz", "girl_bangs", "--review"]], ids=" ".join)
def test_a_closed_stdin_is_input_that_has_ended(args: list[str]) -> None:
    out = closed(0, *args)
    assert out.returncode == 0 and b"Traceback" not in out.stderr, out.stderr
    assert out.stderr == b""


def test_a_scenario_read_from_a_closed_stdin_is_one_line() -> None:
    out = closed(0, "run", "-", "--no-pause")
    assert out.returncode == 2 and out.stdout == b""
    lines = out.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnwalk: <stdin>")


def test_reset_with_a_closed_stdin_asks_no_one_and_changes_nothing() -> None:
    subprocess.run([sys.executable, "-m", "attnwalk", "quiz", "girl_bangs", "-n", "1"], input=b"4.514\n",
                   capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    out = closed(0, "reset")
    assert out.returncode == 2 and b"--yes" in out.stderr and len(out.stderr.splitlines()) == 1


@pytest.mark.parametrize("args, code", [(["run", "nosuch"], 2), (["export", "girl_bangs"], 0),
                                        (["run", "girl_bangs", "--no-pause", "--resume"], 0)])
def test_a_closed_stderr_says_nothing_and_stdout_stays_the_commands(args: list[str], code: int) -> None:
    out = closed(2, *args)
    assert out.returncode == code
    assert b"attnwalk:" not in out.stdout and b"Traceback" not in out.stdout  # the error went nowhere


@pytest.mark.parametrize("columns", ["0", "-5", "abc", "", "99999999", "1e3"])
def test_columns_that_is_not_a_width_is_ignored(columns: str, tmp_path: Path) -> None:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), COLUMNS=columns, LINES=columns)
    out = subprocess.run([sys.executable, "-m", "attnwalk", "list"], capture_output=True, env=env, timeout=60)
    assert out.returncode == 0 and out.stderr == b""
    widths = {len(line) for line in out.stdout.decode().splitlines()}
    assert max(widths) == 80  # not a terminal: 80 columns, as when COLUMNS is unset
    saved = tmp_path / "walk.txt"
    out = subprocess.run([sys.executable, "-m", "attnwalk", "run", "girl_bangs", "--no-pause", "--save", str(saved)],
                         capture_output=True, env=env, timeout=60)
    assert out.returncode == 0 and saved.stat().st_size > 1000 and "Stage 11 / 11" in saved.read_text("utf-8")


def test_a_real_width_is_still_taken() -> None:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), COLUMNS="120")
    out = subprocess.run([sys.executable, "-m", "attnwalk", "list"], capture_output=True, env=env, timeout=60)
    assert max(len(line) for line in out.stdout.decode().splitlines()) == 120


def test_a_worksheet_on_an_ascii_output_is_the_same_json(tmp_path: Path) -> None:
    # a token beyond U+FFFF: the stream's own escape, \U0001f431, is not JSON
    path = tmp_path / "cat.yaml"
    path.write_text("tokens: [小猫, 🐱, 鱼]\nembeddings: [[1, 0], [0, 1], [1, 1]]\nW_Q: [[1, 0], [0, 1]]\n"
                    "W_K: [[1, 0.5], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", encoding="utf-8")

    def sheet(**env: str) -> bytes:
        environ = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), **env)
        return subprocess.run([sys.executable, "-m", "attnwalk", "quiz", "-s", str(path), "--format", "json"],
                              capture_output=True, env=environ, timeout=60).stdout

    import json

    ascii_sheet = sheet(PYTHONIOENCODING="ascii")
    whole = json.loads(sheet(PYTHONIOENCODING="utf-8"))
    assert ascii_sheet.isascii() and json.loads(ascii_sheet) == whole and "🐱" in json.dumps(whole, ensure_ascii=False)
