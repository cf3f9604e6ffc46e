"""Attention sinks (`sinks:`; gpt-oss, and Miller's "off-by-one" softmax): each head h has one
learned logit s_h that joins its softmax's denominator but belongs to no key,

    A[i, j] = e^(S'[i, j]) / (e^(s_h) + Σ_k e^(S'[i, k]))     over the keys row i may read,

S' being what the softmax reads (S, or S + B under ALiBi, masked). The sink is not a column of A:
row i's weights sum to 1 − e^(s_h) / (e^(s_h) + Σ_k e^(S'[i, k])), its sink share. A query with
nothing to look at can then hand its weight to "nothing" and keep z near 0, instead of spreading
100 % over keys it has no use for (Xiao et al. 2023: models without a sink park it on the first
token). Uniform and hard weights do not read the scores' sizes, nor the sink.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.layer import gradcells
from attnwalk.layer.graph import Backward, amend, replace
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context, Stage
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "sinks"
KEYS = ("sinks",)
STAGES: tuple = ()  # no stage of its own: it changes the softmax's (A)
COURSE_AFTER = {"attention_sink": "alibi"}  # its lesson, in the course after ALiBi's


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def read(d: Draft) -> None:
    """`sinks`: one logit per head, a list of `heads` numbers (a single number for one head)."""
    if "sinks" not in d.top:
        return
    f, node = d.f, d.top["sinks"]
    if isinstance(node.value, list):
        values = f.vector(node, "sinks")
    elif d.heads == 1:
        values = np.array([f.number(node, "sinks")])
    else:
        raise f.error("sinks", node, f"expected a list of {d.heads} numbers, one logit per head "
                      f"(a single number is for one head), got {f.number(node, 'sinks'):g}")
    if len(values) != d.heads:
        raise f.error("sinks", node, f"sinks has {len(values)} number{'s' if len(values) != 1 else ''}, "
                      f"but heads is {d.heads}: one logit per head")
    d.params["sinks"] = values
    d.settings[NAME] = True


def _logit(scn: Scenario, head: int) -> float:
    return float(scn.param("sinks")[head])


def _weights(ctx: Context, S: np.ndarray, sinks: np.ndarray) -> np.ndarray:
    return ctx.mode.weights(ctx.seen(S), ctx.allowed, float(sinks[ctx.head]))  # (n, m), rows sum < 1


def _grad(ctx: Context, dA: np.ndarray, A: np.ndarray, S: np.ndarray, sinks: np.ndarray) -> tuple:
    """The sink is a column with no value: ∂L/∂S = A ⊙ (∂L/∂A − rowsum(A ⊙ ∂L/∂A)), as without it,
    and ∂L/∂s_h = −Σ_i σ_i · rowsum(A ⊙ ∂L/∂A)_i, σ_i = 1 − Σ_j A[i, j] the row's sink share
    (∂A[i, j]/∂s_h = −A[i, j] · σ_i). Uniform and hard weights read neither: no gradient."""
    if not ctx.mode.smooth:
        return None, None
    inner = np.sum(A * dA, axis=-1, keepdims=True)  # (n, 1)
    dS = np.where(ctx.allowed, A * (dA - inner) * ctx.amplify, 0.0)  # (n, m)
    share = 1.0 - A.sum(axis=-1)  # (n,) σ_i
    d_sinks = np.zeros(len(sinks))
    d_sinks[ctx.head] = -float(np.sum(share * inner[:, 0]))
    return dS, d_sinks


def _terms(scn: Scenario, mode: Mode) -> tuple[str | None, ...]:
    if not mode.smooth:
        return None, None
    return ("{out} ⊙ ({d} − rowsum({out} ⊙ {d}))",
            "−Σ_i (1 − rowsum({out}))_i · rowsum({out} ⊙ {d})_i")


def _grad_cell(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """∂L/∂S's cell as without a sink; ∂L/∂s_h's: each row's sink share times its rowsum(A ⊙ ∂L/∂A)."""
    if index == 0:
        return gradcells.softmax(c, stage, index)
    if not c.walk.mode.smooth:
        return [c.prose(c.say(f"grad.cell.{c.walk.mode.name}"))], 0.0
    if c.head != c.col:  # head h's softmax reads s_h alone
        return [c.prose(c.say("sinks.grad_other", head=person(c.head), sink=person(c.col)))], 0.0
    A = c.walk.forward.matrix(stage.key, c.head)  # (n, m) this softmax's: A, a later block's A⁽²⁾
    g = gradcells.upstream(c, stage)  # (n, m) ∂L/∂A
    share = [c.printed(1.0 - float(np.sum(A[i]))) for i in range(len(A))]
    inner = [c.printed(c.dot_value(A[i], g[i])) for i in range(len(A))]
    terms = [(s, r) for s, r in zip(share, inner) if s != 0.0 and r != 0.0]
    value = c.printed(-sum(c.printed(s * r) for s, r in terms))
    c.lands(value)
    t = c.mk.times
    products = " + ".join(f"{c.num(s)} {t} {c.operand(r)}" for s, r in terms) or "0"
    return [f"σ = 1 {c.mk.minus} rowsum(A) = {c.vec(np.array(share))}",
            f"rowsum(A ⊙ {gradcells.d('A')}) = {c.vec(np.array(inner))}",
            f"{c.ref()} = {c.mk.minus}Σ_i σ_i {t} rowsum(A ⊙ {gradcells.d('A')})_i = "
            f"{c.mk.minus}({products}) = {c.num(value)}",
            c.prose(c.say("sinks.grad_cell"))], value


