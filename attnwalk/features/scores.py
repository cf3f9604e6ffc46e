"""How a query and a key make a score, where it is not the plain dot product (`score:`, `qk_norm:`):

    score: additive      QKᵀ[i, j] = tanh(q_i + k_j) · w_a   (Bahdanau's; bounded, never / √d_k)
    qk_norm: true        q and k divided by their RMS first, so only their direction counts,
    qk_scale: g          and the score times one learned scale g

The score kinds' arithmetic is the layer's (layer/scores.py); this module puts it in QKᵀ, with
its formula, text and worked cell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer import cells
from attnwalk.layer.geometry import geometry
from attnwalk.layer.graph import amend, replace
from attnwalk.layer.scores import SCORES, Scoring, rms_normalize

if TYPE_CHECKING:
    from attnwalk.scenario.load import Draft
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context, Stage
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

NAME = "score"
STAGES: tuple[Stage, ...] = ()
KEYS = ("score", "w_a", "qk_norm", "qk_scale")


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def _scoring(scn: Scenario) -> Scoring:
    return scn.setting(NAME)


def read(d: Draft) -> None:
    """`score: dot | additive` (additive needs `w_a`, d_k numbers), `qk_norm: true` and its
    `qk_scale`."""
    f, top = d.f, d.top
    score = f.choice(top["score"], "score", SCORES) if "score" in top else "dot"
    if score == "additive":
        if "w_a" not in top:
            raise f.error("w_a", top["score"], "w_a is missing: score: additive needs w_a, a list "
                          "of d_k numbers")
        w_a = f.vector(top["w_a"], "w_a")
        if w_a.shape[0] != d.d_k:
            raise f.error("w_a", top["w_a"], f"w_a has {w_a.shape[0]} numbers, but d_k "
                          f"(per head) is {d.d_k}")
        d.params["w_a"] = w_a
    elif "w_a" in top:
        raise f.error("w_a", top["w_a"], "w_a is only used with score: additive; remove it, or "
                      "add score: additive")
    qk_norm = f.boolean(top["qk_norm"], "qk_norm") if "qk_norm" in top else False
    qk_scale = 1.0
    if "qk_scale" in top:
        if not qk_norm:
            raise f.error("qk_scale", top["qk_scale"], "qk_scale is only used with qk_norm: true; "
                          "remove it, or add qk_norm: true")
        qk_scale = f.number(top["qk_scale"], "qk_scale")
    if score != "dot" or qk_norm:
        d.settings[NAME] = Scoring(SCORES[score], qk_norm, qk_scale)


def raw(scn: Scenario, q: np.ndarray, k: np.ndarray, w_a: np.ndarray | None = None) -> np.ndarray:
    """(n, d_k), (m, d_k) -> (n, m): the scores before any scaling, as `scn` makes them."""
    scoring = _scoring(scn)
    if scoring.qk_norm:
        q, k = rms_normalize(q), rms_normalize(k)  # (n, d_k), (m, d_k)
    out = scoring.score.raw(q, k, w_a)
    return out * scoring.qk_scale if scoring.qk_norm else out


def _compute(ctx: Context, Q: np.ndarray, K: np.ndarray, w_a: np.ndarray | None = None) -> np.ndarray:
    return raw(ctx.scn, Q, K, w_a)  # (n, d_k), (m, d_k) -> (n, m), this head's


def formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    """QKᵀ[i, j] as `scn` scores: q̂ under QK-norm, the rotated q_rot where RoPE turns them first."""
    scoring = _scoring(scn)
    hat = "\u0302" if scoring.qk_norm else ""
    q_name, k_name = cells.vector_name(stage.reads[0]), cells.vector_name(stage.keys[0])
    q, k = f"{q_name[0]}{hat}{q_name[1:]}_i", f"{k_name[0]}{hat}{k_name[1:]}_j"
    score = f"tanh({q} + {k}) · w_a" if scoring.score.name == "additive" else f"{q} · {k}"
    if scoring.qk_norm:
        if scoring.qk_scale != 1.0:
            score = f"{scoring.qk_scale:g} × " + (f"({score})" if scoring.score.name == "dot" else score)
        score += f",  q{hat} = q / RMS(q)"
    return f"QKᵀ[i, j] = {score}"


def step(scn: Scenario, mode: Mode, q: str) -> str:
    """Row t of QKᵀ as decoding scores the new query against cached key j."""
    scoring = _scoring(scn)
    hat = "\u0302" if scoring.qk_norm else ""
    q, k = f"{q[0]}{hat}{q[1:]}", f"k{hat}_j"
    score = f"tanh({q} + {k}) · w_a" if scoring.score.name == "additive" else f"{q} · {k}"
    if scoring.qk_norm and scoring.qk_scale != 1.0:
        score = f"{scoring.qk_scale:g} × ({score})"
    return score


def cell(c: Cell) -> list:
    """This score worked out: q̂ and k̂ under QK-norm, tanh(q + k) · w_a for additive scores (no
    angle to show), q · k and its geometry for dot scores, then × qk_scale."""
    scoring = _scoring(c.scn)
    qn, q, kn, k = cells.score_vectors(c)
    qt, kt = c.rows[c.row], c.cols[c.col]
    lines = [f"{qn}_{qt} = {c.vec(q)}", f"{kn}_{kt} = {c.vec(k)}"]
    if scoring.qk_norm:
        qn, kn = qn[0] + c.hat + qn[1:], kn[0] + c.hat + kn[1:]
        q, k = rms_normalize(q[None, :])[0], rms_normalize(k[None, :])[0]  # (d_k,) each
        lines += [c.say("ui.qk_norm_cell"), f"{qn}_{qt} = {c.vec(q)}", f"{kn}_{kt} = {c.vec(k)}"]
    scale = scoring.qk_scale if scoring.qk_norm else 1.0
    if scoring.score.name == "additive":
        w_a = c.scn.param("w_a")
        # tanh of the q + k shown, so the line checks on a calculator
        t = np.tanh([c.printed(x) + c.printed(y) for x, y in zip(q, k)])  # (d_k,)
        lines += [f"tanh({qn}_{qt} + {kn}_{kt}) = {c.vec(t)}", f"w_a = {c.vec(w_a)}"]
        lines += c.dot(f"tanh({qn} + {kn}) {c.mk.dot} w_a", t, w_a, c.value / scale)
        # q and k are added, never multiplied: no q · k, so no angle to show
        lines.append(c.prose(c.say("geometry.additive", q=qn, k=kn)))
        dot = c.dot_value(t, w_a)
    else:
        lines += c.dot(f"{qn}_{qt} {c.mk.dot} {kn}_{kt}", q, k, c.value / scale)
        dot = c.dot_value(q, k)
        lines += geometry(c, q, k, qn, kn, dot, normalized=scoring.qk_norm)
    if scale != 1.0:  # the scale multiplies the finished score
        end = float(c.product(dot * scale))
        c.lands(end)
        lines.append(f"{c.product(dot)} {c.mk.times} qk_scale {c.short(scale)} = {c.product(end)}")
    return lines


def _scaled_cell(c: Cell) -> list:
    lines = cells.scaled(c)
    return lines + [c.say("ui.qk_norm_scaled")] if _scoring(c.scn).qk_norm and c.walk.mode.scales(
        c.scn.scorer) else lines


def _before_cost(note: str):
    """Put `note` before the scores' cost, the last of QKᵀ's notes."""
    return lambda scn, mode, notes: [*notes[:-1], note, *notes[-1:]]


def extend(stages: list[Stage], scn: Scenario) -> None:
    scoring = _scoring(scn)
    additive = scoring.score.name == "additive"
    replace(stages, "QK^T", compute=_compute, params=("w_a",) if additive else (), formula_for=formula,
            worked=cell, step=step)
    if additive:  # no dot product to speak of
        amend(stages, "QK^T", variants=lambda scn, mode, names: ("additive", *names))
    if scoring.qk_norm:
        # normalised, |q̂ · k̂| ≤ d_k whatever the embeddings and weights: only qk_scale, which
        # multiplies the scores, can take them past float64
        replace(stages, "QK^T", field="qk_scale", overflow="use a smaller qk_scale")
        amend(stages, "QK^T", notes=_before_cost("score.qk_norm.explain"))
        if not additive:  # normalised q and k: no length left to speak of
            amend(stages, "QK^T", variants=lambda scn, mode, names: ("qk_norm", *names))
        replace(stages, "S", worked=_scaled_cell)
    # w_a, or QK-norm's scale, is learned between QKᵀ and Z: Z's note would say nothing is
    amend(stages, "Z", notes=lambda scn, mode, notes: [n for n in notes if not n.startswith("truth.no_parameters")])
