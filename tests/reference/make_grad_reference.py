"""Reference gradients for `attnwalk grad` and `attnwalk train`, computed by torch autograd (float64)
through a forward pass written here from the formulas, independently of attnwalk's code (nothing of
attnwalk is imported). Written to grad_reference.json beside this script.

    python tests/reference/make_grad_reference.py      # needs torch (pip install torch==2.13.0)

Each case is a random scenario (its matrices drawn here, written into the scenario's YAML as
numbers) covering a feature: one head and several, W_O, causal, sliding-window and explicit masks,
sinusoidal positions, RoPE in both pairings, ALiBi, grouped K/V heads, additive and QK-norm scores,
a cross-attention source; an output target (L = ½ Σ (Y − T)²) or an attend target
(L = −Σ log A[q, k]); the scaled, unscaled and uniform modes. Per case the file holds the YAML, the
mode, the loss, ∂L/∂ of every matrix in the layout `attnwalk grad --format json` writes (per-head
matrices under "heads" when there are several), and the losses of five steps of plain gradient
descent on W_Q, W_K, W_V (and W_O) with the case's η: step 0 before any update, then one per step.
tests/test_grad_reference.py compares attnwalk with them to 1e-9, and with this script live where
torch is importable.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "grad_reference.json"
STEPS = 5
TRAINED = ("W_Q", "W_K", "W_V", "W_O")  # what gradient descent updates (w_a stays)

# name, seed, and the scenario's shape and features
CASES = [
    dict(name="one_head_output", seed=1, n=4, d=4, heads=1, d_k=3, d_v=2, positional="sinusoidal",
         target="output", mode="scaled", lr=0.05),
    dict(name="one_head_attend_causal", seed=2, n=5, d=4, heads=1, d_k=4, d_v=3, mask="causal",
         target="attend", pairs={4: 1, 2: 0}, mode="unscaled", lr=0.1),
    dict(name="heads_w_o_causal", seed=3, n=4, d=6, heads=2, d_k=2, d_v=3, w_o=True, mask="causal",
         positional="sinusoidal", target="output", mode="scaled", lr=0.002),
    dict(name="alibi_four_heads", seed=4, n=5, d=4, heads=4, d_k=2, d_v=1, mask="causal", alibi=True,
         target="attend", pairs={4: 0, 3: 1}, head=3, mode="scaled", lr=0.2),
    dict(name="rope_gqa_w_o", seed=5, n=5, d=4, heads=2, kv_heads=1, d_k=4, d_v=2, w_o=True,
         positional="rope", mask="causal", target="output", mode="scaled", lr=0.05),
    dict(name="rope_interleaved_window", seed=6, n=5, d=4, heads=1, d_k=4, d_v=2, positional="rope",
         rope={"base": 100, "pairing": "interleaved"}, mask={"causal": True, "window": 2},
         target="attend", pairs={4: 3, 1: 0}, mode="scaled", lr=0.3),
    dict(name="gqa_explicit_mask_uniform", seed=7, n=4, d=4, heads=4, kv_heads=2, d_k=2, d_v=2, w_o=True,
         mask="explicit", target="output", mode="uniform", lr=0.05),
    dict(name="gqa_explicit_mask_attend", seed=8, n=4, d=4, heads=4, kv_heads=2, d_k=2, d_v=2, w_o=True,
         mask="explicit", target="attend", pairs={0: 0, 3: 2}, head=2, mode="scaled", lr=0.2),
    dict(name="additive_heads", seed=9, n=4, d=4, heads=2, d_k=3, d_v=2, score="additive",
         target="output", mode="scaled", lr=0.05),
    dict(name="qk_norm_scale", seed=10, n=4, d=4, heads=2, d_k=3, d_v=2, qk_norm=True, qk_scale=2.5,
         target="attend", pairs={1: 3, 2: 0}, head=2, mode="scaled", lr=0.1),
    dict(name="cross_source", seed=11, n=3, m=4, d=4, heads=2, d_k=2, d_v=2, w_o=True, source=True,
         positional="sinusoidal", mask="explicit", target="output", mode="scaled", lr=0.01),
    dict(name="window_unscaled_w_o", seed=12, n=5, d=6, heads=2, d_k=3, d_v=3, w_o=True,
         mask={"causal": False, "window": 2}, positional="sinusoidal", target="output", mode="unscaled",
         lr=0.005),
    dict(name="alibi_rope_attend_uniform", seed=13, n=4, d=4, heads=2, d_k=2, d_v=2, positional="rope",
         alibi=True, mask="causal", target="attend", pairs={3: 1}, mode="uniform", lr=0.1),
]


# -- the scenario, drawn here and written as YAML -------------------------------------------------


def draw(case: dict) -> dict:
    """The case's numbers: embeddings, weights, target, mask (numpy arrays)."""
    rng = np.random.default_rng(case["seed"])
    n, d, h = case["n"], case["d"], case["heads"]
    g = case.get("kv_heads", h)
    m = case.get("m", n)
    out = {"E": rng.normal(0, 1, (n, d)), "W_Q": rng.normal(0, 0.7, (d, h * case["d_k"])),
           "W_K": rng.normal(0, 0.7, (d, g * case["d_k"])), "W_V": rng.normal(0, 0.7, (d, g * case["d_v"]))}
    if case.get("source"):
        out["E_src"] = rng.normal(0, 1, (m, d))
    if case.get("w_o"):
        out["W_O"] = rng.normal(0, 0.7, (h * case["d_v"], d))
    if case.get("score") == "additive":
        out["w_a"] = rng.normal(0, 1, case["d_k"])
    if case["target"] == "output":
        out["T"] = rng.normal(0, 1, (n, d if case.get("w_o") else h * case["d_v"]))
    mask = case.get("mask")
    if mask == "causal":
        allowed = np.tril(np.ones((n, m), dtype=bool))
    elif mask == "explicit":
        allowed = rng.random((n, m)) < 0.6
        allowed[np.arange(n), rng.integers(0, m, n)] = True  # every row sees a key
        for q, k in case.get("pairs", {}).items():
            allowed[q, k] = True
    elif isinstance(mask, dict):
        offset = np.arange(n)[:, None] - np.arange(m)[None, :]
        w = mask["window"]
        allowed = (offset >= 0) & (offset < w) if mask["causal"] else np.abs(offset) < w
    else:
        allowed = np.ones((n, m), dtype=bool)
    out["allowed"] = allowed
    return out


