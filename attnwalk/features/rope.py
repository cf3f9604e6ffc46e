"""Rotary positions (`positional: rope`, `rope: {base, pairing}`; Su et al., RoFormer): nothing is
added to X; each head's queries and keys are turned pair by pair by an angle that grows with
their position (layer/rope.py), so q_rot · k_rot depends only on the offset between them.

Q_rot and K_rot stand between Q, K and QKᵀ; a decoder caches the rotated keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer import gradcells
from attnwalk.layer.graph import Backward, Stage, amend, fixed_terms, get, has, insert_before, replace, reroute
from attnwalk.layer.rope import PAIRINGS, SHIFT, Rope, pair_of

if TYPE_CHECKING:
    from attnwalk.scenario.load import Draft
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

NAME = "rope"
KEYS = ("rope",)


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def _rope(scn: Scenario) -> Rope:
    return scn.setting(NAME)


def read(d: Draft) -> None:
    """`positional: rope` with `rope: {base: 10000, pairing: half | interleaved}` (both optional);
    refused where the rotation has no meaning here: an odd d_k (dimensions turn in pairs), a
    source (two sequences share no position axis) and additive scores (no dot product)."""
    f, top, source = d.f, d.top, d.source
    if source is not None and source.positional == "rope":
        raise f.error("source.positional", top["source"].value["positional"], "rope cannot be the "
                      "source's positional encoding: RoPE rotates a sequence's queries and keys "
                      "together, and a source has keys only; give it none or sinusoidal")
    node = top.get("rope")
    if d.main.positional != "rope":
        if node is not None:
            raise f.error("rope", node, "rope is only used with positional: rope; remove it, or "
                          "set positional: rope")
        return
    where = top["positional"]
    if source is not None:
        raise f.error("positional", where, "positional: rope cannot be used with a source: RoPE "
                      "makes a score depend on the offset between the query's and the key's "
                      "positions, and a source's positions are not on the same axis as the "
                      "queries' (models that use RoPE rotate only in self-attention); remove "
                      "source, or use positional: sinusoidal")
    scoring = d.settings.get("score")
    if scoring is not None and scoring.score.name != "dot":
        raise f.error("positional", where, f"positional: rope needs dot-product scores: it turns q "
                      f"and k so that q · k depends on their offset, and score: {scoring.score.name} "
                      "has no q · k; remove score, or use positional: sinusoidal")
    if d.d_k % 2:
        raise f.error("positional", where, f"positional: rope turns the queries' and keys' "
                      f"dimensions in pairs, so d_k (per head) must be even, but it is {d.d_k}; give "
                      "W_Q and W_K an even number of columns per head")
    rope = Rope()
    if node is not None:
        fields = f.mapping(node, "rope", ("base", "pairing"))
        if "base" in fields:
            base = f.number(fields["base"], "rope.base")
            if base <= 1:  # θ_i = base^(−2i/d_k) must fall with i: each later pair turns more slowly
                raise f.error("rope.base", fields["base"], f"rope.base must be greater than 1, got "
                              f"{base:g} (Llama 2 uses 10000, Llama 3 500000)")
            rope = rope._replace(base=base)
        if "pairing" in fields:
            rope = rope._replace(pairing=f.choice(fields["pairing"], "rope.pairing", PAIRINGS))
    d.settings[NAME] = rope


def with_rope(scn: Scenario, turned: bool) -> Scenario:
    """`scn` with its queries and keys turned (by its own RoPE, else the default base) or not: the
    rotation `compare --positional` sets (scenario/variant.py). UsageError where it has no meaning."""
    if not turned:
        return scn.with_setting(NAME, None)
    if scn.d_k % 2:
        raise UsageError(f"--positional rope: {scn.name} has d_k {scn.d_k}; RoPE turns pairs, so d_k must be even")
    if scn.source is not None or scn.scorer.name == "additive":
        raise UsageError(f"--positional rope: {scn.name} has "
                         f"{'a source' if scn.source is not None else 'additive scores'}, which RoPE cannot turn")
    return scn.with_setting(NAME, _rope(scn) or Rope())


def _turned(ctx: Context, M: np.ndarray) -> np.ndarray:
    return _rope(ctx.scn).turn(M, ctx.here)  # (n, d_k): each row at its own position


def _turned_back(ctx: Context, d: np.ndarray, out: np.ndarray, M: np.ndarray) -> tuple:
    # a rotation's transpose is the rotation by the opposite angle: R(φ)ᵀ = R(−φ)
    return (_rope(ctx.scn).turn(d, -ctx.here),)  # (n, d_k)


def unturned_cell(c: Cell, stage: Stage, index: int) -> tuple[list, float]:
    """One cell of ∂L/∂Q (K) from ∂L/∂Q_rot: its pair turned back by the same angle, R(−φ)."""
    g = gradcells.upstream(c, stage)[c.row]  # (d_k,) ∂L/∂ of this row's rotated query or key
    rope, d, pos = _rope(c.scn), len(g), c.row
    i, a, b = pair_of(c.col, d, rope.pairing)
    angle = c.printed(pos * c.printed(float(rope.thetas(d)[i])))
    cos, sin = c.printed(np.cos(angle)), c.printed(np.sin(angle))
    back = np.array([cos, sin]) if c.col == a else np.array([-sin, cos])  # a row of R(φ)ᵀ = R(−φ)
    pair = np.array([g[a], g[b]])
    value = float(pair @ back)
    name = c.cols
    lines = [c.prose(c.say("grad.cell.rope", a=name[a], b=name[b], i=i, pos=pos)),
             c.plain(f"φ = {pos} {c.mk.times} θ_{i} = {c.num(angle)}, cos φ = {c.num(cos)}, sin φ = {c.num(sin)}")]
    return lines + c.dot(f"{gradcells.d(stage.symbol)}[{c.rows[c.row]}, ({name[a]}, {name[b]})] {c.mk.dot} "
                         f"R({c.mk.minus}φ)[{name[c.col]}, :]", pair, back, value), value


_BACK = Backward(_turned_back, fixed_terms("R(−pos · θ_i) · {d}[pos, pair i]"), unturned_cell)


def _formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    """Which dimensions turn together, and how fast: "(i, i + d_k/2) by pos · θ_i"."""
    rope = _rope(scn)
    if rope is None:  # asked of a scenario without the stage: the definition's own
        return base
    pair = "(i, i + d_k/2)" if rope.pairing == "half" else "(2i, 2i+1)"
    theta = f"{rope.base:g}^(−2i/d_k)"
    if rope.scaling:  # a model's rope_scaling rescales the slow pairs: named as a function
        theta = f"{rope.scaling}({theta})"
    x = stage.key[0]
    return f"{x}_rot[pos, {pair}] = R(pos · θ_i) · {x}[pos, {pair}],  θ_i = {theta}"


def _variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    """"θ falls toward 1/base" holds for the base's own frequencies; a model's rescaled ones
    (Llama 3.1's rope_scaling) fall further."""
    return ("scaled",) if _rope(scn) is not None and _rope(scn).scaling else ()


def _notes(scn: Scenario, mode: Mode) -> list[str]:
    rope = _rope(scn)
    if rope is None:
        return []
    scaled = ["rope.model.scaled"] if rope.scaling else []  # a model's rescaled θ_i
    return [f"rope.pairs_{rope.pairing}", "rope.angle"] + scaled


def rotation(c: Cell) -> list:
    """One pair of a query or key turned by its position's angle: θ_i, the angle, cos and sin,
    then this cell as the rotation's row, each number from the ones printed before it."""
    x_key, X = c.walk.input(c.stage, 0, c.head)  # "Q" or "K", this head's, before rotation
    x = X[c.row]  # (d_k,)
    rope, d, pos, tok = _rope(c.scn), len(x), c.row, c.rows[c.row]
    i, a, b = pair_of(c.col, d, rope.pairing)
    exact = float(rope.thetas(d)[i])
    theta = c.printed(exact)
    angle = c.printed(pos * theta)
    cos, sin = c.printed(np.cos(angle)), c.printed(np.sin(angle))
    name = c.cols  # the columns as the table labels them (names, or numbers)
    lines = [c.prose(c.say("rope.cell_pair", col=name[c.col], other=name[b if c.col == a else a],
                           a=name[a], b=name[b], i=i, pos=pos, token=tok))]
    plain = rope.base ** (-2.0 * i / d)
    if np.isclose(exact, plain, rtol=1e-12, atol=0):  # the base's own θ_i (a scaling may keep fast pairs)
        lines.append(c.plain(f"θ_{i} = {c.short(rope.base)}^({c.mk.minus}{2 * i}/{d}) = {c.num(theta)}"))
    else:  # rescaled by the model's rope_scaling: say what the base alone would give
        lines += [c.prose(c.say("rope.model.scaled_cell", i=i, scaling=rope.scaling or "")),
                  c.plain(f"{c.short(rope.base)}^({c.mk.minus}{2 * i}/{d}) = {c.num(plain)} "
                          f"{c.mk.arrow} θ_{i} = {c.num(theta)}")]
    lines += [c.plain(f"{pos} {c.mk.times} θ_{i} = {pos} {c.mk.times} {c.num(theta)} = {c.num(angle)}"
                      f" rad = {c.degrees(np.degrees(angle))}"),
              f"cos {c.num(angle)} = {c.num(cos)}, sin {c.num(angle)} = {c.num(sin)}",
              f"{x_key}[{tok}, {name[a]}] = {c.num(x[a])}, {x_key}[{tok}, {name[b]}] = {c.num(x[b])}"]
    pair = np.array([x[a], x[b]])  # (2,)
    turn = np.array([cos, -sin]) if c.col == a else np.array([sin, cos])  # a row of R(angle)
    return lines + c.dot(f"{x_key}_rot[{tok}, {name[c.col]}]", pair, turn, c.value)


def shift_demo(c: Cell) -> list:
    """Every position moved SHIFT places on, the rotations and scores computed again: this cell's
    score and the largest change anywhere in QKᵀ (only float64's rounding)."""
    rope, s = _rope(c.scn), SHIFT
    score = c.walk.stage("QK^T")
    Q = c.walk.input(c.walk.stage(score.reads[0]), 0, c.head)[1]  # what was turned: (n, d_k)
    K = c.walk.input(c.walk.stage(score.keys[0]), 0, c.head)[1]
    Q_s = rope.turn(Q, np.arange(Q.shape[0]) + s)
    K_s = rope.turn(K, np.arange(K.shape[0]) + s)
    from attnwalk.layer.walk import whole

    ctx = whole(c.scn, c.walk.mode, c.walk.amplify)
    moved = score.compute(ctx, Q_s, K_s, *(c.scn.param(p) for p in score.params))  # (n, n)
    change = float(np.max(np.abs(moved - c.walk.matrix(c.stage.key, c.head))))
    return [c.prose(c.say("rope.shift_cell", shift=s, row_token=c.rows[c.row], col_token=c.cols[c.col],
                          row_pos=c.row, col_pos=c.col, new_row=c.row + s, new_col=c.col + s,
                          offset=c.row - c.col)),
            f"{c.ref()}{c.colon()}{c.num(c.value)} {c.mk.arrow} {c.num(float(moved[c.row, c.col]))}",
            c.prose(c.say("rope.shift_whole", change=c.num(change) if change else "0"))]


_ROT = "{x}_rot[pos, (i, i + d_k/2)] = R(pos · θ_i) · {x}[pos, (i, i + d_k/2)],  θ_i = 10000^(−2i/d_k)"

STAGES = (
    Stage("Q_rot", "Q_rot", _ROT.format(x="Q"), "n", "d_k", _turned, reads=("Q",), per_head=True,
          formula_for=_formula, variants=_variants, notes=_notes, worked=rotation,
          overflow="use smaller queries", aliases=("qrot", "rotated_q"), step=lambda scn, mode, q: f"R(t−1) · {q}",
          backward=_BACK),
    Stage("K_rot", "K_rot", _ROT.format(x="K"), "m", "d_k", _turned, reads=("K",), per_head=True,
          formula_for=_formula, notes=_notes, worked=rotation, overflow="use smaller keys",
          aliases=("krot", "rotated_k"), step=lambda scn, mode, k: f"R(t−1) · {k}", backward=_BACK),
)


def _unrotated(scn: Scenario, mode: Mode, notes: list[str]) -> list[str]:
    return [*notes, "rope.unrotated"]  # "the same row as E" (a real model says it otherwise)


# On ∂L/∂Q and ∂L/∂K (a head's): their gradients came back through the rotation (gradscreens)
GRAD_NOTES = {"Q": ("grad.rope",), "K": ("grad.rope",)}
# A decode step's captions: q_t turned at its position, the cache holding turned keys
DECODE_TEXT = {"query": "decode.variant.query_rope", "cache": "decode.variant.cache_rope"}


def extend(stages: list[Stage], scn: Scenario) -> None:
    insert_before(stages, "QK^T", *STAGES)
    reroute(stages, "Q", "Q_rot", readers=("QK^T",))
    reroute(stages, "K", "K_rot", readers=("QK^T",))
    for key in ("Q", "K", "V"):
        amend(stages, key, notes=_unrotated)
    amend(stages, "QK^T", variants=lambda scn, mode, names: ("rope", *names),  # the rotated are dotted
          notes=lambda scn, mode, notes: [*notes[:-1], "rope.offset", *notes[-1:]])
    inner = get(stages, "QK^T").worked
    replace(stages, "QK^T", worked=lambda c: [*inner(c), *shift_demo(c)])
    if has(stages, "tiled"):
        amend(stages, "tiled", notes=lambda scn, mode, notes: [*notes, "tiles.variant.rope"])


def note_values(scn: Scenario) -> dict[str, Any]:
    """rope.*'s placeholders: the pairs, the slowest frequency, the demonstration's shift."""
    rope = _rope(scn)
    return dict(d_k=scn.d_k, pairs=scn.d_k // 2, last=scn.d_k // 2 - 1, base=f"{rope.base:g}",
                shift=SHIFT, scaling=rope.scaling or "")


def decode_notes(scn: Scenario, n: int) -> list[tuple[str, dict]]:
    """The mistake RoPE invites in a cache (turning cached keys again), and why it does not happen."""
    return [("decode.variant.mistake_rope", {}), ("decode.variant.note_rope", {})]


def word_order(scn: Scenario) -> str:
    """How RoPE makes Z depend on where a token stands (tutor/wordorder.py)."""
    return "quiz.word_order.by_rope"


def concepts(scn: Scenario) -> tuple[str, ...]:
    return ("rope",)  # the scores depend on the offset, not on where the pair stands
