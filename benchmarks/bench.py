"""attnwalk's speed on this machine: startup against its unavoidable imports, and a real-size walk.

    python benchmarks/bench.py [--runs 21] [--large-runs 7] [--large-dir DIR] [--hyperfine] [--profile]

Run it with the Python attnwalk is installed in (e.g. /work/venv/bin/python). It measures:

  startup   median wall time of `python -c "import numpy, yaml, typer, rich.console, rich.table"`
            (the libraries attnwalk cannot run without) and of `attnwalk run girl_bangs --no-pause`,
            in alternating runs so both see the same machine load; target ratio <= 1.3
  help      `attnwalk --help` must import neither numpy nor yaml (read off `python -X importtime`)
  large     `attnwalk run large.yaml --no-pause` piped at COLUMNS=120 on the scenario make_large.py
            writes (n 512, d_model 768, 12 heads, causal, sinusoidal, weights in .npy files);
            target median < 1 s with bounded output (< 2,000 lines, none wider than the width),
            and the output's size at the default width of a pipe (80 columns)

It is not a test: timings depend on the machine and its load, so nothing here runs in CI. It prints
a Markdown table for benchmarks/README.md and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_large import large_scenario  # noqa: E402  (a sibling script, not a package)

BASELINE_IMPORTS = "import numpy, yaml, typer, rich.console, rich.table"
STARTUP_TARGET = 1.3
LARGE_TARGET_S = 1.0
LARGE_MAX_LINES = 2000
HEAVY = ("numpy", "yaml")


def attnwalk_command() -> list[str]:
    """The console script beside this Python if installed, else `python -m attnwalk`."""
    script = Path(sys.executable).with_name("attnwalk")
    return [str(script)] if script.exists() else [sys.executable, "-m", "attnwalk"]


def bench_env() -> dict[str, str]:
    """The environment every timed run gets. PYTHONDONTWRITEBYTECODE goes: with it, an editable
    checkout whose sources changed since their .pyc was written is compiled again on every run
    (~40 ms for attnwalk's modules), a cost no installed copy pays; the warm-up runs write the
    cache, as a user's first run would."""
    env = dict(os.environ, COLUMNS="120", LINES="40", ATTNWALK_LANG="en")
    for key in ("NO_COLOR", "FORCE_COLOR", "PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE"):
        env.pop(key, None)
    return env


def timed(cmd: list[str], env: dict[str, str], capture: bool = False) -> tuple[float, float, bytes]:
    """Wall and CPU (user + system) seconds of one run, and its stdout when captured; a failed
    run stops the bench. On a machine others are using, wall times swell with their load while
    CPU times mostly do not, so both are reported."""
    before = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    cpu = _children_cpu() - before
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr.decode(errors='replace')}")
    return elapsed, cpu, done.stdout or b""


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def alternating(commands: dict[str, list[str]], runs: int, env: dict[str, str],
                warmup: int = 3) -> dict[str, tuple[float, float]]:
    """Each command run `runs` times, interleaved (a b a b ...), after `warmup` untimed rounds:
    name -> (median wall seconds, median CPU seconds)."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for round_ in range(warmup + runs):
        for name, cmd in commands.items():
            elapsed, cpu, _ = timed(cmd, env)
            if round_ >= warmup:
                times[name].append((elapsed, cpu))
    return {name: (statistics.median(t[0] for t in runs_),
                   statistics.median(t[1] for t in runs_)) for name, runs_ in times.items()}


def imported_modules(cmd_args: list[str], env: dict[str, str]) -> dict[str, tuple[int, int]]:
    """module -> (self µs, cumulative µs) for `python -X importtime -m attnwalk ARGS`."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "attnwalk", *cmd_args], env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    out = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, total, name = line.split(":", 1)[1].split("|")
        out[name.strip()] = (int(own), int(total))
    return out


def baseline_modules(env: dict[str, str]) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", BASELINE_IMPORTS], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and "self [us]" not in line}


