"""Decoding with a KV cache: the layer's output made one token at a time, as a decoder makes it.

At step t (1-based) only token t's row of X is projected: q_t = x_t W_Q, k_t = x_t W_K,
v_t = x_t W_V. Each head appends its k_t and v_t to its cache, which then holds the keys and
values of tokens 1 … t; q_t scores the cached keys, softmax makes a_t, and z_t = a_t · V_cache.
The earlier rows are read, never recomputed: k_j and v_j depend on token j alone, and the
causal mask lets no token read a later one, so what step j computed is what every later step
needs. That is why a cache needs the mask: without it token 1 would read token 3's key, which a
decoder has not yet made. z_t then equals row t of the whole layer computed at once (the causal
walk); `Decode.difference` is the largest gap, for the screens to print.

Work is counted as multiply-adds of the products (projections, q · k, a · V, W_O); the softmax's
exponentials and QK-norm's normalising are left out of both columns alike.

The variants decode as a decoder runs them:
- RoPE: q_t and k_t are rotated at their own position t − 1 (positions count from 0) when they
  are made, and the cache holds the ROTATED k: a key's angle depends on its own position only,
  so it is never turned again.
- ALiBi: head h adds −m_h·(t − j) to its score of cached key j; the bias is made from the two
  positions, nothing of it is cached.
- A sliding window (mask: {causal: true, window: w}): keys older than the window stay in this
  cache but get weight 0 and cost no multiply-adds; a decoder may drop them (Mistral's rolling
  buffer of w rows), which `window_rows` counts.
- Grouped-query heads (kv_heads: g): the cache holds g K/V heads, not h; query head h reads the
  cache of K/V head scn.kv_head(h), and each step projects g keys and values, not h.

The hook for real models: `decode` reads a Scenario and `_project` makes one token's q, k, v
(with a model layer's biases, where its Scenario carries b_Q, b_K, b_V). X is the walk's, so a
layer whose X is a LayerNorm (or RMSNorm) of the stream decodes as it is: a norm reads one
token's row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.errors import ScenarioError
from attnwalk.layer import alibi, ops
from attnwalk.layer.modes import BASELINE, Mode, mode_named
from attnwalk.layer.scores import raw_scores
from attnwalk.layer.walk import Walk, compute

if TYPE_CHECKING:
    from attnwalk.scenario.model import Scenario


class Work(NamedTuple):
    """Multiply-adds of one step, by product."""

    projections: int  # x W_Q, x W_K, x W_V (K and V: g K/V heads' columns)
    scores: int  # q · k, every head
    mixing: int  # a · V, every head
    output: int  # concat · W_O (0 without W_O)

    @property
    def total(self) -> int:
        return self.projections + self.scores + self.mixing + self.output

    def __add__(self, other: object) -> Work:  # type: ignore[override]  (sums, not concatenation)
        assert isinstance(other, Work)
        return Work(*(a + b for a, b in zip(self, other)))


ZERO = Work(0, 0, 0, 0)


@dataclass(eq=False)
class HeadStep:
    """One query head at one step: the new token's q, k, v, the cache after appending, and the
    output. With grouped-query heads k, v and the caches are those of the K/V head `kv` it reads
    (the same arrays as the other query heads of its group: one cache, shared)."""

    q: np.ndarray  # (d_k,) rotated at position t − 1 under RoPE
    k: np.ndarray  # (d_k,) appended to K_cache as its last row (rotated under RoPE)
    v: np.ndarray  # (d_v,)
    K_cache: np.ndarray  # (t, d_k): rows 1 … t−1 read from the cache, row t just appended
    V_cache: np.ndarray  # (t, d_v)
    raw: np.ndarray  # (t,) q · k_j for every cached key (all of them; the mask decides below)
    s: np.ndarray  # (t,) the scores, / √d_k where the mode divides
    a: np.ndarray  # (t,) the weights; 0 where the mask hides a cached key
    z: np.ndarray  # (d_v,) = a · V_cache
    b: np.ndarray | None = None  # (t,) ALiBi's −m_h·(t − j), added to s before the softmax
    kv: int = 0  # the K/V head (cache) this query head reads


@dataclass(eq=False)
class Step:
    """Step t: token t arrives, every head attends over its cache, z_t (and o_t) come out."""

    t: int  # 1-based: the cache holds t rows after this step
    x: np.ndarray  # (d_model,) = e_t + p_t
    heads: list[HeadStep]
    concat: np.ndarray  # (h·d_v,) every head's z_t side by side
    o: np.ndarray | None  # (d_model,) = concat · W_O, when the scenario has W_O
    cached: Work  # this step's multiply-adds with the cache
    rerun: Work  # the same token's output without a cache: the layer rerun on tokens 1 … t
    difference: float  # largest |z_t − Z[t]| (and |o_t − O[t]|) against the causal walk

    @property
    def reused(self) -> int:
        """Cache rows this step reads without computing them: those of tokens 1 … t−1."""
        return self.t - 1


@dataclass(eq=False)
class Decode:
    """Every step of decoding one scenario, and the whole causal walk they are checked against."""

    scenario: Scenario
    mode: Mode
    walk: Walk  # the layer computed at once, every row: what each step must reproduce
    steps: list[Step]

    @property
    def difference(self) -> float:
        """The largest gap between any step's output and its row of the walk."""
        return max(step.difference for step in self.steps)


