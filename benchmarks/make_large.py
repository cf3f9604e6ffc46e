"""Write a real-size scenario: n = 512 tokens, d_model = 768, 12 heads, causal, sinusoidal.

    python benchmarks/make_large.py OUT_DIR [--n 512] [--d-model 768] [--heads 12] [--seed 0]

OUT_DIR gets E.npy, W_Q.npy, W_K.npy, W_V.npy, W_O.npy and large.yaml, which refers to them with
`{file: ...}` as a learner pasting in a real model's weights would. The weights are seeded random
normals scaled by 1/sqrt(d_model), so Q and K entries are about 1 and the scaled scores
q·k/sqrt(d_k) spread over a few units: softmax rows neither uniform nor one-hot.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

WORDS = ("the river bank was steep and the water ran fast past the old mill while a small dog "
         "watched from the grass near the bridge").split()


def large_scenario(out: Path, n: int = 512, d_model: int = 768, heads: int = 12, seed: int = 0) -> Path:
    """Write the arrays and the YAML into `out`; return the YAML's path."""
    if d_model % heads:
        raise SystemExit(f"d_model {d_model} is not a multiple of heads {heads}")
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    scale = 1.0 / np.sqrt(d_model)
    arrays = {
        "E": rng.standard_normal((n, d_model)),  # (n, d_model), entries ~ N(0, 1)
        "W_Q": rng.standard_normal((d_model, d_model)) * scale,  # (d_model, h·d_k)
        "W_K": rng.standard_normal((d_model, d_model)) * scale,  # (d_model, h·d_k)
        "W_V": rng.standard_normal((d_model, d_model)) * scale,  # (d_model, h·d_v)
        "W_O": rng.standard_normal((d_model, d_model)) * scale,  # (h·d_v, d_model)
    }
    for name, array in arrays.items():
        np.save(out / f"{name}.npy", array)
    tokens = [WORDS[i % len(WORDS)] for i in range(n)]
    text = (
        f"# A real-size layer for benchmarks/bench.py: n = {n}, d_model = {d_model}, {heads} heads "
        f"(d_k = d_v = {d_model // heads}), seed {seed}.\n"
        f"name: large\n"
        f"title: \"Real size: {n} tokens, d_model {d_model}, {heads} heads\"\n"
        f"tokens: [{', '.join(json.dumps(t) for t in tokens)}]\n"  # quoted: `on`/`no` stay words
        f"embeddings: {{file: E.npy}}\n"
        f"positional: sinusoidal\n"
        f"heads: {heads}\n"
        f"W_Q: {{file: W_Q.npy}}\n"
        f"W_K: {{file: W_K.npy}}\n"
        f"W_V: {{file: W_V.npy}}\n"
        f"W_O: {{file: W_O.npy}}\n"
        f"mask: causal\n"
    )
    path = out / "large.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the .npy files and large.yaml into")
    parser.add_argument("--n", type=int, default=512, help="tokens (default 512)")
    parser.add_argument("--d-model", type=int, default=768, help="model width (default 768)")
    parser.add_argument("--heads", type=int, default=12, help="attention heads (default 12)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(large_scenario(args.out, args.n, args.d_model, args.heads, args.seed))


if __name__ == "__main__":
    main()
