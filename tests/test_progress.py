"""Progress: where the state file lives, what it keeps, and that a broken one never stops a walk."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.layer.walk import compute
from attnwalk.render.screens import walk_steps
from attnwalk.tutor.progress import Progress, scenario_key, state_dir
from attnwalk.scenario.load import load_scenario

runner = CliRunner()


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for var in ("NO_COLOR", "FORCE_COLOR", "ATTNWALK_LANG"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "state" / "attnwalk" / "progress.json"


def steps_of(name: str):
    return walk_steps(compute(load_scenario(name)))


class Warnings(list):
    def __call__(self, message: str) -> None:
        self.append(message)


# -- where ------------------------------------------------------------------------------------


def test_state_dir_follows_xdg_then_the_platform(tmp_path):
    home = Path("/home/ada")
    assert state_dir({"XDG_STATE_HOME": "/x/state"}, "linux", home) == Path("/x/state/attnwalk")
    assert state_dir({"XDG_STATE_HOME": "relative"}, "linux", home) == home / ".local/state/attnwalk"
    assert state_dir({}, "linux", home) == home / ".local" / "state" / "attnwalk"
    assert state_dir({}, "darwin", home) == home / "Library" / "Application Support" / "attnwalk"
    assert state_dir({"LOCALAPPDATA": "/appdata"}, "win32", home) == Path("/appdata/attnwalk")
    assert state_dir({}, "win32", home) == home / "AppData" / "Local" / "attnwalk"


def test_builtins_are_keyed_by_name_and_files_by_absolute_path(tmp_path, monkeypatch):
    assert scenario_key(load_scenario("girl_bangs")) == "girl_bangs"
    src = Path(__file__).resolve().parents[1] / "scenarios" / "girl_bangs.yaml"
    shutil.copy(src, tmp_path / "mine.yaml")
    monkeypatch.chdir(tmp_path)
    assert scenario_key(load_scenario("mine.yaml")) == str(tmp_path / "mine.yaml")


# -- what -------------------------------------------------------------------------------------


def test_stage_round_trip_keeps_the_furthest(state):
    store, steps = Progress(state), steps_of("girl_bangs")
    assert store.resume_index("girl_bangs", steps) is None
    store.record_stage("girl_bangs", 7, steps)
    store.record_stage("girl_bangs", 3, steps)
    assert store.resume_index("girl_bangs", steps) == 3
    walk = json.loads(state.read_text(encoding="utf-8"))["scenarios"]["girl_bangs"]["walk"]
    assert walk["stage"] == 3 and walk["furthest"] == 7 and walk["total"] == len(steps)
    assert walk["stage_key"] == steps[3][0].key and walk["head"] == 0


def test_a_walk_that_went_to_z_and_back_keeps_z_as_its_furthest(state):
    """Found by a new user: n to Z, g 2, q, and `progress` said "furthest stage 2 / 11 (E)".
    The app keeps the furthest step it showed; the store keeps the furthest of every walk."""
    from appdriver import drive, typed

    d = drive("girl_bangs", ["n"] * 10 + ["g", *typed("2")])
    assert (d.app.index, d.app.reached) == (1, 10)
    store, steps = Progress(state), steps_of("girl_bangs")
    store.record_stage("girl_bangs", d.app.index, steps, reached=d.app.reached)
    walk = store.load()["girl_bangs"]["walk"]
    assert (walk["stage"], walk["stage_key"], walk["furthest"], walk["furthest_key"]) == (1, "E", 10, "Z")
    store.record_stage("girl_bangs", 3, steps, reached=5)  # a later, shorter walk keeps Z
    assert store.load()["girl_bangs"]["walk"]["furthest"] == 10
    assert store.resume_index("girl_bangs", steps) == 3


def test_resume_finds_the_same_stage_after_the_file_changed(state):
    store = Progress(state)
    masked, plain = steps_of("causal_mask"), steps_of("girl_bangs")  # one has S + M, one has not
    a_index = [s.key for s, _ in masked].index("A")
    store.record_stage("x", a_index, masked)
    assert plain[store.resume_index("x", plain)][0].key == "A"
    data = json.loads(state.read_text(encoding="utf-8"))
    data["scenarios"]["x"]["walk"].update(stage_key="gone", stage=99)
    state.write_text(json.dumps(data), encoding="utf-8")
    assert store.resume_index("x", plain) == len(plain) - 1  # clamped to the walk


def test_quiz_results_keep_last_best_and_attempts(state):
    store = Progress(state)
    store.record_quiz("g", 10, 16, 16, when="t1")
    store.record_quiz("g", 3, 3, 16, when="t2")  # stopped early: not a best, however good
    store.record_quiz("g", 12, 16, 16, when="t3")
    store.record_quiz("g", 11, 16, 16, when="t4")
    quiz = json.loads(state.read_text(encoding="utf-8"))["scenarios"]["g"]["quiz"]
    assert quiz["attempts"] == 4
    assert quiz["last"]["when"] == "t4" and quiz["best"]["when"] == "t3"


def test_the_furthest_stage_is_kept_apart_from_where_resume_starts(state):
    store, steps = Progress(state), steps_of("girl_bangs")
    store.record_stage("girl_bangs", 10, steps)  # walked to the end, Z
    store.record_stage("girl_bangs", 1, steps)  # later quit at E
    walk = store.load()["girl_bangs"]["walk"]
    assert (walk["furthest"], walk["furthest_key"]) == (10, "Z")
    out = runner.invoke(app, ["progress"], env={"COLUMNS": "150"}).stdout
    assert "11 / 11 (Z)" in out and "2 / 11 (E)" in out
    assert "furthest stage" in out and "--resume starts at" in out
    assert out.index("11 / 11 (Z)") < out.index("2 / 11 (E)")  # furthest first, then --resume
    zh = runner.invoke(app, ["progress", "--lang", "zh"], env={"COLUMNS": "150"}).stdout
    assert "11 / 11 (Z)" in zh and "2 / 11 (E)" in zh


def test_a_record_from_before_furthest_was_kept_shows_its_stage(state):
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"version": 1, "scenarios": {"g": {"walk": {
        "stage": 3, "total": 11, "stage_key": "Q", "head": 0, "when": "2026-01-01T00:00:00+00:00"}}}}),
        encoding="utf-8")
    out = runner.invoke(app, ["progress"], env={"COLUMNS": "150"}).stdout
    assert out.count("4 / 11") == 2  # furthest and --resume: all that is known


def test_a_short_quiz_is_never_the_best_and_says_it_was_short(state):
    store = Progress(state)
    store.record_quiz("g", 12, 16, 16, full=16, when="t1")
    store.record_quiz("g", 2, 2, 2, full=16, when="t2")  # --count 2: all of it right, but 2 of 16
    quiz = store.load()["g"]["quiz"]
    assert quiz["best"]["when"] == "t1" and quiz["last"]["full"] == 16
    out = runner.invoke(app, ["progress"], env={"COLUMNS": "150"}).stdout
    assert "12 / 16" in out and "2 / 2 (of 16 questions)" in out


def test_a_best_saved_from_a_short_quiz_gives_way_to_a_whole_one(state):
    state.parent.mkdir(parents=True)
    old = {"score": 2, "answered": 2, "questions": 2, "when": "old"}  # before 'full': a --count 2 run
    state.write_text(json.dumps({"version": 1, "scenarios": {"g": {"quiz": {
        "last": old, "best": old, "attempts": 1}}}}), encoding="utf-8")
    store = Progress(state)
    store.record_quiz("g", 9, 16, 16, full=16, when="new")
    assert store.load()["g"]["quiz"]["best"]["when"] == "new"


def test_cli_quiz_with_count_does_not_set_the_best(state):
    runner.invoke(app, ["quiz", "girl_bangs", "-n", "2"], input="4.51\n3x3\n")
    quiz = Progress(state).load()["girl_bangs"]["quiz"]
    assert quiz["best"] is None and quiz["last"]["questions"] == 2 and quiz["last"]["full"] > 2


def test_reset_one_or_all(state):
    store = Progress(state)
    store.record_quiz("a", 1, 1, 1)
    store.record_quiz("b", 1, 1, 1)
    assert store.reset("nope") == 0
    assert store.reset("a") == 1 and set(store.load()) == {"b"}
    assert store.reset() == 1 and not state.exists()


def test_writes_are_atomic_and_leave_no_temporary_files(state):
    store = Progress(state)
    for i in range(5):
        store.record_quiz("g", i, 5, 5)
    # and the lock file beside it, which is never removed (progressfile.py says why)
    assert sorted(p.name for p in state.parent.iterdir()) == ["progress.json", "progress.json.lock"]
    json.loads(state.read_text(encoding="utf-8"))


# -- broken files -----------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["{not json", "[]", '{"scenarios": 3}', "\udcff"[:0] + "\x00\x01",
                                     '{"version": 1}', '{"version": 1, "scenarios": {"g": {"walk"'])
def test_a_corrupt_file_is_kept_beside_a_new_one_and_said_where(state, content):
    state.parent.mkdir(parents=True)
    state.write_text(content, encoding="utf-8")
    warnings = Warnings()
    store = Progress(state, warn=warnings)
    assert store.load() == {}
    assert len(warnings) == 1 and "damaged" in warnings[0] and str(state) in warnings[0]
    assert state.read_text(encoding="utf-8") == content  # reading never moves it
    store.record_quiz("g", 1, 2, 2)
    store.record_stage("g", 0, steps_of("girl_bangs"))
    kept = [p for p in state.parent.iterdir() if p.name.startswith("progress-damaged-")]
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == content
    assert len(warnings) == 2 and f"it is kept as {kept[0]}" in warnings[1]
    assert set(json.loads(state.read_text(encoding="utf-8"))["scenarios"]["g"]) == {"quiz", "walk"}


def test_bad_records_inside_a_good_file_are_skipped(state):
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"version": 1, "scenarios": {"a": 5, "b": {"walk": "x", "quiz": []}}}),
                     encoding="utf-8")
    store = Progress(state, warn=Warnings())
    assert store.resume_index("b", steps_of("girl_bangs")) is None
    store.record_quiz("b", 1, 1, 1)
    assert store.load()["b"]["quiz"]["attempts"] == 1
    assert "b" in runner.invoke(app, ["progress"]).stdout


def test_an_unwritable_place_warns_once_and_goes_on(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    warnings = Warnings()
    store = Progress(blocker / "attnwalk" / "progress.json", warn=warnings)
    assert store.record_quiz("g", 1, 1, 1) is False
    assert store.record_stage("g", 0, steps_of("girl_bangs")) is False
    assert len(warnings) == 1 and "cannot save progress" in warnings[0]


# -- the commands -----------------------------------------------------------------------------


def test_progress_and_reset_commands(state):
    result = runner.invoke(app, ["progress"])
    assert result.exit_code == 0 and "No progress yet" in result.stdout and str(state) in result.stdout
    runner.invoke(app, ["quiz", "girl_bangs", "-n", "2"], input="4.51\n3x3\n")
    Progress(state).record_stage("girl_bangs", 9, steps_of("girl_bangs"))
    result = runner.invoke(app, ["progress"], env={"COLUMNS": "120"})
    assert "girl_bangs" in result.stdout and "10 / 11 (A)" in result.stdout and "2 / 2" in result.stdout
    zh = runner.invoke(app, ["progress", "--lang", "zh"], env={"COLUMNS": "120"})
    assert "学习进度" in zh.stdout
    result = runner.invoke(app, ["reset", "river_bank"])
    assert result.exit_code == 0 and "No progress recorded for river_bank" in result.stdout
    result = runner.invoke(app, ["reset", "girl_bangs"])
    assert "Progress cleared for girl_bangs." in result.stdout
    assert Progress(state).load() == {}
    runner.invoke(app, ["quiz", "girl_bangs", "-n", "1"], input="4.51\n")
    assert "(1 scenarios)" in runner.invoke(app, ["reset", "--yes"]).stdout and not state.exists()


def test_reset_a_scenario_file_by_its_path(state, tmp_path, monkeypatch):
    src = Path(__file__).resolve().parents[1] / "scenarios" / "girl_bangs.yaml"
    shutil.copy(src, tmp_path / "mine.yaml")
    monkeypatch.chdir(tmp_path)
    runner.invoke(app, ["quiz", "--scenario", "mine.yaml", "-n", "1"], input="4.51\n")
    assert str(tmp_path / "mine.yaml") in Progress(state).load()
    assert "cleared" in runner.invoke(app, ["reset", "mine.yaml"]).stdout
    assert Progress(state).load() == {}


# -- reset without a name asks first ----------------------------------------------------------


def _two_saved(state) -> Progress:
    store = Progress(state)
    store.record_quiz("girl_bangs", 1, 1, 1, full=16)
    store.record_stage("river_bank", 2, steps_of("river_bank"))
    return store


def test_reset_without_a_name_and_no_terminal_to_ask_in_refuses(state):
    store = _two_saved(state)
    result = runner.invoke(app, ["reset"])  # CliRunner's stdin is not a terminal
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--yes" in result.stderr
    assert sorted(store.load()) == ["girl_bangs", "river_bank"]
    zh = runner.invoke(app, ["reset", "--lang", "zh"])
    assert zh.exit_code == 2 and "--yes" in zh.stderr and "清除所有场景" in zh.stderr
    result = runner.invoke(app, ["reset", "--yes"])
    assert result.exit_code == 0 and "Progress cleared (2 scenarios)." in result.stdout
    assert not state.exists()


def test_reset_with_nothing_saved_says_so_without_asking(state):
    result = runner.invoke(app, ["reset"])
    assert result.exit_code == 0 and result.stdout == "No progress saved: nothing to forget.\n"
    assert result.stderr == ""


@pytest.mark.parametrize("answer, forgets", [("y\n", True), ("YES\n", True), ("n\n", False),
                                             ("\n", False), ("", False), ("yep\n", False)])
def test_reset_in_a_terminal_asks_first(state, monkeypatch, answer, forgets):
    monkeypatch.setattr("attnwalk.terminal.streams.stdin_is_terminal", lambda: True)
    store = _two_saved(state)
    result = runner.invoke(app, ["reset"], input=answer)
    assert result.exit_code == 0
    assert result.stderr == "Forget your progress on every scenario (girl_bangs, river_bank)? [y/N] "
    if forgets:
        assert result.stdout == "Progress cleared (2 scenarios).\n" and not state.exists()
    else:
        assert result.stdout == "Nothing forgotten.\n" and sorted(store.load()) == ["girl_bangs", "river_bank"]


def test_reset_asks_in_chinese_and_takes_a_chinese_yes(state, monkeypatch):
    monkeypatch.setattr("attnwalk.terminal.streams.stdin_is_terminal", lambda: True)
    _two_saved(state)
    result = runner.invoke(app, ["reset", "--lang", "zh"], input="是\n")
    assert "girl_bangs、river_bank" in result.stderr and result.stderr.endswith("[y/N] ")
    assert result.exit_code == 0 and not state.exists()


def test_reset_with_yes_or_a_name_never_asks(state, monkeypatch):
    asked = []
    monkeypatch.setattr("attnwalk.terminal.streams.stdin_is_terminal", lambda: asked.append(1) or True)
    store = _two_saved(state)
    assert "cleared for river_bank" in runner.invoke(app, ["reset", "river_bank"]).stdout
    assert sorted(store.load()) == ["girl_bangs"]
    assert runner.invoke(app, ["reset", "-y"]).exit_code == 0 and not state.exists()
    assert asked == []


def test_reset_asks_in_a_real_terminal(state, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    _two_saved(state)
    child = _spawn(["reset"], tmp_path / "state")
    child.expect_exact("(girl_bangs, river_bank)? [y/N] ")
    assert state.exists()  # nothing forgotten while it waits
    child.sendline("y")
    child.expect_exact("Progress cleared (2 scenarios).")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and not state.exists()


# -- progress at 80 columns -------------------------------------------------------------------

LONG_PATH = "/home/ada/lessons/a_rather_long_folder_name/my_own_scenario.yaml"


def _a_varied_record(state) -> None:
    store = Progress(state)
    steps = steps_of("girl_bangs")
    store.record_stage("girl_bangs", 9, steps)
    store.record_quiz("girl_bangs", 12, 16, 16, full=16,
                      shown=("column_softmax", "no_scale", "column_softmax", "params_vs_activations"))
    store.record_quiz("girl_bangs", 2, 2, 2, full=16)  # --count 2: "2 / 2 (of 16 questions)"
    store.record_stage(LONG_PATH, 3, steps)


# Each phrase a reader takes in at a glance; none may be split over lines at 80 columns.
PHRASES = {
    "en": ["furthest stage", "--resume starts at", "last quiz", "best quiz", "last active", "mistakes shown",
           "10 / 11 (A)", "4 / 11 (X)", "2 / 2 (of 16 questions)", "12 / 16", "softmax down the column ×2",
           "forgot to divide by √d_k", "W_Q and Q taken for the same kind of thing"],
    "zh": ["最远到达的阶段", "--resume 从这里继续", "最近一次测验", "最好成绩", "最近活动", "出现过的错误",
           "10 / 11 (A)", "2 / 2（共 16 题）", "沿列做 softmax ×2", "忘了除以 √d_k", "把 W_Q 和 Q 当成同一类东西"],
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_progress_at_80_columns_keeps_every_phrase_on_one_line(state, lang):
    from rich.cells import cell_len

    _a_varied_record(state)
    result = runner.invoke(app, ["progress", "--lang", lang], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert all(cell_len(line.rstrip()) <= 80 for line in lines[:-1])  # the last: the file's path, never cut
    for phrase in PHRASES[lang]:
        assert any(phrase in line for line in lines), phrase
    dates = [line for line in lines if re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", line)]
    assert len(dates) == 2  # one per scenario, whole
    assert LONG_PATH in result.stdout.replace("\n", "")  # a path longer than the line may fold, but is all there


def test_progress_is_a_table_where_it_fits(state):
    _a_varied_record(state)
    out = runner.invoke(app, ["progress"], env={"COLUMNS": "200"}).stdout
    header = next(line for line in out.splitlines() if "furthest stage" in line)
    for label in ("scenario", "--resume starts at", "last quiz", "best quiz", "last active", "mistakes shown"):
        assert label in header  # one header row: a table
    row = next(line for line in out.splitlines() if "girl_bangs" in line)
    assert "2 / 2 (of 16 questions)" in row and "12 / 16" in row and "softmax down the column ×2" in row


def test_resume_when_printing_starts_at_the_saved_stage(state):
    Progress(state).record_stage("girl_bangs", 7, steps_of("girl_bangs"))
    result = runner.invoke(app, ["run", "girl_bangs", "--no-pause", "--resume"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "Resuming at stage 8 / 11." in result.stderr
    assert "Stage 8 / 11" in result.stdout and "Stage 7 / 11" not in result.stdout
    fresh = runner.invoke(app, ["run", "river_bank", "--no-pause", "--resume"])
    assert "No saved place for river_bank yet" in fresh.stderr and "Stage 1 / " in fresh.stdout


def test_a_corrupt_state_file_never_stops_a_walk_or_a_quiz(state):
    state.parent.mkdir(parents=True)
    state.write_text("{{{", encoding="utf-8")
    result = runner.invoke(app, ["run", "girl_bangs", "--no-pause", "--resume"])
    assert result.exit_code == 0 and result.stderr.count("warning") == 1
    assert "Stage 1 / 11" in result.stdout
    result = runner.invoke(app, ["quiz", "girl_bangs", "-n", "1"], input="4.51\n")
    assert result.exit_code == 0 and "Score: 1 / 1" in result.stdout
    assert json.loads(state.read_text(encoding="utf-8"))["scenarios"]["girl_bangs"]


def test_an_unwritable_state_dir_never_stops_a_quiz(tmp_path, monkeypatch):
    (tmp_path / "blocker").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "blocker"))
    result = runner.invoke(app, ["quiz", "girl_bangs", "-n", "1"], input="4.51\n")
    assert result.exit_code == 0 and "Score: 1 / 1" in result.stdout
    assert result.stderr.count("cannot save progress") == 1


def _spawn(args, state_home):
    pexpect = pytest.importorskip("pexpect")
    exe = shutil.which("attnwalk")
    program, prefix = (exe, []) if exe else (sys.executable, ["-m", "attnwalk"])
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "ATTNWALK_LANG", "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", NO_COLOR="1", LANG="C.UTF-8", XDG_STATE_HOME=str(state_home))
    return pexpect.spawn(program, prefix + args, env=env, encoding="utf-8", timeout=20,
                         dimensions=(40, 120))


def test_progress_survives_between_interactive_runs(state, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    child = _spawn(["run", "girl_bangs"], tmp_path / "state")
    child.expect(r"\b1 / 11\b")
    child.expect(r"q(?:\x1b\[[0-9;]*[A-Za-z])* quit")  # the footer: the walk reads keys now
    for stage in (2, 3, 4):
        child.send("n")
        child.expect(rf"\b{stage} / 11\b")
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert json.loads(state.read_text(encoding="utf-8"))["scenarios"]["girl_bangs"]["walk"]["stage"] == 3
    child = _spawn(["run", "girl_bangs", "--resume"], tmp_path / "state")
    child.expect_exact("Resuming at stage 4 / 11.")
    child.send("n")
    child.expect(r"\b5 / 11\b")
    child.send("\x03")  # Ctrl-C still keeps the place
    child.expect(pexpect.EOF)
    child.close()
    assert json.loads(state.read_text(encoding="utf-8"))["scenarios"]["girl_bangs"]["walk"]["stage"] == 4
