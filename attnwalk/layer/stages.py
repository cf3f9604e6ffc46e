"""The one definition of attnwalk's stages.

Each Stage says how its matrix is computed from earlier ones, when it applies to a scenario, its
formula (and the variants of it a scenario or mode calls for), which text variants and notes fit,
how one of its cells is worked out (layer/cells.py), its kind, whether it is per head, and its
shape's named dimensions. The walk, every screen, `explain`, every export format, the quiz and the
handouts read STAGES; adding a stage is one entry here plus its text in attnwalk/text/*.toml
(README, "Architecture").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.layer import alibi, cells, modelcells, ops, realmodel, tiled
from attnwalk.layer.modes import BASELINE, mode_named
from attnwalk.layer.rope import SHIFT
from attnwalk.layer.scores import raw_scores

if TYPE_CHECKING:
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Layer
    from attnwalk.scenario.model import Scenario

# What a stage's matrix holds, which decides its colours and how a cell is explained.
SIGNED = "signed"  # any real numbers: diverging colours
WEIGHTS = "weights"  # rows of a distribution: sequential colours
MASKED = "masked"  # scores with -inf where the mask forbids: grey cells
TOKENS = "tokens"  # the token list itself, no matrix

Mats = Mapping[str, np.ndarray]  # the matrices computed so far (a head's own over the shared ones)


def _always(scn: Scenario) -> bool:
    return True


def _any_mode(mode: Mode) -> bool:
    return True


def _no_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return ()


def _no_notes(scn: Scenario, mode: Mode) -> list[str]:
    return []


class Stage(NamedTuple):  # not a frozen dataclass, whose definition costs every start ~0.7 ms more
    """One stage of the layer, as every command names, computes, shows and explains it."""

    key: str  # the name in exports, in `explain` and in the text files: "QK^T"
    symbol: str  # how it is printed: "QKᵀ"
    formula: str  # as the lessons write it; `formula_for` varies it per scenario and mode
    rows: str  # named dimension of the rows: "n" (queries) or "m" (keys)
    cols: str  # named dimension of the columns: "d_model", "d_k", "d_v", "m" (keys), "h·d_v"
    compute: Callable[[Mats, Layer], np.ndarray] | None  # pure; None for the tokens stage
    kind: str = SIGNED
    per_head: bool = False  # computed once per head in multi-head scenarios
    split: bool = False  # its columns are h blocks, one per head (Q, K, V: each head reads its own; concat)
    shared: bool = False  # split into g K/V heads, each read by heads/g query heads (K, V; kv_heads)
    applies: Callable[[Scenario], bool] = _always  # does this scenario have the stage at all?
    formula_for: Callable[[str, Scenario, Mode], str] | None = None  # (base, scn, mode) -> formula
    variants: Callable[[Scenario, Mode], tuple[str, ...]] = _no_variants  # text variants, most specific first
    notes: Callable[[Scenario, Mode], list[str]] = _no_notes  # text keys of what this scenario adds
    worked: Callable[[cells.Cell], list] | None = None  # one cell's arithmetic (layer/cells.py)
    overflow: str = ""  # the fix to suggest when the stage overflows float64 ("" = not checked)
    inputs: tuple[str, ...] = ()  # the scenario fields its numbers come from, to name the one to
    # make smaller when it overflows; "keys:" fields are the keys' sequence's (a source's, if any)
    weight: str | None = None  # the learned matrix that makes it (a Scenario field): "W_Q"
    weight_rows: str = "d_model"  # the named dimension of that matrix's rows (its columns: cols)
    exported: bool = True  # in `export --format json` (S+M is S with −∞: the JSON keeps S and mask)
    aliases: tuple[str, ...] = ()  # other spellings a learner may type, lower case
    in_mode: Callable[[Mode], bool] = _any_mode  # is it defined in this mode? (tiled: not in hard)

    @property
    def square(self) -> bool:
        """True when both axes are tokens (query × key), so columns are labelled by token."""
        return self.cols == "m"

    def text_variants(self, scn: Scenario | None = None, mode: Mode | str = BASELINE) -> tuple[str, ...]:
        """The names of the text variants that fit `scn` under `mode`, most specific first: the
        text files may give a variant its own fields ([stage."S".unscaled] title, what, …)."""
        return () if scn is None else self.variants(scn, mode_named(mode))

    def formula_in(self, scn: Scenario | None = None, mode: Mode | str = BASELINE) -> str:
        """The formula as `scn` computes it under `mode`: every screen, explanation and export
        that prints a formula reads this. Formulas are math only, the same in every language."""
        if scn is None or self.formula_for is None:
            return self.formula
        return self.formula_for(self.formula, scn, mode_named(mode))


# -- how each stage is computed --------------------------------------------------------------------


def _positions(m: Mats, layer: Layer) -> np.ndarray:
    return layer.positions(layer.scn.main)  # (n, d_model)


def _projection(weight: str) -> Callable[[Mats, Layer], np.ndarray]:
    def compute(m: Mats, layer: Layer) -> np.ndarray:
        X = m["X"] if weight == "W_Q" else layer.kv_input(m)  # cross-attention: K, V read the source
        out = ops.product(X, getattr(layer.scn, weight))  # (n or m, d_model) @ (d_model, h·d) -> (n or m, h·d)
        bias = layer.scn.bias_after(weight)  # a real model's b_Q, b_K, b_V: (h·d,), added to every row
        return out if bias is None else out + bias
    return compute


def _rotated(key: str) -> Callable[[Mats, Layer], np.ndarray]:
    def compute(m: Mats, layer: Layer) -> np.ndarray:
        rope = layer.scn.rope  # self-attention only (the loader refuses a source): positions 0 … n − 1
        return rope.turn(m[key], np.arange(m[key].shape[0]))  # (n, d_k)
    return compute


def _raw(m: Mats, layer: Layer) -> np.ndarray:
    if "Q_rot" in m:  # RoPE: the rotated queries and keys are the ones compared
        return raw_scores(layer.scn, m["Q_rot"], m["K_rot"])  # (n, d_k), (n, d_k) -> (n, n)
    return raw_scores(layer.scn, m["Q"], m["K"])  # (n, d_k), (m, d_k) -> (n, m), this head's


def _scaled(m: Mats, layer: Layer) -> np.ndarray:
    return m["QK^T"] / layer.scale  # (n, m): √d_k, or 1 where the mode or the score kind says so


def _bias(m: Mats, layer: Layer) -> np.ndarray:
    slope = alibi.slopes(layer.scn.heads)[layer.head]
    return alibi.bias(layer.scn.n, layer.scn.m, slope)  # (n, m): −m_h·|i − j|


def _weights(m: Mats, layer: Layer) -> np.ndarray:
    return layer.mode.weights(layer.seen_scores(m), layer.scn.allowed)  # (n, m), rows sum to 1


def _tiled(m: Mats, layer: Layer) -> np.ndarray:
    scores = tiled.tiled_scores(layer.mode, layer.seen_scores(m), layer.scn.allowed)  # (n, m)
    return tiled.output(scores, m["V"], layer.scn.tiles)  # (n, d_v), keys B at a time


def _concat(m: Mats, layer: Layer) -> np.ndarray:
    return np.concatenate([head["Z"] for head in layer.heads], axis=1)  # h × (n, d_v) -> (n, h·d_v)


def _projected(m: Mats, layer: Layer) -> np.ndarray:
    concat = m["concat"] if "concat" in m else layer.heads[0]["Z"]  # (n, h·d_v)
    out = concat @ layer.scn.W_O  # (n, h·d_v) @ (h·d_v, d_model) -> (n, d_model)
    return out if layer.scn.b_O is None else out + layer.scn.b_O


def _input(m: Mats, layer: Layer) -> np.ndarray:
    """X: E + P, or in a real model the LayerNorm before attention (realmodel.py)."""
    if realmodel.is_model(layer.scn):
        return realmodel.layer_input(m, layer)
    return m["E"] + m["P"]  # (n, d_model)


# -- formulas, text variants and notes that depend on the scenario and the mode --------------------


def _p_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if scn.main.positional in ("none", "rope"):  # RoPE adds nothing to X: it turns q and k later
        return "P = 0"
    if scn.main.positional == "explicit" and realmodel.is_model(scn):  # its learned position table
        return "P = W_pos[pos_ids]" if realmodel.fairseq_positions(scn) else "P = W_pos[0 … n−1]"
    if scn.main.positional == "explicit":
        return "P ∈ ℝ^(n × d_model)"  # the scenario gives the rows
    return base


def _order_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """P's and X's text: which positions there are, and whether a mask carries order of its own.

    Without positions and without a mask the layer is permutation-equivariant; a mask is laid over
    positions, so it makes order matter even with P = 0 ("none_causal"). The sinusoidal text is the
    stage's own; a masked variant only replaces the sentences the mask makes false."""
    mask = "" if not scn.masked else "causal" if scn.mask_kind == "causal" else "masked"
    positional = scn.main.positional  # none | sinusoidal | explicit | rope
    if positional in ("none", "rope"):  # nothing added to X (RoPE rotates q and k instead)
        plain = (f"{positional}_{mask}", positional) if mask else (positional,)
        if realmodel.is_model(scn):  # a Llama-family layer: X is the RMSNorm of E, not E itself
            return ("rope_model",) + plain
        alibi_order = scn.bias == "alibi" and positional == "none"  # ALiBi carries order
        return ("none_alibi", *plain) if alibi_order else plain
    if realmodel.is_model(scn):  # learned positions; X is a LayerNorm, in its family's words
        offset = ("offset",) if realmodel.fairseq_positions(scn) else ()  # RoBERTa's numbering
        return ((mask,) if mask else ()) + offset + ("learned",)
    return ((mask,) if mask else ()) + (("explicit",) if positional == "explicit" else ())


