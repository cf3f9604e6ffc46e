"""`run` and `step` through the CLI, which is not a terminal: the whole walk printed, --save, and
the options they check. (The interactive walk is tests/test_app.py's.)

Golden numbers are typed in from lesson 002 (女生撩刘海), ../shared/seeds/002_*.txt:
QKᵀ[撩, 刘海] = 0.3274×1.3872 + 1.2872×5.3083 = 0.4542 + 6.8326 = 7.2868,
A[女生, 刘海] = 0.8078, Z[女生] = [1.5636, 2.5716].
"""

from __future__ import annotations

import os
import re

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app

LESSON_002 = ("7.2868", "0.8078", "1.5636", "2.5716")


# -- the real screens: run and step through the CLI (a CliRunner is not a terminal) ------------


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_run_prints_every_stage_without_escape_codes() -> None:
    result = invoke("run", "girl_bangs")
    assert result.exit_code == 0, result.output
    assert "\x1b[" not in result.stdout
    for number in LESSON_002:
        assert number in result.stdout
    for i in range(1, 12):
        assert re.search(rf"\b{i} / 11\b", result.stdout), f"stage {i} / 11 missing"


def test_step_takes_a_scenario_file_and_a_name(tmp_path) -> None:
    from attnwalk.scenario.builtins import builtin_path

    path = tmp_path / "mine.yaml"
    path.write_text(builtin_path("girl_bangs").read_text(encoding="utf-8"), encoding="utf-8")
    by_file = invoke("step", "--scenario", str(path))
    assert by_file.exit_code == 0, by_file.output
    assert "0.8078" in by_file.stdout
    by_name = invoke("step", "girl_bangs", "--no-pause")
    assert by_name.exit_code == 0 and "0.8078" in by_name.stdout
    by_option = invoke("run", "-s", str(path))
    assert by_option.exit_code == 0 and "0.8078" in by_option.stdout


def test_run_needs_exactly_one_scenario(tmp_path) -> None:
    neither = invoke("run")
    assert neither.exit_code == 2 and "--scenario" in neither.stderr
    both = invoke("run", "girl_bangs", "--scenario", str(tmp_path / "x.yaml"))
    assert both.exit_code == 2 and "not both" in both.stderr


def test_precision_changes_the_decimals_and_is_checked() -> None:
    result = invoke("run", "girl_bangs", "--precision", "2")
    # the stages, not the lesson that opens the walk: its description is the author's prose and
    # quotes the source lesson's 4 decimals (A[女生, 刘海] = 0.8078) whatever the precision
    stages = result.stdout[result.stdout.index("Stage 2 / 11"):]
    assert result.exit_code == 0 and "0.81" in stages and "0.8078" not in stages
    assert invoke("run", "girl_bangs", "--precision", "13").exit_code == 2
    assert invoke("run", "girl_bangs", "--precision", "-1").exit_code == 2


def test_mode_option_changes_the_weights() -> None:
    result = invoke("run", "girl_bangs", "--mode", "uniform")
    assert result.exit_code == 0 and "0.3333" in result.stdout


def test_unknown_language_exits_2() -> None:
    result = invoke("run", "girl_bangs", "--lang", "fr")
    assert result.exit_code == 2 and "en or zh" in result.stderr


@pytest.mark.parametrize("suffix", [".svg", ".html", ".htm", ".txt"])
def test_save_writes_the_whole_walk(tmp_path, suffix: str) -> None:
    path = tmp_path / f"walk{suffix}"
    result = invoke("run", "girl_bangs", "--save", str(path))
    assert result.exit_code == 0, result.output
    saved = path.read_text(encoding="utf-8")
    for number in LESSON_002:
        assert number in saved
    if suffix == ".svg":
        assert saved.lstrip().startswith("<svg")
        assert "attnwalk:&#160;girl_bangs&#160;(scaled)" in saved  # the window title names the mode
    elif suffix in (".html", ".htm"):
        assert "<html" in saved.lower()
    else:
        assert "\x1b[" not in saved and not saved.lstrip().startswith("<")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # an ordinary file, not a private temp file


def test_save_with_an_unknown_extension_exits_2_before_walking(tmp_path) -> None:
    path = tmp_path / "walk.pdf"
    result = invoke("run", "girl_bangs", "--save", str(path))
    assert result.exit_code == 2
    assert ".svg, .html, .htm, .txt" in result.stderr
    assert result.stdout == "" and not path.exists()


def test_save_to_a_missing_folder_exits_2_and_writes_nothing(tmp_path) -> None:
    path = tmp_path / "nonexistent-dir" / "x.svg"
    result = invoke("run", "girl_bangs", "--save", str(path))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr and "Traceback" not in result.output
    assert not path.parent.exists()
    assert invoke("run", "girl_bangs", "--save", "/nonexistent-dir/x.svg").exit_code == 2
    assert not os.path.exists("/nonexistent-dir")


def test_save_that_fails_while_writing_leaves_no_partial_file(tmp_path, monkeypatch) -> None:
    import attnwalk.atomic as atomic

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    path = tmp_path / "walk.txt"
    result = invoke("run", "girl_bangs", "--save", str(path))
    # output that cannot be written: exit 1, as for stdout (exit 2 is a mistake in what was asked)
    assert result.exit_code == 1 and "No space left on device" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_printed_walk_never_imports_textual() -> None:
    # piped (not a terminal), --no-pause, TERM=dumb: plain Rich; Textual is for the interactive app
    import subprocess
    import sys

    code = ("import sys; sys.argv = ['attnwalk'] + sys.argv[1:]\n"
            "from attnwalk.cli import _run as run\n"
            "try:\n    run()\nexcept SystemExit:\n    pass\n"
            "print('TEXTUAL', sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))")
    for args, env in ((["run", "girl_bangs"], {}), (["run", "shapes", "--no-pause"], {}),
                      (["run", "river_bank"], {"TERM": "dumb"}), (["quiz", "girl_bangs", "--count", "1"], {})):
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                             input="1\n", env=dict(os.environ, NO_COLOR="1", **env))
        assert "TEXTUAL []" in out.stdout, (args, out.stdout[-500:], out.stderr[-500:])
        assert "Stage" in out.stdout or "Question" in out.stdout
