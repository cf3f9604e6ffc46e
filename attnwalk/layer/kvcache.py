"""Decoding with a KV cache: the layer's output made one token at a time, as a decoder makes it.

Decoding is the layer's own graph (graph.py) evaluated one row at a time. At step t (1-based)
every stage the output is made from is computed for token t's row alone: x_t, then q_t, k_t, v_t
(turned at position t − 1 under RoPE, normalised first behind a norm), then one row of QKᵀ, S, A
and Z. The stages read whole, along the key axis (what QKᵀ and Z read as keys: K and V, or the
rotated K_rot), come from the cache: the rows of tokens 1 … t−1 kept from the steps before, with
token t's row just appended. So the cache holds exactly what the graph says is read whole, and
what a feature adds to the graph decodes without a line here: ALiBi's −m_h·(t − j) comes from
the two positions, a sliding window's older keys stay cached at weight 0 (a decoder may drop
them: Mistral's rolling buffer of w rows, `window_rows`), grouped-query heads share their K/V
head's cache, a norm reads one token's row.

The earlier rows are read, never recomputed. That is exact because of the causal mask: no token
reads a later one, so what step j computed is what every later step needs (in the first layer
k_j depends on token j alone; deeper in a stack x_j carries tokens 1 … j, which the mask also
keeps fixed). Without the mask token 1 would read token 3's key, which a decoder has not yet
made. z_t then equals row t of the whole layer computed at once (the causal walk);
`Decode.difference` is the largest gap, for the screens to print.

Work is counted as multiply-adds of the products (projections, q · k, a · V, W_O); the softmax's
exponentials, a norm's statistics and QK-norm's normalising are left out of both columns alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.errors import ScenarioError
from attnwalk.layer.graph import Context, Graph, get, head_block, needed, segments
from attnwalk.layer.modes import BASELINE, Mode, mode_named
from attnwalk.layer.roles import (CONCAT, MIXED, SCALED, SCORES, SOFTMAX, block_output, next_token, output, path,
                                  score_stages)
from attnwalk.layer.walk import Walk, compute, run

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario


class Work(NamedTuple):
    """Multiply-adds of one step, by product."""

    projections: int  # x W_Q, x W_K, x W_V (K and V: g K/V heads' columns)
    scores: int  # q · k, every head
    mixing: int  # a · V, every head
    output: int  # concat · W_O (0 without W_O)
    after: int = 0  # the products after the output, one row each: the FFN's W_1, W_gate, W_2; W_U

    @property
    def total(self) -> int:
        return self.projections + self.scores + self.mixing + self.output + self.after

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
    # (t,) the row of every stage between the raw scores and the softmax, in order (roles.score_stages):
    # S alone, or S, ALiBi's B and S + B, or whatever a feature puts there; its last is what a_t is
    # the softmax of
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    # (…,) the row of every per-head stage a feature puts after z_t on the way to the output
    later: dict[str, np.ndarray] = field(default_factory=dict)
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
    difference: float  # largest |z_t − Z[t]| (and |o_t − O[t]|, and the block's rows) against the causal walk
    # (d,) the row of every stage after the attention's output on the way to the block's output
    # (the residual's h_t, the FFN's u_t, g_t, f_t, y_t, a norm between): row-wise, from o_t and x_t
    block: dict[str, np.ndarray] = field(default_factory=dict)

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


CAUSAL_REASON = ("a KV cache keeps each token's key and value for the later steps, which is exact "
                 "only when no token reads a later one; without the mask token 1 also reads the "
                 "keys of tokens a decoder has not generated yet")


def _refused(scn: Scenario) -> tuple[str, str | None] | None:
    """(why, the scenario field to point at) when `scn` cannot be decoded with a cache: a feature
    that makes keys a decoder cannot cache (a source; a mask that shows later tokens; an encoder's
    layer) says why and names its field (DECODE_FIELD); else a layer without a mask."""
    for feature in scn.features:
        refuse = getattr(feature, "refuse_decode", None)
        problem = refuse(scn) if refuse is not None else None
        if problem:
            return problem, getattr(feature, "DECODE_FIELD", None)
    if not scn.masked:
        return f"decode needs a causal mask (mask: causal): {CAUSAL_REASON}", "mask"
    return None


def refusal(scn: Scenario) -> str | None:
    """Why `scn` cannot be decoded with a cache, or None when it can."""
    refused = _refused(scn)
    return None if refused is None else refused[0]


def check_decodable(scn: Scenario) -> None:
    """ScenarioError, naming the file and the field (the mask's line, a source's) when `scn`
    cannot be decoded."""
    refused = _refused(scn)
    if refused is not None:
        problem, field = refused
        raise ScenarioError(problem, file=scn.label, field=field, line=scn.lines.get(field) if field else None)


def cached_work(scn: Scenario, t: int) -> Work:
    """Multiply-adds of step t (1-based) with the cache: one token projected, one query scored
    against the keys it may read."""
    h, d_model, d_k, d_v = scn.heads, scn.d_model, scn.d_k, scn.d_v
    pairs = int(scn.allowed[t - 1, :t].sum())  # (query t, key j) pairs the mask lets through
    output = h * d_v * d_model if scn.W_O is not None else 0
    return Work(_projected(scn), h * pairs * d_k, h * pairs * d_v, output, _after(scn))


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
    return Work(t * _projected(scn), h * pairs * d_k, h * pairs * d_v, output, t * _after(scn))


def after_weights(scn: Scenario) -> list[str]:
    """The weights a step multiplies by after the attention's output (block_rows' stages: the
    FFN's W_1, W_gate, W_2, the unembedding's W_U, or a tied table E_vocab, read as a parameter),
    in order."""
    by_key = {s.key: s for s in scn.graph}
    names: list[str] = []
    for key in block_rows(scn.graph):
        stage = by_key[key]  # its weight, else the matrices among its parameters (not a norm's γ, β)
        names += [stage.weight] if stage.weight else [p for p in stage.params if np.ndim(scn.param(p)) == 2]
    return names


def _after(scn: Scenario) -> int:
    """Multiply-adds of one token's row through the weights after the output: d_in × d_out each."""
    return sum(int(scn.param(name).size) for name in after_weights(scn))


