"""A mask (`mask:`): which keys each query may attend to. M is 0 where it may and −∞ where it may
not, added to the scores before softmax, so a masked weight is exactly e^−∞ = 0.

    mask: causal                          query i sees key j when j ≤ i (a decoder's)
    mask: {causal: true, window: w}       0 ≤ i − j < w: itself and the w − 1 before it (Mistral)
    mask: {window: w}                     |i − j| < w: a band on both sides
    mask: [[true, false], …]              any n × m pattern (or {file: mask.npy})

The mask itself is the layer's input (Scenario.allowed, read by every softmax); this module adds
the stage that shows S + M, and says in the other stages' text what a mask does to order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnwalk.layer import masks
from attnwalk.layer.graph import MASKED, Stage, amend, get, has, insert_before, replace
from attnwalk.layer.masks import Mask
from attnwalk.reading.fields import quoted, shape_text
from attnwalk.reading.yamltree import indexed
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.scenario.load import Draft
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.scenario import Scenario

NAME = "mask"
KEYS = ("mask",)
MASKS = ("none", "causal")
BAND_KEYS = ("causal", "window")  # mask: {causal: true, window: 3}


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def _mask(scn: Scenario) -> Mask:
    return scn.setting(NAME)


def read(d: Draft) -> None:
    """`mask: none | causal | {causal, window} | an n × m matrix` (or a file of one)."""
    node = d.top.get("mask")
    if node is None:
        return
    f, n, m, cross = d.f, d.main.n, d.m, d.source is not None
    if isinstance(node.value, dict) and any(key in node.value for key in BAND_KEYS):
        allowed, mask = _band(f, node, n, cross)
    elif isinstance(node.value, (list, dict)):  # rows, or {file: mask.npy}
        allowed = f.bool_matrix(node, "mask")
        if allowed.shape != (n, m):
            want = "n × m (queries × source keys)" if cross else "n × n"
            raise f.error("mask", node, f"mask is {shape_text(allowed)}, but it must be {want} = "
                          f"{n} × {m}")
        mask = Mask("explicit")
    else:
        if f.choice(node, "mask", MASKS) == "none":
            return
        if cross:
            raise f.error("mask", node, "mask: causal needs keys from the same sequence; with a "
                          "source the keys are another sequence with no 'future' to hide "
                          "(give an explicit n × m mask instead)")
        allowed, mask = masks.causal(n), Mask("causal")
    for i, row in enumerate(allowed):
        if not row.any():
            raise f.error(indexed("mask", i), node.value[i] if isinstance(node.value, list) else node,
                          f"{indexed('mask', i)} ({quoted(d.main.tokens[i], 20)}) allows no key: every "
                          "query must be allowed to attend to at least one key (set at least one "
                          "entry of the row to true)")
    d.allowed = allowed
    d.settings[NAME] = mask


def _band(f: Any, node: Any, n: int, cross: bool) -> tuple[Any, Mask]:
    """mask: {causal: true|false, window: w}: the allowed keys and the mask."""
    spec = f.mapping(node, "mask", BAND_KEYS, ())
    is_causal = f.boolean(spec["causal"], "mask.causal") if "causal" in spec else False
    width = f.integer(spec["window"], "mask.window", minimum=1) if "window" in spec else None
    if cross:
        raise f.error("mask", node, "mask: {causal, window} needs keys from the same sequence; "
                      "with a source the keys are another sequence (give an explicit n × m mask instead)")
    if width is None:
        if not is_causal:
            raise f.error("mask", node, "mask: {causal: false} without a window masks nothing; "
                          "write mask: none, or give window: w")
        return masks.causal(n), Mask("causal")
    return masks.window(n, width, is_causal), Mask("window", width, is_causal)


def _notes(scn: Scenario, mode: Mode) -> list[str]:
    mask = _mask(scn)
    if mask is None:  # asked of a scenario without a mask
        return []
    if mask.kind == "window":  # a band, not a triangle: the variant names its width
        kind = "window.causal" if mask.causal else "window.symmetric"
        return [kind, "stage.S+M.neg_inf"] + (["window.wide"] if mask.window >= scn.n else [])
    return [f"stage.S+M.{mask.kind}", "stage.S+M.neg_inf"]


def masked_cell(c: Cell) -> list:
    """S + M for one cell: the score plus 0, or −∞ and why this key is hidden from this query."""
    name, S = c.walk.input(c.stage, 0, c.head)
    S = float(S[c.row, c.col])
    name = c.sym(name)  # S, or (S + B) under ALiBi
    lines: list = []
    if c.walk.amplify != 1.0:
        S *= c.walk.amplify
        lines.append(c.say("ui.amplified_score", k=c.short(c.walk.amplify), value=c.num(S)))
    if c.scn.allowed[c.row, c.col]:
        return lines + [f"{name} + M = {c.num(S)} + 0 = {c.num(c.value)}"]
    mask = _mask(c.scn)
    why = c.say("ui.masked_cell")
    if mask.kind == "causal" or (mask.kind == "window" and mask.causal and c.col > c.row):
        why += " " + c.say("ui.causal_cell", col=person(c.col), row=person(c.row))
    elif mask.kind == "window":  # too far back (or, symmetric, too far either way)
        why += " " + c.say("window.cell", col=person(c.col), row=person(c.row), distance=abs(c.row - c.col),
                           window=mask.window)
    return lines + [f"{name} + M = {c.num(S)} + ({c.mk.neg_inf}) = {c.mk.neg_inf}", c.prose(why)]


def _seen(ctx: Context, S: Any) -> Any:
    return ctx.seen(S)  # × --amplify, −∞ where the mask forbids


STAGES = (
    Stage("S+M", "S + M", "$0 + M,  M[i, j] ∈ {0, −∞}", "n", "m", _seen, reads=("S",), kind=MASKED,
          per_head=True, notes=_notes, worked=masked_cell, exported=False, aliases=("masked", "sm"),
          step=lambda scn, mode, s: s),  # decoding reads only the keys the mask allows (decodemath.keys_read)
)


def _order(scn: Scenario, mode: Mode, names: tuple[str, ...]) -> tuple[str, ...]:
    """P's and X's text: a mask is laid over positions, so it makes order matter even with P = 0
    ("none_causal")."""
    mask = "causal" if _mask(scn).kind == "causal" else "masked"
    positional = scn.main.positional
    return (f"{positional}_{mask}" if positional in ("none", "rope") else mask, *names)


def _tiled_notes(scn: Scenario, mode: Mode, notes: list[str]) -> list[str]:
    # fully masked blocks are skipped; under a window, every block outside a row's band
    window = ["tiles.variant.window"] if _mask(scn).kind == "window" else []
    return ["tiles.masked_blocks", *notes, *window]


def _position_cell(inner):
    def worked(c: Cell) -> list:  # no positions, but a mask laid over them: order matters even so
        if c.scn.main.positional != "none":
            return inner(c)
        kind = "causal" if _mask(c.scn).kind == "causal" else "explicit"  # a window: any mask's words
        return [c.say(f"truth.no_positional_{kind}")]
    return worked


def extend(stages: list[Stage], scn: Scenario) -> None:
    # S + M shows what softmax reads: what A reads, with −∞ where the mask forbids
    insert_before(stages, "A", STAGES[0]._replace(reads=get(stages, "A").reads))
    for key in ("P", "X"):
        amend(stages, key, variants=_order)
    replace(stages, "P", worked=_position_cell(get(stages, "P").worked))
    if has(stages, "tiled"):
        amend(stages, "tiled", notes=_tiled_notes)


def export(walk: Walk, data: dict[str, Any]) -> None:
    """A window's width and direction (the mask itself is `mask`, exported for every scenario)."""
    mask = _mask(walk.scenario)
    if mask.kind == "window":
        data["window"] = {"width": mask.window, "causal": mask.causal}


