"""The unembedding: from the block's output to the next token, as GPT-2's and Llama's heads do it.

    vocab: [the, river, bank, …]          the vocabulary, a word per id (0-based, in this order)
    W_U: MATRIX                           d_model × |vocab| (GPT-2's and Llama's lm_head, transposed)
    tie_embeddings: true                  W_U = vocab_embeddingsᵀ instead (GPT-2, Gemma: tied)
    vocab_embeddings: MATRIX              |vocab| × d_model: the embedding table; the tokens'
                                          `embeddings` are its rows when the file leaves them out
    final_norm: layer | rms               a norm before the head (GPT-2's ln_f, Llama's norm):
    final_norm_gamma, final_norm_beta,    γ, β (ones, zeros) and ε (1e-5), as `norm:`'s
    final_norm_eps
    temperature: 1                        p = softmax(ℓ / T)
    top_k: 5                              how many of the likeliest next tokens the walk lists

The stages: LN_f (with a final norm), logits ℓ = Y · W_U (one row per position, one column per
word of the vocabulary) and p = softmax(ℓ / T). Row i of p is the distribution of the token
AFTER position i. They read the block's output (the last block's, when there are several).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from attnwalk.layer import nexttoken, normcells, norms, roles
from attnwalk.layer.cells import dims_shown
from attnwalk.layer.graph import Backward, Stage, get, insert_after, symbol_of
from attnwalk.layer.stages import PRODUCT_BACK, projection
from attnwalk.reading.fields import quoted, shape_text, whole
from attnwalk.reading.yamltree import Node, indexed

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.reading.fields import Fields
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "unembed"
COURSE_AFTER = {"next_token": "backprop"}  # its lesson: after the first loss and gradient
KEYS = ("vocab", "W_U", "tie_embeddings", "vocab_embeddings", "final_norm", "final_norm_gamma",
        "final_norm_beta", "final_norm_eps", "temperature", "top_k")
NORMS = ("layer", "rms")
TOP_K = 5
VOCAB = roles.VOCAB  # the named dimension of the logits' columns: one per word of the vocabulary


class Unembed(NamedTuple):
    vocab: tuple[str, ...]
    tied: bool = False  # W_U = vocab_embeddingsᵀ
    temperature: float = 1.0
    top_k: int = TOP_K
    norm: str | None = None  # "layer" | "rms" | None
    eps: float = 1e-5

    @property
    def table(self) -> str:
        """The parameter the logits are made with: W_U, or the tied embedding table."""
        return "vocab_embeddings" if self.tied else "W_U"


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def setting(scn: Scenario) -> Unembed:
    return scn.setting(NAME) or Unembed(("",))  # (the text of a layer without it: explain, checks)


# -- reading the keys --------------------------------------------------------------------------------


def _vocab(f: Fields, top: dict[str, Node]) -> tuple[str, ...]:
    vocab = f.strings(top["vocab"], "vocab")
    seen: dict[str, int] = {}
    for i, word in enumerate(vocab):
        if word in seen:
            raise f.error(indexed("vocab", i), top["vocab"].value[i], f"{quoted(word, 20)} is in the "
                          f"vocabulary twice (entries {seen[word] + 1} and {i + 1}); each word has one id")
        seen[word] = i
    return vocab


def _ids(f: Fields, top: dict[str, Node], vocab: tuple[str, ...]) -> list[int]:
    """Each token's id: its place in the vocabulary. A token not in it is refused."""
    tokens = f.strings(top["tokens"], "tokens")
    ids = []
    for i, tok in enumerate(tokens):
        if tok not in vocab:
            listed = ", ".join(quoted(w, 20) for w in vocab[:12]) + (", …" if len(vocab) > 12 else "")
            raise f.error(indexed("tokens", i), top["tokens"].value[i], f"the token {quoted(tok, 20)} is "
                          f"not in vocab ({listed}); add it to vocab, or change the token")
        ids.append(vocab.index(tok))
    return ids


