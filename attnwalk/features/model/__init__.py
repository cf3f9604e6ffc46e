"""A real pretrained layer's own stages (`attnwalk model`): what BERT, GPT-2 and the Llama family
add around the attention the lessons walk. Never from a scenario file: commands/model.py builds
the scenario, with the ModelLayer as the setting "model" and the projections' biases as params.

    E_sum = E + P (+ E_seg)     the embeddings summed (the Llama family: E itself)
    H                           a later layer's input, as the layers below made it
    μ, σ (or RMS);  X = LN(·)   the norm before attention: X is what W_Q multiplies
    R = X + O (or E_sum + O);  Y = LN(R)   the residual sum, and BERT's norm after it
    heads                       every head's entropy per query, and where each looks most
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.features.model import cells, gemma, layout, nexttoken, quant
from attnwalk.layer import norms, ops
from attnwalk.layer.graph import Stage, amend, get, insert_after, insert_before, replace

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

NAME = layout.NAME
# The word-order question trades two tokens' embeddings (tutor/wordorder.py): a model's stream
# comes from the model (past layer 1 from the layers below), not from rows that can trade places.
SWAPPABLE = False


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def _segments(ctx: Context) -> np.ndarray:
    return np.array(layout.layer_of(ctx.scn).E_seg[ctx.here], dtype=np.float64)  # segment 0's row


def _earlier(ctx: Context) -> np.ndarray:
    return np.array(layout.layer_of(ctx.scn).norm_in.x[ctx.here], dtype=np.float64)  # as the model made it


def _stats(ctx: Context, x: np.ndarray) -> np.ndarray:
    return norms.stats(x, layout.norm_before(ctx.scn).eps)  # (n, 2): μ, σ


def _rms(ctx: Context, x: np.ndarray) -> np.ndarray:
    return norms.rms(x, layout.norm_before(ctx.scn).eps)  # (n, 1)


def _input(ctx: Context, x: np.ndarray, stats: np.ndarray) -> np.ndarray:
    """X: the LayerNorm (or RMSNorm) of E_sum or H, what W_Q multiplies."""
    params = layout.norm_before(ctx.scn)
    if layout.rms(ctx.scn):
        return norms.rms_normalized(x, stats, params.gamma)
    return norms.normalized(x, stats, params.gamma, params.beta)


def _after(ctx: Context, R: np.ndarray) -> np.ndarray:
    params = layout.norm_after(ctx.scn)
    return norms.normalized(R, norms.stats(R, params.eps), params.gamma, params.beta)


def _glance(ctx: Context, A: list[np.ndarray]) -> np.ndarray:
    """Every head's entropy per query, in bits: (n, h). The screen adds each head's map."""
    return np.stack([ops.entropy_bits(a) for a in A], axis=1)


def _family(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return layout.family(scn, mode)


STAGES = (
    Stage("E_seg", "E_seg", "E_seg = W_seg[0]", "n", "d_model", _segments,
          variants=lambda scn, mode: ("one_type",) if active(scn) and layout.fairseq_positions(scn) else (),
          worked=cells.segment),
    Stage("E_sum", "E_sum", "E_sum = E + P", "n", "d_model", lambda ctx, *parts: sum(parts),
          reads=("E", "P"), formula_for=layout.sum_formula, variants=_family, worked=cells.embedding_sum),
    Stage("H", "H", "H = R_L + MLP(ln_2(R_L))", "n", "d_model", _earlier, formula_for=layout.earlier_formula,
          variants=_family, worked=cells.earlier),
    Stage("LN_stats", "μ, σ", "μ = mean(x), σ = √(var(x) + ε)", "n", "stats", _stats, reads=("E_sum",),
          formula_for=layout.stats_formula, worked=cells.norm_stats,
          aliases=("stats", "mu", "sigma", "μσ", "mean")),
    Stage("RMS", "RMS", "RMS(x) = √(mean(x²) + ε)", "n", "rms", _rms, reads=("E_sum",),
          formula_for=layout.rms_formula, worked=cells.rms_stats, aliases=("rmsnorm", "rms_stats")),
    Stage("glance", "heads", "entropy(A_h[i, :]) = −Σ_j A_h[i, j] log₂ A_h[i, j]", "n", "h", _glance,
          reads=("A",), across=True, worked=cells.glance, aliases=("heads", "all", "allheads", "all_heads"),
          panel="glance"),
    Stage("R", "R", "R = X + O", "n", "d_model", lambda ctx, x, O: x + O, reads=("X", "O"),
          formula_for=layout.residual_formula, variants=_family, worked=cells.residual,
          aliases=("residual",)),
    Stage("Y", "Y", "Y = LN(R)", "n", "d_model", _after, reads=("R",), formula_for=layout.after_formula,
          worked=cells.after_norm, aliases=("ln2", "output")),
)
STAGES += gemma.STAGES  # Gemma 3's QK-norm and its norm after attention (gemma.extend places them)
STAGES += nexttoken.STAGES  # --next: the final norm and the next token (nexttoken.extend places them)
_BY_KEY = {s.key: s for s in STAGES}


def _position_cell(c: Cell) -> list:
    """A learned position table's row (RoBERTa numbers positions from the padding id + 1)."""
    P = c.walk.matrix("P")[c.row]
    if layout.fairseq_positions(c.scn):
        return [c.say("model.position_cell_offset", pos=c.row), f"P[{c.rows[c.row]}] = {c.vec(P)}"]
    return [c.say("model.position_cell", pos=c.row), f"P[{c.rows[c.row]}] = W_pos[{c.row}] = {c.vec(P)}"]


