"""The JSON of `attnwalk grad` and `attnwalk train`, at full float64 precision.

    grad   {"name", "tokens", "mode", "loss", "target", "shape",
            "grads": {"Y", "Z", "A", "S", "QK^T", "Q", "K", "V", "X", "W_Q", "W_K", "W_V", …}}
    train  {"name", "tokens", "mode", "lr", "head", "layer", "steps": [{"step": 0, "loss", "grad_norm", "A"}, …]}
           "A" is head "head"'s weights in block "layer" (1: the first block's); "grad_norm" is
           |∂L/∂W|, as the printed table says it. A run on drawn sequences (the induction
           lesson's `sequences:`) writes instead of A what its feature measures of every head of
           every block: "loss_repeat" and "heads": [{"layer", "head", "previous_token",
           "induction"}] (the scores as `attnwalk heads` defines them, on the scenario's tokens);
           each head's A is the live view's to show, not 500 steps' JSON

Each gradient has the shape of the matrix it is the gradient of, as `export` writes that matrix:
with several heads, `grads.heads` holds each head's (its share of Q, K, V, and its QK^T, S, A, Z,
Q_rot, K_rot, S+B where the layer has them), and Q, K, V and the weights' stay full width (with
grouped heads, K and V as wide as the K/V heads: a K/V head's block sums the shares of the query
heads that read it). S is the scaled scores before the mask and the bias.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from attnwalk.layer.backward import Grads, loss_end, objective, output_key, path_of
from attnwalk.layer.train import Step
from attnwalk.layer.walk import Walk
from attnwalk.numbering import shown


def grad_data(grads: Grads) -> dict[str, Any]:
    walk = grads.walk
    scn = walk.scenario
    stages = [s for s in grads.path if s.compute is not None and s.inputs]  # not E, P, B
    out: dict[str, Any] = {"Y": grads.mats[output_key(walk)].tolist()}
    for stage in reversed(stages):  # as the backward walk meets them
        if stage.per_head and scn.heads > 1:
            continue
        if stage.key == "concat" and scn.heads == 1 and scn.W_O is None:
            continue  # one head's concat is its Z, and Y
        out[stage.key] = (grads.heads[0] if stage.per_head else grads.mats)[stage.key].tolist()
    if scn.heads > 1:
        keys = [s.key for s in stages if s.per_head or s.key in grads.heads[0]]
        out["heads"] = [{key: own[key].tolist() for key in keys} for own in grads.heads]
    out.update({name: g.tolist() for name, g in grads.params.items()})
    data: dict[str, Any] = {"name": scn.name, "tokens": list(scn.tokens), "mode": walk.mode.name,
                            "loss": grads.loss, "grads": out,
                            "shape": {"n": scn.n, "m": scn.m, "d_model": scn.d_model, "d_k": scn.d_k,
                                      "d_v": scn.d_v, "heads": scn.heads, "kv_heads": scn.groups}}
    objective(scn).export(walk, data)  # the target, as the scenario gives it
    return data


def grad_numbers(walk: Walk) -> int:
    """How many numbers grad_data will write for `walk`'s backward pass, from the forward matrices'
    shapes (each gradient has its matrix's shape): counted before the backward pass is computed."""
    scn = walk.scenario
    path = path_of(walk.computed, loss_end(scn))
    total = walk.mats[output_key(walk)].size  # Y
    for stage in path:
        if stage.compute is None or not stage.inputs:
            continue
        if stage.per_head:
            total += sum(head.mats[stage.key].size for head in walk.heads)
        else:
            total += walk.mats[stage.key].size
            if scn.heads > 1 and stage.key in walk.heads[0].mats:  # each head's share of Q, K, V
                total += sum(head.mats[stage.key].size for head in walk.heads)
        total += sum(np.size(scn.param(name)) for name in stage.params)
    return total


def train_data(steps: Iterable[Step], head: int, lr: float) -> dict[str, Any]:
    """Every step: its number (0: before any update), the loss, |∂L/∂W|, and head `head`'s weights
    A in the first block (on drawn sequences, every head's scores in their place)."""
    from attnwalk.layer import roles

    rows = []
    first = None
    for step in steps:
        first = first or step
        row = {"step": step.step, "loss": step.loss, "grad_norm": step.grad_norm}
        if "heads" not in step.numbers:
            row["A"] = step.walk.matrix(roles.softmaxes(step.walk.graph)[0].key, head).tolist()
        rows.append({**row, **step.numbers})
    scn = first.walk.scenario
    return {"name": scn.name, "tokens": list(scn.tokens), "mode": first.walk.mode.name, "lr": lr,
            "head": shown(head), "layer": 1, "steps": rows}


def runs_data(runs: Mapping[str, Iterable[Step]], head: int, lr: float) -> dict[str, Any]:
    """`train --format json`: one mode's run as train_data; with --compare, each mode's steps under
    "modes", beside the first's name, tokens, η and head."""
    data = {mode: train_data(run, head, lr) for mode, run in runs.items()}
    if len(data) == 1:
        return next(iter(data.values()))
    first = next(iter(data.values()))
    out = {key: first[key] for key in ("name", "tokens", "lr", "head", "layer")}
    out["modes"] = {mode: {"steps": d["steps"]} for mode, d in data.items()}
    return out
