"""Issue 27, point 2: outputs never destroy inputs. -o and --save refuse (exit 2, one line) a file
the command reads, however it is spelled or linked, and the progress file; a device, a FIFO or
/proc/self/fd/1 is written to as it is; a link's target is replaced and the link kept; an existing
file is replaced whole, keeping its permissions; what cannot be written is exit 1, one line."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bounded import attnwalk, refused

from attnwalk.cli import app
from attnwalk.scenario.builtins import builtin_path

runner = CliRunner()
MODELS = Path(__file__).resolve().parent / "fixtures" / "models"


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scen.yaml"
    shutil.copy(builtin_path("girl_bangs"), path)
    return path


def unchanged(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before and not path.is_symlink()


# -- never onto an input -------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["same", "relative", "link", "hard link"])
def test_export_onto_its_own_scenario_is_refused(scenario: Path, tmp_path: Path, spelling: str) -> None:
    before = scenario.read_bytes()
    target = {"same": str(scenario), "relative": "./scen.yaml", "link": str(tmp_path / "link.yaml"),
              "hard link": str(tmp_path / "hard.yaml")}[spelling]
    if spelling == "link":
        os.symlink(scenario, target)
    if spelling == "hard link":
        os.link(scenario, target)
    line = refused("export", str(scenario), "-f", "markdown", "-o", target, where=f"--output {target}: ",
                   cwd=tmp_path)
    assert "a file this command reads" in line
    unchanged(scenario, before)


def test_save_onto_the_scenario_being_walked_is_refused(tmp_path: Path) -> None:
    walk = tmp_path / "walk.txt"  # a scenario file may have any name
    shutil.copy(builtin_path("river_bank"), walk)
    before = walk.read_bytes()
    refused("step", "-s", str(walk), "--save", str(walk), "--no-pause", where=f"--save {walk}: ")
    unchanged(walk, before)


def test_output_onto_a_matrix_file_the_scenario_reads_is_refused(tmp_path: Path) -> None:
    (tmp_path / "wq.csv").write_text("1,0\n0,1\n", encoding="utf-8")
    (tmp_path / "s.yaml").write_text("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_Q: {file: wq.csv}\n"
                                     "W_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", encoding="utf-8")
    refused("export", str(tmp_path / "s.yaml"), "-f", "csv", "-o", str(tmp_path / "wq.csv"),
            where=f"--output {tmp_path / 'wq.csv'}: ")
    assert (tmp_path / "wq.csv").read_text(encoding="utf-8") == "1,0\n0,1\n"


def test_output_onto_a_models_own_files_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "tiny-bert"
    shutil.copytree(MODELS / "tiny-bert", model)
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        before = (model / name).read_bytes()
        refused("model", "the river bank", "--model", str(model), "-f", "json", "-o", str(model / name),
                where=f"--output {model / name}: ")
        assert (model / name).read_bytes() == before


def test_output_onto_the_progress_file_is_refused(tmp_path: Path) -> None:
    state = Path(os.environ["XDG_STATE_HOME"]) / "attnwalk" / "progress.json"
    runner.invoke(app, ["quiz", "girl_bangs", "-n", "1"], input="4.514\n")
    before = state.read_bytes()
    for args in (["export", "girl_bangs", "-o", str(state)], ["export", "girl_bangs", "-o", str(state.parent / ".." / "attnwalk" / "progress.json")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "that is your progress file" in result.stderr
    link = tmp_path / "walk.txt"  # --save takes its format from the name: through a link
    link.symlink_to(state)
    result = runner.invoke(app, ["run", "girl_bangs", "--no-pause", "--save", str(link)])
    assert result.exit_code == 2 and "that is your progress file" in result.stderr
    assert state.read_bytes() == before


# -- special files: written to, never replaced ---------------------------------------------------


def test_dev_null_is_written_to_and_stays_a_device() -> None:
    out, _ = attnwalk("export", "girl_bangs", "-o", "/dev/null")
    assert out.returncode == 0 and out.stderr == ""
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_proc_self_fd_1_is_the_commands_own_stdout(tmp_path: Path) -> None:
    with open(tmp_path / "out.json", "wb") as stdout:
        out, _ = attnwalk("export", "girl_bangs", "-o", "/proc/self/fd/1", stdout=stdout)
    assert out.returncode == 0
    assert (tmp_path / "out.json").read_text(encoding="utf-8").startswith('{"name": "girl_bangs"')


def test_a_fifo_with_a_reader_gets_the_output_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, waiting
    reader = threading.Thread(target=lambda: got.append(_read_all(fd)))
    reader.start()
    out, _ = attnwalk("export", "girl_bangs", "-o", str(fifo))
    reader.join(30)
    assert out.returncode == 0 and got[0].startswith(b'{"name": "girl_bangs"')
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def _read_all(fd: int) -> bytes:
    import select

    os.set_blocking(fd, True)
    pieces = []
    while True:
        select.select([fd], [], [], 30)
        piece = os.read(fd, 1 << 16)
        if not piece and pieces:
            break
        pieces.append(piece)
    os.close(fd)
    return b"".join(pieces)


def test_a_fifo_no_one_reads_is_one_line_and_exit_1_not_a_wait(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    line = refused("export", "girl_bangs", "-o", str(fifo), where=f"--output {fifo}: ", code=1)
    assert "no process is reading this FIFO" in line and stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", [["export", "girl_bangs", "-o"], ["run", "girl_bangs", "--no-pause", "--save"]])
def test_a_device_that_cannot_take_it_is_exit_1_in_one_line(args: list[str], tmp_path: Path) -> None:
    full = tmp_path / "full.txt"  # --save takes its format from the name: /dev/full through a link
    full.symlink_to("/dev/full")
    out, _ = attnwalk(*args, str(full), stdout=subprocess.DEVNULL)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and f"{full}: cannot write it (No space left on device)" in lines[0]
    assert full.is_symlink() and stat.S_ISCHR(os.stat(full).st_mode)


def test_save_to_a_fifo_says_the_size_written_not_the_fifos(tmp_path: Path) -> None:
    fifo = tmp_path / "walk.txt"  # --save takes its format from the name
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(_read_all(fd)))
    reader.start()
    out, _ = attnwalk("run", "girl_bangs", "--no-pause", "--save", str(fifo))
    reader.join(30)
    assert out.returncode == 0 and len(got[0]) > 1000
    assert "KiB" in out.stderr and "0 bytes" not in out.stderr


# -- links and permissions -----------------------------------------------------------------------


def test_a_link_keeps_pointing_and_its_target_is_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "notes" / "handout.md"
    target.parent.mkdir()
    target.write_text("old handout\n", encoding="utf-8")
    os.chmod(target, 0o640)
    link = tmp_path / "handout.md"
    link.symlink_to(target)
    out, _ = attnwalk("export", "girl_bangs", "-f", "markdown", "-o", str(link))
    assert out.returncode == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8").startswith("# ") and "女生" in target.read_text(encoding="utf-8")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # as `>` would keep it
    assert sorted(p.name for p in target.parent.iterdir()) == ["handout.md"]  # no temporary left


def test_a_read_only_file_system_is_called_that(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import attnwalk.commands.output as output

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(output.os, "access", lambda path, mode: False)
    monkeypatch.setattr(output.os, "statvfs", lambda path: ReadOnly())
    result = runner.invoke(app, ["export", "girl_bangs", "-o", str(tmp_path / "x.json")])
    assert result.exit_code == 2
    assert f"cannot write in {tmp_path} (a read-only file system)" in result.stderr
