"""attnwalk grad and attnwalk train on a real-size layer, and their refusals from the shapes.

    python benchmarks/bench_grad.py [--runs 3] [--steps 3] [--large-dir DIR]

The layer is make_large.py's (n 512, d_model 768, 12 heads, W_O, causal, sinusoidal) with an output
target of seeded random normals (target.npy). It measures, piped at COLUMNS=120:

  grad      `attnwalk grad large.yaml --no-pause`: median wall and CPU time, the output's lines and
            widest line, the largest resident size of one run (the forward and backward matrices of
            12 heads: bounded by layer/train.py's MAX_BYTES estimate)
  train     `attnwalk train large.yaml --steps N --no-pause`: median wall and CPU time
  refusals  `train --steps 50` (too many multiply-adds) and `grad --format json` (too many numbers to
            write) must exit 2 with one line before computing: their wall time

Targets: grad < 5 s, train of 2 steps < 10 s, each refusal < 1 s, exit 2. Not a test: timings
depend on the machine and its load (the numbers in benchmarks/README.md say when they were taken).
It prints a Markdown table and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import attnwalk_command, bench_env, timed  # noqa: E402  (sibling scripts)
from make_large import large_scenario  # noqa: E402

GRAD_TARGET_S, TRAIN_TARGET_S, REFUSAL_TARGET_S = 5.0, 10.0, 1.0


def with_target(out: Path) -> Path:
    """make_large.py's layer, with `target: {output: {file: target.npy}}` (n × d_model, seeded)."""
    path = large_scenario(out)
    np.save(out / "target.npy", np.random.default_rng(1).standard_normal((512, 768)))
    text = path.read_text(encoding="utf-8") + "target: {output: {file: target.npy}}\n"
    target = out / "large_target.yaml"
    target.write_text(text, encoding="utf-8")
    return target


def peak_rss_mb(cmd: list[str], env: dict[str, str]) -> float:
    """The largest resident size of one run of `cmd`, in MB (its own process, via wait4)."""
    import os

    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss / 1024


def refusal(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    import time

    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, done.returncode, done.stderr.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--large-dir", type=Path, default=None)
    args = parser.parse_args()
    env = bench_env()
    aw = attnwalk_command()
    with tempfile.TemporaryDirectory() as tmp:
        scenario = str(with_target(args.large_dir or Path(tmp)))
        grad = [timed([*aw, "grad", scenario, "--no-pause"], env, capture=True) for _ in range(args.runs)]
        train = [timed([*aw, "train", scenario, "--steps", str(args.steps), "--no-pause"], env)
                 for _ in range(args.runs)]
        rss = peak_rss_mb([*aw, "grad", scenario, "--no-pause"], env)
        too_long = refusal([*aw, "train", scenario, "--steps", "50"], env)
        too_big = refusal([*aw, "grad", scenario, "--format", "json"], env)
    out = grad[0][2].decode("utf-8")
    lines = out.splitlines()
    grad_s = statistics.median(t for t, _, _ in grad)
    train_s = statistics.median(t for t, _, _ in train)
    rows = [
        ("`attnwalk grad` (n 512, d_model 768, 12 heads), piped", f"{grad_s * 1000:,.0f} ms",
         f"median of {args.runs}; CPU {statistics.median(c for _, c, _ in grad) * 1000:,.0f} ms; target < {GRAD_TARGET_S:g} s"),
        ("its output (COLUMNS=120)", f"{len(lines)} lines", f"widest {max(map(len, lines))} columns"),
        ("its largest resident size", f"{rss:,.0f} MB", "the whole process, Python and numpy included"),
        (f"`attnwalk train --steps {args.steps}`, piped", f"{train_s * 1000:,.0f} ms",
         f"median of {args.runs}; CPU {statistics.median(c for _, c, _ in train) * 1000:,.0f} ms; target < {TRAIN_TARGET_S:g} s"),
        ("`train --steps 50`: refused", f"{too_long[0] * 1000:,.0f} ms, exit {too_long[1]}", too_long[2][:90] + "…"),
        ("`grad --format json`: refused", f"{too_big[0] * 1000:,.0f} ms, exit {too_big[1]}", too_big[2][:90] + "…"),
    ]
    print("| what | result | notes |\n| --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    missed = (grad_s > GRAD_TARGET_S or train_s > TRAIN_TARGET_S or max(len(line) for line in lines) > 120
              or too_long[1] != 2 or too_big[1] != 2 or max(too_long[0], too_big[0]) > REFUSAL_TARGET_S)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