def refusal(scn: Scenario) -> str | None:
    """Why `scn` cannot be decoded with a cache, or None when it can."""
    if scn.source is not None:
        return ("decode needs self-attention: with a source, the keys and values are the source's, "
                "computed once before decoding starts, not a cache that grows with each token")
    if not scn.masked:
        reason = ("a KV cache keeps each token's key and value for the later steps, which is exact "
                  "only when no token reads a later one; without the mask token 1 also reads the "
                  "keys of tokens a decoder has not generated yet")
        if scn.model is not None:  # `attnwalk model --decode` on an encoder: no file, no mask line
            return (f"decode needs a causal mask, and this model attends both ways (an encoder such "
                    f"as BERT: every token reads the later ones too): {reason}; decode a causal "
                    f"model such as GPT-2")
        return f"decode needs a causal mask (mask: causal): {reason}"
    future = np.argwhere(np.triu(scn.allowed, 1))
    if len(future) and scn.window is not None:
        return (f"decode needs a window that looks back only (mask: {{causal: true, window: "
                f"{scn.window}}}): without causal: true the window |i − j| < {scn.window} lets token 1 "
                f"read token 2, which a decoder has not generated yet")
    if len(future):
        query, key = (int(x) + 1 for x in future[0])
        return (f"decode needs a mask that hides every later token (mask: causal, or one inside "
                f"it): this mask lets token {query} read token {key}, which a decoder has not "
                f"generated when token {query}'s output is made")
    return None


def check_decodable(scn: Scenario) -> None:
    """ScenarioError, naming the file and the mask's line, when `scn` cannot be decoded."""
    problem = refusal(scn)
    if problem is not None:
        field = "source" if scn.source is not None else "mask" if scn.model is None else None
        raise ScenarioError(problem, file=scn.label, field=field, line=scn.lines.get(field) if field else None)


def cached_work(scn: Scenario, t: int) -> Work:
    """Multiply-adds of step t (1-based) with the cache: one token projected, one query scored
    against the keys it may read."""
    h, d_model, d_k, d_v = scn.heads, scn.d_model, scn.d_k, scn.d_v
    pairs = int(scn.allowed[t - 1, :t].sum())  # (query t, key j) pairs the mask lets through
    output = h * d_v * d_model if scn.W_O is not None else 0
    return Work(_projected(scn), h * pairs * d_k, h * pairs * d_v, output)


def _projected(scn: Scenario) -> int:
    """Multiply-adds of projecting one token: h query heads, g K/V heads (g = h without GQA)."""
    return scn.d_model * (scn.heads * scn.d_k + scn.groups * (scn.d_k + scn.d_v))


def rerun_work(scn: Scenario, t: int) -> Work:
    """Multiply-adds of making token t's output without a cache: the layer run again on tokens
    1 … t, every row, as a decoder without a cache does (in a stack of layers each next layer
    needs every row of this one's output, so none can be skipped)."""
    h, d_model, d_k, d_v = scn.heads, scn.d_model, scn.d_k, scn.d_v
    pairs = int(scn.allowed[:t, :t].sum())
    output = t * h * d_v * d_model if scn.W_O is not None else 0
    return Work(t * _projected(scn), h * pairs * d_k, h * pairs * d_v, output)


