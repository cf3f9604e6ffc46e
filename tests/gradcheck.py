"""Central finite differences through attnwalk's forward pass, for the gradient tests: the loss with
one cell of one matrix moved, every later stage computed again from it. The forward is the layer's
own (layer/walk.py's run over the scenario's graph); nothing of the backward pass is used."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np

from attnwalk.features.target import loss
from attnwalk.layer.graph import head_block, segments
from attnwalk.layer.modes import mode_named
from attnwalk.layer.walk import Head, Walk, run, whole

EPS = 1e-6


def loss_moved(scn, mode, key: str, head: int | None, cell: tuple, delta: float) -> float:
    """L with cell `cell` of stage `key` moved by `delta`: the matrix computed once (head None), or
    head `head`'s (its per-head stage, or its own copy of its block of Q, K, V)."""
    mode = mode_named(mode)
    graph = tuple(s for s in scn.graph if s.in_mode(mode))
    before, per_head, after = segments(graph)
    ctx = whole(scn, mode, 1.0)
    mats: dict = {}

    def moved(M):
        M = np.array(M, dtype=np.float64)
        M[cell] += delta
        return M

    def shared(name):
        return mats[name] if name in mats else scn.param(name)

    with np.errstate(over="ignore", invalid="ignore"):
        for stage in before:
            if stage.compute is None:
                continue
            mats[stage.key] = run(stage, ctx, shared)
            if head is None and stage.key == key:
                mats[key] = moved(mats[key])
        heads = []
        for h in range(scn.heads):
            ctx.head = h
            own = {s.key: head_block(s, mats[s.key], h, scn) for s in before if s.split}
            if head == h and key in own:
                own[key] = moved(own[key])
            for stage in per_head:
                own[stage.key] = run(stage, ctx, lambda name: own[name] if name in own else shared(name))
                if head == h and stage.key == key:
                    own[key] = moved(own[key])
            heads.append(own)
        per_head_keys = {s.key for s in per_head}
        for stage in after:
            mats[stage.key] = run(stage, ctx, lambda name: [own[name] for own in heads]
                                  if name in per_head_keys else shared(name))
            if head is None and stage.key == key:
                mats[key] = moved(mats[key])
    walk = Walk(scenario=scn, mode=mode, amplify=1.0, graph=scn.graph, mats=mats,
                heads=[Head(h, own) for h, own in enumerate(heads)])
    return loss(walk).value


def param_moved(scn, name: str, cell: tuple, delta: float):
    """`scn` with one entry of parameter `name` moved by `delta`."""
    W = np.array(scn.param(name), dtype=np.float64)
    W[cell] += delta
    if name in ("W_Q", "W_K", "W_V", "W_O"):
        return dataclasses.replace(scn, **{name: W})
    return dataclasses.replace(scn, params=MappingProxyType({**scn.params, name: W}))


def numeric(scn, mode, key: str, head: int | None, shape: tuple, param: bool, cells) -> np.ndarray:
    """∂L/∂ of the chosen cells by central differences (NaN elsewhere)."""
    from attnwalk.layer.walk import compute

    out = np.full(shape, np.nan)
    for cell in cells:
        if param:
            up = loss(compute(param_moved(scn, key, cell, EPS), mode)).value
            down = loss(compute(param_moved(scn, key, cell, -EPS), mode)).value
        else:
            up = loss_moved(scn, mode, key, head, cell, EPS)
            down = loss_moved(scn, mode, key, head, cell, -EPS)
        out[cell] = (up - down) / (2 * EPS)
    return out


def cells_of(shape: tuple, most: int, seed: int = 0) -> list[tuple]:
    """Every cell of a small matrix; a fixed sample of `most` of a larger one."""
    every = list(np.ndindex(*shape))
    if len(every) <= most:
        return every
    rng = np.random.default_rng(seed)
    return [every[i] for i in sorted(rng.choice(len(every), most, replace=False))]


def relative_error(numeric_: np.ndarray, analytic: np.ndarray) -> float:
    """Largest gap over the cells differenced, relative to the gradient's size there."""
    chosen = ~np.isnan(numeric_)
    gap = np.max(np.abs(numeric_[chosen] - analytic[chosen]), initial=0.0)
    size = max(np.max(np.abs(analytic[chosen]), initial=0.0), np.max(np.abs(numeric_[chosen]), initial=0.0))
    return 0.0 if gap == 0.0 else gap / max(size, 1e-6)
