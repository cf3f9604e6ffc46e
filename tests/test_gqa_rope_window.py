"""Issue 19's "done when": a scenario with positional: rope, kv_heads: 2, heads: 4 and a sliding
window exports numbers that match an independent reference, written here from the formulas:
RoPE turns each pair (i, i + d/2) of a head's q and k at position p by p · base^(−2i/d); query head
h reads K/V head h // 2; query i sees key j when 0 ≤ i − j < w."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app



def rotated(x: np.ndarray, base: float, pairing: str) -> np.ndarray:
    n, d = x.shape
    out = x.copy()
    for p in range(n):
        for i in range(d // 2):
            a, b = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
            angle = p * base ** (-2 * i / d)
            out[p, a] = x[p, a] * math.cos(angle) - x[p, b] * math.sin(angle)
            out[p, b] = x[p, a] * math.sin(angle) + x[p, b] * math.cos(angle)
    return out


def reference(X, W_Q, W_K, W_V, heads, kv_heads, width, base, pairing):
    n = len(X)
    d_k, d_v = W_Q.shape[1] // heads, W_V.shape[1] // kv_heads
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    out = []
    for h in range(heads):
        g = h // (heads // kv_heads)
        q = rotated(Q[:, h * d_k:(h + 1) * d_k], base, pairing)
        k = rotated(K[:, g * d_k:(g + 1) * d_k], base, pairing)
        v = V[:, g * d_v:(g + 1) * d_v]
        A = np.zeros((n, n))
        for i in range(n):
            seen = [j for j in range(n) if 0 <= i - j < width]
            s = {j: float(q[i] @ k[j]) / math.sqrt(d_k) for j in seen}
            top = max(s.values())
            total = sum(math.exp(x - top) for x in s.values())
            for j in seen:
                A[i, j] = math.exp(s[j] - top) / total
        out.append({"Q_rot": q, "K_rot": k, "A": A, "Z": A @ v})
    return out


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("width", [1, 2, 3, 6])
def test_rope_with_two_kv_heads_for_four_and_a_window_exports_the_reference(tmp_path, pairing, width) -> None:
    rng = np.random.default_rng(width)
    n, d_model, d_k, d_v = 6, 5, 4, 3
    doc = {"tokens": [f"t{i}" for i in range(n)],
           "embeddings": rng.normal(size=(n, d_model)).tolist(),
           "W_Q": rng.normal(size=(d_model, 4 * d_k)).tolist(),
           "W_K": rng.normal(size=(d_model, 2 * d_k)).tolist(),
           "W_V": rng.normal(size=(d_model, 2 * d_v)).tolist(),
           "W_O": rng.normal(size=(4 * d_v, d_model)).tolist(),
           "heads": 4, "kv_heads": 2, "positional": "rope", "rope": {"base": 100, "pairing": pairing},
           "mask": {"causal": True, "window": width}}
    path = tmp_path / "modern.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = CliRunner().invoke(app, ["export", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    arrays = {w: np.array(doc[w]) for w in ("embeddings", "W_Q", "W_K", "W_V", "W_O")}
    ref = reference(arrays["embeddings"], arrays["W_Q"], arrays["W_K"], arrays["W_V"], 4, 2, width, 100.0,
                    pairing)
    assert data["kv_heads"] == [0, 0, 1, 1]
    assert data["mask"] == [[0 <= i - j < width for j in range(n)] for i in range(n)]
    for h, head in enumerate(data["stages"]["heads"]):
        for key in ("Q_rot", "K_rot", "A", "Z"):
            assert np.allclose(head[key], ref[h][key], atol=1e-12), (h, key)
    concat = np.concatenate([r["Z"] for r in ref], axis=1)
    assert np.allclose(data["stages"]["O"], concat @ arrays["W_O"], atol=1e-12)
