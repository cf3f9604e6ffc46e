"""The interactive walk's speed, as a learner feels it: measured in a real pseudo-terminal.

    python benchmarks/app_bench.py [--runs 11] [--presses 40] [--large-dir DIR]

Run it with the Python attnwalk is installed in (pexpect needed: `pip install -e '.[test]'`).

  first screen   spawn `attnwalk run girl_bangs` in an 80 × 24 pty and wait for the footer's
                 "quit": median of --runs, beside the median of the import floor
                 (`import numpy, yaml, typer, rich.console, rich.table`) and of that floor plus
                 Textual (`textual.app, textual.widgets`); target <= floor + Textual + 50 ms
  keypress       on A (head 1) of `shapes` and of the large layer (make_large.py: n 512, d_model
                 768, 12 heads), --presses arrow keys (→, then ← at the edge) and as many n / b:
                 the time from the key to the new cursor line (A[row, col] = …) or the new stage
                 header; target p95 <= 50 ms. The keys start a second after A is drawn (as a
                 learner reads it), and what reached the terminal before each key is dropped
                 first. Beside it the CPU time the app's threads ran over the same span
                 (Linux): on a loaded machine, what the key cost rather than waited
  m              on the large layer's A: each mode's first m, from the key to "Mode: …" on
                 screen; target <= 300 ms

Not a test: timings depend on the machine and its load. Prints a Markdown table for
benchmarks/README.md and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pexpect

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import attnwalk_command, bench_env  # noqa: E402  (sibling scripts, not a package)
from make_large import large_scenario  # noqa: E402

FLOOR = "import numpy, yaml, typer, rich.console, rich.table"
TEXTUAL = FLOOR + ", textual.app, textual.widgets"
QUIT = r"q(?:\x1b\[[0-9;]*[A-Za-z])* quit"  # the footer: key and description drawn apart
CURSOR_LINE = r"A\[[^\]\x1b]+\] = "
READ = 1.0  # seconds on A before the first key


def spawn(args: list[str], env: dict[str, str], size=(24, 80)):
    cmd = attnwalk_command()
    child = pexpect.spawn(cmd[0], cmd[1:] + args, env=env, dimensions=size, encoding="utf-8",
                          codec_errors="replace", timeout=60)
    child.delaybeforesend = None  # pexpect sleeps 50 ms before each send by default: not the app's time
    return child


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def p95_ms(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))] * 1000


def imports(code: str, env: dict[str, str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        times.append(time.perf_counter() - start)
    return times


# The least a Textual app costs to put a footer on the screen: the floor's and Textual's imports,
# then one Static and a Footer with attnwalk's q binding. What the walk's first screen needs
# beyond this is attnwalk's own work; the target's 50 ms must hold Textual's start as well.
MINIMAL_APP = FLOOR + """, textual.app, textual.widgets
from textual.app import App
from textual.binding import Binding
from textual.widgets import Footer, Static

class Minimal(App):
    BINDINGS = [Binding("q", "quit", "quit")]
    ENABLE_COMMAND_PALETTE = False

    def compose(self):
        yield Static("minimal")
        yield Footer(compact=True, show_command_palette=False)

Minimal().run()
"""


def until_quit(args: list[str], env: dict[str, str]) -> float:
    """Seconds from spawning `args` in the pty to the footer's quit on the terminal; then q."""
    start = time.perf_counter()
    child = pexpect.spawn(args[0], args[1:], env=env, dimensions=(24, 80), encoding="utf-8",
                          codec_errors="replace", timeout=60)
    child.delaybeforesend = None
    child.expect(QUIT)
    seconds = time.perf_counter() - start
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    return seconds


def first_screen(env: dict[str, str], runs: int) -> tuple[list[float], ...]:
    """Alternating runs of the floor, the floor with Textual, the minimal app's first screen
    and the walk's."""
    floor, textual, minimal, walk = [], [], [], []
    for round_ in range(runs + 2):  # 2 warm-up rounds
        f = imports(FLOOR, env, 1)[0]
        t = imports(TEXTUAL, env, 1)[0]
        m = until_quit([sys.executable, "-c", MINIMAL_APP], env)
        w = until_quit([*attnwalk_command(), "run", "girl_bangs"], env)
        if round_ >= 2:
            floor.append(f), textual.append(t), minimal.append(m), walk.append(w)
    return floor, textual, minimal, walk


def to_a(child, steps: int) -> int:
    """From the first screen to A of head 1; its step number."""
    child.expect(QUIT)
    child.send("g")
    child.expect_exact("Jump to stage")
    child.send("A\r")
    index = 1
    while index == 1:  # the first screen's header may still be in the stream
        child.expect(rf"Stage (\d+) / {steps}\b")
        index = int(child.match.group(1))
    child.expect(CURSOR_LINE)
    return index


