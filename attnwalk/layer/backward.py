"""The backward pass: the layer's own graph (graph.py) walked once in reverse, from the loss's
gradient back to the weights.

Each stage keeps its backward beside its forward (graph.Backward, as micrograd keeps `_backward`
beside each op): given ∂L/∂ of its output, it returns ∂L/∂ of each input. This module only walks
the graph the other way round and adds up what arrives, the reverse of walk.py's evaluation:

    the stages made from every head (O, concat)    reversed, once
    each head's stages (Z, A, S, QKᵀ, …)           reversed, per head, from its own blocks
    each head's share of Q, K, V                   summed into its block (a K/V head's block is
                                                   the sum of the query heads that share it)
    the stages before the heads (V, K, Q, X)       reversed, once

A name read by several stages (X by Q, K and V) gets the sum of what each passes back. A stage
that passes nothing into an input says so with None (P, ALiBi's B, the scores under uniform
weights); such a gradient is exactly 0, and is stored as zeros, so every mode has the same
matrices. The loss is not a stage (features/target.py): its gradient is the seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer.graph import Graph, Stage, blocks, needed, segments
from attnwalk.layer.walk import Walk, whole

if TYPE_CHECKING:
    from attnwalk.layer.graph import Context

Seeds = Mapping[tuple[str, "int | None"], np.ndarray]  # (stage key, head or None) -> ∂L/∂ of it


@dataclass(eq=False)
class Grads:
    """∂L/∂ of every matrix the layer's output is made from, for one walk and one loss."""

    walk: Walk
    loss: float
    path: Graph  # the stages the gradient goes back through, in forward order
    mats: dict[str, np.ndarray]  # of the stages computed once: Q, K, V full width, X, concat, O
    heads: list[dict[str, np.ndarray]]  # of each head's stages, and its share of Q, K, V (its block)
    params: dict[str, np.ndarray]  # of the parameters: W_Q, W_K, W_V, W_O, w_a, …

    def of(self, key: str, head: int | None = None) -> np.ndarray:
        """∂L/∂ of stage or parameter `key`: of head `head`'s stage (or its share of Q, K, V) when
        a head is given, else of the matrix computed once (Q, K, V full width)."""
        if head is not None:
            return self.heads[head][key]
        return self.params[key] if key in self.params else self.mats[key]


def output_of(stages: Graph) -> str:
    """The key of the layer's output Y among `stages`: the block's output (roles.block_output: the
    FFN's Y, the residual's H, else W_O's O or concat), what an output target compares."""
    from attnwalk.layer.roles import block_output

    return block_output(stages).key


def output_key(walk: Walk) -> str:
    return output_of(walk.computed)


def path_of(computed: Graph, end: str | None = None) -> Graph:
    """The stages the layer's output is made from (what a gradient can reach), in order, and those
    `end` is made from, the stage the loss reads (the next-token logits, after the output); a
    UsageError naming the first one whose backward is not known."""
    path = needed(computed, [output_of(computed), *([end] if end else [])])
    for stage in path:
        if stage.compute is not None and stage.inputs and stage.backward is None:
            raise UsageError(f"the backward pass cannot go through stage {stage.key}: its gradient "
                             "is not worked out (attnwalk grad takes scenario files, not real models)")
    return path


def objective(scn):
    """The feature that gives `scn` its loss (features/target.py: `loss`, `reads`, its stage and
    cells), found among the scenario's features as decoding finds why it cannot run: the layer
    asks the scenario, it does not import a feature. UsageError when the scenario has none."""
    for feature in scn.features:
        if hasattr(feature, "loss"):
            return feature
    raise UsageError(f"{scn.label}: has no target, so there is no loss to differentiate")


def loss_end(scn) -> str:
    """The stage `scn`'s loss reads, where the backward pass starts (path_of's end)."""
    return objective(scn).reads(scn)


def backward(walk: Walk, seeds: Seeds, loss: float) -> Grads:
    """∂L/∂ of every stage and parameter on the path to the output, from `seeds`: the gradient
    the loss gives the stage it reads ((key, None) for a stage computed once, (key, h) for head
    h's)."""
    scn = walk.scenario
    path = path_of(walk.computed, loss_end(scn))
    shared: dict[str, np.ndarray] = {}
    heads: list[dict[str, np.ndarray]] = [{} for _ in range(scn.heads)]
    params: dict[str, np.ndarray] = {}
    for (key, head), g in seeds.items():
        _add(shared if head is None else heads[head], key, g)
    ctx = whole(scn, walk.mode, walk.amplify)
    with np.errstate(over="ignore", invalid="ignore"):
        for stages in reversed(blocks(path)):  # the last block first
            _block_back(walk, stages, ctx, shared, heads, params)
    _zeros_where_none(walk, path, shared, heads, params)
    return Grads(walk, loss, path, shared, heads, params)


