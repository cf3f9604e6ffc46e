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

from attnwalk.layer import cells, gradcells
from attnwalk.layer.geometry import geometry
from attnwalk.layer.graph import Backward, amend, replace
from attnwalk.layer.scores import SCORES, Scoring, rms_normalize, rms_normalize_grad

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


def without_qk_norm(scn: Scenario) -> Scenario:
    """`scn` scoring as it does without QK-norm (the qk_norm lesson's plain dot scores)."""
    plain = _scoring(scn)._replace(qk_norm=False, qk_scale=1.0)
    return scn.with_setting(NAME, None if plain.score.name == "dot" else plain)


def look_given(scn: Scenario, head: int) -> list[tuple[str, dict]]:
    """What the look question adds to q and the keys (tutor/tokenquiz.py): how the two make a
    score here, with this head's w_a for additive scores (its numbers as arrays)."""
    scoring = _scoring(scn)
    if scoring.score.name == "additive":
        return [("quiz.given.look_additive", {"w_a": _head_w_a(scn, head)})]
    return [("quiz.given.look_qk_norm", {})] if scoring.qk_norm else []


def _head_w_a(scn: Scenario, head: int) -> np.ndarray:
    """Head `head`'s w_a: its own block of d_k numbers where each head has one, else the one."""
    w_a, d_k = scn.param("w_a"), scn.d_k
    return w_a[head * d_k:(head + 1) * d_k] if len(w_a) > d_k else w_a


def raw(scn: Scenario, q: np.ndarray, k: np.ndarray, w_a: np.ndarray | None = None) -> np.ndarray:
    """(n, d_k), (m, d_k) -> (n, m): the scores before any scaling, as `scn` makes them."""
    scoring = _scoring(scn)
    if scoring.qk_norm:
        q, k = rms_normalize(q), rms_normalize(k)  # (n, d_k), (m, d_k)
    out = scoring.score.raw(q, k, w_a)
    return out * scoring.qk_scale if scoring.qk_norm else out


def _compute(ctx: Context, Q: np.ndarray, K: np.ndarray, w_a: np.ndarray | None = None) -> np.ndarray:
    return raw(ctx.scn, Q, K, w_a)  # (n, d_k), (m, d_k) -> (n, m), this head's


def _grad(ctx: Context, d: np.ndarray, out: np.ndarray, Q: np.ndarray, K: np.ndarray,
          w_a: np.ndarray | None = None) -> tuple:
    """raw's backward: through × qk_scale, the score kind, and the RMS normalising."""
    scoring = _scoring(ctx.scn)
    q, k = (rms_normalize(Q), rms_normalize(K)) if scoring.qk_norm else (Q, K)
    if scoring.qk_norm:
        d = d * scoring.qk_scale
    dq, dk, dw = scoring.score.raw_grad(d, q, k, w_a)
    if scoring.qk_norm:
        dq, dk = rms_normalize_grad(dq, Q), rms_normalize_grad(dk, K)
    return (dq, dk) if w_a is None else (dq, dk, dw)