def _id_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return () if scn.main.ids is not None else ("no_ids",)  # ids and the lookup only where ids are


def _embedding_notes(scn: Scenario, mode: Mode) -> list[str]:
    E = np.asarray(scn.main.E) * 100  # typed by hand: at most two decimals (random ones have more)
    return ["truth.hand_set"] if bool(np.all(np.abs(E - np.round(E)) < 1e-9)) else []


def _projection_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if scn.source is not None and not base.startswith("Q"):
        base = base.replace("= X ·", "= X_src ·")  # keys and values come from the source
    if scn.bias_after(base.split(" · ")[-1]) is not None:  # "Q = X · W_Q" + " + b_Q"
        base += " + b_" + base[0]
    count = scn.heads if base.startswith("Q") else scn.groups  # K and V: one block per K/V head
    return base + (f" = {blocks(base[0], count)}" if count > 1 else "")


def _learned_bias_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    if not realmodel.is_model(scn) or scn.b_Q is None:
        return ()
    # with RoPE the bias is turned with its key, so b_K does change the weights (K's text)
    return ("biased_rope", "biased") if scn.rope is not None else ("biased",)


def _q_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """A real model's bias first (its text names the heads' blocks too), then several heads:
    Q is n × h·d_k there, not "d_k columns"."""
    return _learned_bias_variants(scn, mode) + (("heads",) if scn.heads > 1 else ())


