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

The hook for real models: `decode` reads a Scenario and `_project` makes one token's q, k, v
(with a model layer's biases, where its Scenario carries b_Q, b_K, b_V). X is the walk's, so a
layer whose X is a LayerNorm of the stream decodes as it is: a LayerNorm reads one token's row. A
model layer that rotates q and k by position (RoPE) rotates them in `_project`, at position t.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.errors import ScenarioError
from attnwalk.layer import ops
from attnwalk.layer.modes import BASELINE, Mode, mode_named
from attnwalk.layer.scores import raw_scores
from attnwalk.layer.walk import Walk, compute

if TYPE_CHECKING:
    from attnwalk.scenario.model import Scenario


class Work(NamedTuple):
    """Multiply-adds of one step, by product."""

    projections: int  # x W_Q, x W_K, x W_V
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
    """One head at one step: the new token's q, k, v, the cache after appending, and the output."""

    q: np.ndarray  # (d_k,)
    k: np.ndarray  # (d_k,) appended to K_cache as its last row
    v: np.ndarray  # (d_v,)
    K_cache: np.ndarray  # (t, d_k): rows 1 … t−1 read from the cache, row t just appended
    V_cache: np.ndarray  # (t, d_v)
    raw: np.ndarray  # (t,) q · k_j for every cached key (all of them; the mask decides below)
    s: np.ndarray  # (t,) the scores, / √d_k where the mode divides
    a: np.ndarray  # (t,) the weights; 0 where the mask hides a cached key
    z: np.ndarray  # (d_v,) = a · V_cache


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
        return ("decode needs a causal mask (mask: causal): a KV cache keeps each token's key "
                "and value for the later steps, which is exact only when no token reads a later "
                "one; without the mask token 1 also reads the keys of tokens a decoder has not "
                "generated yet")
    future = np.argwhere(np.triu(scn.allowed, 1))
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
        field = "source" if scn.source is not None else "mask"
        raise ScenarioError(problem, file=scn.label, field=field, line=scn.lines.get(field))


def cached_work(scn: Scenario, t: int) -> Work:
    """Multiply-adds of step t (1-based) with the cache: one token projected, one query scored
    against the keys it may read."""
    h, d_model, d_k, d_v = scn.heads, scn.d_model, scn.d_k, scn.d_v
    pairs = int(scn.allowed[t - 1, :t].sum())  # (query t, key j) pairs the mask lets through
    output = h * d_v * d_model if scn.W_O is not None else 0
    return Work(d_model * h * (2 * d_k + d_v), h * pairs * d_k, h * pairs * d_v, output)


def rerun_work(scn: Scenario, t: int) -> Work:
    """Multiply-adds of making token t's output without a cache: the layer run again on tokens
    1 … t, every row, as a decoder without a cache does (in a stack of layers each next layer
    needs every row of this one's output, so none can be skipped)."""
    h, d_model, d_k, d_v = scn.heads, scn.d_model, scn.d_k, scn.d_v
    pairs = int(scn.allowed[:t, :t].sum())
    output = t * h * d_v * d_model if scn.W_O is not None else 0
    return Work(t * d_model * h * (2 * d_k + d_v), h * pairs * d_k, h * pairs * d_v, output)


def decode(scn: Scenario, mode: Mode | str = BASELINE) -> Decode:
    """Decode `scn` token by token under `mode` (scaled, unscaled, uniform); ScenarioError when
    it has no causal mask (check_decodable)."""
    check_decodable(scn)
    mode = mode_named(mode)
    walk = compute(scn, mode)
    h, d_k, d_v = scn.heads, scn.d_k, scn.d_v
    X = walk.mats["X"]  # (n, d_model): the embedding and position of each token, looked up as it arrives
    # One buffer per head, filled a row per step; step t's cache is its first t rows (a view), so
    # n steps hold n rows, not n²/2.
    K_cache = np.zeros((h, scn.n, d_k))
    V_cache = np.zeros((h, scn.n, d_v))
    divisor = mode.divisor(scn.scorer, d_k)
    steps = []
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(scn.n):
            t = i + 1
            x = X[i]
            q_all, k_all, v_all = _project(scn, x)
            heads = []
            for hd in range(h):
                q, k = q_all[hd * d_k:(hd + 1) * d_k], k_all[hd * d_k:(hd + 1) * d_k]  # this head's block
                v = v_all[hd * d_v:(hd + 1) * d_v]
                K_cache[hd, i], V_cache[hd, i] = k, v  # appended; rows before i are not touched
                K, V = K_cache[hd, :t], V_cache[hd, :t]  # (t, d_k), (t, d_v)
                raw = raw_scores(scn, q[None, :], K)[0]  # (1, d_k), (t, d_k) -> (t,)
                s = raw / divisor
                allowed = scn.allowed[i:i + 1, :t]  # (1, t)
                a = mode.weights(ops.masked(s[None, :], allowed), allowed)[0]  # (t,)
                z = a @ V  # (t,) @ (t, d_v) -> (d_v,)
                heads.append(HeadStep(q, k, v, K, V, raw, s, a, z))
            concat = np.concatenate([head.z for head in heads])  # (h·d_v,)
            o = _output(scn, concat)
            steps.append(Step(t, x, heads, concat, o, cached_work(scn, t), rerun_work(scn, t),
                              _difference(walk, i, heads, o)))
    return Decode(scn, mode, walk, steps)


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
    """Numbers the cache holds after step t: t rows of K and of V in every head."""
    return t * scn.heads * (scn.d_k + scn.d_v)