def cpu_seconds(pid: int) -> float:
    """CPU time the process's live threads have run (Linux's /proc/PID/task/*/schedstat, in ns);
    NaN elsewhere. Beside the wall time: what a key costs the app, whatever else the machine runs
    (on a shared machine the wall time is mostly waiting for a CPU)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
                pass
    except OSError:
        return float("nan")
    return total / 1e9


def drain(child) -> None:
    """Forget what the terminal has already received, so the next expect can only match what the
    next key draws: one frame may hold two cursor lines (the status line and a worked cell's
    result), and a second match left in the buffer timed the next key at 0 ms."""
    child.buffer = ""
    while True:
        try:
            child.read_nonblocking(1 << 16, timeout=0)
        except (pexpect.TIMEOUT, pexpect.EOF):
            return


def keypresses(path_or_name: str, env: dict[str, str], presses: int,
               steps: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """Seconds from each arrow key to its cursor line, and from each n / b to its stage header;
    and the CPU seconds the app spent over each of them. The keys start a second after A is on
    screen, as a learner reads a stage before moving on it (what the app starts in the background
    at its first screen and on arrival, the next mode and the worked cell, is done by then)."""
    child = spawn(["run", path_or_name], env)
    at = to_a(child, steps)
    time.sleep(READ)
    arrows, stages, arrows_cpu, stages_cpu = [], [], [], []
    for i in range(presses):
        key = "\x1b[C" if (i // 5) % 2 == 0 else "\x1b[D"  # five right, five left
        drain(child)
        cpu, start = cpu_seconds(child.pid), time.perf_counter()
        child.send(key)
        child.expect(CURSOR_LINE)
        arrows.append(time.perf_counter() - start)
        arrows_cpu.append(cpu_seconds(child.pid) - cpu)
    for i in range(presses):
        key, index = ("n", at + 1) if i % 2 == 0 else ("b", at)
        drain(child)
        cpu, start = cpu_seconds(child.pid), time.perf_counter()
        child.send(key)
        child.expect(rf"Stage {index} / {steps}\b")
        stages.append(time.perf_counter() - start)
        stages_cpu.append(cpu_seconds(child.pid) - cpu)
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    return arrows, stages, arrows_cpu, stages_cpu


def mode_keys(path: str, env: dict[str, str], steps: int) -> list[tuple[str, float]]:
    child = spawn(["run", path], env)
    to_a(child, steps)
    out = []
    for mode in ("unscaled", "uniform", "scaled"):
        time.sleep(0.3)  # let the screen settle
        start = time.perf_counter()
        child.send("m")
        child.expect_exact(f"Mode: {mode}")
        out.append((mode, time.perf_counter() - start))
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    return out


def step_count(scenario: str) -> int:
    code = ("from attnwalk.scenario.load import load_scenario; from attnwalk.layer.walk import compute; "
            "from attnwalk.render.screens import walk_steps; import sys; "
            "print(len(walk_steps(compute(load_scenario(sys.argv[1])))))")
    return int(subprocess.run([sys.executable, "-c", code, scenario], capture_output=True, text=True,
                              check=True).stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument("--large-dir", type=Path)
    parser.add_argument("--first-screen", action="store_true", help="measure the first screen only")
    args = parser.parse_args()
    env = dict(bench_env(), TERM="xterm-256color", HOME=tempfile.mkdtemp(prefix="attnwalk-bench-home-"))
    env.pop("COLUMNS"), env.pop("LINES")
    rows, missed = [], []

    floor, textual, minimal, walk = first_screen(env, args.runs)
    limit = median_ms(textual) + 50
    rows.append(("import floor (numpy, yaml, typer, rich)", f"{median_ms(floor):.0f} ms", f"median of {args.runs}"))
    rows.append(("import floor + Textual", f"{median_ms(textual):.0f} ms", f"median of {args.runs}"))
    rows.append(("a minimal Textual app's first screen (those imports, a Static, a Footer)",
                 f"{median_ms(minimal):.0f} ms", f"median of {args.runs}"))
    ok = median_ms(walk) <= limit
    rows.append(("first screen, `run girl_bangs` at 80 × 24", f"**{median_ms(walk):.0f} ms**",
                 f"target ≤ {limit:.0f} ms (floor + Textual + 50): {'met' if ok else 'MISSED'}"))
    missed += [] if ok else ["first screen"]
    if args.first_screen:
        return report(rows, missed)

    folder = args.large_dir or Path(tempfile.mkdtemp(prefix="attnwalk-large-"))
    large = str(large_scenario(folder))
    for label, scenario in (("shapes", "shapes"), ("large (n 512, d_model 768, 12 heads)", large)):
        steps = step_count(scenario)
        arrows, stages, arrows_cpu, stages_cpu = keypresses(scenario, env, args.presses, steps)
        for what, times, cpu in (("→/← cursor", arrows, arrows_cpu), ("n/b stage", stages, stages_cpu)):
            ok = p95_ms(times) <= 50
            missed += [] if ok else [f"{what} on {label}"]
            rows.append((f"{what} on {label}", f"p95 **{p95_ms(times):.0f} ms**",
                         f"median {median_ms(times):.0f} ms, {len(times)} presses; target p95 ≤ 50 ms: "
                         f"{'met' if ok else 'MISSED'}; the app's CPU per key p95 {p95_ms(cpu):.0f} ms, "
                         f"median {median_ms(cpu):.0f} ms"))
    for mode, seconds in mode_keys(large, env, step_count(large)):
        ok = seconds * 1000 <= 300
        missed += [] if ok else [f"m to {mode}"]
        rows.append((f"m → {mode} on the large layer's A", f"**{seconds * 1000:.0f} ms**",
                     f"target ≤ 300 ms: {'met' if ok else 'MISSED'}"))

    return report(rows, missed)


def report(rows: list[tuple[str, str, str]], missed: list[str]) -> int:
    print(f"load average {os.getloadavg()[0]:.2f}\n")
    print("| what | result | notes |\n| --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if missed:
        print("\nmissed: " + ", ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
