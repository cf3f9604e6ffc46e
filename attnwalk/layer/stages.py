"""The one definition of attnwalk's stages.

Every other module (compute, render, explain, export, lesson text) reads this list; adding a stage
means adding one entry here and its text in attnwalk/text/*.toml.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from attnwalk.text import text

if TYPE_CHECKING:
    from attnwalk.scenario.model import Scenario

# What a stage's matrix holds, which decides its colours and how a cell is explained.
SIGNED = "signed"  # any real numbers: diverging colours
WEIGHTS = "weights"  # rows of a distribution: sequential colours
MASKED = "masked"  # scores with -inf where the mask forbids: grey cells
TOKENS = "tokens"  # the token list itself, no matrix


class Stage(NamedTuple):
    """One stage of the layer, as every command names, computes and explains it."""

    key: str  # the name in exports, in `explain` and in the text files: "QK^T"
    symbol: str  # how it is printed: "QKᵀ"
    title: str  # English title; translations live in attnwalk/text/
    formula: str
    rows: str  # named dimension of the rows: "n"
    cols: str  # named dimension of the columns: "d_model", "d_k", "d_v", "m" (keys)
    kind: str = SIGNED
    per_head: bool = False  # computed once per head in multi-head scenarios

    @property
    def square(self) -> bool:
        """True when both axes are tokens (query × key), so columns are labelled by token."""
        return self.cols == "m"


STAGES: tuple[Stage, ...] = (
    Stage("tokens", "tokens", "Tokens and ids", "token_i → id_i", "n", "-", TOKENS),
    Stage("E", "E", "Token embeddings", "E = EmbeddingTable[ids]", "n", "d_model"),
    Stage("P", "P", "Positional encoding", "P[pos, 2i] = sin(pos/10000^(2i/d_model)), P[pos, 2i+1] = cos(…)", "n", "d_model"),
    Stage("X", "X", "Input to the layer", "X = E + P", "n", "d_model"),
    Stage("Q", "Q", "Queries", "Q = X · W_Q", "n", "d_k"),
    Stage("K", "K", "Keys", "K = X · W_K", "m", "d_k"),
    Stage("V", "V", "Values", "V = X · W_V", "m", "d_v"),
    Stage("QK^T", "QKᵀ", "Raw scores", "QKᵀ[i, j] = q_i · k_j", "n", "m", SIGNED, True),
    Stage("S", "S", "Scaled scores", "S = QKᵀ / √d_k", "n", "m", SIGNED, True),
    Stage("S+M", "S + M", "Masked scores", "S + M,  M[i, j] ∈ {0, −∞}", "n", "m", MASKED, True),
    Stage("A", "A", "Attention weights", "A[i, :] = softmax((S + M)[i, :])", "n", "m", WEIGHTS, True),
    Stage("Z", "Z", "Output", "Z = A · V", "n", "d_v", SIGNED, True),
    Stage("concat", "concat", "Heads concatenated", "concat = [Z_1 | Z_2 | … | Z_h]", "n", "h·d_v"),
    Stage("O", "O", "Output projection", "O = concat · W_O", "n", "d_model"),
)

BY_KEY: dict[str, Stage] = {s.key: s for s in STAGES}

# Keys a user may type for a stage (`attnwalk explain girl_bangs QKT 1 2`), folded to lower case.
_ALIASES = {
    "qkt": "QK^T", "qk^t": "QK^T", "qkᵀ": "QK^T", "qk": "QK^T", "raw": "QK^T",
    "s+m": "S+M", "masked": "S+M", "sm": "S+M",
}


def stage_by_name(name: str) -> Stage | None:
    """The stage a user means by `name` (key, symbol or a common spelling), or None."""
    if name in BY_KEY:
        return BY_KEY[name]
    folded = name.strip().lower().replace(" ", "")
    for stage in STAGES:
        if folded in (stage.key.lower(), stage.symbol.lower().replace(" ", "")):
            return stage
    key = _ALIASES.get(folded)
    return BY_KEY[key] if key else None


def formula(stage: Stage, scn: "Scenario | None" = None, mode: str = "scaled") -> str:
    """The stage's formula as `scn` computes it under `mode`: Stage.formula, varied where the
    scenario does something else (cross-attention's K and V come from the source, multi-head Q, K
    and V are split into blocks, additive and QK-norm scores, modes that do not divide or that
    ignore the scores). Every screen, explanation and export that prints a formula reads this."""
    base = stage.formula
    if scn is None:
        return base
    key = stage.key
    if key == "P" and scn.main.positional != "sinusoidal":
        return "P = 0" if scn.main.positional == "none" else "P ∈ ℝ^(n × d_model)"  # given rows
    if key in ("Q", "K", "V"):
        if scn.source is not None and key != "Q":
            base = base.replace("= X ·", "= X_src ·")  # keys and values come from the source
        if scn.heads > 1:
            base += f" = {_blocks(key, scn.heads)}"
        return base
    if key == "QK^T":
        hat = "\u0302" if scn.qk_norm else ""  # q̂ = q / RMS(q): QK-norm scores see only direction
        q, k = f"q{hat}_i", f"k{hat}_j"
        score = f"tanh({q} + {k}) · w_a" if scn.score == "additive" else f"{q} · {k}"
        if scn.qk_norm:
            if scn.qk_scale != 1.0:
                score = f"{scn.qk_scale:g} × " + (f"({score})" if scn.score == "dot" else score)
            score += f",  q{hat} = q / RMS(q)"
        return f"QKᵀ[i, j] = {score}"
    if key == "S" and (scn.score == "additive" or mode == "unscaled"):
        return "S = QKᵀ"  # additive scores and unscaled mode are not divided by √d_k
    # Formulas are math only, the same in every language; the words belong in the stage texts.
    if key == "A" and mode == "uniform":
        if not scn.masked:  # every key allowed: 1 / (number of keys)
            return f"A[i, j] = 1 / {'m' if scn.source is not None else 'n'}"
        return "A[i, :] = softmax(M[i, :]) = exp(M[i, :]) / |{k : M[i, k] = 0}|"
    if key == "A" and mode == "hard":
        return "A[i, :] = onehot(argmax_k (S + M)[i, k])"
    if key == "concat" and scn.heads > 1:
        return f"concat = {_blocks('Z', scn.heads)}"
    return base


def stage_text(lang: str, stage: Stage, scn: "Scenario | None" = None, mode: str = "scaled",
               field: str = "title") -> str:
    """A field of the stage's text (title, what, why, mistake) in `lang`, as `scn` computes it
    under `mode`: the variant's own field where attnwalk/text has one ([stage."S".unscaled]), else
    the stage's. Beside formula(), the one place a stage's words vary; every screen, explanation
    and handout that names or explains a stage reads this."""
    tx = text(lang)
    for variant in _variants(stage, scn, mode):
        key = f"stage.{stage.key}.{variant}.{field}"
        if tx.has(key):
            return tx.t(key)
    return tx.stage(stage.key, field)


def _variants(stage: Stage, scn: "Scenario | None", mode: str) -> tuple[str, ...]:
    """The names of the text variants that fit, most specific first."""
    if scn is None:
        return ()
    key = stage.key
    if key == "P" and scn.main.positional != "sinusoidal":
        return (scn.main.positional,)  # none, explicit
    if key == "S":
        additive = ("additive",) if scn.score == "additive" else ()  # never divided by √d_k
        if mode in ("uniform", "hard"):  # S computed as usual, then ignored or only ranked
            return (mode, *additive)
        return additive or (("unscaled",) if mode == "unscaled" else ())
    if key == "A" and mode in ("uniform", "hard"):
        return (mode,)
    return ()


def _blocks(symbol: str, heads: int) -> str:
    """"[Q_1 | Q_2 | Q_3]", or "[Q_1 | Q_2 | … | Q_8]" for many heads: one block per head."""
    shown = [f"{symbol}_{h}" for h in range(1, heads + 1)]
    if heads > 3:
        shown = shown[:2] + ["…", shown[-1]]
    return "[" + " | ".join(shown) + "]"


MODES: tuple[str, ...] = ("scaled", "unscaled", "uniform")
EXTRA_MODES: tuple[str, ...] = ("hard",)  # only when asked for (compare)
