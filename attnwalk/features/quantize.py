"""A scenario that quantizes its own weight matrices (`quantize: q4_1 | q8_0`), as llama.cpp stores
a model in a GGUF file: W_Q, W_K, W_V (and W_O) become the numbers read back from their blocks,
and the layer multiplies by those. `attnwalk compare NAME --quantize none` sets the same layer at
float beside it (scenario/variant.py).

    Q8_0   each block keeps d = max|w| / 127 and an 8-bit q a weight:  w = d·q
    Q4_1   each block keeps d = (max − min) / 15 and m = min, a 4-bit q a weight:  w = d·q + m

The blocks run down each column of W (one output; one row of a GGUF tensor), 32 weights long, or
the whole column where d_model is under 32 (layer/quants.py). A Q, K, V or O cell shows the block
behind its column's first weight, and the column as written.
"""

from __future__ import annotations

from dataclasses import replace as replaced
from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.layer import quants
from attnwalk.layer.graph import amend, get, has, replace
from attnwalk.layer.quantcells import block_lines
from attnwalk.layer.quants import Quantization

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Stage
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "quantize"
KEYS = ("quantize",)
STAGES: tuple = ()  # no stage of its own: the projections multiply by other numbers


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def read(d: Draft) -> None:
    if "quantize" not in d.top:
        return
    f, node = d.f, d.top["quantize"]
    kind = f.choice(node, "quantize", ("none", *quants.KINDS))
    if kind == "none":
        return
    floats = {name: W for name, W in (("W_Q", d.W_Q), ("W_K", d.W_K), ("W_V", d.W_V), ("W_O", d.W_O))
              if W is not None}
    made = {}
    for name, W in floats.items():
        why = quants.refusal(name, W, kind)
        if why is not None:
            raise f.error("quantize", node, f"quantize: {why}")
        made[name] = quants.quantized(W, kind)
        W.flags.writeable = False  # kept as written, frozen as the loader freezes what the layer reads
    d.W_Q, d.W_K, d.W_V = made["W_Q"], made["W_K"], made["W_V"]
    d.W_O = made.get("W_O")
    d.settings[NAME] = Quantization(kind.upper(), floats)


def trained_keys(scn: Scenario) -> dict[str, Any]:
    """`train -o`: gradient descent moved the numbers read back off the grid, and the trained layer
    multiplies by them as they are; quantizing them again would be another layer."""
    return {"quantize": "none"}


def _held(scn: Scenario) -> Quantization:
    return scn.setting(NAME)


def kind_of(scn: Scenario) -> str:
    """What `scn`'s weights are: none (float, as written), q4_1 or q8_0."""
    held = _held(scn)
    return "none" if held is None else held.kind.lower()


def requantized(scn: Scenario, kind: str) -> Scenario:
    """Scenario `scn` with its weight matrices as written ("none") or quantized to `kind`, from the
    floats the file wrote (a quantized scenario keeps them). Unchecked: scenario/variant.py checks
    the blocks and names the result for compare."""
    held = _held(scn)
    floats = held.floats if held is not None else {
        name: scn.param(name) for name in quants.WEIGHTS if name != "W_O" or scn.W_O is not None}
    if kind == "none":
        return replaced(scn.with_setting(NAME, None), **floats)
    made = {name: quants.quantized(W, kind) for name, W in floats.items()}
    for W in made.values():
        W.flags.writeable = False
    return replaced(scn.with_setting(NAME, Quantization(kind.upper(), floats)), **made)


def _with_block(stage: Stage):
    inner, weight = stage.worked, stage.weight

    def worked(c: Cell) -> list:  # under the dot product: the column as written, then its first block
        held = _held(c.scn)
        W = held.floats[weight]
        block = quants.block(W, held.kind, 0, c.col)
        col = c.cols[c.col]
        lines = [*inner(c), c.prose(c.say("quantize.column", weight=weight, col=col, kind=held.kind)),
                 f"{weight}[:, {col}] = {c.vec(W[:, c.col])}"]
        lines += block_lines(c, weight, block)
        if block.size < quants.BLOCK:
            lines.insert(-2, c.prose(c.say("quantize.short_block", size=block.size, block=quants.BLOCK)))
        return lines
    return worked