def _o_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return ("biased",) if realmodel.is_model(scn) and scn.b_O is not None else ()  # Qwen2: b_Q, no b_O


def _o_formula(base: str, scn: Scenario, mode: Mode) -> str:
    return base + " + b_O" if scn.b_O is not None else base


def _projection_notes(scn: Scenario, mode: Mode) -> list[str]:
    notes = ["cross.kv"] if scn.source is not None else [_unrotated(scn)] if scn.rope else []
    if scn.groups < scn.heads:
        notes.append("gqa.shared_mqa" if scn.groups == 1 else "gqa.shared")
    return notes


def _q_notes(scn: Scenario, mode: Mode) -> list[str]:
    split = "gqa.split_note" if scn.groups < scn.heads else "heads.split"  # K, V: g blocks
    return (([split] if scn.heads > 1 else []) + (["cross.q"] if scn.source is not None else [])
            + ([_unrotated(scn)] if scn.rope else []))


def _unrotated(scn: Scenario) -> str:
    # a model's X is normalised (and past layer 1 carries context), so not "the same row as E"
    return "rope.model.unrotated" if realmodel.is_model(scn) else "rope.unrotated"


def _roped(scn: Scenario) -> bool:
    return scn.rope is not None


def _rot_formula(base: str, scn: Scenario, mode: Mode) -> str:
    """Which dimensions turn together, and how fast: "(i, i + d_k/2) by pos · θ_i"."""
    if scn.rope is None:  # asked of a scenario without the stage: the definition's own
        return base
    pair = "(i, i + d_k/2)" if scn.rope.pairing == "half" else "(2i, 2i+1)"
    theta = f"{scn.rope.base:g}^(−2i/d_k)"
    if scn.rope.scaling:  # a model's rope_scaling rescales the slow pairs: named as a function
        theta = f"{scn.rope.scaling}({theta})"
    return f"{base[0]}_rot[pos, {pair}] = R(pos · θ_i) · {base[0]}[pos, {pair}],  θ_i = {theta}"


