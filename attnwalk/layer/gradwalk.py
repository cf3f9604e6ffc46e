"""The backward walk as a learner steps through it: one screen per gradient, from the loss back to
the weights, each a stage of a Walk (walk.py) so that every screen, key and view of the forward
walk shows it as it shows a forward stage.

The gradient stages are made from the layer's own graph, never listed by hand: ∂L/∂F for each
stage F the forward walk shows that the gradient reaches, and ∂L/∂W for each parameter. Each is
shown as soon as it is complete, that is when every stage that reads F has passed its part back:
∂L/∂V right after ∂L/∂Z (only Z reads V), ∂L/∂X last (Q, K and V all read it). With several
heads each head's share of Q, K and V comes in its own screens, and the full-width ∂L/∂Q (K, V)
after the heads. A stage's formula and worked cell are the sum of what its readers' backwards
say (graph.Backward.terms and .cell, assembled in gradscreens.py). The forward matrices stay in the
walk, hidden, for the cells.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer import gradscreens
from attnwalk.layer.backward import Grads, loss_end, objective, path_of
from attnwalk.layer.graph import Graph, Stage, blocks as block_stages, segments
from attnwalk.layer.roles import MIXED
from attnwalk.layer.stages import blocks
from attnwalk.layer.walk import Head, Walk
from attnwalk.numbering import shown

if TYPE_CHECKING:
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

@dataclass(eq=False)
class GradWalk(Walk):
    """A Walk whose shown stages are the gradients (the forward ones hidden, for the cells)."""

    grads: Grads | None = None
    forward: Walk | None = None
    sources: dict | None = None  # gradient key -> (forward key, head view?, param?)


def grad_symbol(symbol: str) -> str:
    """∂L/∂Z, ∂L/∂(QKᵀ), ∂L/∂(S + B): bracketed where the symbol is more than one name."""
    return f"∂L/∂({symbol})" if ("ᵀ" in symbol or " " in symbol) else f"∂L/∂{symbol}"


def grad_stages(scn: Scenario, mode: Mode | str = "scaled") -> tuple[Stage, ...]:
    """The screens of `scn`'s backward walk, the loss first, made from its graph alone (no numbers):
    what the walk shows, and what a lesson's notes may name."""
    from attnwalk.layer.modes import mode_named

    mode = mode_named(mode)
    computed = tuple(s for s in scn.graph if s.in_mode(mode))
    path = path_of(computed, loss_end(scn))  # to the output, and on to the stage the loss reads (ℓ)
    shown = {s.key for s in computed if s.shown}
    by_key = {s.key: s for s in path}
    last = max((s.block for s in path), default=0)  # the loss reads the last block: its screens come first
    return (objective(scn).LOSS_STAGE._replace(block=last),
            *(_grad_stage(key, scope, by_key, scn) for key, scope in _order(path, scn, shown)))


def grad_walk(grads: Grads) -> GradWalk:
    """The backward walk of `grads`: the loss, then every gradient in the order it completes."""
    fwd = grads.walk
    scn = fwd.scenario
    shown = grad_stages(scn, fwd.mode)
    stages: list[Stage] = [s._replace(shown=False) for s in fwd.graph] + list(shown)
    sources = {stage.key: _source_of(stage.key, scn) for stage in shown[1:]}
    mats = dict(fwd.mats)
    heads = [dict(h.mats) for h in fwd.heads]
    mats[shown[0].key] = objective(scn).loss(fwd).rows
    for stage in shown[1:]:
        key, view, param = sources[stage.key]
        if stage.per_head:
            for h, own in enumerate(heads):
                own[stage.key] = grads.heads[h][key]
        else:
            mats[stage.key] = np.atleast_2d(grads.params[key]) if param else grads.mats[key]  # w_a: 1 × d_k
    named = dataclasses.replace(scn, dimensions={**scn.dimensions, "L_i": {"": ("L_i",)}})  # the loss column
    return GradWalk(scenario=named, mode=fwd.mode, amplify=fwd.amplify, graph=tuple(stages), mats=mats,
                    heads=[Head(h, own) for h, own in enumerate(heads)], source=fwd.source,
                    grads=grads, forward=fwd, sources=sources)