def decode(scn: Scenario, mode: Mode | str = BASELINE) -> Decode:
    """Decode `scn` token by token under `mode` (scaled, unscaled, uniform); ScenarioError when
    it has no causal mask (check_decodable)."""
    check_decodable(scn)
    mode = mode_named(mode)
    walk = compute(scn, mode)
    final = output(walk.computed).key  # the attention's output: W_O's O, else concat
    block = block_rows(walk.computed)
    graph = needed(walk.computed, [final, *block])
    cache = Cache(graph, scn)
    # the rows a step shows besides q, k, v, a and z, the same at every step: every stage between
    # the scores and a_t, every per-head stage after z_t on the way to the output, and block's
    shown = (score_stages(graph), [s for s in path(graph, MIXED, final) if s.per_head], final, block)
    with np.errstate(over="ignore", invalid="ignore"):
        steps = [_step(walk, graph, cache, i, shown) for i in range(scn.n)]
    return Decode(scn, mode, walk, steps)


def block_rows(computed: Graph) -> list[str]:
    """The keys of every stage a step makes after the attention's output, in order: to the block's
    end (the residual's H, the FFN's Y, a norm after them) and on to the next token's p_t where
    there is a vocabulary; none where the output ends the layer. Each is made from row t alone."""
    final = output(computed).key  # W_O's O, else concat
    end = block_output(computed).key
    if next_token(computed) is not None:  # an unembedding: on to the next token's p_t
        end = next_token(computed).key
    return [] if end == final else [s.key for s in (*path(computed, final, end), get(computed, end))]


class Cache:
    """The rows of every stage the graph reads whole (along the key axis), one buffer per stage
    (per head for a per-head one), filled a row per step: step t's cache is its first t rows (a
    view), so n steps hold n rows, not n²/2."""

    def __init__(self, graph: Graph, scn: Scenario) -> None:
        self.names = {name for stage in graph for name in stage.keys}  # K (or K_rot), V
        self.rows: dict[tuple[str, int], np.ndarray] = {}
        self.n = scn.n

    def append(self, name: str, head: int, i: int, M: np.ndarray) -> None:
        if name in self.names:
            if (name, head) not in self.rows:
                self.rows[(name, head)] = np.zeros((self.n, M.shape[1]))
            self.rows[(name, head)][i] = M[0]  # appended; rows before it are not touched

    def read(self, name: str, head: int, t: int) -> np.ndarray:
        return self.rows[(name, head)][:t]


SHARED = -1  # the cache key of a stage computed once for every head (K, V)