def _rot_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """"θ falls toward 1/base" holds for the base's own frequencies; a model's rescaled ones
    (Llama 3.1's rope_scaling) fall further."""
    return ("scaled",) if scn.rope is not None and scn.rope.scaling else ()


def _rot_notes(scn: Scenario, mode: Mode) -> list[str]:
    if scn.rope is None:
        return []
    scaled = ["rope.model.scaled"] if scn.rope.scaling else []  # a model's rescaled θ_i
    return [f"rope.pairs_{scn.rope.pairing}", "rope.angle"] + scaled


def _raw_formula(base: str, scn: Scenario, mode: Mode) -> str:
    hat = "\u0302" if scn.qk_norm else ""  # q̂ = q / RMS(q): QK-norm scores see only direction
    rot = "_rot" if scn.rope else ""  # RoPE: the rotated ones
    q, k = f"q{hat}{rot}_i", f"k{hat}{rot}_j"
    score = f"tanh({q} + {k}) · w_a" if scn.score == "additive" else f"{q} · {k}"
    if scn.qk_norm:
        if scn.qk_scale != 1.0:
            score = f"{scn.qk_scale:g} × " + (f"({score})" if scn.score == "dot" else score)
        score += f",  q{hat} = q / RMS(q)"
    return f"QKᵀ[i, j] = {score}"


def _raw_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    if scn.rope is not None:  # the rotated queries and keys are dotted (RoPE scores are dot products)
        return ("rope",)
    if scn.qk_norm and scn.scorer.divides:  # normalised q and k: no length left to speak of
        return ("qk_norm",)
    return () if scn.scorer.divides else (scn.score,)  # additive: no dot product to speak of


def _raw_notes(scn: Scenario, mode: Mode) -> list[str]:
    notes = ["cross.what"] if scn.source is not None else []  # (additive: the variant says it)
    notes += ["score.qk_norm.explain"] if scn.qk_norm else []
    notes += ["rope.offset"] if scn.rope else []
    return notes + ["truth.cost_cross" if scn.source is not None else "truth.cost"]  # O(n²·d_k)


def _s_formula(base: str, scn: Scenario, mode: Mode) -> str:
    return base if mode.scales(scn.scorer) else "S = QKᵀ"


def _s_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    undivided = () if scn.scorer.divides else (scn.score,)  # additive: never divided by √d_k
    if not mode.reads_scores or not mode.smooth:  # S computed as usual, then ignored or only ranked
        return (mode.name, *undivided)
    return undivided or (() if mode.divides else (mode.name,))