def decode(scn: Scenario, mode: Mode | str = BASELINE) -> Decode:
    """Decode `scn` token by token under `mode` (scaled, unscaled, uniform); ScenarioError when
    it has no causal mask (check_decodable)."""
    check_decodable(scn)
    mode = mode_named(mode)
    walk = compute(scn, mode)
    h, g, d_k, d_v = scn.heads, scn.groups, scn.d_k, scn.d_v
    X = walk.mats["X"]  # (n, d_model): the embedding and position of each token, looked up as it arrives
    # One buffer per K/V head (g of them: fewer than h with grouped-query heads), filled a row per
    # step; step t's cache is its first t rows (a view), so n steps hold n rows, not n²/2.
    K_cache = np.zeros((g, scn.n, d_k))
    V_cache = np.zeros((g, scn.n, d_v))
    divisor = mode.divisor(scn.scorer, d_k)
    slopes = alibi.slopes(h) if scn.bias == "alibi" else None
    steps = []
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(scn.n):
            t = i + 1
            x = X[i]
            q_all, k_all, v_all = _project(scn, x)
            for kv in range(g):  # appended; rows before i are not touched
                K_cache[kv, i] = _turned(scn, k_all[kv * d_k:(kv + 1) * d_k], i)  # the rotated k is cached
                V_cache[kv, i] = v_all[kv * d_v:(kv + 1) * d_v]
            heads = []
            for hd in range(h):
                kv = scn.kv_head(hd)
                q = _turned(scn, q_all[hd * d_k:(hd + 1) * d_k], i)  # this head's block, at position i
                K, V = K_cache[kv, :t], V_cache[kv, :t]  # (t, d_k), (t, d_v)
                raw = raw_scores(scn, q[None, :], K)[0]  # (1, d_k), (t, d_k) -> (t,)
                s = raw / divisor
                # ALiBi: −m_h·(t − j) from the two positions alone (0 − x, as the walk's B: +0 at j = t)
                b = None if slopes is None else 0.0 - slopes[hd] * (i - np.arange(t, dtype=np.float64))
                allowed = scn.allowed[i:i + 1, :t]  # (1, t)
                seen = s if b is None else s + b
                a = mode.weights(ops.masked(seen[None, :], allowed), allowed)[0]  # (t,)
                z = a @ V  # (t,) @ (t, d_v) -> (d_v,)
                heads.append(HeadStep(q, K[i], V[i], K, V, raw, s, a, z, b, kv))
            concat = np.concatenate([head.z for head in heads])  # (h·d_v,)
            o = _output(scn, concat)
            steps.append(Step(t, x, heads, concat, o, cached_work(scn, t), rerun_work(scn, t),
                              _difference(walk, i, heads, o)))
    return Decode(scn, mode, walk, steps)


def _turned(scn: Scenario, row: np.ndarray, position: int) -> np.ndarray:
    """A query's or key's head block rotated at its position under RoPE, by the walk's own rotation
    (rope.turn: a real model's rescaled θ_i included), else as it is."""
    if scn.rope is None:
        return row
    return scn.rope.turn(row[None, :], np.array([position]))[0]  # (1, d) -> (d,)


def _project(scn: Scenario, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One token's q, k, v, every head's side by side: (d_model,) @ (d_model, h·d) -> (h·d,), plus
    a real model's biases b_Q, b_K, b_V where its layer has them."""
    out = []
    for weight in ("W_Q", "W_K", "W_V"):
        row = x @ getattr(scn, weight)
        bias = getattr(scn, "b_" + weight[2:], None)  # a model layer's; a scenario file has none
        out.append(row if bias is None else row + bias)
    return out[0], out[1], out[2]


def _output(scn: Scenario, concat: np.ndarray) -> np.ndarray | None:
    """o_t = concat_t · W_O (+ b_O in a real model's layer): (h·d_v,) @ (h·d_v, d_model)."""
    if scn.W_O is None:
        return None
    o = concat @ scn.W_O
    bias = getattr(scn, "b_O", None)
    return o if bias is None else o + bias


def _difference(walk: Walk, i: int, heads: list[HeadStep], o: np.ndarray | None) -> float:
    gaps = [float(np.max(np.abs(head.z - walk.matrix("Z", hd)[i]), initial=0.0))
            for hd, head in enumerate(heads)]
    if o is not None:
        gaps.append(float(np.max(np.abs(o - walk.mats["O"][i]), initial=0.0)))
    return max(gaps)


def cache_numbers(scn: Scenario, t: int) -> int:
    """Numbers the cache holds after step t: t rows of K and of V in every K/V head (g of them)."""
    return t * scn.groups * (scn.d_k + scn.d_v)


def ungrouped_numbers(scn: Scenario, t: int) -> int:
    """What the cache would hold after step t with one K/V head per query head (no GQA)."""
    return t * scn.heads * (scn.d_k + scn.d_v)


def window_rows(scn: Scenario, t: int) -> int:
    """Rows a decoder must keep after step t: all t, or under a causal sliding window the last w
    (Mistral's rolling buffer): no later query reads a key older than that."""
    return t if scn.window is None else min(t, scn.window)


def kv_representatives(scn: Scenario) -> list[int]:
    """For each K/V head, the first query head that reads it (its HeadStep carries that cache)."""
    readers = [scn.kv_head(h) for h in range(scn.heads)]
    return [readers.index(kv) for kv in range(scn.groups)]
