"""The feed-forward network after attention (`ffn: gelu | relu | silu | swiglu`), the other half of
every Transformer block, applied to each token's row on its own:

    U = H̃ · W_1 + b_1          up to d_ff dimensions          (H̃: H, or LN₂(H) behind a pre-norm)
    G = φ(U)                   φ = ReLU, GELU (the tanh form GPT-2 uses) or SiLU
    G = SiLU(H̃ · W_gate) ⊙ U   SwiGLU (Shazeer, 2020; Llama): a second projection gates U
    F = G · W_2 + b_2          back down to d_model
    Y = H + F                  the block's output: the FFN adds to the stream, as attention did

`W_1` (d_model × d_ff) and `W_2` (d_ff × d_model) are required, `b_1` (d_ff) and `b_2` (d_model)
optional (none: no bias, as Llama has), `W_gate` (d_model × d_ff) only with swiglu. Behind a norm
the FFN reads LN₂(H) with its own γ₂, β₂ (`ffn_norm_gamma`, `ffn_norm_beta`); under
`norm_placement: post` it reads LN(H) and the sum is normalised after it, LN₂(Y)
(features/norm.py places both). The FFN needs the residual (`residual: true`): it reads the stream
H and adds back to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.features import norm, residual
from attnwalk.layer import activations as act
from attnwalk.layer import ffncells, gradcells, roles
from attnwalk.layer.graph import Backward, Stage, amend, fixed_terms, grouped, insert_after, symbol_of
from attnwalk.layer.stages import PRODUCT_BACK, projection, projection_step
from attnwalk.reading.fields import shape_text

if TYPE_CHECKING:
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "ffn"
KINDS = ("gelu", "relu", "silu", "swiglu")
KEYS = ("ffn", "W_1", "b_1", "W_2", "b_2", "W_gate", "ffn_norm_gamma", "ffn_norm_beta")
MAX_D_FF = 4096
COURSE_AFTER = {"block": "layer_norm"}  # its lesson, in the course after the norm's


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def read(d: Draft) -> None:
    f, top = d.f, d.top
    if "ffn" not in top:
        for key in KEYS[1:]:
            if key in top:
                raise f.error(key, top[key], f"{key} is a parameter of the feed-forward network; add "
                              "ffn: gelu | relu | silu | swiglu, or remove it")
        return
    kind = f.choice(top["ffn"], "ffn", KINDS)
    if not residual.on(d):
        raise f.error("ffn", top["ffn"], "the FFN reads the residual stream H = X + O and adds its "
                      "output back to it: add residual: true")
    for key in ("W_1", "W_2") + (("W_gate",) if kind == "swiglu" else ()):
        if key not in top:
            raise f.error("ffn", top["ffn"], f"ffn: {kind} needs {key}: W_1 and W_gate are "
                          "d_model × d_ff, W_2 is d_ff × d_model" if kind == "swiglu" else
                          f"ffn needs {key}: W_1 is d_model × d_ff, W_2 is d_ff × d_model")
    if kind != "swiglu" and "W_gate" in top:
        raise f.error("W_gate", top["W_gate"], "W_gate is SwiGLU's gate: use ffn: swiglu, or remove it")
    d_model = d.main.d_model
    W_1 = f.matrix(top["W_1"], "W_1")
    d_ff = W_1.shape[1]
    if W_1.shape[0] != d_model:
        raise f.error("W_1", top["W_1"], f"W_1 is {shape_text(W_1)}, but it must be d_model × d_ff: "
                      f"{d_model} rows, one for each column of H")
    if d_ff > MAX_D_FF or d.main.n * d_ff > 4_194_304:
        raise f.error("W_1", top["W_1"], f"W_1 has {d_ff} columns: d_ff is at most {MAX_D_FF} here "
                      "(a lesson's FFN is a few dozen wide)")
    shapes = {"W_1": (d_model, d_ff), "W_2": (d_ff, d_model), "W_gate": (d_model, d_ff)}
    names = {"W_1": "d_model × d_ff", "W_2": "d_ff × d_model", "W_gate": "d_model × d_ff"}
    for key in ("W_1", "W_2", "W_gate"):
        if key in top:
            W = W_1 if key == "W_1" else f.matrix(top[key], key)
            if W.shape != shapes[key]:
                raise f.error(key, top[key], f"{key} is {shape_text(W)}, but it must be {names[key]} = "
                              f"{shapes[key][0]} × {shapes[key][1]} (d_ff = {d_ff}, W_1's columns)")
            d.params[key] = W
    for key, width, what in (("b_1", d_ff, "d_ff (W_1's columns)"), ("b_2", d_model, "d_model")):
        if key in top:
            b = f.vector(top[key], key)
            if b.shape[0] != width:
                raise f.error(key, top[key], f"{key} has {b.shape[0]} numbers, but it must have "
                              f"{what} = {width}: one for each column it is added to")
            d.params[key] = b
    norm.read_gamma_beta(d, "ffn_norm_gamma", "ffn_norm_beta")
    d.settings[NAME] = kind


def _kind(scn: Scenario) -> str:
    return scn.setting(NAME) or "gelu"  # (G's text, asked of a layer without it: explain, the text checks)


def _act(ctx: Context, U: np.ndarray) -> np.ndarray:
    return act.ACTIVATIONS[_kind(ctx.scn)].apply(U)  # (n, d_ff), cell by cell


def _act_grad(ctx: Context, dG: np.ndarray, G: np.ndarray, U: np.ndarray) -> tuple:
    return (dG * act.ACTIVATIONS[_kind(ctx.scn)].slope(U),)


def _gated(ctx: Context, X: np.ndarray, U: np.ndarray, W: np.ndarray) -> np.ndarray:
    return act.silu(X @ W) * U  # (n, d_model) @ (d_model, d_ff) -> (n, d_ff), ⊙ U


def _gated_grad(ctx: Context, dG: np.ndarray, G: np.ndarray, X: np.ndarray, U: np.ndarray,
                W: np.ndarray) -> tuple:
    delta = ffncells.gate_delta(X, U, W, dG)  # (n, d_ff) ∂L/∂a
    return delta @ W.T, dG * act.silu(X @ W), X.T @ delta


def _act_terms(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return (f"{{d}} ⊙ {act.ACTIVATIONS[_kind(scn)].name}'({{0}})",)


def _formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    """U = LN₂(H) · W_1 + b_1, F = G · W_2 (+ b_2 where given)."""
    return f"{stage.symbol} = {grouped(symbol_of(stage.reads[0], scn))} · " + " + ".join(stage.params)


def _act_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    """G = GELU(U) (with GELU's tanh form written out), ReLU(U), SiLU(U); φ(U) as written where
    the layer has no FFN (explain's stage, asked of another scenario)."""
    if scn.setting(NAME) is None:
        return base
    kind = _kind(scn)
    return f"{stage.symbol} = {act.ACTIVATIONS[kind].name}({grouped(symbol_of(stage.reads[0], scn))})" + (
        ",  GELU(u) = ½ u (1 + tanh(√(2/π) (u + 0.044715 u³)))" if kind == "gelu" else "")


def _gate_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    """G = SiLU(LN₂(H) · W_gate) ⊙ U."""
    x, u = (grouped(symbol_of(name, scn)) for name in stage.reads)
    return f"{stage.symbol} = SiLU({x} · {stage.params[0]}) ⊙ {u}"


def _sum(ctx: Context, H: np.ndarray, F: np.ndarray) -> np.ndarray:
    return H + F  # (n, d_model)


def _sum_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    return f"Y = {symbol_of(stage.reads[0], scn)} + F"


def _variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return (_kind(scn),)


def _act_step(scn: Scenario, mode: Mode, u: str) -> str:
    return f"{act.ACTIVATIONS[_kind(scn)].name}({u})"


_SUM_BACK = Backward(lambda ctx, d, out, H, F: (d, d), fixed_terms("{d}", "{d}"), gradcells.passed)
STAGES = (
    Stage("U", "U", "U = $0 · W_1 + b_1", "n", "d_ff", projection, reads=("LN2",), params=("W_1", "b_1"),
          weight="W_1", formula_for=_formula, worked=ffncells.product, step=projection_step("W_1"),
          overflow="use a smaller W_1", aliases=("up", "ffn_up", "u"), backward=PRODUCT_BACK),
    Stage("G", "G", "G = φ(U)", "n", "d_ff", _act, reads=("U",), formula_for=_act_formula, variants=_variants,
          worked=lambda c: ffncells.activation(_kind(c.scn))(c), step=_act_step, aliases=("act", "activation", "g"),
          backward=Backward(_act_grad, _act_terms, lambda c, stage, i: ffncells.activation_grad(_kind(c.scn))(c, stage, i))),
    Stage("F", "F", "F = $0 · W_2 + b_2", "n", "d_model", projection, reads=("G",), params=("W_2", "b_2"),
          weight="W_2", weight_rows="d_ff", formula_for=_formula, worked=ffncells.product,
          step=projection_step("W_2"), overflow="use a smaller W_2", aliases=("down", "ffn_down", "f"),
          backward=PRODUCT_BACK),
    Stage("res_ffn", "Y", "Y = $0 + $1", "n", "d_model", _sum, reads=("res_attn", "F"), formula_for=_sum_formula,
          worked=ffncells.stream_sum, step=lambda scn, mode, h, f: f"{h} + {f}",
          aliases=("y", "block_output", "output"), backward=_SUM_BACK),
)


def extend(stages: list[Stage], scn: Scenario) -> None:
    kind = _kind(scn)
    stream = roles.block_output(tuple(stages))  # H, or LN(H) under post placement
    before = norm.before_ffn(scn, stream.key, stream.symbol)  # pre placement: LN₂(H)
    x = before[-1].key if before else stream.key
    up, gate, down, total = STAGES
    biased = [name for name in ("b_1", "b_2") if name in scn.params]
    up = up._replace(reads=(x,), params=("W_1", *(["b_1"] if "b_1" in biased else [])),
                     learned=("b_1",) if "b_1" in biased else ())
    down = down._replace(params=("W_2", *(["b_2"] if "b_2" in biased else [])),
                         learned=("b_2",) if "b_2" in biased else ())
    if kind == "swiglu":
        gate = gate._replace(compute=_gated, reads=(x, "U"), params=("W_gate",), weight="W_gate",
                             formula_for=_gate_formula,
                             worked=ffncells.gated, step=lambda scn, mode, h, u: f"SiLU({h} · W_gate) ⊙ {u}",
                             backward=Backward(_gated_grad, fixed_terms(
                                 "({d} ⊙ {1} ⊙ SiLU'({0} · {2})) · {2}ᵀ", "{d} ⊙ SiLU({0} · {2})",
                                 "{0}ᵀ · ({d} ⊙ {1} ⊙ SiLU'({0} · {2}))"), ffncells.gated_grad))
    total = total._replace(reads=(stream.key, "F"))
    if _normalised_sum(stream):  # post placement: the FFN adds to LN(H), and LN₂(Y) ends the block
        total = total._replace(variants=lambda scn, mode: ("post",))
    insert_after(stages, stream.key, *before, up, gate, down, total)
    insert_after(stages, total.key, *norm.after_sum(scn, total.key, total.symbol, second=True))  # post: LN₂(Y)
    # Z's note on where the learned parameters are: the FFN's W_1 and W_2 as well
    notes = {"truth.no_parameters": "ffn.no_parameters", "truth.no_parameters_w_o": "ffn.no_parameters_w_o"}
    amend(stages, "Z", notes=lambda scn, mode, said: [notes.get(n, n) for n in said])


def grad_variants(scn: Scenario) -> tuple[str, ...]:
    """The backward walk's text: under post placement the FFN reads LN(H) and LN₂(Y) ends the
    block (its sum reads the norm's output, not H)."""
    by_key = {s.key: s for s in scn.graph}
    total = by_key.get(STAGES[3].key)
    return ("post",) if total is not None and _normalised_sum(by_key[total.reads[0]]) else ()


def _normalised_sum(stream: Stage) -> bool:
    """Is the stream the FFN adds to the residual sum normalised (post placement's LN(H)), rather
    than the sum H itself (pre) or a real model's own stream?"""
    return stream.key != residual.KEY and residual.KEY in stream.reads


# -- the block lesson's own questions (tutor/lessonquiz.py asks them; their text is
# quiz.lesson.block.*): the numbers each needs, or None where the walk does not show the point

def _focus(walk) -> int | None:
    """The row the lesson is about (its focus, bank), where the walk has the residual and the FFN."""
    row = walk.scenario.focus
    return row if row is not None and walk.has(residual.KEY) and walk.has("U") else None


def _kept(walk) -> dict | None:
    """H = X + O: bank's own row is kept and attention's output added to it, not put in its place."""
    row = _focus(walk)
    if row is None:
        return None
    from attnwalk.layer.axes import token_labels

    out = roles.output(walk.computed).key
    return {"token": token_labels(walk.scenario.tokens)[row], "x": walk.mats["X"][row],
            "o": walk.mats[out][row], "h": walk.mats[residual.KEY][row]}


def _silent(walk) -> dict | None:
    """A ReLU unit whose input is negative writes nothing: bank's money unit, outweighed by the
    water attention brought."""
    row = _focus(walk)
    if row is None or _kind(walk.scenario) != "relu":
        return None
    from attnwalk.layer.axes import token_labels

    U = walk.mats["U"][row]  # (d_ff,)
    unit = int(np.argmin(U))
    if U[unit] >= 0:
        return None
    return {"token": token_labels(walk.scenario.tokens)[row], "unit": unit + 1, "u": float(U[unit]),
            "w": np.asarray(walk.scenario.param("W_2"))[unit]}


QUESTIONS = {"block": {"kept": _kept, "silent": _silent}}
