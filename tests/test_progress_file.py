"""Issue 27, point 1: the progress file is the learner's data. Concurrent runs merge their records
under a lock; a damaged or unknown-version file is kept beside itself, never overwritten; a link
is written through; a FIFO, a device or a huge file is refused in one line, unread; any field of
any JSON type is read; SIGHUP and SIGTERM keep the walk's place and give the terminal back.

The programs run as a learner runs them (tests/bounded.py: under 300 MB, in bounded time), with
XDG_STATE_HOME in the test's own folder. The large files are made here, never committed.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounded import ROOT, attnwalk

from attnwalk.scenario.builtins import builtin_path
from attnwalk.tutor import progressfile
from attnwalk.tutor.progress import Progress
from attnwalk.tutor.progressview import progress_view


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "attnwalk" / "progress.json"


def records(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))["scenarios"]


def quiz(*args: str, answers: str = "4.514\n", timeout: float = 60) -> subprocess.CompletedProcess:
    """`attnwalk quiz ... -n 1` with its answer piped in, bounded."""
    read, write = os.pipe()
    os.write(write, answers.encode("utf-8"))
    os.close(write)
    try:
        out, _ = attnwalk("quiz", *args, "-n", "1", stdin=read, timeout=timeout)
    finally:
        os.close(read)
    return out


def warnings_in(out: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in out.stderr
    return [line for line in out.stderr.splitlines() if line.startswith("attnwalk:")]


def fifty_records(path: Path) -> bytes:
    """A progress file as a learner's looks after a term: 50 scenarios, a walk and a quiz each."""
    scenarios = {f"/home/ada/lessons/scenario{i}.yaml": {
        "walk": {"stage": i % 11, "total": 11, "stage_key": "A", "head": 0, "furthest": 10,
                 "furthest_key": "Z", "when": "2026-11-29T09:20:00+00:00"},
        "quiz": {"last": {"score": 12, "answered": 16, "questions": 16, "full": 16,
                          "when": "2026-11-29T09:40:00+00:00", "seed": None, "missed": ["cell:A:0:1:0"]},
                 "best": None, "attempts": 3, "mistakes": {"column_softmax": 2}}} for i in range(50)}
    data = json.dumps({"version": 1, "scenarios": scenarios}, indent=2).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


# -- many at once --------------------------------------------------------------------------------


def test_sixteen_quizzes_at_once_keep_sixteen_records(state: Path, tmp_path: Path) -> None:
    # each quiz reads the file, adds its record and writes it back: without the lock, a quiz that
    # read before another wrote wrote that one's record away (8 to 12 of 16 were kept)
    files = []
    for i in range(16):
        path = tmp_path / f"lesson{i}.yaml"
        shutil.copy(builtin_path("girl_bangs"), path)
        files.append(path)
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "attnwalk", "quiz", "-s", str(path), "-n", "1"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
             for path in files]
    for proc in procs:  # every one started before any answers: they end together
        proc.stdin.write(b"4.514\n")
        proc.stdin.close()
    errors = [proc.stderr.read().decode() for proc in procs]
    assert [proc.wait(timeout=180) for proc in procs] == [0] * 16, errors
    assert all(error == "" for error in errors), errors
    saved = records(state)
    assert sorted(saved) == sorted(str(path.resolve()) for path in files)
    assert all(record["quiz"]["attempts"] == 1 for record in saved.values())


def _record_after(barrier, path: str, i: int) -> None:
    barrier.wait()  # all sixteen read-modify-write the one file at the same moment
    assert Progress(Path(path), warn=lambda message: None).record_quiz("girl_bangs", i % 3, 2, 2)


def test_sixteen_writers_of_one_record_count_sixteen_attempts(state: Path) -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(16)
    workers = [context.Process(target=_record_after, args=(barrier, str(state), i)) for i in range(16)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0] * 16
    assert records(state)["girl_bangs"]["quiz"]["attempts"] == 16


def test_a_lock_held_too_long_leaves_the_file_as_it_was_and_says_so(state: Path, monkeypatch) -> None:
    fcntl = pytest.importorskip("fcntl")
    Progress(state).record_quiz("girl_bangs", 1, 1, 1)
    before = state.read_bytes()
    monkeypatch.setattr(progressfile, "LOCK_WAIT", 0.2)
    said: list[str] = []
    with open(state.with_name("progress.json.lock"), "a") as other:  # another attnwalk holds it
        fcntl.flock(other, fcntl.LOCK_EX)
        assert Progress(state, warn=said.append).record_quiz("river_bank", 1, 1, 1) is False
    assert state.read_bytes() == before
    assert len(said) == 1 and "held by another attnwalk" in said[0] and str(state) in said[0]


# -- damaged, or written by a newer attnwalk ------------------------------------------------------


