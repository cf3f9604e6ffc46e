"""Shell completion, typer's own: the shell runs attnwalk with _ATTNWALK_COMPLETE set and reads
the candidates back. Driven here as click and typer test it (the environment variables with
CliRunner), and once through bash itself with the script `--show-completion` prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app

runner = CliRunner()
LESSONS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))


def bash_candidates(line: str) -> list[str]:
    """What bash's completion function gets for `line` (the word being typed is its last one,
    or a new empty word when the line ends in a space)."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    result = runner.invoke(app, [], prog_name="attnwalk", env={
        "_ATTNWALK_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(cword)})
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_the_built_in_lessons_are_files():
    assert len(LESSONS) >= 14 and {"girl_bangs", "river_bank", "rope", "alibi", "grouped_query",
                                   "online_softmax", "kv_cache"} <= set(LESSONS)


def test_commands_complete():
    assert set(bash_candidates("attnwalk ")) == {"export", "list", "init", "run", "step", "decode", "compare",
                                                 "explain", "quiz", "grade", "serve", "progress", "reset", "model",
                                                 "grad", "train", "heads"}
    assert bash_candidates("attnwalk ex") == ["export", "explain"]


@pytest.mark.parametrize("line", ["attnwalk run ", "attnwalk quiz ", "attnwalk export ",
                                  "attnwalk compare ", "attnwalk explain ",
                                  "attnwalk init new.yaml --from "])
def test_every_lesson_name_completes_where_a_lesson_is_named(line):
    assert bash_candidates(line) == LESSONS


def test_reset_completes_the_scenarios_progress_holds():
    from attnwalk.tutor.progress import Progress

    assert bash_candidates("attnwalk reset ") == []  # nothing saved (the suite's own state folder)
    store = Progress()
    store.record_quiz("river_bank", 1, 1, 1)
    store.record_quiz("/tmp/mine.yaml", 1, 1, 1)
    assert bash_candidates("attnwalk reset ") == ["/tmp/mine.yaml", "river_bank"]
    assert bash_candidates("attnwalk reset r") == ["river_bank"]


def test_a_lesson_name_completes_from_its_start():
    assert bash_candidates("attnwalk run gi") == ["girl_bangs"]
    assert bash_candidates("attnwalk run yellow") == ["yellow_dog", "yellow_dog_length"]
    assert bash_candidates("attnwalk run ./mine") == []  # nothing: bash falls back to file names


def test_stage_names_complete_those_the_scenario_has():
    # girl_bangs has no mask and one head (mask: none in its file); causal_mask is masked.
    assert bash_candidates("attnwalk explain girl_bangs S") == ["S"]
    assert bash_candidates("attnwalk explain causal_mask S") == ["S", "S+M"]
    assert bash_candidates("attnwalk explain girl_bangs Q") == ["Q", "QK^T"]
    every = bash_candidates("attnwalk explain girl_bangs ")
    assert {"X", "Q", "K", "V", "QK^T", "S", "A", "Z"} <= set(every)
    assert "S+M" not in every and "concat" not in every
    # a scenario that cannot be read yet: every stage is offered
    assert {"S+M", "concat", "O"} <= set(bash_candidates("attnwalk explain nope.yaml "))


def test_modes_complete():
    assert bash_candidates("attnwalk run girl_bangs -m ") == ["scaled", "unscaled", "uniform"]
    assert bash_candidates("attnwalk explain girl_bangs A 1 1 --mode u") == ["unscaled", "uniform"]
    assert bash_candidates("attnwalk compare --mode ") == ["scaled", "unscaled", "uniform", "hard"]


def test_zsh_and_fish_get_the_same_candidates():
    zsh = runner.invoke(app, [], prog_name="attnwalk", env={
        "_ATTNWALK_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "attnwalk run gi"})
    assert '"girl_bangs"' in zsh.stdout
    fish = runner.invoke(app, [], prog_name="attnwalk", env={
        "_ATTNWALK_COMPLETE": "complete_fish", "_TYPER_COMPLETE_FISH_ACTION": "get-args",
        "_TYPER_COMPLETE_ARGS": "attnwalk explain causal_mask S"})
    assert fish.stdout.split() == ["S", "S+M"]


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o default -F _attnwalk_completion attnwalk"),
                                           ("zsh", "compdef _attnwalk_completion attnwalk"),
                                           ("fish", "complete --command attnwalk")])
def test_show_completion_prints_a_script(shell, marker, monkeypatch):
    # typer reads this when it builds the command (before CliRunner's env applies): with it,
    # --show-completion takes the shell's name instead of detecting the shell it runs in.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = runner.invoke(app, ["--show-completion", shell], prog_name="attnwalk")
    assert result.exit_code == 0 and marker in result.stdout and "_ATTNWALK_COMPLETE" in result.stdout


def test_help_lists_the_completion_options():
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "80"}).stdout
    assert "--install-completion" in out and "--show-completion" in out


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_a_lesson_with_the_printed_script():
    beside = Path(sys.executable).parent / "attnwalk"
    exe = str(beside) if beside.is_file() else shutil.which("attnwalk")
    if exe is None:
        pytest.skip("the attnwalk console script is not installed")
    script = subprocess.run([exe, "--show-completion", "bash"], capture_output=True, text=True, check=True,
                            env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}).stdout
    probe = (f'{script}\nCOMP_WORDS=(attnwalk run riv); COMP_CWORD=2; _attnwalk_completion attnwalk\n'
             'printf "%s\\n" "${COMPREPLY[@]}"\n')
    path = str(Path(exe).parent) + ":" + os.environ.get("PATH", "")
    done = subprocess.run(["bash", "--norc", "--noprofile"], input=probe, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": path})
    assert done.stdout.split() == ["river_bank"], done.stderr


# -- help texts -------------------------------------------------------------------------------

COMMANDS = ("export", "list", "init", "run", "step", "decode", "grad", "train", "compare", "explain", "quiz",
            "grade", "serve", "progress", "reset", "model", "heads")


def test_the_command_list_is_whole_at_80_columns():
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "80"}).stdout
    listed = out[out.index("Commands:"):].splitlines()[1:]
    rows = [line.split(None, 1) for line in listed if line.strip()]
    assert [name for name, _ in rows] == list(COMMANDS)  # one line each: no description wraps
    for name, description in rows:
        assert not description.endswith("...") and description.endswith("."), (name, description)


def test_compare_names_its_scenario_files_as_scenarios_to_compare():
    out = " ".join(runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "200"}).stdout.split())
    assert "Walk this scenario file" not in out
    assert "-s, --scenario FILE A scenario file (YAML), instead of a NAME or as the second one" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_and_each_of_its_parameters_is_described(command):
    from typer.main import get_command

    click_command = get_command(app).commands[command]
    assert click_command.help and click_command.short_help
    for param in click_command.params:
        assert getattr(param, "help", None), (command, param.name)
    out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "80"}).stdout
    assert out.startswith(f"Usage: attnwalk {command} ")
    if command not in ("list", "progress"):  # the two that take nothing but --lang
        assert "Example" in out