def _matrix(M: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(repr(float(x)) for x in row) + "]" for row in M) + "]"


def yaml_text(case: dict, nums: dict) -> str:
    n = case["n"]
    lines = [f"name: {case['name']}", "tokens: [" + ", ".join(f"t{i + 1}" for i in range(n)) + "]",
             f"embeddings: {_matrix(nums['E'])}"]
    lines += [f"{key}: {_matrix(nums[key])}" for key in ("W_Q", "W_K", "W_V", "W_O") if key in nums]
    if case["heads"] > 1:
        lines.append(f"heads: {case['heads']}")
    if "kv_heads" in case:
        lines.append(f"kv_heads: {case['kv_heads']}")
    if "positional" in case:
        lines.append(f"positional: {case['positional']}")
    if "rope" in case:
        lines.append(f"rope: {{base: {case['rope']['base']}, pairing: {case['rope']['pairing']}}}")
    if case.get("source"):
        m = len(nums["E_src"])
        lines.append("source: {tokens: [" + ", ".join(f"s{j + 1}" for j in range(m)) + "], embeddings: "
                     + _matrix(nums["E_src"]) + ", positional: sinusoidal}")
    mask = case.get("mask")
    if mask == "causal":
        lines.append("mask: causal")
    elif mask == "explicit":
        lines.append("mask: [" + ", ".join("[" + ", ".join("true" if x else "false" for x in row) + "]"
                                           for row in nums["allowed"]) + "]")
    elif isinstance(mask, dict):
        lines.append(f"mask: {{causal: {str(mask['causal']).lower()}, window: {mask['window']}}}")
    if case.get("alibi"):
        lines.append("bias: alibi")
    if case.get("score") == "additive":
        lines += ["score: additive", "w_a: [" + ", ".join(repr(float(x)) for x in nums["w_a"]) + "]"]
    if case.get("qk_norm"):
        lines += ["qk_norm: true", f"qk_scale: {case['qk_scale']}"]
    if case["target"] == "output":
        lines.append(f"target: {{output: {_matrix(nums['T'])}}}")
    else:
        pairs = ", ".join(f"{q + 1}: {k + 1}" for q, k in case["pairs"].items())
        head = f", head: {case['head']}" if "head" in case else ""
        lines.append(f"target: {{attend: {{{pairs}}}{head}}}")
    return "\n".join(lines) + "\n"