def test_a_truncated_file_is_kept_beside_the_new_one_and_the_message_says_where(state: Path) -> None:
    data = fifty_records(state)
    assert len(data) > 16_000
    state.write_bytes(data[:-300])  # cut short, as a full disk or a crash of another tool leaves it
    out = quiz("girl_bangs")
    assert out.returncode == 0 and "Score: 1 / 1" in out.stdout
    kept = sorted(state.parent.glob("progress-damaged-*.json"))
    assert len(kept) == 1 and kept[0].read_bytes() == data[:-300]  # every byte kept
    lines = warnings_in(out)
    assert len(lines) == 1 and f"it is kept as {kept[0]}" in lines[0] and "damaged" in lines[0]
    assert list(records(state)) == ["girl_bangs"]


def test_a_file_of_a_newer_version_is_kept_not_overwritten(state: Path) -> None:
    fifty_records(state)
    newer = json.loads(state.read_text(encoding="utf-8"))
    newer["version"] = 2
    state.write_text(json.dumps(newer), encoding="utf-8")
    before = state.read_bytes()
    out = quiz("girl_bangs")
    assert out.returncode == 0
    kept = sorted(state.parent.glob("progress-version-2-*.json"))
    assert len(kept) == 1 and kept[0].read_bytes() == before
    lines = warnings_in(out)
    assert len(lines) == 1 and "version 2" in lines[0] and str(kept[0]) in lines[0]


def test_reading_alone_never_moves_a_damaged_file_and_progress_says_why(state: Path) -> None:
    state.parent.mkdir(parents=True)
    state.write_text('{"version": 1, "scenarios": {', encoding="utf-8")
    out, _ = attnwalk("progress")
    assert out.returncode == 2 and out.stdout == ""
    assert len(warnings_in(out)) == 1 and "is damaged" in out.stderr and "it is kept" in out.stderr
    assert [p.name for p in state.parent.iterdir()] == ["progress.json"]


# -- links ----------------------------------------------------------------------------------------


def test_a_linked_progress_file_is_written_through_and_stays_a_link(state: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "attnwalk-progress.json"
    fifty_records(dotfiles)
    state.parent.mkdir(parents=True)
    state.symlink_to(dotfiles)
    out = quiz("girl_bangs")
    assert out.returncode == 0 and warnings_in(out) == []
    assert state.is_symlink() and os.readlink(state) == str(dotfiles)
    assert len(records(dotfiles)) == 51 and records(dotfiles)["girl_bangs"]["quiz"]["attempts"] == 1
    assert Progress(state).reset() == 51  # forgetting everything removes the target; the link stays
    assert state.is_symlink() and not dotfiles.exists()
    assert quiz("girl_bangs").returncode == 0 and list(records(dotfiles)) == ["girl_bangs"]


# -- what is not a progress file -------------------------------------------------------------------


def special(kind: str, state: Path, tmp_path: Path) -> None:
    state.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(state)
    elif kind == "dev-zero":
        state.symlink_to("/dev/zero")
    else:  # 400 MB, sparse: nothing is written to the disk
        with open(state, "wb") as handle:
            handle.truncate(400 * 1024 * 1024)


@pytest.mark.parametrize("kind, why", [("fifo", "named pipe"), ("dev-zero", "a device"),
                                       ("large", "400 MB, more than the 4 MB allowed")])
def test_a_file_that_is_not_a_progress_file_is_refused_unread_in_one_line(
        state: Path, tmp_path: Path, kind: str, why: str) -> None:
    special(kind, state, tmp_path)
    out, _ = attnwalk("progress")
    assert out.returncode == 2 and out.stdout == ""
    lines = warnings_in(out)
    assert len(lines) == 1 and why in lines[0] and str(state) in lines[0]
    out = quiz("girl_bangs")  # the quiz goes on; its result is not saved over the file
    assert out.returncode == 0 and "Score: 1 / 1" in out.stdout
    lines = warnings_in(out)
    assert len(lines) == 1 and why in lines[0] and "neither read from it nor saved" in lines[0]
    mode = os.stat(state).st_mode
    assert {"fifo": stat.S_ISFIFO, "dev-zero": stat.S_ISCHR, "large": stat.S_ISREG}[kind](mode)
    if kind == "large":
        assert state.stat().st_size == 400 * 1024 * 1024


# -- any field, any type -------------------------------------------------------------------------


def test_when_as_text_and_as_a_number_both_read(state: Path) -> None:
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"version": 1, "scenarios": {
        "girl_bangs": {"walk": {"stage": 2, "total": 11, "stage_key": "X", "when": "2026-11-29T09:20:00+00:00"},
                       "quiz": {"last": {"score": 1, "answered": 1, "questions": 1, "when": 1764408000}}},
        "river_bank": {"walk": {"stage": 3, "total": 11, "when": 1764408000.5}}}}), encoding="utf-8")
    out, _ = attnwalk("progress", env={"COLUMNS": "120", "TZ": "UTC"})
    assert out.returncode == 0 and out.stderr == ""
    assert "girl_bangs" in out.stdout and "river_bank" in out.stdout
    assert "2026-11-29 09:20" in out.stdout  # girl_bangs: the later of the walk's text and the quiz's number
    assert "2025-11-29 09:20" in out.stdout  # 1764408000.5 s after 1970, in UTC


SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
JSON = st.recursive(SCALARS, lambda children: st.one_of(st.lists(children, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), children, max_size=3)),
                    max_leaves=8)
FIELDS = ("stage", "total", "stage_key", "head", "furthest", "furthest_key", "when", "score", "answered",
          "questions", "full", "seed", "missed", "best", "last", "attempts", "mistakes")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(walk=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=8),
       quiz_record=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=8),
       last=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=8))
def test_any_value_in_any_field_is_read_shown_and_recorded_over(tmp_path_factory, walk, quiz_record, last) -> None:
    from rich.console import Console

    from attnwalk.layer.walk import compute
    from attnwalk.render.screens import walk_steps
    from attnwalk.scenario.load import load_scenario

    from attnwalk.errors import UsageError

    path = tmp_path_factory.mktemp("progress") / "progress.json"
    text = json.dumps({"version": 1, "scenarios": {"g": {"walk": walk, "quiz": {**quiz_record, "last": last}},
                                                   "h": {"walk": walk, "quiz": quiz_record}}})
    path.write_text(text, encoding="utf-8")
    warned: list[str] = []
    store = Progress(path, warn=warned.append)
    console = Console(width=100, file=io.StringIO(), color_system=None)
    # issue 39: a part that is not of the kind attnwalk writes there (the quiz's best a list, its
    # attempts text, a mistake's count a word) makes the file a damaged one, kept whole aside
    # rather than read as empty and overwritten; any other value in any field reads as before
    well_formed = _well_formed(quiz_record) and _well_formed({**quiz_record, "last": last})
    if well_formed:
        console.print(progress_view("en", store))
    else:
        with pytest.raises(UsageError, match="is damaged"):
            progress_view("en", store)
    steps = walk_steps(compute(load_scenario("girl_bangs")))
    store.resume_index("g", steps)
    assert store.record_quiz("g", 1, 2, 2, shown=("column_softmax",))
    assert store.record_stage("h", 3, steps, reached=5)
    saved = records(path)
    assert saved["g"]["quiz"]["last"]["score"] == 1 and saved["h"]["walk"]["stage"] == 3
    kept = [p for p in path.parent.iterdir() if "damaged" in p.name]
    if well_formed:
        assert warned == [] and kept == []
    else:
        assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == text  # every byte kept
        assert any(str(kept[0]) in message for message in warned)


def _well_formed(quiz: dict) -> bool:
    """The quiz record's parts are of the kinds the progress module's docstring gives: last and
    best objects (or null), attempts a whole number, mistakes an object of whole-number counts."""
    def whole(x):
        return isinstance(x, int) and not isinstance(x, bool)

    return (all(quiz.get(k) is None or isinstance(quiz[k], dict) for k in ("last", "best"))
            and ("attempts" not in quiz or whole(quiz["attempts"]))
            and ("mistakes" not in quiz or (isinstance(quiz["mistakes"], dict)
                                            and all(whole(n) for n in quiz["mistakes"].values()))))


# -- closing the terminal ------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals and SIGHUP are POSIX only")
@pytest.mark.parametrize("sig, code", [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_sighup_and_sigterm_keep_the_place_and_leave_the_app_screen_as_q_does(state: Path, sig, code) -> None:
    pexpect = pytest.importorskip("pexpect")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", NO_COLOR="1", LANG="C.UTF-8", PYTHONPATH=str(ROOT))
    child = pexpect.spawn(sys.executable, ["-m", "attnwalk", "run", "girl_bangs"], env=env, encoding="utf-8",
                          codec_errors="replace", timeout=30, dimensions=(24, 80))
    child.expect_exact("\x1b[?1049h")  # the app's screen
    child.expect(r"\b1 / 11\b")
    child.expect(r"q(?:\x1b\[[0-9;]*[A-Za-z])* quit")
    for stage in (2, 3, 4):
        child.send("n")
        child.expect(rf"\b{stage} / 11\b")
    child.kill(sig)
    child.expect_exact("\x1b[?1049l")  # the learner's own screen back, as after q
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == code and "Traceback" not in child.before
    assert records(state)["girl_bangs"]["walk"]["stage"] == 3
