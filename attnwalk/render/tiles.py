"""The tiled stage's own panels: each query row's keys B at a time (the block's scores and maximum,
then m, α, l and Õ after it), how far Õ / l is from the direct form's Z, and what each form holds
in memory at once."""

from __future__ import annotations

import numpy as np
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.layer import tiled
from attnwalk.layer.axes import token_labels
from attnwalk.layer.cells import Hidden
from attnwalk.layer.tiledcells import head_steps
from attnwalk.layer.walk import Walk
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.heatmap import GAP, shown_indices
from attnwalk.render.options import ViewOptions
from attnwalk.render.worked import elided
from attnwalk.render.wrap import Prose

MAX_BLOCKS = 8  # a row with more blocks shows its first and last few and a count of the rest


def tiles_view(walk: Walk, head: int, opts: ViewOptions) -> list[RenderableType]:
    """The block-by-block table, the difference from Z and the memory panel."""
    return [block_table(walk, head, opts), difference_line(walk, head, opts), memory_panel(walk, opts)]


def block_table(walk: Walk, head: int, opts: ViewOptions) -> RenderableType:
    scn = walk.scenario
    steps = head_steps(walk, head)
    rows, keys = token_labels(scn.tokens), token_labels(scn.key_tokens)
    num = lambda x: style.number(float(x), opts)  # noqa: E731
    mk = style.markers(opts)

    def vec(v: np.ndarray) -> str:  # a long vector by its first and last entries: the table fits
        shown = [num(x) for x in v] if len(v) <= 3 else [num(v[0]), mk.ellipsis, num(v[-1])]
        return "[" + ", ".join(shown) + "]"

    table = FastTable(box=style.table_box(opts), header_style=style.HEADER, pad_edge=False, show_edge=False,
                      padding=(0, 1, 0, 0))
    whole = walk.scenario.d_v <= 2  # else Õ's first column, the one the worked cell follows
    out = (lambda O: vec(O)) if whole else (lambda O: num(O[0]))  # noqa: E731
    for heading in (style.say(opts, "tiles.block_head"), "S_blk",
                    style.say(opts, "tiles.max_head"), "m", "α", "l", "Õ" if whole else "Õ[0]"):
        table.add_column(style.plain(heading, opts), no_wrap=True,
                         justify="left" if heading in ("S_blk", "Õ") or not table.columns else "right")
    for i in shown_indices(scn.n, opts.bar_rows):
        if i is GAP:
            table.add_row(Text(mk.ellipsis, style=style.GAP_CELL))
            continue
        table.add_row(Text(rows[i] + style.say(opts, "ui.colon").rstrip(), style=style.HEADER))
        for b in _shown_blocks(len(steps)):
            if isinstance(b, Hidden):
                table.add_row(style.say(opts, "tiles.hidden_blocks", count=b.count))
                continue
            s = steps[b]
            names = keys[s.start] if s.stop - s.start == 1 else f"{keys[s.start]}{mk.ellipsis}{keys[s.stop - 1]}"
            if not s.visible[i]:
                cells = (names, vec(s.scores[i]), num(s.block_max[i]), num(s.m[i]),
                         style.say(opts, "tiles.skipped_short"), num(s.l[i]), out(s.O[i]))
                table.add_row(*(Text(cell, style=style.MASKED_CELL) for cell in cells))  # no row style: slow
                continue
            rescaled = s.alpha[i] < 1.0 and np.isfinite(s.m_old[i])
            alpha = Text(num(s.alpha[i]), style="bold" if rescaled else "")
            table.add_row(names, vec(s.scores[i]), num(s.block_max[i]), num(s.m[i]), alpha,
                          num(s.l[i]), out(s.O[i]))
    title = style.say(opts, "tiles.panel_title", B=scn.tiles)
    return Group(Text(style.plain(title, opts), style=style.SCREEN_TITLE), table)


def _shown_blocks(count: int) -> list[int | Hidden]:
    if count <= MAX_BLOCKS:
        return list(range(count))
    return elided(count)


def difference_line(walk: Walk, head: int, opts: ViewOptions) -> RenderableType:
    gap = float(np.max(np.abs(walk.matrix("tiled", head) - walk.matrix("Z", head))))
    if gap == 0.0:
        return Prose(style.say(opts, "tiles.difference_zero"), style=style.NOTE)
    return Prose(style.say(opts, "tiles.difference", difference=f"{gap:.1e}"), style=style.NOTE)


def memory_panel(walk: Walk, opts: ViewOptions) -> RenderableType:
    """How many numbers each form holds at once in one head, in float32 and float64 bytes."""
    from attnwalk.render.costview import size_text

    scn = walk.scenario
    held = tiled.memory(scn.n, scn.m, scn.d_v, scn.tiles)
    B = min(scn.tiles, scn.m)
    grid = FastTable(box=style.table_box(opts), header_style=style.HEADER, pad_edge=False, show_edge=False)
    for heading in ("", "#", "float32", "float64"):
        grid.add_column(heading, justify="left" if not heading else "right")
    lines = (("tiles.memory_direct", held["direct_scores"] + held["direct_weights"]),
             ("tiles.memory_tiled", held["tiled_scores"]),
             ("tiles.memory_state", held["tiled_state"]))
    for key, count in lines:
        grid.add_row(style.say(opts, key, n=scn.n, m=scn.m, B=B, d_v=scn.d_v), f"{count:,}",
                     size_text(4 * count), size_text(8 * count))
    note = Prose(style.say(opts, "tiles.memory_note", held=f"{scn.n * B:,}", full=f"{scn.n * scn.m:,}"),
                 style=style.NOTE)
    return Panel(Group(grid, note), box=style.panel_box(opts), border_style=style.PANEL_BORDER,
                 title=Text(style.say(opts, "tiles.memory_title")), title_align="left")
