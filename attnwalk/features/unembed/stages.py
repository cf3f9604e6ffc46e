"""The unembedding's stages: the final norm LN_f, the logits ℓ = Y · W_U (tied: Y · E_vocabᵀ) and
p = softmax(ℓ / T), each with its compute, worked cell, decode step and backward."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.features.unembed.keys import NAME, setting, token_ids
from attnwalk.layer import nexttoken, normcells, norms, roles
from attnwalk.layer.cells import dims_shown
from attnwalk.layer.graph import Backward, Stage, get, grouped, insert_after, replace, symbol_of
from attnwalk.layer.stages import PRODUCT_BACK, projection

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

VOCAB = roles.VOCAB  # the named dimension of the logits' columns: one per word of the vocabulary

def _normalized(ctx: Context, Y: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None = None) -> np.ndarray:
    u = setting(ctx.scn)
    if u.norm == "rms":
        return norms.rms_normalized(Y, norms.rms(Y, u.eps), gamma)  # (n, d_model)
    return norms.normalized(Y, norms.stats(Y, u.eps), gamma, beta)  # (n, d_model)


def _norm_rule(scn: Scenario) -> tuple[str, float]:
    u = setting(scn)
    return u.norm or "layer", u.eps


def _norm_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    u, y = setting(scn), grouped(symbol_of(stage.reads[0], scn))  # Y, a later block's Y⁽²⁾
    if scn.setting(NAME) is None:  # asked of a layer without an unembedding (explain's stage): as written
        return base
    if u.norm == "rms":
        return f"RMSNorm_f({y}) = {y} / RMS · γ_f,  RMS = √(mean({y}[i, :]²) + ε),  ε = {u.eps:g}"
    return (f"LN_f({y}) = ({y} − μ) / σ · γ_f + β_f,  μ = mean({y}[i, :]),  σ = √(var({y}[i, :]) + ε),"
            f"  ε = {u.eps:g}")


def _norm_cell(c: Cell) -> list:
    """One row's statistics, then this dimension normalised (as the norm before the projections)."""
    u = setting(c.scn)
    y_key, Y = c.walk.input(c.stage, 0)
    y = Y[c.row]
    tok, dim = c.rows[c.row], c.cols[c.col]
    name = f"{c.sym(y_key)}[{tok}]"
    gamma = c.scn.param("final_norm_gamma")[c.col]
    lines: list = [f"{name} = {c.vec(y)}", *dims_shown(c, len(y))]
    if u.norm == "rms":
        root = float(norms.rms(y[None, :], u.eps)[0, 0])
        lines += normcells.rms_lines(c, name, y, root, u.eps)
        return lines + normcells.rms_normalized_lines(
            c, f"{c.sym()}[{tok}, {dim}] = {c.sym(y_key)}[{tok}, {dim}] / RMS {c.mk.times} γ_f[{dim}]", y[c.col],
            root, gamma, "_f")
    mu, sigma = norms.stats(y[None, :], u.eps)[0]
    mean_lines, mu_shown = normcells.mean_lines(c, name, y, mu)
    sigma_lines, sigma_shown = normcells.sigma_lines(c, name, y, mu, sigma, u.eps)
    beta = c.scn.param("final_norm_beta")[c.col]
    return [*lines, *mean_lines, *sigma_lines,
            *normcells.normalized_lines(c, f"{c.sym()}[{tok}, {dim}]", y[c.col], mu_shown, sigma_shown,
                                        gamma, beta, "_f")]


def _tied_logits(ctx: Context, Y: np.ndarray, table: np.ndarray) -> np.ndarray:
    return projection(ctx, Y, table.T)  # (n, d_model) @ (d_model, |vocab|) -> (n, |vocab|)


def _tied_grad(ctx: Context, d: np.ndarray, out: np.ndarray, Y: np.ndarray, table: np.ndarray) -> tuple:
    """ℓ = Y · Eᵀ: ∂L/∂Y = ∂L/∂ℓ · E, ∂L/∂E = ∂L/∂ℓᵀ · Y (word w's row: every position's ∂L/∂ℓ[:, w])."""
    return d @ table, d.T @ Y  # (n, V) @ (V, d) -> (n, d);  (V, n) @ (n, d) -> (V, d)


