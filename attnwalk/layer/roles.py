"""Roles: what a surface asks the graph for, instead of a stage's name.

A screen, the quiz, decode or compare that needs "the scores the softmax reads" asks `logits`
and gets whatever stage holds that role in this scenario's layer — S, ALiBi's S + B, or a stage a
feature put between — with its key and symbol. The base layer's stages keep their names (the
softmax is A, the raw scores QKᵀ, the scaled scores S, the mixing Z); every stage a feature puts
in between is found by walking what each stage reads (graph.py), never by its name.

`slope` is the derivative of one stage's cell by the same cell of an earlier one, along the path
between them, from each stage's own backward (as micrograd's backward is a walk over the graph):
a unit gradient pushed back through every stage on the path. It is exact for the elementwise
stages that stand between the scores and the softmax (a bias, a cap, a transform of S).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer.graph import Graph, Stage, get, segments
from attnwalk.layer.walk import whole

if TYPE_CHECKING:
    from attnwalk.layer.walk import Walk

SOFTMAX = "A"  # the base layer's attention weights: softmax of what `logits` names
SCORES = "QK^T"  # the raw scores q_i · k_j
SCALED = "S"  # the scores divided by √d_k (or not, by the mode): what features build on
MIXED = "Z"  # the weights applied to the values
CONCAT = "concat"  # every head's Z side by side


def logits(graph: Graph) -> Stage:
    """The stage the softmax reads (before the mask and --amplify): S, S + B, or a feature's."""
    return get(graph, get(graph, SOFTMAX).reads[0])


def softmaxes(graph: Graph) -> tuple[Stage, ...]:
    """Each block's attention weights, block 1's first: A, then a later block's copy A⁽²⁾, …"""
    return tuple(s for s in graph if s.text_key == SOFTMAX)


def masked_view(graph: Graph) -> Stage | None:
    """The stage that shows the softmax's input with −∞ where the mask forbids (S + M), if any:
    the graph's stage of kind MASKED."""
    from attnwalk.layer.graph import MASKED

    return next((s for s in graph if s.kind == MASKED), None)


def output(graph: Graph) -> Stage:
    """The attention's output: the last projection made from every head's Z (W_O's O, a feature's),
    else the heads' Z side by side (concat: one head's Z itself). What a block adds after it (the
    residual, which adds the layer's input X back, and all that follows it: a norm, the FFN) is the
    block's, not the attention's: `block_output` is the end of the block."""
    before, _, after = segments(graph)
    ahead = {s.key for s in before}
    attention: list[Stage] = []
    for stage in after:
        if any(name in ahead for name in stage.reads):  # the residual: the layer's input added back
            break
        attention.append(stage)
    projected = [s for s in attention if s.weight]
    return projected[-1] if projected else get(graph, CONCAT)


def block_output(graph: Graph) -> Stage:
    """The block's output, what a next block or the unembedding reads: the last stage made from
    the heads whose columns are d_model (the FFN's Y = H + F, else the residual's H = X + O, or
    a norm after either under post placement), else the attention's `output` (O, or concat).

    Asked of the graph as a feature finds it while the layer is being built (the blocks feature
    and the unembedding ask it before adding their own stages: a final norm LN_f, made from the
    heads and d_model wide, would otherwise be found instead)."""
    _, _, after = segments(graph)
    wide = [s for s in after if s.cols == "d_model" and not s.per_head]
    return wide[-1] if wide else output(graph)


VOCAB = "vocab"  # the named dimension of a stage whose columns are the vocabulary's words


def next_token(graph: Graph) -> Stage | None:
    """The next-token probabilities (an unembedding's p): the last stage whose columns are the
    vocabulary, or None where the layer has no vocabulary."""
    found = [s for s in graph if s.cols == VOCAB]
    return found[-1] if found else None


def next_logits(graph: Graph) -> Stage:
    """The logits the next-token probabilities are made from (ℓ = Y · W_U): what p reads."""
    return get(graph, next_token(graph).reads[0])


def projected_from(graph: Graph, key: str = "Q") -> Stage:
    """What projection `key` (Q, K or V) reads: X, or a stage a feature put between (LN(X))."""
    return get(graph, get(graph, key).reads[0])


def path(graph: Graph, start: str, end: str) -> tuple[Stage, ...]:
    """The stages on a path from stage `start` to stage `end`, both excluded, in graph order:
    each is made from `start` (through what it reads) and `end` is made from it."""
    by_key = {s.key: s for s in graph}
    made_from_start = {start}
    for stage in graph:
        if any(name in made_from_start for name in stage.inputs):
            made_from_start.add(stage.key)
    feeds_end = {end}
    for stage in reversed(graph):
        if stage.key in feeds_end:
            feeds_end.update(stage.inputs)
    keys = (made_from_start & feeds_end) - {start, end}
    return tuple(by_key[k] for k in by_key if k in keys)


def score_stages(graph: Graph) -> tuple[Stage, ...]:
    """The per-head query × key stages the softmax's input is made from after the raw scores, in
    order: S alone in the base layer; S, B and S + B under ALiBi; whatever a feature adds. What a
    decode step shows between q_t · k_j and a_t."""
    target = logits(graph)
    wanted = {target.key}
    for stage in reversed(graph):
        if stage.key in wanted:
            wanted.update(stage.inputs)
    return tuple(s for s in graph if s.key in wanted and s.key != SCORES and s.per_head and s.square)


def slope(walk: Walk, head: int, upstream: str, downstream: str) -> np.ndarray:
    """∂downstream[i, j] / ∂upstream[i, j] for every cell of head `head`: a unit gradient at
    `downstream` passed back through each stage between, by its own backward (the stages between
    the scores and the softmax act cell by cell, so this is the chain rule's product of their
    slopes). 1 everywhere when the two are the same stage."""
    graph = walk.computed
    own = walk.heads[head].mats
    if upstream == downstream:
        return np.ones_like(own[downstream])
    between = path(graph, upstream, downstream)
    on_path = {upstream, *(s.key for s in between)}
    ctx = whole(walk.scenario, walk.mode, walk.amplify)
    ctx.head = head

    def value(name: str) -> object:
        if name in own:
            return own[name]
        return walk.mats[name] if name in walk.mats else walk.scenario.param(name)

    d = np.ones_like(own[downstream])
    for stage in reversed((*between, get(graph, downstream))):
        if stage.backward is None:
            raise ValueError(f"stage {stage.key} has no backward: no slope passes through it")
        ctx.here = ctx.rows if stage.rows == "n" else ctx.key_rows
        grads = stage.backward.grad(ctx, d, own[stage.key], *(value(name) for name in stage.inputs))
        index = next(i for i, name in enumerate(stage.inputs) if name in on_path)
        d = grads[index] if grads[index] is not None else np.zeros_like(d)
    return d
