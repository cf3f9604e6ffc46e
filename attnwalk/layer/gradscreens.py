"""How one screen of the backward walk is made from the layer's graph: which forward stage a
gradient stage is of, which stages read it (and so pass its gradient back), its formula, text
variants and notes, and its worked cell: each reader's part, worked out by that reader's own
backward (gradcells.py, kept beside the forward as graph.Backward.cell), the loss's own part where
the loss reads it, and their sum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnwalk.layer.gradcells import d
from attnwalk.layer.graph import Stage, symbol_of
from attnwalk.layer.roles import SCALED, logits, output, projected_from
from attnwalk.numbering import shown

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario


# -- which forward stage a gradient screen is of, and who passes it back ---------------------------


def source(scn: Scenario, key: str, mode: Mode) -> tuple[str, str]:
    """(forward key, scope) of gradient stage `key` ("dQ_h": ("Q", "view")); scope as gradwalk's."""
    name = key[1:]
    graph = {s.key: s for s in scn.graph}
    if name in graph:
        stage = graph[name]
        if stage.split and not stage.across and scn.heads > 1:
            return name, "split"
        return name, "head" if stage.per_head or stage.split and not stage.across else "once"
    if name.endswith("_h") and name[:-2] in graph:
        return name[:-2], "view"
    return name, "param"


def path(scn: Scenario, mode: Mode) -> tuple[Stage, ...]:
    """The forward stages the output is made from under `mode` (what the gradient goes through)."""
    from attnwalk.layer.backward import loss_end, path_of

    return path_of(tuple(s for s in scn.graph if s.in_mode(mode)), loss_end(scn))


def readers(scn: Scenario, mode: Mode, name: str, scope: str) -> list[tuple[Stage, int]]:
    """(stage, index) of each stage on the path that reads `name` as its index-th input, among the
    per-head stages for a per-head gradient or a head's share, else among the others."""
    per_head = scope in ("head", "view")
    out = []
    for stage in path(scn, mode):
        if name not in stage.inputs:
            continue
        if scope == "param" or stage.per_head == per_head or (scope == "head" and stage.across):
            out.append((stage, stage.inputs.index(name)))  # concat reads every head's Z
    return out


def seeded(scn: Scenario, mode: Mode, name: str) -> bool:
    """Does the loss itself read stage `name` (the output Y, or one head's A)? With one head and no
    W_O the output is concat, one head's Z itself: its gradient is Z's."""
    reads = objective(scn).reads(scn)
    return name == reads or (name == "Z" and reads == "concat" and scn.heads == 1)


def objective(scn: Scenario):
    """The feature that gives the loss (features/target.py), asked for it as the layer asks a
    feature anything: through the scenario's features, never by importing it."""
    from attnwalk.layer.backward import objective as found

    return found(scn)


def reads_output(scn: Scenario) -> bool:
    """Does the loss read the layer's output, or a stage made from it (the next-token logits), else
    only A (nothing after A gets a gradient)?"""
    from attnwalk.layer.backward import output_of
    from attnwalk.layer.graph import needed

    return output_of(scn.graph) in {s.key for s in needed(scn.graph, [objective(scn).reads(scn)])}


# -- formulas, variants, notes of the gradient stages -----------------------------------------------


def term(stage: Stage, index: int, scn: Scenario, mode: Mode) -> str | None:
    """What `stage` passes back into its index-th input, written with the layer's symbols."""
    text = stage.backward.terms(scn, mode)[index]
    if text is None:
        return None
    names = [symbol_of(n, scn) for n in stage.inputs]
    return text.format(*names, d=d(stage.symbol), out=stage.symbol)


def seed_term(scn: Scenario, mode: Mode) -> str:
    return objective(scn).seed_term(scn)


def formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    """∂L/∂F = the sum of its readers' terms (and the loss's, where the loss reads F)."""
    from attnwalk.layer.gradwalk import blocks_formula

    name, scope = source(scn, stage.key, mode)
    if scope == "split":
        F = next(s for s in scn.graph if s.key == name)
        return f"{stage.symbol} = {blocks_formula(d(F.symbol), scn, F.shared)}"
    # one head's concat is its Z: the output, whose gradient is the loss's (seeded says so)
    parts = [term(R, i, scn, mode) for R, i in readers(scn, mode, name, scope) if R.shown or R.key != "concat"]
    if seeded(scn, mode, name):
        parts.append(seed_term(scn, mode))
    shown = [p for p in parts if p is not None]
    if scope == "param" and scn.heads > 1 and any(R.per_head for R, _ in readers(scn, mode, name, scope)):
        shown = [f"Σ_h {p}" for p in shown]
    return f"{stage.symbol} = " + (" + ".join(shown) if shown else "0")


def variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """The text variants of every gradient stage: the mode where it stops the gradient (uniform),
    unscaled scores, and the features' own: an attend target (the loss reads A alone: what comes
    after A gets 0), a norm before the projections (∂L/∂X goes back through it)."""
    out = []
    if not mode.smooth:
        out.append(mode.name)
    elif not mode.scales(scn.scorer):
        out.append("unscaled")
    if mode.smooth and logits(scn.graph).key != SCALED:  # a stage between S and the softmax
        out.insert(0, "passed")
    # each feature may name its own (the target: attend; a norm: normed, rms), as it does forward
    return (*out, *(v for f in scn.features if hasattr(f, "grad_variants") for v in f.grad_variants(scn)))