def extend(stages: list[Stage], scn: Scenario) -> None:
    for key in ("Q", "K", "V", "O"):
        if has(stages, key):
            replace(stages, key, worked=_with_block(get(stages, key)))
    amend(stages, "Q", notes=lambda scn, mode, notes: [*notes, "quantize.q_note"])
    # nothing else changes: the walk, decode, compare and export multiply by the numbers read back


# the backward walk: each weight's gradient is taken at the numbers read back, and says so
GRAD_NOTES = {weight: ("grad.quantized",) for weight in ("W_Q", "W_K", "W_V", "W_O")}


def note_values(scn: Scenario) -> dict[str, Any]:
    """{quant_kind}, and {quant_name}: how compare names this scenario (a built-in by its name)."""
    return {"quant_kind": _held(scn).kind, "quant_name": scn.name if scn.builtin else (scn.path or scn.name)}


def export(walk: Walk, data: dict[str, Any]) -> None:
    """`quantize`: the type, the block length, and the weights as written (`weights` holds the
    numbers read back, which the layer multiplies by)."""
    held = _held(walk.scenario)
    data["quantize"] = {"type": held.kind, "block": quants.block_size(walk.scenario.d_model),
                        "float_weights": {name: W.tolist() for name, W in held.floats.items()}}


# -- the quantized lesson's own questions (tutor/lessonquiz.py asks them; their text is
# quiz.lesson.quantized.*): the numbers each needs, or None where the walk does not show the point

def _collapsed(walk: Walk) -> dict | None:
    """Two weights of W_K's outlier block that 4 bits put on one level, and why."""
    held = _held(walk.scenario)
    if held is None or held.kind != "Q4_1":
        return None
    W = held.floats["W_K"]
    j = int(np.argmax(np.abs(W).max(axis=0)))  # the column holding the outlier
    column, back = W[:, j], walk.scenario.W_K[:, j]
    big = int(np.argmax(np.abs(column)))
    pairs = [(a, b) for a in range(len(column)) for b in range(a + 1, len(column))
             if big not in (a, b) and column[a] != column[b] and back[a] == back[b]]
    if not pairs or quants.block_size(len(column)) != len(column):  # the lesson's one block a column
        return None
    a, b = pairs[0]
    block = quants.block(W, held.kind, a, j)
    rest = np.delete(column, big)
    return {"col": j + 1, "column": column, "r1": a + 1, "r2": b + 1, "w1": float(column[a]),
            "w2": float(column[b]), "level": float(back[a]), "outlier": float(column[big]),
            "d": block.fields["d"], "m": block.fields["m"], "q": block.q, "rest_lo": float(rest.min()),
            "rest_hi": float(rest.max()), "d_rest": float((rest.max() - rest.min()) / 15)}


def _finer(walk: Walk) -> dict | None:
    """The same block at Q8_0: the focus row's first choice, at float, at 4 bits and at 8."""
    from attnwalk.layer.axes import token_labels
    from attnwalk.layer.walk import compute

    scn, said = walk.scenario, _collapsed(walk)
    if said is None or scn.focus is None:
        return None
    i, keys = scn.focus, token_labels(scn.key_tokens)
    top = {kind: int(np.argmax(compute(requantized(scn, kind)).matrix("A", 0)[i]))
           for kind in ("none", "q8_0")}
    q4 = int(np.argmax(walk.matrix("A", 0)[i]))
    if top["none"] == q4 or top["q8_0"] != top["none"]:
        return None
    W, j = _held(scn).floats["W_K"], said["col"] - 1
    d8 = quants.block(W, "q8_0", 0, j).fields["d"]
    w8 = quants.quantized(W, "q8_0")[:, j]
    return {**said, "token": token_labels(scn.tokens)[i], "float_top": keys[top["none"]], "q4_top": keys[q4],
            "d8": d8, "w1_8": float(w8[said["r1"] - 1]), "w2_8": float(w8[said["r2"] - 1]),
            "ratio": round(said["d"] / d8)}


QUESTIONS = {"quantized": {"collapsed": _collapsed, "finer": _finer}}