def extra_imports(env: dict[str, str], top: int = 12) -> list[tuple[str, float]]:
    """Top-level packages `run girl_bangs` imports beyond the baseline, by their own import time."""
    base = baseline_modules(env)
    run = imported_modules(["run", "girl_bangs", "--no-pause"], env)
    by_package: dict[str, int] = {}
    for name, (own, _) in run.items():
        if name not in base:
            package = name.split(".")[0] if not name.startswith("attnwalk") else name
            by_package[package] = by_package.get(package, 0) + own
    ranked = sorted(by_package.items(), key=lambda kv: -kv[1])[:top]
    return [(name, us / 1000) for name, us in ranked]


def hyperfine_medians(commands: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, float]:
    """Cross-check with hyperfine (blocks of runs, not interleaved): median seconds per command."""
    import json
    import shlex

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(["hyperfine", "-N", "--warmup", "3", "--runs", str(runs), "--export-json",
                        out.name, *(shlex.join(c) for c in commands.values())],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results = json.load(open(out.name))["results"]
    return {name: r["median"] for name, r in zip(commands, results)}


def profile_large(path: Path, top: int = 25) -> None:
    """Where the large walk's time goes, in this process: cProfile's top functions by own time."""
    import contextlib
    import cProfile
    import io
    import pstats

    from attnwalk.cli import app

    profile = cProfile.Profile()
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        profile.enable()
        try:
            app(["run", str(path), "--no-pause"], standalone_mode=False)
        except SystemExit:
            pass
        profile.disable()
    report = io.StringIO()
    stats = pstats.Stats(profile, stream=report)
    stats.sort_stats("cumulative").print_stats(r"attnwalk", top)
    stats.sort_stats("tottime").print_stats(top)
    print(report.getvalue())


Row = tuple[str, str, str]  # what, result, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="startup runs of each command (default 21)")
    parser.add_argument("--large-runs", type=int, default=7, help="runs of the large walk (default 7)")
    parser.add_argument("--large-dir", type=Path, help="where to write the large scenario "
                        "(default: a temporary folder)")
    parser.add_argument("--hyperfine", action="store_true", help="also time startup with hyperfine")
    parser.add_argument("--profile", action="store_true", help="profile one large walk in-process")
    parser.add_argument("--no-large", action="store_true", help="measure startup and help only")
    args = parser.parse_args()

    env = bench_env()
    load_before = load_average()
    attnwalk = attnwalk_command()
    rows: list[Row] = []
    missed: list[str] = []
    startup(attnwalk, env, args.runs, args.hyperfine, rows, missed)
    help_imports(attnwalk, env, rows, missed)
    if not args.no_large:
        with tempfile.TemporaryDirectory() as tmp:
            path = large_scenario(args.large_dir or Path(tmp))
            large_walk(attnwalk, env, path, args.large_runs, rows, missed)
            if args.profile:
                profile_large(path)
    return report(rows, missed, env, load_before)


def verdict(ok: bool, what: str, missed: list[str]) -> str:
    if not ok:
        missed.append(what)
    return "met" if ok else "MISSED"


def startup(attnwalk: list[str], env: dict[str, str], runs: int, hyperfine: bool,
            rows: list[Row], missed: list[str]) -> None:
    commands = {"baseline": [sys.executable, "-c", BASELINE_IMPORTS],
                "run": attnwalk + ["run", "girl_bangs", "--no-pause"]}
    medians = alternating(commands, runs, env)
    (base, base_cpu), (run, run_cpu) = medians["baseline"], medians["run"]
    ratio = run / base
    rows.append((f"`python -c \"{BASELINE_IMPORTS}\"`", f"{base * 1000:.0f} ms",
                 f"median of {runs}, alternating; CPU {base_cpu * 1000:.0f} ms"))
    rows.append(("`attnwalk run girl_bangs --no-pause`", f"{run * 1000:.0f} ms",
                 f"median of {runs}, alternating; CPU {run_cpu * 1000:.0f} ms"))
    rows.append(("startup ratio (run / imports)", f"{ratio:.2f}",
                 f"target <= {STARTUP_TARGET}: {verdict(ratio <= STARTUP_TARGET, 'startup ratio', missed)}"
                 f"; by CPU time {run_cpu / base_cpu:.2f}"))
    if hyperfine and shutil.which("hyperfine"):
        hf = hyperfine_medians(commands, runs, env)
        rows.append(("startup ratio, hyperfine (blocks)", f"{hf['run'] / hf['baseline']:.2f}",
                     f"{hf['baseline'] * 1000:.0f} ms vs {hf['run'] * 1000:.0f} ms"))


def help_imports(attnwalk: list[str], env: dict[str, str], rows: list[Row], missed: list[str]) -> None:
    heavy = sorted(m for m in imported_modules(["--help"], env) if m.split(".")[0] in HEAVY)
    help_time, _ = alternating({"help": attnwalk + ["--help"]}, 7, env)["help"]
    ok = verdict(not heavy, "help imports", missed) == "met"
    rows.append(("`attnwalk --help`", f"{help_time * 1000:.0f} ms",
                 "imports neither numpy nor yaml" if ok else f"MISSED: imports {', '.join(heavy[:4])}"))


def large_walk(attnwalk: list[str], env: dict[str, str], path: Path, runs: int, rows: list[Row],
               missed: list[str]) -> None:
    cmd = attnwalk + ["run", str(path), "--no-pause"]
    timed(cmd, env)  # warm the file cache
    walls, cpus, output = [], [], b""
    for _ in range(runs):
        elapsed, cpu, output = timed(cmd, env, capture=True)
        walls.append(elapsed)
        cpus.append(cpu)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    rows.append(("`attnwalk run large.yaml --no-pause` (n 512, d_model 768, 12 heads)",
                 f"{wall * 1000:.0f} ms", f"median of {runs}; target < 1 s: "
                 f"{verdict(wall < LARGE_TARGET_S, 'large walk time', missed)}; CPU {cpu * 1000:.0f} ms"))
    default_env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    _, _, default_output = timed(cmd, default_env, capture=True)  # piped: rich's default 80 columns
    for what, out, width in (("COLUMNS=120", output, 120), ("default width", default_output, 80)):
        lines, widest = output_size(out)
        rows.append((f"its output ({what}, piped)", f"{lines:,} lines, {len(out):,} bytes",
                     f"widest line {widest} of {width} columns; target < {LARGE_MAX_LINES:,} lines: "
                     f"{verdict(lines < LARGE_MAX_LINES and widest <= width, 'large walk output', missed)}"))


def output_size(output: bytes) -> tuple[int, int]:
    """Lines, and the widest line in terminal cells (CJK characters take two)."""
    from rich.cells import cell_len

    text = output.decode("utf-8", errors="replace")
    return text.count("\n"), max((cell_len(line) for line in text.splitlines()), default=0)


def load_average() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def report(rows: list[Row], missed: list[str], env: dict[str, str], load_before: float) -> int:
    load = load_average()
    print(f"attnwalk benchmarks: {platform_line()}; load average {load_before:.2f} before, "
          f"{load:.2f} after\n")
    if max(load, load_before) > 0.5 * (os.cpu_count() or 1):
        print(f"warning: the machine is busy (load average {load:.1f} on {os.cpu_count()} CPUs): "
              "wall times are inflated and noisier; compare the CPU-time ratio too, or rerun "
              "when it is quiet\n")
    print("| what | result | notes |\n| --- | --- | --- |")
    for what, result, notes in rows:
        print(f"| {what} | {result} | {notes} |")
    print("\nimports `run girl_bangs` adds beyond the baseline (own time, one run):")
    for name, ms in extra_imports(env):
        print(f"  {ms:7.1f} ms  {name}")
    if missed:
        print(f"\nmissed: {', '.join(missed)}")
    return 1 if missed else 0


def platform_line() -> str:
    import platform

    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    packages = ", ".join(f"{name} {version(name)}" for name in ("numpy", "PyYAML", "typer", "rich"))
    return (f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {packages}, "
            f"{time.strftime('%Y-%m-%d %H:%M')}")


def version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(package)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