def fill(f: Fields, top: dict[str, Node]) -> None:
    """Before the tokens are read: with a vocabulary and its embedding table and no `embeddings`,
    the tokens' embeddings are the table's rows at their ids (E = EmbeddingTable[ids])."""
    if "embeddings" in top or "vocab_embeddings" not in top or "vocab" not in top or "tokens" not in top:
        return
    vocab = _vocab(f, top)
    table = _table_given(f, top, len(vocab))
    node = top["vocab_embeddings"]
    rows = [Node([Node(float(x), node.line) for x in table[i]], node.line) for i in _ids(f, top, vocab)]
    top["embeddings"] = Node(rows, node.line)


def _table_given(f: Fields, top: dict[str, Node], size: int) -> np.ndarray:
    table = f.matrix(top["vocab_embeddings"], "vocab_embeddings")
    if table.shape[0] != size:
        raise f.error("vocab_embeddings", top["vocab_embeddings"], f"vocab_embeddings has "
                      f"{table.shape[0]} rows, but vocab has {size} words: one row per word")
    return table


def read(d: Draft) -> None:
    f, top = d.f, d.top
    if "vocab" not in top:
        for key in KEYS[1:]:
            if key in top:
                raise f.error(key, top[key], f"{key} belongs to the unembedding, which needs the "
                              "vocabulary: add vocab: [WORD, …] (and W_U, or tie_embeddings with "
                              "vocab_embeddings), or remove it")
        return
    vocab = _vocab(f, top)
    ids = _ids(f, top, vocab)
    if d.main.ids is not None and list(d.main.ids) != ids:
        raise f.error("ids", top["ids"], f"ids are {list(d.main.ids)}, but the tokens' places in vocab "
                      f"are {ids} (counted from 0): with a vocabulary a token's id is its place in it; "
                      "remove ids, or make them agree")
    d_model = d.main.d_model
    width = d_model if d.W_O is not None or d.heads * d.d_v == d_model else d.heads * d.d_v
    tied = f.boolean(top["tie_embeddings"], "tie_embeddings") if "tie_embeddings" in top else False
    table = _table_given(f, top, len(vocab)) if "vocab_embeddings" in top else None
    if table is not None:
        if table.shape[1] != d_model:
            raise f.error("vocab_embeddings", top["vocab_embeddings"], f"vocab_embeddings has "
                          f"{table.shape[1]} columns, but d_model is {d_model} (embeddings have "
                          f"{d_model} columns)")
        _agree(f, top, d.main.E, table, ids, d.main.tokens)
        d.params["vocab_embeddings"] = table
    if tied:
        if "W_U" in top:
            raise f.error("W_U", top["W_U"], "tie_embeddings: true makes W_U the embedding table "
                          "transposed (vocab_embeddingsᵀ); remove W_U, or tie_embeddings")
        if table is None:
            raise f.error("tie_embeddings", top["tie_embeddings"], "tie_embeddings: true reads W_U as "
                          f"vocab_embeddingsᵀ: give vocab_embeddings, |vocab| × d_model = {len(vocab)} × {d_model}")
        if width != d_model:
            raise f.error("tie_embeddings", top["tie_embeddings"], f"the block's output is {width} wide "
                          f"(h·d_v, with no W_O), but the embedding table's rows are d_model = {d_model}: "
                          "tied, the output must be d_model wide; add W_O")
    else:
        if "W_U" not in top:
            raise f.error("vocab", top["vocab"], "the vocabulary needs its unembedding: give W_U "
                          f"(d_model × |vocab| = {width} × {len(vocab)}), or tie_embeddings: true "
                          "with vocab_embeddings")
        W_U = f.matrix(top["W_U"], "W_U")
        if W_U.shape != (width, len(vocab)):
            rows = "d_model" if width == d_model else "h·d_v (the output is concat, no W_O)"
            raise f.error("W_U", top["W_U"], f"W_U is {shape_text(W_U)}, but it must be "
                          f"{rows} × |vocab| = {width} × {len(vocab)}")
        d.params["W_U"] = W_U
    temperature = 1.0
    if "temperature" in top:
        temperature = f.number(top["temperature"], "temperature")
        if not temperature > 0:
            raise f.error("temperature", top["temperature"], f"temperature must be above 0, got "
                          f"{temperature:g}: p = softmax(ℓ / T) divides by it (1 leaves the logits as they are)")
    top_k = min(TOP_K, len(vocab))
    if "top_k" in top:
        top_k = f.integer(top["top_k"], "top_k", minimum=1)
        if top_k > len(vocab):
            raise f.error("top_k", top["top_k"], f"top_k is {whole(top_k)}, but vocab has only "
                          f"{len(vocab)} words")
    norm, eps = _final_norm(d, width)
    d.settings[NAME] = Unembed(vocab, tied, temperature, top_k, norm, eps)