def _tied_grad_cell(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    from attnwalk.layer import gradcells

    g = gradcells.upstream(c, stage)  # (n, V) ∂L/∂ℓ
    dl = gradcells.d(stage.symbol)
    y_name, Y = gradcells.given(c, stage, 0)
    table = np.asarray(c.scn.param("vocab_embeddings"), dtype=np.float64)  # (V, d)
    if index == 0:
        value = float(g[c.row] @ table[:, c.col])
        return c.dot(f"{dl}[{c.rows[c.row]}] {c.mk.dot} E_vocab[:, {c.cols[c.col]}]", g[c.row],
                     table[:, c.col], value), value
    value = float(g[:, c.row] @ Y[:, c.col])
    return c.dot(f"{dl}[:, {c.rows[c.row]}] {c.mk.dot} {y_name}[:, {c.cols[c.col]}]", g[:, c.row],
                 Y[:, c.col], value), value


def _ids(scn: Scenario) -> np.ndarray:
    return np.array(token_ids(scn))  # each token's place in the vocabulary (keys.token_ids)


def _lookup(ctx: Context, table: np.ndarray) -> np.ndarray:
    """Tied: E = E_vocab[ids], each token's row of the one table W_U = E_vocabᵀ is made of too, so
    training moves the table through both its uses and E follows it (GPT-2's wte)."""
    return np.array(table[_ids(ctx.scn)[ctx.here]], dtype=np.float64)  # (n, d_model)


def _lookup_grad(ctx: Context, dE: np.ndarray, E: np.ndarray, table: np.ndarray) -> tuple:
    G = np.zeros(np.shape(table))
    np.add.at(G, _ids(ctx.scn)[ctx.here], dE)  # each position's row into its word's row, summed
    return (G,)


def _lookup_grad_cell(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """∂L/∂E_vocab[w, j] through E: the sum of ∂L/∂E[i, j] over the positions i holding word w."""
    from attnwalk.layer import gradcells

    g = gradcells.upstream(c, stage)  # (n, d) ∂L/∂E
    at = [i for i, w in enumerate(_ids(c.scn)) if w == c.row]
    value = float(sum(g[i, c.col] for i in at))
    de = gradcells.d(stage.symbol)
    if not at:
        return [c.prose(c.say("unembed.lookup_none", word=c.rows[c.row]))], 0.0
    parts = " + ".join(c.operand(g[i, c.col]) for i in at)
    terms = " + ".join(f"{de}[{c.walk.forward.scenario.tokens[i]}, {c.cols[c.col]}]" for i in at)
    sums = f"{terms} = {parts} = {c.num(value)}" if len(at) > 1 else f"{terms} = {c.num(value)}"  # one term: once
    return [c.prose(c.say("unembed.lookup_rows", word=c.rows[c.row])), sums], value


LOOKUP_BACK = Backward(_lookup_grad, lambda scn, mode: ("Σ_(i: id_i = w) {d}[i, :]",), _lookup_grad_cell,
                       {"vocab_embeddings": "E_vocab"}, {"vocab_embeddings": f"{VOCAB} × d_model"})


def _logits_cell(c: Cell) -> list:
    """ℓ[i, w] = y_i · W_U[:, w]: position i's row dotted with word w's column."""
    y_key, Y = c.walk.input(c.stage, 0)
    u = setting(c.scn)
    W = _table(c.scn)  # (d_model, |vocab|)
    y, w = Y[c.row], W[:, c.col]
    tok, word = c.rows[c.row], c.cols[c.col]
    column = f"E_vocab[{word}]" if u.tied else f"W_U[:, {word}]"
    return [f"{c.sym(y_key)}[{tok}] = {c.vec(y)}", f"{column} = {c.vec(w)}",
            *c.dot(f"{c.sym(y_key)}[{tok}] {c.mk.dot} {column}", y, w, c.value), *dims_shown(c, len(y)),
            c.prose(c.say("unembed.cell_row", token=tok, word=word))]


def _table(scn: Scenario) -> np.ndarray:
    """W_U, d_model × |vocab| (tied: the embedding table transposed)."""
    u = setting(scn)
    return np.asarray(scn.param(u.table), dtype=np.float64).T if u.tied else np.asarray(scn.param("W_U"))


def _probabilities(ctx: Context, logits: np.ndarray) -> np.ndarray:
    return nexttoken.softmax_t(logits, setting(ctx.scn).temperature)  # (n, |vocab|), rows sum to 1


def _p_grad(ctx: Context, dp: np.ndarray, p: np.ndarray, logits: np.ndarray) -> tuple:
    """p = softmax(ℓ / T): ∂L/∂ℓ = p ⊙ (∂L/∂p − rowsum(p ⊙ ∂L/∂p)) / T."""
    inner = np.sum(p * dp, axis=-1, keepdims=True)  # (n, 1)
    return (p * (dp - inner) / setting(ctx.scn).temperature,)


def _p_grad_cell(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    from attnwalk.layer import gradcells

    p = c.walk.forward.mats[stage.key]
    g = gradcells.upstream(c, stage)
    T = setting(c.scn).temperature
    tok, word = c.rows[c.row], c.cols[c.col]
    dp = gradcells.d(stage.symbol)
    lines = c.dot(f"p[{tok}] {c.mk.dot} {dp}[{tok}]", p[c.row], g[c.row], float(p[c.row] @ g[c.row]))
    mean = c.printed(c.dot_value(p[c.row], g[c.row]))
    a, ga = c.printed(float(p[c.row, c.col])), c.printed(float(g[c.row, c.col]))
    inner = c.printed(ga - mean)
    value = c.printed(c.printed(a * inner) / T)
    c.lands(value)
    lines.append(f"p[{tok}, {word}] {c.mk.times} ({dp}[{tok}, {word}] {c.mk.minus} {c.operand(mean)}) / T = "
                 f"{c.num(a)} {c.mk.times} {c.operand(inner)} / {c.short(T)} = {c.num(value)}")
    return lines, value


def _p_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    if scn.setting(NAME) is None:  # asked of a layer without an unembedding (explain's stage): as written
        return base
    return f"p[i, :] = softmax({symbol_of(stage.reads[0], scn)}[i, :] / T),  T = {setting(scn).temperature:g}"


def _p_cell(c: Cell) -> list:
    """p[i, w] at the scenario's T, each exponent with the row's max subtracted, from the digits
    printed before it."""
    T = setting(c.scn).temperature
    l_key, L = c.walk.input(c.stage, 0)
    return nexttoken.worked(c, L[c.row], T, c.sym(l_key))


def _step(scn: Scenario, mode: Mode, y: str) -> str:
    return f"{y} · W_U"


STAGES = (
    Stage("LN_f", "LN_f(Y)", "LN_f($0) = ($0 − μ) / σ · γ_f + β_f", "n", "d_model", _normalized, reads=("Y",),
          params=("final_norm_gamma", "final_norm_beta"), formula_for=_norm_formula, worked=_norm_cell,
          aliases=("ln_f", "final_norm", "norm_f"), overflow="use smaller weights or a larger final_norm_eps",
          step=lambda scn, mode, y: f"LN_f({y})",
          backward=normcells.backward(_norm_rule, {"final_norm_gamma": "γ_f", "final_norm_beta": "β_f"})),
    Stage("logits", "ℓ", "ℓ = $0 · W_U", "n", VOCAB, projection, reads=("Y",), params=("W_U",), weight="W_U",
          worked=_logits_cell, aliases=("logits", "logit", "l"), overflow="use a smaller W_U", step=_step,
          backward=PRODUCT_BACK),
    Stage("p", "p", "p[i, :] = softmax(ℓ[i, :] / T)", "n", VOCAB, _probabilities, reads=("logits",),
          formula_for=_p_formula, worked=_p_cell, aliases=("probabilities", "probs", "next"), panel="next",
          step=lambda scn, mode, l: f"softmax({l} / T)",
          backward=Backward(_p_grad, lambda scn, mode: ("{out} ⊙ ({d} − rowsum({out} ⊙ {d})) / T",), _p_grad_cell)),
)


def extend(stages: list[Stage], scn: Scenario) -> None:
    u = setting(scn)
    y = roles.block_output(tuple(stages)).key  # the last block's output, as the blocks made it
    norm, logits, p = STAGES
    last = y
    new = []
    if u.norm is not None:
        norm = norm._replace(reads=(y,), symbol=f"{'RMSNorm_f' if u.norm == 'rms' else 'LN_f'}({_symbol(stages, y)})",
                             params=("final_norm_gamma",) if u.norm == "rms" else norm.params)
        new.append(norm)
        last = norm.key
    if u.tied:
        logits = logits._replace(compute=_tied_logits, params=(u.table,), weight=None, learned=(u.table,),
                                 formula="ℓ = $0 · E_vocabᵀ", step=lambda scn, mode, y: f"{y} · E_vocabᵀ",
                                 backward=Backward(_tied_grad, lambda scn, mode: ("{d} · {1}", "{d}ᵀ · {0}"),
                                                   _tied_grad_cell, {u.table: "E_vocab"},
                                                   {u.table: f"{VOCAB} × d_model"}))
        # the tokens' rows are the table's too: E is looked up in it at every step of training
        replace(stages, "E", compute=_lookup, params=(u.table,), backward=LOOKUP_BACK)
    new += [logits._replace(reads=(last,)), p]
    insert_after(stages, stages[-1].key, *new)
    # the tokens' ids are their places in the vocabulary (features.token_ids): the tokens screen says so
    replace(stages, "tokens", variants=lambda scn, mode: () if scn.main.ids is not None else ("vocab_ids",))


def _symbol(stages: list[Stage], key: str) -> str:
    return get(stages, key).symbol
