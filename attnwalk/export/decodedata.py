"""`attnwalk decode --format json`: every step of decoding with a KV cache, at full float64 precision.

    {"name", "tokens", "mode", "shape", "steps": [{"t", "token", "x", "q", "k", "v",
      "K_cache", "V_cache", "s", "a", "z", "work", "difference"}, ...], "difference"}

`t` counts from 1 and is the number of rows the cache holds after the step (K_cache is t × d_k).
With one head every entry is that head's. With several, a step keeps the full-width rows and
caches, every head's columns side by side as `export` writes Q, K, V (`q`, `k`, `v` of h·d_k and
h·d_v numbers, `K_cache` t × h·d_k, `V_cache` t × h·d_v, `z` = concat, h·d_v) and `heads` lists
each head's own {"q", "k", "v", "K_cache", "V_cache", "s", "a", "z"}; `s` and `a` exist only per
head. With W_O a step adds `o` (d_model). `s` is the score row (/ √d_k where the mode divides),
null where the mask hides a cached key (JSON has no −∞); `work` is {"cached", "rerun"}, each
{"projections", "scores", "mixing", "output", "total"} multiply-adds; `difference` is the largest
|z_t − Z[t]| against the whole causal layer.

Every stage the graph puts between the scores and the softmax adds its row under its key in lower
case (null where masked, as `s`), so that `a` is the softmax of the last of them: under ALiBi `b`,
the bias −m_h·(t − j), and `s+b`, what the softmax reads; under RoPE `q`, `k` and the caches are the rotated ones.
With grouped-query heads (`shape.kv_heads` g < heads) the full-width `k`, `v`, `K_cache` and
`V_cache` hold the g K/V heads' columns (g·d_k, g·d_v: what a decoder caches), and each head's
entry adds `kv`, the 0-based K/V head it reads. `--head N` keeps one head: the top level adds
`"head": N` and every step carries that head's entries itself, as with one head, and no `heads`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.layer.kvcache import Decode, HeadStep, Step, Work, kv_representatives

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario


def decode_data(dec: Decode, head: int | None = None) -> dict[str, Any]:
    """Every step; `head` (0-based) keeps that head's entries alone."""
    scn = dec.scenario
    shape = {"n": scn.n, "d_model": scn.d_model, "d_k": scn.d_k, "d_v": scn.d_v, "heads": scn.heads}
    if scn.groups < scn.heads:
        shape["kv_heads"] = scn.groups
    data: dict[str, Any] = {"name": scn.name, "tokens": list(scn.tokens), "mode": dec.mode.name,
                            "shape": shape}
    if head is not None:
        data["head"] = head + 1
    data["steps"] = [_step(dec, step, head) for step in dec.steps]
    data["difference"] = dec.difference
    return data


def decode_numbers(scn: Scenario) -> int:
    """How many numbers decode_data writes for `scn`, counted from its shapes (nothing is built):
    step t holds t rows of each cache and t scores, weights (and ALiBi biases), so they add up to
    n(n + 1)/2 rows; with several heads the rows and caches appear twice (full width, with g K/V
    heads, and per query head)."""
    h, g, n = scn.heads, scn.groups, scn.n
    rows = n * (n + 1) // 2  # Σ t over the steps
    per_head = rows * h * (scn.d_k + scn.d_v + 3) + n * h * (2 * scn.d_k + 2 * scn.d_v)  # (+ 3: s, a, b)
    if h > 1:  # the full-width copy: every query head's q, the g K/V heads' k, v and caches
        per_head += rows * g * (scn.d_k + scn.d_v) + n * (h * scn.d_k + g * (scn.d_k + scn.d_v) + h * scn.d_v)
    # + 14 a step: t, the difference, and the work's two columns of five products and a total
    return per_head + n * (scn.d_model * (2 if scn.W_O is not None else 1) + 14) + _block_numbers(scn)


def _block_numbers(scn: Scenario) -> int:
    """The rows after the attention's output every step adds (the residual, the FFN, ℓ and p): one
    row of each such stage a step, n rows in all, as the walk holds them."""
    from attnwalk.layer.cost import stage_numbers
    from attnwalk.layer.kvcache import block_rows

    keys = set(block_rows(scn.graph))
    return sum(count for key, count, _ in stage_numbers(scn) if key in keys)


def _step(dec: Decode, step: Step, head: int | None) -> dict[str, Any]:
    scn = dec.scenario
    allowed = scn.allowed[step.t - 1, :step.t]
    out: dict[str, Any] = {"t": step.t, "token": scn.tokens[step.t - 1], "x": step.x.tolist()}
    if scn.heads == 1 or head is not None:
        out.update(_head(scn, step.heads[head or 0], allowed))
    else:
        out["q"] = np.concatenate([h.q for h in step.heads]).tolist()
        caches = [step.heads[h] for h in kv_representatives(scn)]  # one per K/V head: g, not h
        for key in ("k", "v"):
            out[key] = np.concatenate([getattr(cache, key) for cache in caches]).tolist()
        for key in ("K_cache", "V_cache"):  # (t, g·d): the K/V heads' blocks side by side, as export's K
            out[key] = np.concatenate([getattr(cache, key) for cache in caches], axis=1).tolist()
        out["z"] = step.concat.tolist()
        out["heads"] = [_head(scn, h, allowed) for h in step.heads]
    if step.o is not None:
        out["o"] = step.o.tolist()
    for key, row in step.block.items():  # the block after the output (residual, FFN), keys in lower case
        out.setdefault(key.lower(), row.tolist())
    out["work"] = {"cached": _work(step.cached), "rerun": _work(step.rerun)}
    out["difference"] = step.difference
    return out


def _head(scn: Scenario, head: HeadStep, allowed: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"q": head.q.tolist(), "k": head.k.tolist(), "v": head.v.tolist(),
                           "K_cache": head.K_cache.tolist(), "V_cache": head.V_cache.tolist(),
                           "s": [float(s) if ok else None for s, ok in zip(head.s, allowed)]}
    for key, row in head.scores.items():  # S's is `s` above; a feature's stages after it
        out.setdefault(key.lower(), [float(x) if ok else None for x, ok in zip(row, allowed)])
    out["a"], out["z"] = head.a.tolist(), head.z.tolist()
    for key, row in head.later.items():  # a feature's stages after z_t, under their keys in lower case
        out.setdefault(key.lower(), row.tolist())
    if scn.groups < scn.heads:
        out["kv"] = head.kv
    return out


def _work(work: Work) -> dict[str, int]:
    return {**work._asdict(), "total": work.total}