def grad_cell(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """One cell of ∂L/∂Q, ∂L/∂K (or ∂L/∂w_a) through this score kind: ∂L/∂(QKᵀ) summed along the
    other axis, times the score's slope there; under QK-norm, then back through q / RMS(q)."""
    from types import SimpleNamespace

    g = gradcells.upstream(c, stage)  # (n, m) ∂L/∂(QKᵀ), this head's
    _, Q = gradcells.given(c, stage, 0)
    _, K = gradcells.given(c, stage, 1)
    w_a = c.scn.param("w_a") if len(stage.inputs) > 2 else None
    at = (c.col,) if index == 2 else (c.row, c.col)  # w_a is a vector
    value = float(_grad(SimpleNamespace(scn=c.scn), g, None, Q, K, w_a)[index][at])
    scoring = _scoring(c.scn)
    q, k = (rms_normalize(Q), rms_normalize(K)) if scoring.qk_norm else (Q, K)
    scale = scoring.qk_scale if scoring.qk_norm else 1.0
    G = g * scale
    dqk = gradcells.d(stage.symbol) if scale == 1.0 else f"{c.short(scale)} {c.mk.times} {gradcells.d(stage.symbol)}"
    hat = c.hat if scoring.qk_norm else ""
    tok, col = c.rows[c.row], c.cols[c.col]
    if index == 2:  # ∂L/∂w_a[c] = Σ_i,j G[i, j] · tanh(q_i + k_j)[c]
        T = np.tanh(q[:, None, c.col] + k[None, :, c.col])  # (n, m)
        return c.dot(f"Σ_i,j {dqk}[i, j] {c.mk.times} tanh(q{hat}_i + k{hat}_j)[{col}]", G.ravel(), T.ravel(),
                     value), value
    d_q, d_k, _ = scoring.score.raw_grad(G, q, k, w_a)  # ∂L/∂q̂, ∂L/∂k̂ (q, k without QK-norm)
    toward = (d_q if index == 0 else d_k)[c.row]  # (d_k,)
    row = G[c.row] if index == 0 else G[:, c.row]  # the scores this query (key) took part in
    where = f"[{tok}, :]" if index == 0 else f"[:, {tok}]"
    lines: list = []
    if scoring.score.name == "additive":
        w = float(w_a[c.col])
        pre = q[c.row, c.col] + k[:, c.col] if index == 0 else q[:, c.col] + k[c.row, c.col]
        slope = w * (1.0 - np.tanh(pre) ** 2)  # ∂ tanh(q + k) · w_a / ∂q[c], per key (query)
        lines.append(c.prose(c.say("grad.cell.additive", w=c.num(w))))
        lines += c.dot(f"{dqk}{where} {c.mk.dot} w_a[{col}](1 {c.mk.minus} tanh²)", row, slope, float(toward[c.col]))
    else:
        other = (k if index == 0 else q)[:, c.col]
        lines += c.dot(f"{dqk}{where} {c.mk.dot} {'k' if index == 0 else 'q'}{hat}[:, {col}]", row, other,
                       float(toward[c.col]))
    if not scoring.qk_norm:
        return lines, value
    x, unit = (Q if index == 0 else K)[c.row], (q if index == 0 else k)[c.row]
    rms = c.printed(float(np.max(np.abs(x)) * np.sqrt(np.mean((x / np.max(np.abs(x))) ** 2)))) if np.any(x) else 0.0
    mean = c.printed(float(np.mean(toward * unit)))
    name = ("q" if index == 0 else "k") + hat
    if rms == 0.0:
        return lines + [c.prose(c.say("grad.cell.zero_row"))], value
    top = c.printed(c.printed(toward[c.col]) - c.printed(unit[c.col]) * mean)
    end = c.printed(top / rms)
    c.lands(end, on=value)
    lines += [c.prose(c.say("grad.cell.qk_norm")),
              f"{gradcells.d(name)}_{tok} = {c.vec(toward)},  mean({gradcells.d(name)} {c.mk.times} {name}) = {c.num(mean)}",
              f"({c.num(toward[c.col])} {c.mk.minus} {c.operand(unit[c.col])} {c.mk.times} {c.operand(mean)}) / "
              f"RMS = {c.num(top)} / {c.num(rms)} = {c.num(end)}"]
    return lines, value


def _terms(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """What ∂L/∂q and ∂L/∂k (and ∂L/∂w_a) are made of, for this score kind."""
    scoring = _scoring(scn)
    g = "qk_scale · {d}" if scoring.qk_norm and scoring.qk_scale != 1.0 else "{d}"
    if scoring.score.name == "additive":
        hat = "\u0302" if scoring.qk_norm else ""
        inner = f"(1 − tanh²(q{hat}_i + k{hat}_j)) ⊙ w_a"
        terms = (f"Σ_j {g}[i, j] · {inner}", f"Σ_i {g}[i, j] · {inner}",
                 f"Σ_i,j {g}[i, j] · tanh(q{hat}_i + k{hat}_j)")
    else:
        terms = (f"{g} · K̂" if scoring.qk_norm else f"{g} · {{1}}",
                 f"{g}ᵀ · Q̂" if scoring.qk_norm else f"{g}ᵀ · {{0}}")
    if scoring.qk_norm:  # then back through q̂ = q / RMS(q)
        terms = (f"(G − q̂ · mean(G ⊙ q̂)) / RMS(q), G = {terms[0]}",
                 f"(G − k̂ · mean(G ⊙ k̂)) / RMS(k), G = {terms[1]}", *terms[2:])
    return terms


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
            worked=cell, step=step, backward=Backward(_grad, _terms, grad_cell))
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


def quiz_given(scn: Scenario, key: str, head: int) -> list[tuple[str, dict]]:
    """What a quiz question on a cell of stage `key` gives beyond q and k, as (text key, numbers):
    w_a, the head's own block of it, for additive scores; QK-norm's scale."""
    if key != "QK^T":
        return []
    scoring, out = _scoring(scn), []
    if scoring.score.name == "additive":
        out.append(("quiz.given.look_additive", {"w_a": _head_w_a(scn, head)}))
    if scoring.qk_norm:
        out.append(("quiz.given.qk_norm", {"scale": scoring.qk_scale}))
    return out


def quiz_hint(scn: Scenario, key: str) -> str | None:
    """The hint of a question on stage `key`'s cell where the formula alone would not do: how an
    additive score is made."""
    return "score.additive.explain" if key == "QK^T" and _scoring(scn).score.name == "additive" else None


def extra_work(scn: Scenario) -> int:
    """Multiply-adds a training step's forward pass adds for these scores: tanh(q_i + k_j) · w_a
    has d_k terms a score (the dot product's are counted with QKᵀ already)."""
    return scn.heads * scn.n * scn.m * scn.d_k if _scoring(scn).score.name == "additive" else 0


def extra_numbers(scn: Scenario) -> int:
    """Numbers a training step holds besides: one head's n × m × d_k tanh and its gradient (×3)."""
    return 3 * scn.n * scn.m * scn.d_k if _scoring(scn).score.name == "additive" else 0