def _p_variants(scn: Scenario, mode: Mode, names: tuple[str, ...]) -> tuple[str, ...]:
    if scn.main.positional != "explicit":  # RoPE: a Llama-family layer, X the RMSNorm of E
        return ("rope_model", *names)
    offset = ("offset",) if layout.fairseq_positions(scn) else ()  # RoBERTa's numbering
    return tuple(part for name in names for part in ((*offset, "learned") if name == "explicit" else (name,)))


def _no_parameters(scn: Scenario, mode: Mode, notes: list[str]) -> list[str]:
    # biases, norms and tables are learned too (the Llama family: no position table, no β)
    said = "model.llama.no_parameters" if layout.rms(scn) else "model.no_parameters"
    return [said if n.startswith("truth.no_parameters") else n for n in notes]


def _with_block(stage: Stage):
    inner = stage.worked

    def worked(c: Cell) -> list:  # the stored block behind the first weight of the dot product
        return [*inner(c), *quant.stored_weight(c, stage.params[0])]
    return worked


def extend(stages: list[Stage], scn: Scenario) -> None:
    x = layout.norm_input(scn)
    added = [_BY_KEY["E_sum"]._replace(reads=("E", "P", "E_seg")) if layout.has_segments(scn)
             else _BY_KEY["E_sum"]]
    if layout.has_segments(scn):
        added.insert(0, _BY_KEY["E_seg"])
    if layout.later_layer(scn):
        added.append(_BY_KEY["H"])
    norm = "RMS" if layout.rms(scn) else "LN_stats"
    added.append(_BY_KEY[norm]._replace(reads=(x,)))
    insert_after(stages, "P", *added)
    replace(stages, "X", compute=_input, reads=(x, norm), formula_for=layout.input_formula,
            variants=_family, worked=cells.rms_norm if layout.rms(scn) else cells.layer_norm,
            step=lambda scn, mode, *x: "X[t]",  # its norm's output (and the layers below)
            backward=None)  # a model's norm: its gradient is not worked out (grad takes scenario files)
    replace(stages, "P", worked=_position_cell if scn.main.positional == "explicit" else get(stages, "P").worked)
    amend(stages, "P", variants=_p_variants, formula=layout.position_formula)
    for key in ("Q", "K", "V"):  # a model's X is normalised (and past layer 1 carries context)
        amend(stages, key, notes=lambda scn, mode, notes: [
            "rope.model.unrotated" if n == "rope.unrotated" else n for n in notes])
    if getattr(layout.layer_of(scn), "stored", None):  # a GGUF's weights: how each became a number
        for key in ("Q", "K", "V", "O"):
            replace(stages, key, worked=_with_block(get(stages, key)))
    insert_before(stages, "QK^T", _BY_KEY["glance"])
    amend(stages, "Z", notes=_no_parameters)
    insert_after(stages, "O", _BY_KEY["R"]._replace(reads=(layout.residual_input(scn), "O")))
    if layout.post_norm(scn):
        insert_after(stages, "R", _BY_KEY["Y"])
    if gemma.active(scn):  # Gemma 3: QK-norm, the norm after attention, the scaled embeddings
        gemma.extend(stages, scn)


DECODE_FIELD = None  # a real layer has no file to point at


def refuse_decode(scn: Scenario) -> str | None:
    """`model --decode` on an encoder (BERT): no mask, every token reads the later ones too."""
    from attnwalk.layer.kvcache import CAUSAL_REASON

    if scn.masked:
        return None
    return (f"decode needs a causal mask, and this model attends both ways (an encoder such as BERT: "
            f"every token reads the later ones too): {CAUSAL_REASON}; decode a causal model such as GPT-2")


def next_steps(scn: Scenario) -> list[tuple[str, dict]]:
    """What the end of the walk suggests (render/lesson.py): the quiz and compare, as options of
    `attnwalk model` (the layer has no file to name)."""
    return [("end.model_quiz", {}), ("end.model_compare", {})]


def decode_notes(scn: Scenario, n: int) -> list[tuple[str, dict]]:
    return [("decode.variant.note_model", {})]
