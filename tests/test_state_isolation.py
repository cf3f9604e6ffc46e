"""The suite never touches the learner's own progress (issue 15, point 11), nor reads it (issue 38).

tests/conftest.py points HOME and the XDG directories at a temporary folder for every test. The
learner's real state directory is named here from the environment as it was when this module
was imported, at collection, before any test's fixture ran: a path only, never opened or listed
(these tests compared a snapshot of it from before and after, and failed whenever the learner's own
attnwalk wrote there while the suite ran). Programs that record progress (the interactive walk in a
pseudo-terminal, a piped quiz) are run with the environment a test has, as every pty and subprocess
test runs them: what they record is under the test's home, and every file they wrote is there (the
home starts empty), in the state directory that environment names, which is not the learner's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnwalk.tutor.progress import state_dir

ROOT = Path(__file__).resolve().parent.parent

# Read at import, not in a test: by the time a test runs, conftest's fixture has replaced these.
# Only the names: nothing under the learner's home is opened, listed or even stat'ed.
_REAL_ENV = dict(os.environ)
_REAL_HOME = Path(_REAL_ENV["HOME"]) if _REAL_ENV.get("HOME") else Path.home()
REAL_STATE = state_dir(_REAL_ENV, home=_REAL_HOME)


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]] | None:
    """Every file under `folder`: (size, mtime in ns, sha256), or None when the folder is absent."""
    if not folder.exists():
        return None
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            stat = path.stat()
            found[str(path.relative_to(folder))] = (stat.st_size, stat.st_mtime_ns,
                                                   hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def assert_recorded_only_in_the_test_home(env: dict[str, str], before: dict) -> None:
    """The program run with `env` recorded girl_bangs in the state directory `env` names, under the
    test's home and not the learner's, and wrote nothing else in that home (`before`: the home's
    files before it ran)."""
    home = Path(os.environ["HOME"])
    ours = state_dir(env, home=Path(env["HOME"]))
    assert ours == state_dir() and ours.is_relative_to(home) and not ours.is_relative_to(_REAL_HOME)
    assert ours != REAL_STATE
    recorded = snapshot(ours)
    assert recorded and any("girl_bangs" in Path(ours, name).read_text(encoding="utf-8") for name in recorded)
    written = {name for name, facts in snapshot(home).items() if before.get(name) != facts}
    assert written and all((home / name).is_relative_to(ours) for name in written), written


def test_state_dir_inside_a_test_is_under_the_temporary_home() -> None:
    home = Path(os.environ["HOME"])
    assert home != _REAL_HOME
    assert Path(os.environ["XDG_STATE_HOME"]).is_relative_to(home)
    assert state_dir().is_relative_to(home)
    assert not state_dir().is_relative_to(REAL_STATE) and state_dir() != REAL_STATE
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        assert Path(os.environ[name]).is_relative_to(home)


def test_each_test_gets_its_own_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The fixture's folder is made for this session's temporary tree, not picked from $HOME."""
    assert Path(os.environ["HOME"]).is_relative_to(tmp_path_factory.getbasetemp())


def test_a_stepped_walk_in_a_pty_records_progress_only_in_the_temporary_home() -> None:
    pexpect = pytest.importorskip("pexpect")
    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("pseudo-terminals are POSIX only")
    assert snapshot(state_dir()) is None  # nothing recorded yet in this test's home
    before = snapshot(Path(os.environ["HOME"])) or {}
    # the environment a pty test gives the program: the test's own, only the terminal's settings changed
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "LINES", "ATTNWALK_LANG")}
    env.update(TERM="xterm-256color", NO_COLOR="1", LANG="C.UTF-8")
    child = pexpect.spawn(sys.executable, ["-m", "attnwalk", "run", "girl_bangs"], dimensions=(40, 120),
                          env=env, encoding="utf-8", codec_errors="replace", timeout=30, cwd=str(ROOT))
    child.expect(r"\b1 / 11\b")
    child.expect(r"q(?:\x1b\[[0-9;]*[A-Za-z])* quit")  # the footer: the walk reads keys now
    child.send("n")
    child.expect(r"\b2 / 11\b")
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert_recorded_only_in_the_test_home(env, before)


def test_a_piped_quiz_records_its_score_only_in_the_temporary_home() -> None:
    before = snapshot(Path(os.environ["HOME"])) or {}
    env = {**os.environ, "LANG": "C.UTF-8", "NO_COLOR": "1"}
    run = subprocess.run([sys.executable, "-m", "attnwalk", "quiz", "girl_bangs", "-n", "1"],
                         input="1\n", capture_output=True, text=True, encoding="utf-8", timeout=60,
                         cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr
    assert_recorded_only_in_the_test_home(env, before)
