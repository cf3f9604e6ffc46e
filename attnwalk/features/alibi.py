"""ALiBi (`bias: alibi`; Press et al., 2022): no positions added to X; head h adds −m_h·|i − j| to
its scores, a penalty that grows linearly with the distance between query i and key j, with the
paper's geometric slopes (layer/alibi.py). B and S + B stand between S and what softmax reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.layer import alibi, gradcells
from attnwalk.layer.graph import Backward, Stage, amend, fixed_terms, get, has, insert_after, replace, reroute
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.scenario.load import Draft
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.scenario import Scenario

NAME = "alibi"
KEYS = ("bias",)
BIASES = ("none", "alibi")


def active(scn: Scenario) -> bool:
    return bool(scn.setting(NAME))


def read(d: Draft) -> None:
    """`bias: none | alibi`."""
    if "bias" not in d.top or d.f.choice(d.top["bias"], "bias", BIASES) != "alibi":
        return
    if d.source is not None:
        raise d.f.error("bias", d.top["bias"], "bias: alibi needs keys from the same sequence: it "
                        "penalises the distance |i − j| between a query's position and a key's, and "
                        "a source's positions are another sequence's; remove bias or the source")
    d.settings[NAME] = True


def _bias(ctx: Context) -> np.ndarray:
    slope = alibi.slopes(ctx.scn.heads)[ctx.head]
    distance = np.abs(ctx.rows[:, None] - ctx.keys[None, :]).astype(np.float64)  # (n, m): |i − j|
    return 0.0 - slope * distance  # 0 − x rather than −x, so the diagonal is +0, not −0


def _causal(scn: Scenario) -> bool:
    return bool(np.array_equal(scn.allowed, np.tril(np.ones_like(scn.allowed))))


def _formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    # under a causal mask only j ≤ i is ever seen: the paper writes the distance as i − j
    return base.replace("|i − j|", "(i − j)") if _causal(scn) else base


def _notes(scn: Scenario, mode: Mode) -> list[str]:
    return ["alibi.slopes", "alibi.causal" if _causal(scn) else "alibi.symmetric"] + (
        ["alibi.with_positions"] if scn.main.positional != "none" else [])


def _uniform(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return () if mode.reads_scores else ("uniform",)  # uniform reads neither S nor B


def bias_cell(c: Cell) -> list:
    """B[i, j] = −m_h · |i − j|, with head h's slope as the paper builds it: 2^(−a/b)."""
    a, b = alibi.exponent(c.scn.heads, c.head)
    slope = alibi.slopes(c.scn.heads)[c.head]
    distance = abs(c.row - c.col)
    product = c.printed(c.printed(slope) * distance)
    c.lands(-product if distance else 0.0)
    m_h = f"m_{person(c.head)}"
    return [f"{m_h} = 2^({c.mk.minus}{a}/{b}) = {c.num(slope)}",
            f"{c.sym()}[{c.rows[c.row]}, {c.cols[c.col]}] = {c.mk.minus}{m_h} {c.mk.times} "
            f"|{person(c.row)} {c.mk.minus} {person(c.col)}| = {c.num(-slope)} {c.mk.times} "  # a number as the tables write it
            f"{distance} = {c.num(c.value)}"]


def biased_cell(c: Cell) -> list:
    (s_name, S), (b_name, B) = (c.walk.input(c.stage, i, c.head) for i in (0, 1))  # S (S⁽²⁾) and B
    S, B = float(S[c.row, c.col]), float(B[c.row, c.col])
    c.lands(c.printed(c.printed(S) + c.printed(B)))
    return [f"{c.ref()} = {c.ref(s_name)} + {c.ref(b_name)} = {c.num(S)} + {c.operand(B)} = {c.num(c.value)}"]


STAGES = (
    Stage("B", "B", "B[i, j] = −m_h · |i − j|", "n", "m", _bias, per_head=True, formula_for=_formula,
          notes=_notes, variants=_uniform, worked=bias_cell, aliases=("bias", "alibi"),
          step=lambda scn, mode: "−m_h · (t − j)"),
    Stage("S+B", "S + B", "S + B", "n", "m", lambda ctx, S, B: S + B, reads=("S", "B"), per_head=True,
          notes=lambda scn, mode: [] if mode.reads_scores else ["alibi.uniform"], variants=_uniform,
          worked=biased_cell, aliases=("sb", "biased"),
          step=lambda scn, mode, s, b: f"{s} − {b.removeprefix('−')}",  # S − m_h · (t − j)
          # B is a fixed penalty of the distance, learned by nothing: no gradient goes into it
          backward=Backward(lambda ctx, d, out, S, B: (d, None), fixed_terms("{d}", None), gradcells.passed)),
)


def _position_cell(inner):
    def worked(c: Cell) -> list:  # order reaches the scores through the distance penalty
        return [c.say("alibi.no_positional")] if c.scn.main.positional == "none" else inner(c)
    return worked


def extend(stages: list[Stage], scn: Scenario) -> None:
    insert_after(stages, "S", *STAGES)
    reroute(stages, "S", "S+B", readers=[s.key for s in stages if s.key not in ("S+B", "B")])
    # softmax reads S + B (A's text); a mask is laid over the biased scores ((S + B) + M: its reads)
    amend(stages, "A", variants=lambda scn, mode, names: ("alibi", *names) if mode.smooth else names)
    if scn.main.positional == "none":  # ALiBi carries order
        for key in ("P", "X"):
            amend(stages, key, variants=lambda scn, mode, names: ("none_alibi", *names))
        replace(stages, "P", worked=_position_cell(get(stages, "P").worked))
    if has(stages, "tiled"):
        amend(stages, "tiled", notes=lambda scn, mode, notes: [*notes, "tiles.variant.alibi"])


def export(walk: Walk, data: dict[str, Any]) -> None:
    data["alibi_slopes"] = alibi.slopes(walk.scenario.heads)


def note_values(scn: Scenario) -> dict[str, Any]:
    """{slopes}: every head's slope, the middle elided for many heads."""
    shown = [f"{slope:.6g}" for slope in alibi.slopes(scn.heads)]
    return {"slopes": ", ".join(shown if len(shown) <= 8 else shown[:4] + ["…"] + shown[-2:])}


def decode_scores_caption(scn: Scenario, head: int) -> tuple[str, dict]:
    """A decode step's scores, this head's bias and their sum, with its slope."""
    return "decode.variant.scores_alibi", {"slope": float(alibi.slopes(scn.heads)[head])}


def decode_notes(scn: Scenario, n: int) -> list[tuple[str, dict]]:
    return [("decode.variant.note_alibi", {})]


def word_order(scn: Scenario) -> str:
    """How ALiBi makes Z depend on where a token stands (tutor/wordorder.py)."""
    return "quiz.word_order.by_alibi"


def list_mask(scn: Scenario) -> list[tuple[str, dict]]:
    return [("alibi.list", {})]  # the lesson list's mask column: ", ALiBi" after the mask


def concepts(scn: Scenario) -> tuple[str, ...]:
    return ("alibi",)  # a distance penalty, not a mask and not a position added to X
