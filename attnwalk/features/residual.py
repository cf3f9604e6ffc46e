"""The residual connection after attention (`residual: true`), as every Transformer block has one:

    H = X + O        (X + Z, or X + concat, where there is no W_O)

The attention's output is added to the very rows that entered the layer: attention writes a
correction into the residual stream instead of replacing it (He et al., 2016; Vaswani et al.,
2017). Behind a pre-norm (`norm: layer | rms`, features/norm.py) the projections read LN(X), but
the sum adds X itself: the stream is never normalised. Under `norm_placement: post` the sum is
normalised after it, LN(X + O), as the original Transformer did; the norm module says which stage
stands there (`norm.after_sum`).

The output must be as wide as X (d_model): W_O's O, or every head's Z side by side when
h · d_v = d_model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.features import norm
from attnwalk.layer import cells, gradcells, roles
from attnwalk.layer.graph import Backward, Stage, fixed_terms, insert_after, symbol_of

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "residual"
KEYS = ("residual",)
KEY = "res_attn"  # the stage's key; printed H


def active(scn: Scenario) -> bool:
    return bool(scn.setting(NAME))


def on(d: Draft) -> bool:
    """Has the draft a residual (for the FFN, which reads the stream it makes)?"""
    return bool(d.settings.get(NAME))


def read(d: Draft) -> None:
    """`residual: true | false` (false unless given)."""
    f, top = d.f, d.top
    given = f.boolean(top["residual"], "residual") if "residual" in top else False
    if not given:
        if norm.placed_after_sums(d):
            raise f.error("norm_placement", top["norm_placement"], "norm_placement: post normalises "
                          "each residual sum, LN(X + O), and this layer has none: add residual: true, "
                          "or use norm_placement: pre")
        return
    width = d.main.d_model if d.W_O is not None else d.heads * d.d_v
    if width != d.main.d_model:
        what = "Z" if d.heads == 1 else "concat, every head's Z side by side,"
        raise f.error("residual", top["residual"], f"the residual adds the attention's output to X, so "
                      f"they must be as wide: {what} has h·d_v = {width} columns and X has d_model = "
                      f"{d.main.d_model}; add W_O ((h·d_v) × d_model) to bring it back to d_model")
    d.settings[NAME] = True


def _sum(ctx: Context, X: np.ndarray, O: np.ndarray) -> np.ndarray:
    return X + O  # (n, d_model) + (n, d_model)


def _formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    return f"H = {_operand(stage.reads[0], scn)} + {_operand(stage.reads[1], scn)}"


def _operand(key: str, scn: Scenario) -> str:
    """How the sum names what it adds: one head's concat is its Z."""
    return "Z" if key == roles.CONCAT and scn.heads == 1 else symbol_of(key, scn)


def cell(c: Cell) -> list:
    """H[i, j] = X[i, j] + O[i, j], and the row it is in, each from the digits printed."""
    names = tuple(_operand(name, c.scn) for name in c.stage.reads)
    return cells.stream_sum(c, names, "residual.cell")


def _step(scn: Scenario, mode: Mode, x: str, o: str) -> str:
    return f"{x} + {o}"


def _grad(ctx: Context, d: np.ndarray, out: np.ndarray, X: np.ndarray, O: np.ndarray) -> tuple:
    return d, d  # a sum passes its gradient to both summands unchanged


# On ∂L/∂X: the sum H = X + O passes ∂L/∂H back to X besides the projections' (or the norm's) part
GRAD_NOTES = {"X": ("residual.grad_x",)}

STAGES = (
    Stage(KEY, "H", "H = $0 + $1", "n", "d_model", _sum, reads=("X", "O"), formula_for=_formula, worked=cell,
          step=_step, overflow="use smaller embeddings or weights", aliases=("h", "residual", "resid"),
          backward=Backward(_grad, fixed_terms("{d}", "{d}"), gradcells.passed)),
)


def extend(stages: list[Stage], scn: Scenario) -> None:
    out = roles.output(tuple(stages))  # O, or concat: the attention's output
    insert_after(stages, out.key, STAGES[0]._replace(reads=("X", out.key)))
    after = norm.after_sum(scn, KEY, STAGES[0].symbol, second=False)  # post placement: LN(H) stands after the sum
    if after:
        insert_after(stages, KEY, *after)
