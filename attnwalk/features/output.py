"""The output projection (`W_O`): O = concat · W_O maps the heads' outputs, side by side, back to
d_model, the width the next layer (and the residual stream) expects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnwalk.layer import cells
from attnwalk.layer.graph import Stage, amend, insert_after
from attnwalk.layer.stages import PRODUCT_BACK, projection, projection_formula

from attnwalk.reading.fields import shape_text

if TYPE_CHECKING:
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

STAGES = (
    Stage("O", "O", "O = $0 · W_O", "n", "d_model", projection, reads=("concat",), params=("W_O",),
          weight="W_O", weight_rows="d_v", formula_for=projection_formula, worked=cells.projected,
          overflow="use a smaller W_O", backward=PRODUCT_BACK),
)


KEYS = ("W_O",)


def active(scn: Scenario) -> bool:
    return scn.W_O is not None


def read(d: Draft) -> None:
    """`W_O`: (h·d_v) × d_model, every query head's Z side by side back to d_model."""
    if "W_O" not in d.top:
        return
    f, node = d.f, d.top["W_O"]
    W_O = f.matrix(node, "W_O")
    concat = d.heads * d.d_v  # every query head's Z, d_v wide
    if W_O.shape != (concat, d.main.d_model):
        raise f.error("W_O", node, f"W_O is {shape_text(W_O)}, but it must be "
                      f"(h·d_v) × d_model = {concat} × {d.main.d_model}")
    d.W_O = W_O


def extend(stages: list[Stage], scn: Scenario) -> None:
    insert_after(stages, "concat", *STAGES)
    # the learned parameters after Z: W_O (Z's note says nothing is learned between QKᵀ and Z)
    amend(stages, "Z", notes=lambda scn, mode, notes: [
        "truth.no_parameters_w_o" if n == "truth.no_parameters" else n for n in notes])