DECODE_FIELD = "mask"  # what a refusal to decode points at


def refuse_decode(scn: Scenario) -> str | None:
    """Why this mask cannot be decoded with a cache (a key after the query is visible), or None."""
    import numpy as np

    future = np.argwhere(np.triu(scn.allowed, 1))
    if not len(future):
        return None
    mask = _mask(scn)
    if mask.kind == "window":
        return (f"decode needs a window that looks back only (mask: {{causal: true, window: "
                f"{mask.window}}}): without causal: true the window |i − j| < {mask.window} lets token 1 "
                f"read token 2, which a decoder has not generated yet")
    query, key = (int(x) + 1 for x in future[0])
    return (f"decode needs a mask that hides every later token (mask: causal, or one inside "
            f"it): this mask lets token {query} read token {key}, which a decoder has not "
            f"generated when token {query}'s output is made")


def note_values(scn: Scenario) -> dict[str, Any]:
    return {"window": _mask(scn).window or 0}


def decode_notes(scn: Scenario, n: int) -> list[tuple[str, dict]]:
    """A window keeps only its last w rows in the cache; a mask given by hand is read as written."""
    from attnwalk.layer.kvcache import cache_numbers, window_rows

    mask = _mask(scn)
    if mask.kind == "window":
        return [("decode.variant.note_window", {"w": mask.window, "n": n,
                                                "kept": cache_numbers(scn, window_rows(scn, n)),
                                                "numbers": cache_numbers(scn, n)})]
    return [("decode.note_mask", {})] if mask.kind == "explicit" else []


def list_mask(scn: Scenario) -> list[tuple[str, dict]]:
    """The lesson list's mask column (render/lessons.py): the mask's kind, a window's width."""
    mask = _mask(scn)
    if mask.kind == "window":
        return [("window.list_causal" if mask.causal else "window.list_symmetric", {"window": mask.window})]
    return [(f"list.mask_{mask.kind}", {})]


def concepts(scn: Scenario) -> tuple[str, ...]:
    """A causal window narrower than the sentence: what a query further back can still reach."""
    mask = _mask(scn)
    return ("window",) if mask.kind == "window" and mask.causal and mask.window < scn.n else ()