# -- the layer in torch, from the formulas ---------------------------------------------------------


def sinusoidal(count: int, d: int) -> np.ndarray:
    pos = np.arange(count)[:, None]
    i = np.arange(d)[None, :] // 2
    angle = pos / 10000.0 ** (2 * i / d)
    return np.where(np.arange(d)[None, :] % 2 == 0, np.sin(angle), np.cos(angle))


def rotate(torch, x, base: float, pairing: str):
    """RoPE (RoFormer): pair i turned by pos · base^(−2i/d); pairs (i, i + d/2) or (2i, 2i + 1)."""
    rows, d = x.shape
    theta = torch.tensor([base ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)
    phi = torch.arange(rows, dtype=torch.float64)[:, None] * theta[None, :]
    if pairing == "half":
        a, b = list(range(d // 2)), list(range(d // 2, d))
    else:
        a, b = list(range(0, d, 2)), list(range(1, d, 2))
    xa, xb = x[:, a], x[:, b]
    ra, rb = xa * torch.cos(phi) - xb * torch.sin(phi), xa * torch.sin(phi) + xb * torch.cos(phi)
    out = [None] * d
    for k, (i, j) in enumerate(zip(a, b)):
        out[i], out[j] = ra[:, k], rb[:, k]
    return torch.stack(out, dim=1)


def forward(torch, case: dict, nums: dict, weights: dict, keep: dict | None = None):
    """L, and (with `keep`) every intermediate tensor, each retaining its gradient."""
    def held(name, t, head=None):
        if keep is not None:
            t.retain_grad()
            keep[(name, head)] = t
        return t

    n, d, h = case["n"], case["d"], case["heads"]
    g = case.get("kv_heads", h)
    d_k, d_v = case["d_k"], case["d_v"]
    t64 = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    E = t64(nums["E"]).requires_grad_(True)  # a leaf that wants a gradient, so that X keeps one
    P = t64(sinusoidal(n, d)) if case.get("positional") == "sinusoidal" else torch.zeros(n, d, dtype=torch.float64)
    X = held("X", E + P)
    if case.get("source"):
        m = len(nums["E_src"])
        X_src = held("X_src", t64(nums["E_src"]).requires_grad_(True) + t64(sinusoidal(m, d)))
    else:
        X_src = X
    m = X_src.shape[0]
    Q = held("Q", X @ weights["W_Q"])
    K = held("K", X_src @ weights["W_K"])
    V = held("V", X_src @ weights["W_V"])
    allowed = torch.tensor(nums["allowed"])
    mode = case["mode"]
    Zs = []
    for head in range(h):
        kv = head // (h // g)
        q = held("Q", Q[:, head * d_k:(head + 1) * d_k], head)  # this head's share of Q, K, V
        k = held("K", K[:, kv * d_k:(kv + 1) * d_k], head)
        v = held("V", V[:, kv * d_v:(kv + 1) * d_v], head)
        if case.get("positional") == "rope":
            rope = case.get("rope", {"base": 10000, "pairing": "half"})
            q = held("Q_rot", rotate(torch, q, rope["base"], rope["pairing"]), head)
            k = held("K_rot", rotate(torch, k, rope["base"], rope["pairing"]), head)
        if case.get("qk_norm"):
            q = q / torch.sqrt((q * q).mean(dim=1, keepdim=True))
            k = k / torch.sqrt((k * k).mean(dim=1, keepdim=True))
        if case.get("score") == "additive":
            raw = torch.tanh(q[:, None, :] + k[None, :, :]) @ weights["w_a"]
        else:
            raw = q @ k.T
        if case.get("qk_norm"):
            raw = raw * case["qk_scale"]
        raw = held("QK^T", raw, head)
        divides = mode != "unscaled" and case.get("score") != "additive"
        S = held("S", raw / math.sqrt(d_k) if divides else raw * 1.0, head)
        if case.get("alibi"):
            slope = 2.0 ** (-8.0 * (head + 1) / h)
            dist = (torch.arange(n)[:, None] - torch.arange(m)[None, :]).abs().to(torch.float64)
            S = held("S+B", S + (-slope * dist), head)
        if mode == "uniform":
            A = allowed.to(torch.float64) / allowed.sum(dim=1, keepdim=True)
            A = held("A", A + 0.0 * S, head)  # the weights do not read the scores: 0 · S keeps the graph
        else:
            A = held("A", torch.softmax(S.masked_fill(~allowed, float("-inf")), dim=1), head)
        Zs.append(held("Z", A @ v, head))
    concat = held("concat", torch.cat(Zs, dim=1))
    Y = held("O", concat @ weights["W_O"]) if "W_O" in weights else concat
    if case["target"] == "output":
        return 0.5 * ((Y - t64(nums["T"])) ** 2).sum(), Y
    A = keep[("A", case.get("head", 1) - 1)] if keep is not None else None
    if A is None:
        raise RuntimeError("attend targets need the intermediates")
    return -sum(torch.log(A[q, k]) for q, k in case["pairs"].items()), Y


def reference(case: dict) -> dict:
    """{"name", "yaml", "mode", "lr", "loss", "grads", "train_losses"} for one case."""
    import torch

    nums = draw(case)
    weights = {key: torch.tensor(nums[key], dtype=torch.float64, requires_grad=True)
               for key in ("W_Q", "W_K", "W_V", "W_O", "w_a") if key in nums}
    keep: dict = {}
    loss, Y = forward(torch, case, nums, weights, keep)
    Y.retain_grad()
    loss.backward()
    grads = _layout(case, keep, weights, Y)
    # plain gradient descent: step k's loss is the layer's after k updates, as attnwalk's step k
    current = {k: w.detach().clone().requires_grad_(True) for k, w in weights.items()}
    losses = []
    for _ in range(STEPS + 1):
        step_loss, _ = forward(torch, case, nums, current, {})
        losses.append(step_loss.item())
        step_loss.backward()
        with torch.no_grad():
            current = {k: (w - case["lr"] * w.grad if k in TRAINED and w.grad is not None else w)
                       .detach().clone().requires_grad_(True) for k, w in current.items()}
    return {"name": case["name"], "yaml": yaml_text(case, nums), "mode": case["mode"], "lr": case["lr"],
            "loss": loss.item(), "grads": grads, "train_losses": losses}


def _layout(case: dict, keep: dict, weights: dict, Y) -> dict:
    """The gradients in `attnwalk grad --format json`'s layout; None (no path) as zeros."""
    def grad(t):
        return (t.grad if t.grad is not None else t.detach() * 0.0).tolist()

    h = case["heads"]
    per_head = [name for name in ("Q", "K", "V", "Q_rot", "K_rot", "QK^T", "S", "S+B", "A", "Z")
                if (name, 0) in keep]
    out = {"Y": grad(Y)}
    if "W_O" in weights:
        out["O"] = grad(keep[("O", None)])
    if h > 1 or "W_O" in weights:
        out["concat"] = grad(keep[("concat", None)])
    for name in ("Q", "K", "V", "X", "X_src"):
        if (name, None) in keep:
            out[name] = grad(keep[(name, None)])
    if h == 1:
        out.update({name: grad(keep[(name, 0)]) for name in per_head if name not in ("Q", "K", "V")})
    else:
        out["heads"] = [{name: grad(keep[(name, head)]) for name in per_head} for head in range(h)]
    out.update({key: (w.grad if w.grad is not None else w.detach() * 0.0).tolist() for key, w in weights.items()})
    return out


def main() -> None:
    cases = [reference(case) for case in CASES]
    OUT.write_text(json.dumps({"steps": STEPS, "cases": cases}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
