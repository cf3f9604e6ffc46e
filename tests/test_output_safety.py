"""Output that cannot break (issue 16, points 4-6): a full disk, a closed pipe or an encoding that
cannot hold the text ends without a traceback; a scenario's text is shown, never obeyed by the
terminal; numbers too large or too small for fixed decimals are written in scientific notation
and never cut unseen.

The CLI runs as the installed program does (`python -m attnwalk`, through cli.run), with the
environment of the test (HOME and XDG in a temporary folder, conftest.py) plus NO_COLOR=1.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Console

from attnwalk.layer.safe import escaped
from attnwalk.layer.stages import SIGNED
from attnwalk.render import style
from attnwalk.render.heatmap import heat_table
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.builtins import builtin_path

GIRL_BANGS_TOKENS = ["女生", "撩", "刘海"]  # lesson 002's sentence, typed from the seed

# Every command, as a learner would type it, with what it reads from stdin.
COMMANDS = {
    "run": (["run", "girl_bangs", "--no-pause"], ""),
    "step": (["step", "--scenario", str(builtin_path("river_bank")), "--no-pause"], ""),
    "compare": (["compare", "girl_bangs"], ""),
    "compare-json": (["compare", "girl_bangs", "--format", "json"], ""),
    "list": (["list"], ""),
    "explain": (["explain", "girl_bangs", "A", "撩", "刘海"], ""),
    "quiz": (["quiz", "girl_bangs", "--count", "2"], "7.29\n3x3\n"),
    "export-json": (["export", "girl_bangs"], ""),
    "export-markdown": (["export", "girl_bangs", "-f", "markdown"], ""),
    "export-latex": (["export", "girl_bangs", "-f", "latex"], ""),
    "export-csv": (["export", "girl_bangs", "-f", "csv"], ""),
    "progress": (["progress"], ""),
    "reset": (["reset"], ""),
    "help": (["--help"], ""),
    "version": (["--version"], ""),
}

# The characters a terminal would obey or hide, listed here apart from layer/safe.py: every
# control character but the line break (C0, DEL, C1), the bidirectional formatting characters and
# every other format character (Unicode's category Cf: zero-width spaces and joiners, the soft
# hyphen, the byte-order mark, ...), as unicodedata classes them.
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def obeyed(text: str) -> list[str]:
    return [f"U+{ord(ch):04X}" for ch in text
            if ch in BIDI or unicodedata.category(ch) == "Cf" or (unicodedata.category(ch) == "Cc" and ch != "\n")]


def attnwalk(*args: str, stdin: str = "", stdout=subprocess.PIPE, cwd: Path | None = None,
             **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    environ.update({"NO_COLOR": "1", "COLUMNS": "100", **env})
    return subprocess.run([sys.executable, "-m", "attnwalk", *args], input=stdin.encode("utf-8"),
                          stdout=stdout, stderr=subprocess.PIPE, env=environ, cwd=cwd, timeout=120)


def concurrently(jobs: dict[str, Callable[[], subprocess.CompletedProcess]]
                 ) -> dict[str, subprocess.CompletedProcess]:
    """Each job's result by name, the programs run side by side (a group takes the time of a few)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """HOME and XDG for the module's shared runs: a module fixture starts before conftest's
    per-test one, so it names its own temporary home."""
    folder = tmp_path_factory.mktemp("home")
    return {"HOME": str(folder), **{name: str(folder / sub) for name, sub in (
        ("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share"),
        ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"))}}


def stderr_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return proc.stderr.decode("utf-8", "replace").splitlines()


# -- a full disk, a closed pipe ---------------------------------------------------------------


@pytest.fixture(scope="module")
def full_disk(home: dict[str, str], tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, subprocess.CompletedProcess]:
    new = tmp_path_factory.mktemp("init") / "new.yaml"
    commands = {**COMMANDS, "init": (["init", str(new)], "")}

    def job(args: list[str], stdin: str) -> Callable[[], subprocess.CompletedProcess]:
        def run() -> subprocess.CompletedProcess:
            with open("/dev/full", "w") as full:
                return attnwalk(*args, stdin=stdin, stdout=full, **home)
        return run

    return concurrently({name: job(*command) for name, command in commands.items()})


@pytest.fixture(scope="module")
def closed_pipe(home: dict[str, str]) -> dict[str, subprocess.CompletedProcess]:
    # The reader has gone before the first byte (as `| head -1` is, once it has its line): every
    # write fails with EPIPE.
    commands = {**COMMANDS, "run-shapes": (["run", "shapes", "--no-pause"], "")}

    def job(args: list[str], stdin: str) -> Callable[[], subprocess.CompletedProcess]:
        def run() -> subprocess.CompletedProcess:
            read, write = os.pipe()
            os.close(read)
            try:
                return attnwalk(*args, stdin=stdin, stdout=write, **home)
            finally:
                os.close(write)
        return run

    return concurrently({name: job(*command) for name, command in commands.items()})


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("name", [*COMMANDS, "init"])
def test_a_full_disk_ends_in_one_line_and_exit_1(name: str, full_disk) -> None:
    proc = full_disk[name]
    lines = stderr_lines(proc)
    assert proc.returncode == 1, lines
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert lines[0] == "attnwalk: cannot write the output: No space left on device"


@pytest.mark.parametrize("name", [*COMMANDS, "run-shapes"])
def test_a_closed_pipe_ends_quietly_with_exit_0(name: str, closed_pipe) -> None:
    # Exit 0 and nothing on stderr, not even Python's "Exception ignored ... BrokenPipeError".
    proc = closed_pipe[name]
    assert proc.returncode == 0, stderr_lines(proc)
    assert proc.stderr == b""


def test_head_reads_the_first_line_and_the_walk_exits_0() -> None:
    script = f"{sys.executable} -m attnwalk run shapes --no-pause | head -1; echo \"${{PIPESTATUS[0]}}\""
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, NO_COLOR="1"))
    first, status = proc.stdout.splitlines()
    assert first.startswith("Stage 1 / ") and status == "0"
    assert proc.stderr == ""


# -- encodings that cannot hold the text ------------------------------------------------------


ENCODED = ["run", "compare", "list", "explain", "export-json", "export-markdown", "export-csv"]


@pytest.fixture(scope="module")
def encoded(home: dict[str, str]) -> dict[tuple[str, str], subprocess.CompletedProcess]:
    def job(name: str, encoding: str) -> Callable[[], subprocess.CompletedProcess]:
        args, stdin = COMMANDS[name]
        return lambda: attnwalk(*args, stdin=stdin, PYTHONIOENCODING=encoding, **home)

    runs = concurrently({f"{name} {encoding}": job(name, encoding)
                         for name in ENCODED for encoding in ("ascii", "latin-1")})
    return {tuple(key.split()): proc for key, proc in runs.items()}


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("name", ENCODED)
def test_an_encoding_that_cannot_hold_the_text_escapes_it(encoding: str, name: str, encoded) -> None:
    proc = encoded[name, encoding]
    lines = stderr_lines(proc)
    assert proc.returncode == 0, lines
    assert not any("Traceback" in line or "Error" in line for line in lines), lines
    assert len(lines) <= 1  # at most the note that some characters are escapes
    out = proc.stdout.decode(encoding)  # strictly: every byte is in the encoding
    if name == "export-json":  # \u escapes: the same JSON, the tokens exactly as the lesson has them
        assert json.loads(out)["tokens"] == GIRL_BANGS_TOKENS
        assert lines == []
    elif name != "list":  # the list's titles hold no Chinese the walk needs
        assert "\\u5973\\u751f" in out  # 女生, escaped rather than crashing
        assert lines and "encoding" in lines[0]


def test_an_ascii_output_gets_the_ascii_spelling() -> None:
    out = attnwalk("run", "girl_bangs", "--no-pause", PYTHONIOENCODING="ascii").stdout.decode("ascii")
    assert "S = QK^T / sqrt d_k" in out  # as --ascii writes the formula
    assert "\\u221a" not in out and "\\u2500" not in out  # no √ or ─ escaped: spelled in ASCII


def test_a_message_on_an_ascii_stderr_is_spelled_in_ascii() -> None:
    proc = attnwalk("explain", "girl_bangs", "A", "9", "1", PYTHONIOENCODING="ascii")
    assert proc.returncode == 2
    line, = stderr_lines(proc)
    assert "row number 1-3" in line  # the en dash of "1–3", spelled as --ascii does


# -- labels are text, never commands ----------------------------------------------------------


EVIL = r'''title: "evil \e[2J\e[31m title \u202e gnp.exe"
description: "desc \e[31mred \u202eRLO"
tokens: ["刘海", "a\e[2J\e[31mb", "x\u202ey"]
embeddings: [[1, 0], [0, 1], [1, 1]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0.5], [0, 1]]
W_V: [[1, 0], [0, 1]]
dimensions:
  d_model: ["d\e[1m0", "d\u2066one\x9b"]
notes:
  A: "note \e[5mblink \u2067"
'''
ESC_TOKEN, RLO_TOKEN = "a\x1b[2J\x1b[31mb", "x\u202ey"
ESC_SHOWN, RLO_SHOWN = r"a\x1b[2J\x1b[31mb", r"x\u202ey"


@pytest.fixture
def evil(tmp_path: Path) -> Path:
    path = tmp_path / "evil.yaml"
    path.write_text(EVIL, encoding="utf-8")
    return path


def test_escaped_changes_only_what_a_terminal_would_obey() -> None:
    for code in [*range(0x250), *range(0x2000, 0x2070), 0x061C, 0x3000, 0x4E00, 0x5218, 0xFEFF]:
        ch = chr(code)
        shown = escaped(ch)
        if obeyed(ch) or ch == "\n" or ch in "\u2028\u2029":
            assert shown != ch and shown.isascii() and shown.isprintable() and shown.startswith("\\")
        else:
            assert shown == ch, f"U+{code:04X}"
    assert escaped(ESC_TOKEN) == ESC_SHOWN and escaped(RLO_TOKEN) == RLO_SHOWN
    assert escaped("第一段\n第二段\t", keep_newlines=True) == "第一段\n第二段\\t"


@pytest.mark.parametrize("args", [
    ["run", "--scenario", "{file}", "--no-pause"], ["compare", "--scenario", "{file}"],
    ["compare", "--scenario", "{file}", "--format", "json"], ["explain", "{file}", "A", "3", "2"],
    ["explain", "{file}", "E", "2", "2"], ["export", "{file}", "-f", "markdown"],
    ["export", "{file}", "-f", "latex"],
], ids=lambda a: "-".join(x for x in a if x != "{file}"))
def test_no_output_carries_a_scenarios_control_characters(evil: Path, args: list[str]) -> None:
    args = [str(evil) if a == "{file}" else a for a in args]
    proc = attnwalk(*args)
    out = proc.stdout.decode("utf-8")
    assert proc.returncode == 0, stderr_lines(proc)
    assert obeyed(out) == []
    if "json" in args:
        assert RLO_TOKEN in json.loads(out)["tokens"]  # the same string, read back by a script
    elif "latex" in args:
        assert r"a\textbackslash{}x1b[2J\textbackslash{}x1b[31mb" in out
    else:  # Markdown writes a backslash in a table as \\
        text = out.replace("\\\\", "\\") if "markdown" in args else out
        assert ESC_SHOWN in text  # the token, its escape codes spelled out
        assert (RLO_SHOWN if args[0] != "explain" or args[2] != "E" else r"d\u2066one\x9b") in text
    if args[0] != "explain":
        assert "刘海" in out  # ordinary Chinese stays as it is


def test_json_and_csv_keep_the_tokens_exactly(evil: Path) -> None:
    raw = attnwalk("export", str(evil)).stdout.decode("utf-8")
    assert obeyed(raw) == []  # json.dumps writes ESC as \u001b; U+202E is written \u202e too
    assert json.loads(raw)["tokens"] == ["刘海", ESC_TOKEN, RLO_TOKEN]
    table = attnwalk("export", str(evil), "-f", "csv").stdout.decode("utf-8")
    assert obeyed(table) == []
    labels = {row["row_label"] for row in csv.DictReader(io.StringIO(table))}
    assert {"刘海", ESC_SHOWN, RLO_SHOWN} <= labels


def test_a_terminal_gets_only_attnwalks_own_escape_codes(evil: Path) -> None:
    out = attnwalk("run", "--scenario", str(evil), "--no-pause", FORCE_COLOR="1",
                   NO_COLOR="").stdout.decode("utf-8")
    assert "\x1b[" in out  # colours: Rich's codes are there ...
    assert "\x1b[2J" not in out and "\x1b[5m" not in out and "\u202e" not in out  # ... not the file's
    assert ESC_SHOWN in out and RLO_SHOWN in out


@pytest.mark.parametrize("suffix", [".svg", ".html", ".txt"])
def test_a_saved_walk_shows_the_labels_escaped(evil: Path, tmp_path: Path, suffix: str) -> None:
    saved = tmp_path / f"walk{suffix}"
    proc = attnwalk("run", "--scenario", str(evil), "--no-pause", "--save", str(saved))
    assert proc.returncode == 0, stderr_lines(proc)
    text = saved.read_text(encoding="utf-8")
    assert obeyed(text) == []
    assert "x1b[2J" in text and "u202e" in text


def test_an_error_message_quotes_a_token_escaped(evil: Path) -> None:
    proc = attnwalk("explain", str(evil), "A", "nothing", "1")
    line, = stderr_lines(proc)
    assert proc.returncode == 2 and obeyed(line) == [] and ESC_SHOWN in line


# -- numbers that fit -------------------------------------------------------------------------


HUGE = """title: huge
tokens: [alpha, beta, gamma]
embeddings: [[1e150, 1], [2e150, 2], [-1e150, 4]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0], [0, 1]]
W_V: [[1, 0], [0, 1]]
"""
DIGITS_RUN = re.compile(r"\d{16,}")  # more digits than a float64 holds


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    path = tmp_path / "huge.yaml"
    path.write_text(HUGE, encoding="utf-8")
    return path


@pytest.mark.parametrize(("x", "shown"), [
    (0.0, "0.0000"), (-0.0, "0.0000"), (1.5, "1.5000"), (999999.0, "999999.0000"),
    (1e6, "1.0000e+06"), (-2.5e300, "-2.5000e+300"), (1e-4, "0.0001"), (9.9e-5, "9.9000e-05"),
    (-3e-7, "-3.0000e-07"), (float("-inf"), "−∞"),
])
def test_number_switches_to_scientific_beyond_what_decimals_show(x: float, shown: str) -> None:
    assert style.number(x, ViewOptions()) == shown


def test_short_trims_the_mantissa_never_the_exponent() -> None:
    assert style.short(1e10, ViewOptions()) == "1e+10"
    assert style.short(2.5e-7, ViewOptions()) == "2.5e-07"
    assert style.short(0.02, ViewOptions()) == "0.02"


def test_huge_scores_fit_a_100_column_walk(huge: Path) -> None:
    out = attnwalk("run", "--scenario", str(huge), "--no-pause").stdout.decode("utf-8")
    assert not DIGITS_RUN.search(out)
    assert max(cell_len(line) for line in out.splitlines()) <= 100
    # QKᵀ = X Xᵀ: [alpha]·[beta] = 1e150 × 2e150 + 1 × 2 = 2e300, its row label beside it
    scores = out[out.index("Raw scores"):]
    assert re.search(r"^ alpha +1\.0000e\+300 +2\.0000e\+300 +-1\.0000e\+300", scores, re.M)
    assert re.search(r"^ gamma +-1\.0000e\+300 +-2\.0000e\+300 +1\.0000e\+300", scores, re.M)


def test_explain_writes_huge_numbers_in_scientific_notation(huge: Path) -> None:
    proc = attnwalk("explain", str(huge), "S", "alpha", "beta")
    out = proc.stdout.decode("utf-8")
    assert proc.returncode == 0 and not DIGITS_RUN.search(out)
    assert "2.0000e+300 / 1.4142 = 1.4142e+300" in out  # 2e300 / √2 = 1.41421…e300


def test_handouts_write_huge_numbers_in_scientific_notation(huge: Path) -> None:
    markdown = attnwalk("export", str(huge), "-f", "markdown").stdout.decode("utf-8")
    assert not DIGITS_RUN.search(markdown) and "| alpha | 1.0000e+300 | 2.0000e+300 |" in markdown
    latex = attnwalk("export", str(huge), "-f", "latex").stdout.decode("utf-8")
    assert not DIGITS_RUN.search(latex) and r"$2.0000 \times 10^{300}$" in latex


@pytest.mark.parametrize(("width", "ascii"), [(12, False), (14, True), (20, False)])
def test_a_number_cut_to_fit_shows_that_it_was_cut(width: int, ascii: bool) -> None:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    M = np.array([[1.2345e300, -2e300], [3.0, 4e-9]])
    opts = ViewOptions(width=width, ascii=ascii)
    console.print(heat_table(M, ["averyveryverylongtokenlabel", "b"], ["0", "1"], SIGNED, opts))
    lines = console.file.getvalue().splitlines()
    assert all(cell_len(line.rstrip()) <= width for line in lines)
    ellipsis = "..." if ascii else "…"
    numbers = [tok for line in lines for tok in line.replace("|", " ").split()
               if "." in tok and tok.lstrip("-")[:1].isdigit()]  # not the headers 0, 1
    full = {"1.2345e+300", "-2.0000e+300", "3.0000", "4.0000e-09"}
    assert numbers and all(tok in full or tok.endswith(ellipsis) for tok in numbers), numbers