def _mode_notes(scn: Scenario, mode: Mode) -> list[str]:
    return [] if mode == BASELINE else [f"mode.{mode.name}.explain"]


def _mask_notes(scn: Scenario, mode: Mode) -> list[str]:
    if scn.mask_kind == "window":  # a band, not a triangle: the variant names its width
        kind = "window.causal" if scn.window_causal else "window.symmetric"
        return [kind, "stage.S+M.neg_inf"] + (["window.wide"] if scn.window >= scn.n else [])
    return [f"stage.S+M.{scn.mask_kind}", "stage.S+M.neg_inf"]


def _mask_formula(base: str, scn: Scenario, mode: Mode) -> str:
    return base.replace("S + M", "(S + B) + M", 1) if scn.bias == "alibi" else base


def _bias_formula(base: str, scn: Scenario, mode: Mode) -> str:
    # under a causal mask only j ≤ i is ever seen: the paper writes the distance as i − j
    return base.replace("|i − j|", "(i − j)") if scn.mask_kind == "causal" else base


def _bias_notes(scn: Scenario, mode: Mode) -> list[str]:
    return ["alibi.slopes", "alibi.causal" if scn.mask_kind == "causal" else "alibi.symmetric"] + (
        ["alibi.with_positions"] if scn.main.positional != "none" else [])


def _bias_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return () if mode.reads_scores else ("uniform",)  # uniform reads neither S nor B


def _biased_notes(scn: Scenario, mode: Mode) -> list[str]:
    return ["alibi.uniform"] if not mode.reads_scores else []


def _a_formula(base: str, scn: Scenario, mode: Mode) -> str:
    if not mode.reads_scores:
        if not scn.masked:  # every key allowed: 1 / (number of keys)
            return f"A[i, j] = 1 / {'m' if scn.source is not None else 'n'}"
        return "A[i, :] = softmax(M[i, :]) = exp(M[i, :]) / |{k : M[i, k] = 0}|"
    if not mode.smooth:
        return "A[i, :] = onehot(argmax_k (S + M)[i, k])"
    return base


def _a_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    if not mode.smooth:
        return (mode.name,)  # uniform, hard (A's and Z's text)
    return ("alibi",) if scn.bias == "alibi" else ()  # softmax reads S + B (A's text only)


def _output_notes(scn: Scenario, mode: Mode) -> list[str]:
    # From QKᵀ to Z nothing is learned in any mode; additive scores (w_a) and QK-norm's scale are
    if scn.score != "dot" or scn.qk_norm:
        return []
    if realmodel.rms(scn):  # no position table, no β: the RMSNorm's γ, the projections, W_O
        return ["model.llama.no_parameters"]
    if realmodel.is_model(scn):  # biases, LayerNorms and tables are learned too
        return ["model.no_parameters"]
    return ["truth.no_parameters_w_o" if scn.W_O is not None else "truth.no_parameters"]


def _tiled_formula(base: str, scn: Scenario, mode: Mode) -> str:
    return base if scn.tiles is None else f"{base},  B = {scn.tiles}"


def _tiled_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return () if mode.reads_scores else (mode.name,)  # uniform: the recurrence runs on M alone


def _tiled_notes(scn: Scenario, mode: Mode) -> list[str]:
    notes = ["tiles.masked_blocks"] if scn.masked else []
    notes += ["tiles.one_block"] if scn.tiles is not None and scn.tiles >= scn.m else []
    # what the blocks hold under each variant: S + B, rotated scores, a shared V, a band of keys
    notes += ["tiles.variant.alibi"] if scn.bias == "alibi" else []
    notes += ["tiles.variant.rope"] if scn.rope is not None else []
    notes += ["tiles.variant.gqa"] if scn.groups < scn.heads else []
    return notes + (["tiles.variant.window"] if scn.window is not None else [])


def _concat_formula(base: str, scn: Scenario, mode: Mode) -> str:
    return f"concat = {blocks('Z', scn.heads)}" if scn.heads > 1 else base


def _concat_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return ("gqa",) if scn.groups < scn.heads else ()  # query heads that share K and V