# Which notes a gradient stage adds, by forward key: (note, when) pairs.
_NOTES = {
    "S": ("grad.masked", "grad.uniform"),
    "QK^T": ("grad.uniform",),
    "Q": ("grad.uniform",), "K": ("grad.uniform", "grad.group"),
    "V": ("grad.group",), "W_Q": ("grad.uniform", "grad.normed"), "W_K": ("grad.uniform", "grad.normed"),
    "X": ("grad.paths",), "Z": ("grad.attend",), "V_": (), "W_V": ("grad.attend", "grad.normed"), "W_O": ("grad.attend",),
    "Y": ("grad.attend",), "concat": ("grad.attend",), "A": ("grad.seed_attend",),
}  # "Y": the layer's output, whichever stage it is (roles.output); "X": what the projections read


def notes_for(key: str):
    """The notes of gradient stage `key` ("dS": the mask's zeros, uniform's missing gradient, …)."""
    def said(scn: Scenario, mode: Mode) -> list[str]:
        name, scope = source(scn, key, mode)
        attend = not reads_output(scn)
        projected = projected_from(scn.graph).key  # X, or a norm's output: the projections' input
        when = {"grad.masked": scn.masked and mode.smooth, "grad.uniform": not mode.smooth,
                "grad.group": scn.groups < scn.heads and scope == "split",
                # the projections' paths meeting (not with a source: K, V read it; not the residual's)
                "grad.paths": sum(1 for R, _ in readers(scn, mode, name, scope) if R.weight) > 1,
                "grad.attend": attend, "grad.seed_attend": attend,
                "grad.normed": projected != "X"}
        # and each feature's own notes on a gradient (RoPE's turned back; quantize: the weights read
        # back from blocks), on a head's gradient, not on the full-width blocks
        own = [] if scope == "split" else [
            note for f in scn.features for note in getattr(f, "GRAD_NOTES", {}).get(name, ())]
        role = "X" if name == projected else "Y" if name == output(scn.graph).key and name != "concat" else name
        table = _NOTES.get(role, ())
        return [note for note in table if when.get(note)] + own
    return said


# -- a gradient's cell: its readers' parts, summed ---------------------------------------------------


def chain(c: Cell) -> list:
    """One cell of ∂L/∂F: what each stage that reads F passes back into it (worked out by that
    stage's backward), the loss's own part where the loss reads F, and the sum; its math spelled
    in ASCII under --ascii."""
    return [c.plain(line) if isinstance(line, str) else line for line in _chain(c)]


def _chain(c: Cell) -> list:
    name, scope = source(c.scn, c.stage.key, c.walk.mode)
    if scope == "split":
        return _blocks(c, name)
    parts: list[tuple[str, list, float]] = []  # (who, lines, value)
    heads = range(c.scn.heads) if scope == "param" and _per_head_owner(c, name) else [c.head]
    for R, i in readers(c.scn, c.walk.mode, name, scope):
        if R.key == "concat" and not R.shown:  # one head: concat is Z, the output
            continue
        for h in heads:
            lines, value = R.backward.cell(_At(c, h), R, i)
            who = R.symbol if len(heads) == 1 else f"{R.symbol}, {c.say('ui.head', head=shown(h), heads=c.scn.heads)}"
            parts.append((who, lines, value))
    if seeded(c.scn, c.walk.mode, name):
        parts.append(("L", *objective(c.scn).seed_cell(c)))
    if not parts:
        return [c.prose(c.say("grad.cell.none"))]
    if len(parts) == 1:
        return parts[0][1]
    lines: list = []
    for who, part, value in parts:
        lines.append(c.prose(c.say("grad.cell.from", stage=who, value=c.num(value))))
        lines += part
    values = [c.printed(value) for _, _, value in parts]
    end = c.printed(sum(values))
    c.lands(end)
    lines.append(f"{c.ref()} = " + " + ".join(c.operand(v) if k else c.num(v) for k, v in enumerate(values))
                 + f" = {c.num(end)}")
    return lines


def _per_head_owner(c: Cell, name: str) -> bool:
    return any(R.per_head for R, _ in readers(c.scn, c.walk.mode, name, "param"))


def _blocks(c: Cell, name: str) -> list:
    """Q, K, V full width: this column is head h's share (a K/V head's: its query heads' summed)."""
    F = c.walk.forward.stage(name)
    count = c.scn.groups if F.shared else c.scn.heads
    width = c.walk.matrix(c.stage.key).shape[1] // count
    block, inner = divmod(c.col, width)
    sharers = [h for h in range(c.scn.heads) if (c.scn.kv_head(h) if F.shared else h) == block]
    values = [c.printed(float(c.walk.matrix(f"d{name}_h", h)[c.row, inner])) for h in sharers]
    parts = [f"{d(F.symbol)}_{shown(h)}[{c.rows[c.row]}, {shown(inner)}]" for h in sharers]
    end = c.printed(sum(values))
    c.lands(end)
    line = f"{c.ref()} = " + " + ".join(parts)
    if len(values) > 1:
        line += " = " + " + ".join(c.operand(v) if k else c.num(v) for k, v in enumerate(values))
    return [c.prose(c.say("grad.cell.block", col=shown(c.col), block=shown(block), inner=shown(inner),
                          count=len(sharers))), f"{line} = {c.num(end)}"]


class _At:
    """The cell `c` seen from head `head` (a shared weight's gradient sums every head's part)."""

    def __init__(self, c: Cell, head: int) -> None:
        self._c, self.head = c, head

    def __getattr__(self, name: str):
        return getattr(self._c, name)


