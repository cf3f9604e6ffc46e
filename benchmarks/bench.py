"""attnwalk's speed on this machine: startup against its unavoidable imports, and a real-size walk.

    python benchmarks/bench.py [--runs 21] [--large-runs 7] [--large-dir DIR] [--hyperfine] [--profile]

Run it with the Python attnwalk is installed in (e.g. /work/venv/bin/python). It measures:

  startup   median wall time of `python -c "import numpy, yaml, typer, rich.console, rich.table"`
            (the libraries attnwalk cannot run without) and of `attnwalk run girl_bangs --no-pause`,
            in alternating runs so both see the same machine load; target ratio <= 1.3
  help      `attnwalk --help` must import neither numpy nor yaml (read off `python -X importtime`)
  large     `attnwalk run large.yaml --no-pause` piped at COLUMNS=120 on the scenario make_large.py
            writes (n 512, d_model 768, 12 heads, causal, sinusoidal, weights in .npy files);
            target median < 1 s with bounded output (< 2,000 lines)

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
    env = dict(os.environ, COLUMNS="120", LINES="40", ATTNWALK_LANG="en")
    for key in ("NO_COLOR", "FORCE_COLOR", "PYTHONPROFILEIMPORTTIME"):
        env.pop(key, None)
    return env


def timed(cmd: list[str], env: dict[str, str], capture: bool = False) -> tuple[float, bytes]:
    """Wall time of one run (seconds), and its stdout when captured; a failed run stops the bench."""
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr.decode(errors='replace')}")
    return elapsed, done.stdout or b""


def alternating(commands: dict[str, list[str]], runs: int, env: dict[str, str],
                warmup: int = 3) -> dict[str, list[float]]:
    """Each command run `runs` times, interleaved (a b a b ...), after `warmup` untimed rounds."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(warmup + runs):
        for name, cmd in commands.items():
            elapsed, _ = timed(cmd, env)
            if round_ >= warmup:
                times[name].append(elapsed)
    return times


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
    attnwalk = attnwalk_command()
    missed = []
    rows = []

    # -- startup --------------------------------------------------------------------------------
    commands = {"baseline": [sys.executable, "-c", BASELINE_IMPORTS],
                "run": attnwalk + ["run", "girl_bangs", "--no-pause"]}
    times = alternating(commands, args.runs, env)
    base, run = statistics.median(times["baseline"]), statistics.median(times["run"])
    ratio = run / base
    rows.append((f"`python -c \"{BASELINE_IMPORTS}\"`", f"{base * 1000:.0f} ms", "median of "
                 f"{args.runs}, alternating"))
    rows.append(("`attnwalk run girl_bangs --no-pause`", f"{run * 1000:.0f} ms",
                 f"median of {args.runs}, alternating"))
    ok = ratio <= STARTUP_TARGET
    missed += [] if ok else ["startup ratio"]
    rows.append(("startup ratio (run / imports)", f"{ratio:.2f}",
                 f"target <= {STARTUP_TARGET}: {'met' if ok else 'MISSED'}"))
    if args.hyperfine and shutil.which("hyperfine"):
        medians = hyperfine_medians(commands, args.runs, env)
        rows.append(("startup ratio, hyperfine (blocks)", f"{medians['run'] / medians['baseline']:.2f}",
                     f"{medians['baseline'] * 1000:.0f} ms vs {medians['run'] * 1000:.0f} ms"))

    # -- help -----------------------------------------------------------------------------------
    help_imports = imported_modules(["--help"], env)
    heavy = sorted(m for m in help_imports if m.split(".")[0] in HEAVY)
    help_time = statistics.median(alternating({"help": attnwalk + ["--help"]}, 7, env)["help"])
    ok = not heavy
    missed += [] if ok else ["help imports"]
    rows.append(("`attnwalk --help`", f"{help_time * 1000:.0f} ms",
                 "imports neither numpy nor yaml" if ok else f"MISSED: imports {', '.join(heavy[:4])}"))

    # -- large ----------------------------------------------------------------------------------
    with tempfile.TemporaryDirectory() as tmp:
        if args.no_large:
            return report(rows, missed, env)
        folder = args.large_dir or Path(tmp)
        path = large_scenario(folder)
        cmd = attnwalk + ["run", str(path), "--no-pause"]
        timed(cmd, env)  # warm the file cache
        large_times, output = [], b""
        for _ in range(args.large_runs):
            elapsed, output = timed(cmd, env, capture=True)
            large_times.append(elapsed)
        large = statistics.median(large_times)
        lines = output.count(b"\n")
        ok = large < LARGE_TARGET_S
        missed += [] if ok else ["large walk time"]
        rows.append(("`attnwalk run large.yaml --no-pause` (n 512, d_model 768, 12 heads)",
                     f"{large * 1000:.0f} ms", f"median of {args.large_runs}; target < 1 s: "
                     f"{'met' if ok else 'MISSED'}"))
        ok = lines < LARGE_MAX_LINES
        missed += [] if ok else ["large walk output"]
        rows.append(("its output (COLUMNS=120, piped)", f"{lines:,} lines, {len(output):,} bytes",
                     f"target < {LARGE_MAX_LINES:,} lines: {'met' if ok else 'MISSED'}"))
        if args.profile:
            profile_large(path)
    return report(rows, missed, env)


def report(rows: list[tuple[str, str, str]], missed: list[str], env: dict[str, str]) -> int:
    print(f"attnwalk benchmarks: {platform_line()}\n")
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
    return (f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"typer {version('typer')}, {time.strftime('%Y-%m-%d')}")


def version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(package)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