def _concat_notes(scn: Scenario, mode: Mode) -> list[str]:
    # heads.why opens each head's screens, and concat's mistake says it too (heads.w_o would
    # repeat O's own what)
    return ["heads.concat"]


def note_values(scn: Scenario, note: str) -> dict[str, object]:
    """The numbers a note's placeholders take ({heads}, {d_head}, {width}, {n}, {m}, {window},
    {kv_heads}, {group}, {slopes})."""
    d_head = scn.d_k if note == "heads.split" else scn.d_v
    slopes = ""
    if scn.bias == "alibi":
        shown = [f"{slope:.6g}" for slope in alibi.slopes(scn.heads)]
        slopes = ", ".join(shown if len(shown) <= 8 else shown[:4] + ["…"] + shown[-2:])
    values = {"heads": scn.heads, "d_head": d_head, "width": scn.heads * scn.d_v, "n": scn.n,
              "m": scn.m, "window": scn.window or 0, "kv_heads": scn.groups,
              "group": scn.heads // scn.groups, "slopes": slopes, "B": scn.tiles}
    if scn.rope is not None:  # rope.*: the pairs, the slowest frequency, the demonstration's shift
        values.update(d_k=scn.d_k, pairs=scn.d_k // 2, last=scn.d_k // 2 - 1, base=f"{scn.rope.base:g}",
                      shift=SHIFT, scaling=scn.rope.scaling or "")
    return values


def blocks(symbol: str, heads: int) -> str:
    """"[Q_1 | Q_2 | Q_3]", or "[Q_1 | Q_2 | … | Q_8]" for many heads: one block per head."""
    shown = [f"{symbol}_{h}" for h in range(1, heads + 1)]
    if heads > 3:
        shown = shown[:2] + ["…", shown[-1]]
    return "[" + " | ".join(shown) + "]"


def _x_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return realmodel.family_variants(scn, mode) if realmodel.is_model(scn) else _order_variants(scn, mode)


def _x_cell(c: cells.Cell) -> list:
    if realmodel.rms(c.scn):
        return modelcells.rms_norm(c)
    return modelcells.layer_norm(c) if realmodel.is_model(c.scn) else cells.input_sum(c)


_SINUSOIDAL = "P[pos, 2i] = sin(pos/10000^(2i/d_model)), P[pos, 2i+1] = cos(…)"
_ROT = "{x}_rot[pos, (i, i + d_k/2)] = R(pos · θ_i) · {x}[pos, (i, i + d_k/2)],  θ_i = 10000^(−2i/d_k)"
_BIG = "use smaller embeddings or weights"
_X = ("embeddings", "positional")  # what X is made of: the fields behind every later stage
_KEYS_X = ("keys:embeddings", "keys:positional")

STAGES: tuple[Stage, ...] = (
    Stage("tokens", "tokens", "token_i → id_i", "n", "-", None, TOKENS, variants=_id_variants),
    Stage("E", "E", "E = EmbeddingTable[ids]", "n", "d_model", lambda m, layer: np.array(layer.scn.main.E),
          variants=_id_variants, notes=_embedding_notes, worked=cells.embedding),
    Stage("P", "P", _SINUSOIDAL, "n", "d_model", _positions, formula_for=_p_formula,
          variants=_order_variants, worked=cells.position),
    Stage("E_seg", "E_seg", "E_seg = W_seg[0]", "n", "d_model", realmodel.segments,
          applies=realmodel.has_segments, variants=realmodel.segment_variants, worked=modelcells.segment),
    Stage("E_sum", "E_sum", "E_sum = E + P", "n", "d_model", realmodel.embedding_sum,
          applies=realmodel.is_model, formula_for=realmodel.sum_formula,
          variants=realmodel.family_variants, worked=modelcells.embedding_sum),
    Stage("H", "H", "H = R_L + MLP(ln_2(R_L))", "n", "d_model", realmodel.earlier,
          applies=realmodel.later_layer, formula_for=realmodel.earlier_formula,
          variants=realmodel.family_variants, worked=modelcells.earlier),
    Stage("LN_stats", "μ, σ", "μ = mean(x), σ = √(var(x) + ε)", "n", "stats", realmodel.norm_stats,
          applies=realmodel.layer_norm_before, formula_for=realmodel.stats_formula,
          worked=modelcells.norm_stats,
          aliases=("stats", "mu", "sigma", "μσ", "mean")),
    Stage("RMS", "RMS", "RMS(x) = √(mean(x²) + ε)", "n", "rms", realmodel.rms_stats,
          applies=realmodel.rms, formula_for=realmodel.rms_formula, worked=modelcells.rms_stats,
          aliases=("rmsnorm", "rms_stats")),
    Stage("X", "X", "X = E + P", "n", "d_model", _input, formula_for=realmodel.input_formula,
          variants=_x_variants, worked=_x_cell, overflow="use smaller embeddings or positions",
          inputs=_X),
    Stage("Q", "Q", "Q = X · W_Q", "n", "d_k", _projection("W_Q"), split=True, weight="W_Q",
          formula_for=_projection_formula, variants=_q_variants, notes=_q_notes,
          worked=cells.projection, overflow=_BIG,
          inputs=_X + ("W_Q",)),
    Stage("K", "K", "K = X · W_K", "m", "d_k", _projection("W_K"), split=True, shared=True, weight="W_K",
          formula_for=_projection_formula, variants=_learned_bias_variants, notes=_projection_notes,
          worked=cells.projection, overflow=_BIG, inputs=("W_K",) + _KEYS_X),
    Stage("V", "V", "V = X · W_V", "m", "d_v", _projection("W_V"), split=True, shared=True, weight="W_V",
          formula_for=_projection_formula, variants=_learned_bias_variants, notes=_projection_notes,
          worked=cells.projection, overflow=_BIG, inputs=("W_V",) + _KEYS_X),
    Stage("Q_rot", "Q_rot", _ROT.format(x="Q"), "n", "d_k", _rotated("Q"), per_head=True, applies=_roped,
          formula_for=_rot_formula, variants=_rot_variants, notes=_rot_notes, worked=cells.rotation,
          overflow="use smaller queries", inputs=_X + ("W_Q",), aliases=("qrot", "rotated_q")),
    Stage("K_rot", "K_rot", _ROT.format(x="K"), "m", "d_k", _rotated("K"), per_head=True, applies=_roped,
          formula_for=_rot_formula, notes=_rot_notes, worked=cells.rotation,
          overflow="use smaller keys", inputs=("W_K",) + _KEYS_X, aliases=("krot", "rotated_k")),
    Stage("glance", "heads", "entropy(A_h[i, :]) = −Σ_j A_h[i, j] log₂ A_h[i, j]", "n", "h",
          realmodel.glance, applies=realmodel.is_model, variants=_concat_variants, worked=modelcells.glance,
          aliases=("heads", "all", "allheads", "all_heads")),
    Stage("QK^T", "QKᵀ", "QKᵀ[i, j] = q_i · k_j", "n", "m", _raw, per_head=True,
          formula_for=_raw_formula, variants=_raw_variants, notes=_raw_notes, worked=cells.scores,
          overflow="use smaller queries and keys", inputs=_X + ("W_Q", "W_K") + _KEYS_X,
          aliases=("qkt", "qk^t", "qk", "raw")),
    Stage("S", "S", "S = QKᵀ / √d_k", "n", "m", _scaled, per_head=True, formula_for=_s_formula,
          variants=_s_variants, notes=_mode_notes, worked=cells.scaled),
    Stage("B", "B", "B[i, j] = −m_h · |i − j|", "n", "m", _bias, per_head=True,
          applies=lambda scn: scn.bias == "alibi", formula_for=_bias_formula, notes=_bias_notes,
          variants=_bias_variants,
          worked=cells.alibi_bias, aliases=("bias", "alibi")),
    Stage("S+B", "S + B", "S + B", "n", "m", lambda m, layer: m["S"] + m["B"], per_head=True,
          applies=lambda scn: scn.bias == "alibi", notes=_biased_notes, variants=_bias_variants,
          worked=cells.biased,
          aliases=("sb", "biased")),
    Stage("S+M", "S + M", "S + M,  M[i, j] ∈ {0, −∞}", "n", "m",
          lambda m, layer: layer.seen_scores(m), MASKED, per_head=True, formula_for=_mask_formula,
          applies=lambda scn: scn.masked, notes=_mask_notes, worked=cells.masked, exported=False,
          aliases=("masked", "sm")),
    Stage("A", "A", "A[i, :] = softmax((S + M)[i, :])", "n", "m", _weights, WEIGHTS, per_head=True,
          formula_for=_a_formula, variants=_a_variants, notes=_mode_notes, worked=cells.softmax),
    Stage("Z", "Z", "Z = A · V", "n", "d_v", lambda m, layer: m["A"] @ m["V"], per_head=True,
          variants=_a_variants, notes=_output_notes, worked=cells.output,
          overflow="use smaller values", inputs=("W_V",) + _KEYS_X),  # (n, m) @ (m, d_v) -> (n, d_v)
    Stage("tiled", "Z_tiled", "Z_tiled[i, :] = Õ_i / l_i", "n", "d_v", _tiled, per_head=True,
          applies=lambda scn: scn.tiles is not None, in_mode=lambda mode: tiled.defined_in(mode),
          formula_for=_tiled_formula, variants=_tiled_variants, notes=_tiled_notes,
          worked=lambda c: _tiled_cell(c), exported=False, aliases=("tiles", "online", "flash")),
    Stage("concat", "concat", "concat = [Z_1 | Z_2 | … | Z_h]", "n", "h·d_v", _concat, split=True,
          applies=lambda scn: scn.heads > 1, formula_for=_concat_formula, notes=_concat_notes,
          variants=_concat_variants,
          worked=cells.concat),
    Stage("O", "O", "O = concat · W_O", "n", "d_model", _projected, weight="W_O", weight_rows="d_v",
          applies=lambda scn: scn.W_O is not None, formula_for=_o_formula, variants=_o_variants,
          worked=cells.projected, overflow="use a smaller W_O", inputs=("W_O", "W_V") + _KEYS_X),
    Stage("R", "R", "R = X + O", "n", "d_model", realmodel.residual, applies=realmodel.is_model,
          formula_for=realmodel.residual_formula, variants=realmodel.family_variants,
          worked=modelcells.residual, aliases=("residual",)),
    Stage("Y", "Y", "Y = LN(R)", "n", "d_model", realmodel.after_norm, applies=realmodel.post_norm,
          formula_for=realmodel.after_formula, worked=modelcells.after_norm, aliases=("ln2", "output")),
)


def _tiled_cell(c: cells.Cell) -> list:
    from attnwalk.layer.tiledcells import tiled_cell  # it reads the walk, which imports this module

    return tiled_cell(c)


# The stages only a real model's layer has (`attnwalk model`): a scenario file's notes cannot name them
MODEL_ONLY = frozenset({"E_seg", "E_sum", "H", "LN_stats", "RMS", "glance", "R", "Y"})


def stage_named(key: str, stages: tuple[Stage, ...] | None = None) -> Stage:
    """The stage whose key is `key` (KeyError when there is none)."""
    for stage in STAGES if stages is None else stages:
        if stage.key == key:
            return stage
    raise KeyError(key)


def stage_by_name(name: str, stages: tuple[Stage, ...] | None = None) -> Stage | None:
    """The stage a user means by `name` (key, symbol or a common spelling, any case), or None."""
    stages = STAGES if stages is None else stages
    folded = name.strip().lower().replace(" ", "")
    for stage in stages:
        if name == stage.key or folded in (stage.key.lower(), stage.symbol.lower().replace(" ", ""),
                                           *stage.aliases):
            return stage
    return None