def _agree(f: Fields, top: dict[str, Node], E: np.ndarray, table: np.ndarray, ids: list[int],
           tokens: tuple[str, ...]) -> None:
    """The tokens' embeddings, where the file gives both, are the table's rows at their ids."""
    for i, j in enumerate(ids):
        if not np.array_equal(E[i], table[j]):
            node = top["embeddings"]
            at = node.value[i] if isinstance(node.value, list) and i < len(node.value) else node
            raise f.error(indexed("embeddings", i), at, f"{quoted(tokens[i], 20)}'s embedding is not "
                          f"row {j + 1} of vocab_embeddings ({quoted(tokens[i], 20)}'s row): a token's "
                          "embedding is the table's row; remove embeddings to look them up, or make them agree")


def _final_norm(d: Draft, width: int) -> tuple[str | None, float]:
    f, top = d.f, d.top
    if "final_norm" not in top:
        for key in ("final_norm_gamma", "final_norm_beta", "final_norm_eps"):
            if key in top:
                raise f.error(key, top[key], f"{key} is only used with final_norm: layer or rms; "
                              "remove it, or add final_norm")
        return None, 1e-5
    kind = f.choice(top["final_norm"], "final_norm", NORMS)
    eps = 1e-5
    if "final_norm_eps" in top:
        eps = f.number(top["final_norm_eps"], "final_norm_eps")
        if not eps > 0:
            raise f.error("final_norm_eps", top["final_norm_eps"], f"final_norm_eps must be above 0, "
                          f"got {eps:g} (1e-5 is usual)")
    if kind == "rms" and "final_norm_beta" in top:
        raise f.error("final_norm_beta", top["final_norm_beta"], "final_norm_beta is only used with "
                      "final_norm: layer (RMSNorm has no β)")
    for key, default in (("final_norm_gamma", np.ones(width)), ("final_norm_beta", np.zeros(width))):
        if key == "final_norm_beta" and kind == "rms":
            continue
        value = f.vector(top[key], key) if key in top else default
        if value.shape[0] != width:
            raise f.error(key, top[key], f"{key} has {value.shape[0]} numbers, but the block's "
                          f"output has {width} columns: one for each")
        d.params[key] = value
    return kind, eps


def dimension_names(scn: Scenario, dim: str) -> tuple[str, ...] | None:
    """The logits' and probabilities' columns are the vocabulary's words."""
    return setting(scn).vocab if dim == VOCAB and active(scn) else None


def dimension_sizes(scn: Scenario) -> dict[str, int]:
    """How wide the vocabulary's columns are (an export's size is counted before it is made)."""
    return {VOCAB: len(setting(scn).vocab)}


# -- the stages --------------------------------------------------------------------------------------


def _normalized(ctx: Context, Y: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None = None) -> np.ndarray:
    u = setting(ctx.scn)
    if u.norm == "rms":
        return norms.rms_normalized(Y, norms.rms(Y, u.eps), gamma)  # (n, d_model)
    return norms.normalized(Y, norms.stats(Y, u.eps), gamma, beta)  # (n, d_model)


def _norm_grad(ctx: Context, d: np.ndarray, out: np.ndarray, Y: np.ndarray, gamma: np.ndarray,
               beta: np.ndarray | None = None) -> tuple:
    u = setting(ctx.scn)
    if u.norm == "rms":
        return norms.rms_normalized_grad(d, Y, gamma, u.eps)
    return norms.normalized_grad(d, Y, gamma, u.eps)