def _source_of(key: str, scn: Scenario) -> tuple[str, bool, bool]:
    """(forward key, a head's share?, a parameter?) of gradient stage `key`."""
    name = key[1:]
    if name.endswith("_h") and any(s.key == name[:-2] for s in scn.graph):
        return name[:-2], True, False
    return name, False, not any(s.key == name for s in scn.graph)


def _order(path: Graph, scn: Scenario, shown: set[str]) -> list[tuple[str, str]]:
    """(forward key, scope) of each gradient screen in the order it completes. Scope: "once" (a
    stage computed once), "head" (a per-head stage), "view" (a head's share of Q, K, V), "split"
    (Q, K, V full width, after the heads), "param" (a weight). The layer's inputs (E, P, ALiBi's
    B: made from nothing) and hidden stages have no screen. Several blocks: the last block's
    first. A name is complete when every stage of the path that reads it has passed back (X, read
    by Q, K, V and by a residual after the heads, completes with the last of them)."""
    made = {s.key for s in path if s.inputs and s.key in shown}  # what has a screen
    remaining: dict[str, int] = {}
    for stage in path:
        for name in stage.inputs:
            remaining[name] = remaining.get(name, 0) + 1
    out: list[tuple[str, str]] = []
    per_head = {s.key for s in path if s.per_head}
    read = {name for s in path for name in s.inputs}
    for stage in path:  # where the path ends: the output Y, or the stage the loss reads after it (ℓ)
        if stage.key in made and stage.key not in per_head and stage.key not in read:
            out.append((stage.key, "once"))
    for stages in reversed(block_stages(path)):
        out += _block_order(list(stages), scn, made, remaining)
    return out


def _block_order(path: list[Stage], scn: Scenario, made: set[str], remaining: dict[str, int]) -> list[tuple[str, str]]:
    """_order's screens of one block's stages."""
    before, per_head, after = segments(tuple(path))
    per_head_keys = {s.key for s in per_head}
    split = {s.key for s in before if s.split}
    one = scn.heads == 1
    out: list[tuple[str, str]] = []
    # each head's mixing Z (read by concat after the heads): the first of a head's screens
    heads: list[tuple[str, str]] = [(s.key, "head") for s in per_head if s.text_key == MIXED]
    later: list[tuple[str, str]] = []  # the per-head stages' parameters (w_a): after the heads

    def once(name: str, param: bool) -> None:
        if param:
            out.append((name, "param"))
        elif name in made and name not in per_head_keys and name not in split:
            out.append((name, "once"))

    def per(name: str, param: bool) -> None:
        if param:
            if (name, "param") not in later:
                later.append((name, "param"))
        elif name in per_head_keys and name in made:
            heads.append((name, "head"))
        elif name in split:  # with one head, its share is the whole of it
            heads.append((name, "head" if one else "view"))

    _completed(after, once, remaining)
    _completed(per_head, per, remaining)
    out += heads
    if not one:
        out += [(s.key, "split") for s in reversed(before) if s.key in split]
    out += later
    _completed(before, once, remaining)
    return out


def _completed(section: list[Stage], emit, remaining: dict[str, int]) -> None:
    """Walk `section` in reverse; each input whose readers have all passed back (`remaining`
    counts them over the whole path) is complete: emit(name, is it a parameter), a stage's
    parameters first, then what it reads whole, then the rest (Z = A · V: ∂L/∂V before ∂L/∂A,
    whose path goes on)."""
    for stage in reversed(section):
        first_param = len(stage.reads) + len(stage.keys)
        named = list(enumerate(stage.inputs))
        for i, name in named[first_param:] + named[len(stage.reads):first_param] + named[:len(stage.reads)]:
            remaining[name] -= 1
            if remaining[name] == 0:
                emit(name, i >= first_param)