def _step(walk: Walk, graph: Graph, cache: Cache, i: int, shown: tuple) -> Step:
    """Step t = i + 1: token t's row of every stage, its keys read from the cache; `shown`: the
    stages between the scores and a_t, those after z_t, and the output's key (decode's)."""
    scn, t = walk.scenario, i + 1
    before, per_head, after = segments(graph)
    ctx = Context(scn, walk.mode, 1.0, rows=np.array([i]), key_rows=np.array([i]), keys=np.arange(t))
    mats: dict[str, np.ndarray] = {}

    def shared(name: str) -> object:
        return mats[name] if name in mats else scn.param(name)

    for stage in before:
        mats[stage.key] = run(stage, ctx, shared)
        cache.append(stage.key, SHARED, i, mats[stage.key])
    heads: list[dict[str, np.ndarray]] = []
    for h in range(scn.heads):
        ctx.head = h
        own = {s.key: head_block(s, mats[s.key], h, scn) for s in before if s.split}
        kept = {s.key: head_block(s, cache.read(s.key, SHARED, t), h, scn)  # this head's block of K, V
                for s in before if s.split and s.key in cache.names}
        for stage in per_head:
            own[stage.key] = run(stage, ctx, lambda name: own[name] if name in own else shared(name),
                                 lambda name: kept[name] if name in kept else cache.read(name, h, t))
            cache.append(stage.key, h, i, own[stage.key])
        own.update({f"{name}:cache": kept[name] if name in kept else cache.read(name, h, t)
                    for name in cache.names})
        heads.append(own)
    per_head_keys = {s.key for s in per_head}
    for stage in after:
        mats[stage.key] = run(stage, ctx, lambda name: [own[name] for own in heads]
                              if name in per_head_keys else shared(name))
    score, out = get(graph, SCORES), get(graph, MIXED)
    between, later, final, block = shown
    steps = [HeadStep(q=own[score.reads[0]][0], k=own[f"{score.keys[0]}:cache"][i],
                      v=own[f"{out.keys[0]}:cache"][i], K_cache=own[f"{score.keys[0]}:cache"],
                      V_cache=own[f"{out.keys[0]}:cache"], raw=own[SCORES][0], s=own[SCALED][0],
                      a=own[SOFTMAX][0], z=own[MIXED][0], scores={s.key: own[s.key][0] for s in between},
                      later={s.key: own[s.key][0] for s in later}, kv=scn.kv_head(h)) for h, own in enumerate(heads)]
    o = mats[final][0] if final != CONCAT else None  # o_t: a projection of the heads' z_t
    x = mats[get(graph, "Q").reads[0]][0]  # what the projections read: x_t (behind a norm, its output)
    rows = {key: mats[key][0] for key in block}
    return Step(t, x, steps, mats[CONCAT][0], o, cached_work(scn, t), rerun_work(scn, t),
                _difference(walk, i, steps, o, final, rows), rows)


def _difference(walk: Walk, i: int, heads: list[HeadStep], o: np.ndarray | None, final: str,
                block: dict[str, np.ndarray]) -> float:
    gaps = [float(np.max(np.abs(head.z - walk.matrix("Z", hd)[i]), initial=0.0))
            for hd, head in enumerate(heads)]
    if o is not None:
        gaps.append(float(np.max(np.abs(o - walk.mats[final][i]), initial=0.0)))
    gaps += [float(np.max(np.abs(row - walk.mats[key][i]), initial=0.0)) for key, row in block.items()]
    return max(gaps)


def cache_numbers(scn: Scenario, t: int) -> int:
    """Numbers the cache holds after step t: t rows of K and of V in every K/V head (g of them)."""
    return t * scn.groups * (scn.d_k + scn.d_v)


def ungrouped_numbers(scn: Scenario, t: int) -> int:
    """What the cache would hold after step t with one K/V head per query head (no GQA)."""
    return t * scn.heads * (scn.d_k + scn.d_v)


def rolling_window(scn: Scenario) -> int | None:
    """w, when the mask is a causal sliding window of w keys narrower than the sequence (Mistral's
    rolling buffer keeps w rows), read off the mask itself; None when a query may read every
    earlier key."""
    allowed = scn.allowed  # (n, m) bool
    n = allowed.shape[0]
    if allowed.shape != (n, n):
        return None
    rows, cols = np.indices((n, n))
    w = int(allowed.sum(axis=1).max(initial=0))
    return w if 0 < w < n and np.array_equal(allowed, (cols <= rows) & (cols > rows - w)) else None


def window_rows(scn: Scenario, t: int) -> int:
    """Rows a decoder must keep after step t: all t, or under a causal sliding window the last w
    (Mistral's rolling buffer): no later query reads a key older than that."""
    w = rolling_window(scn)
    return t if w is None else min(t, w)


def kv_representatives(scn: Scenario) -> list[int]:
    """For each K/V head, the first query head that reads it (its HeadStep carries that cache)."""
    readers = [scn.kv_head(h) for h in range(scn.heads)]
    return [readers.index(kv) for kv in range(scn.groups)]