def _norm_terms(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    if setting(scn).norm == "rms":
        return "(G − x̂ ⊙ mean(G ⊙ x̂)) / RMS,  G = {d} ⊙ γ_f", "Σ_i {d} ⊙ x̂"
    return "(G − mean(G) − x̂ ⊙ mean(G ⊙ x̂)) / σ,  G = {d} ⊙ γ_f", "Σ_i {d} ⊙ x̂", "Σ_i {d}"


def _norm_grad_cell(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    u = setting(c.scn)
    return normcells.grad_lines(c, stage, index, u.norm == "rms", u.eps)


def _norm_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    u, y = setting(scn), stage.reads[0]
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
            root, gamma)
    mu, sigma = norms.stats(y[None, :], u.eps)[0]
    mean_lines, mu_shown = normcells.mean_lines(c, name, y, mu)
    sigma_lines, sigma_shown = normcells.sigma_lines(c, name, y, mu, sigma, u.eps)
    beta = c.scn.param("final_norm_beta")[c.col]
    return [*lines, *mean_lines, *sigma_lines,
            *normcells.normalized_lines(c, f"{c.sym()}[{tok}, {dim}]", y[c.col], mu_shown, sigma_shown,
                                        gamma, beta)]


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
          backward=Backward(_norm_grad, _norm_terms, _norm_grad_cell,
                            {"final_norm_gamma": "γ_f", "final_norm_beta": "β_f"})),
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
                                 formula="ℓ = $0 · E_vocabᵀ",
                                 backward=Backward(_tied_grad, lambda scn, mode: ("{d} · {1}", "{d}ᵀ · {0}"),
                                                   _tied_grad_cell, {u.table: "E_vocab"},
                                                   {u.table: f"{VOCAB} × d_model"}))
    new += [logits._replace(reads=(last,)), p]
    insert_after(stages, stages[-1].key, *new)


def _symbol(stages: list[Stage], key: str) -> str:
    return get(stages, key).symbol


# -- what the walk, the export and the loss read ---------------------------------------------------


def temperature(scn: Scenario) -> float:
    return setting(scn).temperature


def token_ids(scn: Scenario) -> list[int]:
    """Each token's id: its place in the vocabulary."""
    vocab = setting(scn).vocab
    return [vocab.index(tok) for tok in scn.tokens]


def vocabulary(scn: Scenario) -> tuple[str, ...]:
    return setting(scn).vocab


def logits_of(walk: Walk) -> np.ndarray:
    """ℓ, (n, |vocab|): the stage the probabilities read."""
    return walk.mats[roles.next_logits(walk.computed).key]


def ranked(walk: Walk, row: int, temperatures: tuple[float, ...] = nexttoken.TEMPERATURES) -> dict[str, Any]:
    """Row `row`'s next tokens, the likeliest first (ties: the earlier id first), the top k of
    them: each one's token, id, logit and p at each temperature (and at the scenario's)."""
    u = setting(walk.scenario)
    logits = logits_of(walk)[row]
    order = nexttoken.top_k(logits, u.top_k)
    ps = {T: nexttoken.softmax_t(logits[None, :], T)[0] for T in (*temperatures, u.temperature)}
    return {"temperatures": list(temperatures), "temperature": u.temperature, "top_k": u.top_k,
            "next": [{"token": u.vocab[j], "id": int(j), "logit": float(logits[j]),
                      "p": float(ps[u.temperature][j]), "p_at": [float(ps[T][j]) for T in temperatures]}
                     for j in order]}


def export(walk: Walk, data: dict[str, Any]) -> None:
    """The vocabulary, T and k, and for every position the top k next tokens ({token, id, logit,
    p}, as `model --next` writes a model's last position); "next" is the last position's."""
    from attnwalk.layer.axes import token_labels

    u = setting(walk.scenario)
    rows = []
    for i, tok in enumerate(token_labels(walk.scenario.tokens)):
        top = ranked(walk, i)["next"]
        rows.append({"position": i + 1, "token": tok,
                     "next": [{k: v for k, v in item.items() if k != "p_at"} for item in top]})
    data["unembedding"] = {"vocab": list(u.vocab), "tied": u.tied, "temperature": u.temperature,
                           "top_k": u.top_k, "final_norm": u.norm, "positions": rows}
    data["next"] = rows[-1]["next"]


def note_values(scn: Scenario) -> dict[str, Any]:
    u = setting(scn)
    return {"vocab_size": len(u.vocab), "temperature": f"{u.temperature:g}", "top_k": u.top_k}


def draft_vocab(d: Draft) -> tuple[str, ...] | None:
    """The vocabulary a file being read gives (a next-token target reads its ids), else None."""
    u = d.settings.get(NAME)
    return None if u is None else u.vocab