def _grad_stage(key: str, scope: str, by_key: dict[str, Stage], scn: Scenario) -> Stage:
    """The screen of ∂L/∂`key`: its shape, the formula made of its readers' terms, its cell."""
    if scope == "param":
        owner = next(s for s in by_key.values() if key in s.params)
        rows, cols = _param_axes(key, owner, scn)
        symbol = grad_symbol(owner.backward.symbols.get(key, key))
        return Stage(f"d{key}", symbol, f"{symbol} = …", rows, cols, None, reads=(f"d{owner.key}",),
                     block=owner.block, base=_base_param(key, owner),
                     formula_for=gradscreens.formula, variants=gradscreens.variants, notes=gradscreens.notes_for(f"d{key}"),
                     worked=gradscreens.chain, aliases=(f"d{key}".lower(),))
    F = by_key[key]
    symbol = grad_symbol(F.symbol + ("_h" if scope == "view" else ""))
    cols = F.cols
    if scope == "split" or (scope == "once" and F.split and scn.heads > 1 and key != "concat"):
        cols = ("g·" if F.shared and scn.groups < scn.heads else "h·") + F.cols
    gkey = f"d{key}_h" if scope == "view" else f"d{key}"
    readers = tuple(f"d{s.key}" for s in by_key.values() if key in s.inputs)
    if scope == "split":
        readers = (f"d{key}_h",)
    base = "" if not F.base else (f"d{F.base}_h" if scope == "view" else f"d{F.base}")
    return Stage(gkey, symbol, f"{symbol} = …", F.rows, cols, None, reads=readers, block=F.block, base=base,
                 per_head=scope in ("head", "view"), split=scope == "split", shared=F.shared,
                 formula_for=gradscreens.formula, variants=gradscreens.variants, notes=gradscreens.notes_for(gkey),
                 worked=gradscreens.chain, aliases=(gkey.lower(), gkey.lower().replace("^", "")))


def _base_param(key: str, owner: Stage) -> str:
    """The text of a later block's weight's gradient: block 1's (∂L/∂W_Q⁽²⁾ reads as ∂L/∂W_Q)."""
    suffix = f".{shown(owner.block)}"
    return f"d{key[:-len(suffix)]}" if owner.block and key.endswith(suffix) else ""


def _param_axes(key: str, owner: Stage, scn: Scenario) -> tuple[str, str]:
    """The named dimensions of a weight: W_Q is d_model × h·d_k, W_O is h·d_v × d_model."""
    W = np.asarray(scn.param(key))
    if W.ndim == 1:  # w_a: one number per dimension of q and k; a norm's γ, β: of its rows
        named = owner.backward.param_cols.get(key)  # as the stage names it (sinks: one per head)
        return "1", named or ("d_k" if owner.per_head else owner.cols)
    if key == owner.weight:
        count = "" if scn.heads == 1 else ("g·" if owner.shared and scn.groups < scn.heads else "h·")
        rows = owner.weight_rows if owner.weight_rows == "d_model" else f"h·{owner.weight_rows}"
        return (rows if scn.heads > 1 or rows == "d_model" else owner.weight_rows,
                owner.cols if owner.cols == "d_model" else count + owner.cols)
    return "d_model", "d_model"


def blocks_formula(symbol: str, scn: Scenario, shared: bool) -> str:
    """"[∂L/∂Q_1 | ∂L/∂Q_2]": the heads' shares side by side (K, V with grouped heads: each K/V
    head's block is the sum of its query heads' shares)."""
    if shared and scn.groups < scn.heads:  # "[∂L/∂K_1 + ∂L/∂K_2 | ∂L/∂K_3 + ∂L/∂K_4]": math only
        sums = [_elided([f"{symbol}_{shown(h)}" for h in range(scn.heads) if scn.kv_head(h) == g], " + ")
                for g in range(scn.groups)]
        return "[" + _elided(sums, " | ") + "]"
    return blocks(symbol, scn.heads)


def _elided(parts: list[str], sep: str) -> str:
    """parts joined by sep, the middle of more than three left out as stages.blocks does."""
    return sep.join(parts if len(parts) <= 3 else [parts[0], parts[1], "…", parts[-1]])


def in_mode(walk: GradWalk, mode: Mode | str) -> GradWalk:
    """The backward walk of the same scenario under another mode."""
    from attnwalk.layer.train import gradients
    from attnwalk.layer.walk import with_mode

    return grad_walk(gradients(with_mode(walk.forward, mode)))