def _reads_sink(mode: Mode) -> bool:
    return mode.reads_scores and mode.smooth


def _notes(scn: Scenario, mode: Mode, notes: list[str]) -> list[str]:
    return [*notes, "sinks.rows" if _reads_sink(mode) else "sinks.ignored"]


def _formula(text: str, scn: Scenario, mode: Mode) -> str:
    """softmax(x[i, :]) written out with the sink's term in the sum: e^x[i, j] / (e^s_h + Σ_k e^x[i, k])."""
    inside = re.fullmatch(r"A\[i, :\] = softmax\((.*)\[i, :\]\)", text)
    if inside is None or not _reads_sink(mode):
        return text
    x = inside.group(1)
    return f"A[i, j] = e^{x}[i, j] / (e^s_h + Σ_k e^{x}[i, k])"


def extend(stages: list[Stage], scn: Scenario) -> None:
    replace(stages, "A", compute=_weights, params=("sinks",), learned=("sinks",), extra_logit=_logit,
            backward=Backward(_grad, _terms, _grad_cell, symbols={"sinks": "s"},
                              param_cols={"sinks": "h"}))
    amend(stages, "A", notes=_notes, formula=_formula,
          variants=lambda scn, mode, names: ("sinks", *names) if _reads_sink(mode) else names)
    # s_h is learned between the scores and Z: Z's note would say nothing is; and z shrinks
    amend(stages, "Z", notes=lambda scn, mode, notes: [n for n in notes if not n.startswith("truth.no_parameters")]
          + (["sinks.z"] if _reads_sink(mode) else []))


def export(walk: Walk, data: dict[str, Any]) -> None:
    data["sinks"] = [float(s) for s in walk.scenario.param("sinks")]


def note_values(scn: Scenario) -> dict[str, Any]:
    """{sinks}: every head's logit, the middle elided for many heads."""
    shown = [f"{s:.6g}" for s in scn.param("sinks")]
    return {"sinks": ", ".join(shown if len(shown) <= 8 else shown[:4] + ["…"] + shown[-2:])}


def grad_variants(scn: Scenario) -> tuple[str, ...]:
    """The backward walk's text: ∂L/∂S's rows no longer sum to weights that sum to 1."""
    return ("sinks",)


def decode_notes(scn: Scenario, n: int) -> list[tuple[str, dict]]:
    return [("sinks.decode", {})]


# -- the lesson's own questions: the numbers they need, computed from the walk ---------------------


@functools.lru_cache(maxsize=4)  # both questions of one walk ask it (as tutor/mistakes.py's maps)
def _compared(walk: Walk) -> tuple[dict, Walk] | None:
    """The focus row (the lesson's `the`, a query with nothing to look at) with and without the
    sink: its numbers, and the walk without the sink, computed once for both questions."""
    from attnwalk.layer.axes import token_labels
    from attnwalk.layer.walk import compute

    row = walk.scenario.focus
    if row is None or not walk.mode.smooth:
        return None
    plain = compute(walk.scenario.with_setting(NAME, None), walk.mode)
    A0, A = plain.matrix("A", 0)[row], walk.matrix("A", 0)[row]
    S = walk.scores(0)[row][walk.scenario.allowed[row]]
    said = {"token": token_labels(walk.scenario.tokens)[row], "top": float(S.max()),
            "sum_plain": float(A0.sum()), "sum_sink": float(A.sum()), "share": float(1 - A.sum()),
            "sink": _logit(walk.scenario, 0)}
    return said, plain


def _without(walk: Walk) -> dict | None:
    """Without the sink, row `the` still hands out all of its weight; with it, most goes nowhere."""
    compared = _compared(walk)
    return None if compared is None else compared[0]


def _z_small(walk: Walk) -> dict | None:
    """With the sink, z of that row shrinks toward 0 instead of averaging the values."""
    compared = _compared(walk)
    if compared is None:
        return None
    said, plain = compared
    row = walk.scenario.focus
    z0, z = plain.matrix("Z", 0)[row], walk.matrix("Z", 0)[row]
    return {**said, "z_plain": z0, "z_sink": z, "norm_plain": float(np.linalg.norm(z0)),
            "norm_sink": float(np.linalg.norm(z))}


QUESTIONS = {"attention_sink": {"without": _without, "z_small": _z_small}}