def _block_back(walk: Walk, path: Graph, ctx: Context, shared: dict, heads: list[dict], params: dict) -> None:
    """One block's stages passed back, the reverse of its evaluation: after the heads, each head's,
    each head's share of Q, K, V into its block, before the heads."""
    scn = walk.scenario
    before, per_head, after = segments(path)
    per_head_keys = {s.key for s in per_head}
    for stage in reversed(after):
        def value(name: str) -> object:
            return [h.mats[name] for h in walk.heads] if name in per_head_keys else _forward(walk, name)

        def put(name: str, g: object, param: bool) -> None:
            if name in per_head_keys:
                for h, g_h in enumerate(g):  # type: ignore[arg-type]
                    _add(heads[h], name, g_h)
            else:
                _add(params if param else shared, name, g)

        _pass_back(stage, ctx, shared.get(stage.key), walk.mats[stage.key], value, put)
    for h in range(scn.heads):
        ctx.head = h
        own = walk.heads[h].mats  # its per-head matrices and its blocks of Q, K, V

        def value(name: str) -> object:
            return own[name] if name in own else _forward(walk, name)

        def put(name: str, g: object, param: bool) -> None:
            _add(params if param else heads[h] if name in own else shared, name, g)

        for stage in reversed(per_head):
            _pass_back(stage, ctx, heads[h].get(stage.key), own[stage.key], value, put)
    for stage in before:  # each head's share of a split matrix, into its block
        if stage.split:
            _fold_heads(stage, walk, heads, shared)
    for stage in reversed(before):
        if stage.compute is None:
            continue

        def put(name: str, g: object, param: bool) -> None:
            _add(params if param else shared, name, g)

        _pass_back(stage, ctx, shared.get(stage.key), walk.mats[stage.key],
                   lambda name: _forward(walk, name), put)


def _pass_back(stage: Stage, ctx: Context, d: np.ndarray | None, out: np.ndarray, value, put) -> None:
    """Stage `stage`'s backward at ctx's rows: the gradients of its inputs, each given to `put`
    (name, gradient, is it a parameter). Nothing arrived (d None): nothing to pass back."""
    if d is None or not stage.inputs:
        return
    ctx.here = ctx.rows if stage.rows == "n" else ctx.key_rows
    grads = stage.backward.grad(ctx, d, out, *(value(name) for name in stage.inputs))
    first_param = len(stage.reads) + len(stage.keys)
    for i, (name, g) in enumerate(zip(stage.inputs, grads)):
        if g is not None:
            put(name, g, i >= first_param)


def _forward(walk: Walk, name: str) -> object:
    return walk.mats[name] if name in walk.mats else walk.scenario.param(name)


def _add(into: dict, key: str, g: np.ndarray) -> None:
    """into[key] += g, never in place: a gradient may be a view of another (concat's blocks)."""
    g = np.asarray(g, dtype=np.float64)
    into[key] = g if key not in into else into[key] + g


def _fold_heads(stage: Stage, walk: Walk, heads: list[dict], shared: dict) -> None:
    """∂L/∂Q (K, V) full width: head h's share in its block; with grouped heads a K/V head's block
    is the sum of the shares of the query heads that read it."""
    scn = walk.scenario
    if not any(stage.key in h for h in heads):
        return
    M = walk.mats[stage.key]
    count = scn.groups if stage.shared else scn.heads
    width = M.shape[1] // count
    G = np.zeros_like(M) if stage.key not in shared else shared[stage.key].copy()  # added to in place
    for h, own in enumerate(heads):
        if stage.key in own:
            b = scn.kv_head(h) if stage.shared else h
            G[:, b * width:(b + 1) * width] += own[stage.key]
    shared[stage.key] = G


def _zeros_where_none(walk: Walk, path: Graph, shared: dict, heads: list[dict], params: dict) -> None:
    """A gradient nothing reached is exactly 0 (the scores under uniform weights, W_V when the
    loss reads only A): stored as zeros, so that every mode and target has the same matrices. The
    layer's inputs (E, P, ALiBi's B: stages made from nothing) keep only what reached them."""
    for stage in path:
        if stage.compute is None or not stage.inputs:
            continue
        if stage.per_head:
            for h, own in enumerate(heads):
                own.setdefault(stage.key, np.zeros_like(walk.heads[h].mats[stage.key]))
            continue
        shared.setdefault(stage.key, np.zeros_like(walk.mats[stage.key]))
        for h, own in enumerate(heads):  # each head's block of Q, K, V
            if stage.key in walk.heads[h].mats:
                own.setdefault(stage.key, np.zeros_like(walk.heads[h].mats[stage.key]))
    for stage in path:
        for name in stage.params:
            params.setdefault(name, np.zeros_like(np.asarray(walk.scenario.param(name), dtype=np.float64)))
