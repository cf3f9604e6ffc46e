"""Every head of a real model's layer at a glance: a table of each head's mean entropy and where
its queries look most, and each head's attention map drawn small, side by side, so the learner
can pick a head worth walking (--head N, or h in the walk)."""

from __future__ import annotations

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text

from attnwalk.layer import headfocus
from attnwalk.layer.axes import token_labels
from attnwalk.layer.walk import Walk
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose
from attnwalk.numbering import shown as person

MAP_LIMIT = 24  # tokens: a longer sentence's maps would be wider than a terminal's third
SHADES = " ░▒▓█"  # weight 0 … 1, each cell one character
ASCII_SHADES = " .:*#"


def looks_label(focus: headfocus.Focus, labels: tuple[str, ...], opts: ViewOptions) -> str:
    """"the previous token (6 of 9 queries)", "[SEP] (7 of 9 queries)"."""
    token = labels[focus.key] if focus.key is not None else ""
    where = style.say(opts, f"model.looks.{focus.kind}", token=token)
    return style.say(opts, "model.looks.count", where=where, count=focus.count, of=focus.of)


def heads_glance(walk: Walk, stage, opts: ViewOptions) -> RenderableType:
    """The table of heads (mean entropy over the queries, where most queries look) and the maps:
    what `stage`, the model's every-head glance, shows."""
    scn = walk.scenario
    labels = token_labels(scn.tokens)
    special = tuple(scn.model.tokens.special)
    entropy = walk.mats[stage.key]  # (n, h) bits
    table = FastTable(box=style.table_box(opts), header_style=style.HEADER, show_edge=opts.ascii)
    for key, justify in (("head", "right"), ("entropy", "right"), ("looks", "left")):
        table.add_column(Text(style.say(opts, f"model.glance.{key}")), justify=justify, no_wrap=True)
    for h in range(scn.heads):
        A = walk.heads[h].mats["A"]  # (n, n)
        focus = headfocus.looks_most_at(A, special)
        table.add_row(Text(str(person(h))), Text(f"{float(entropy[:, h].mean()):.2f}"),
                      Text(looks_label(focus, labels, opts)))
    parts: list[RenderableType] = [table]
    if scn.n <= MAP_LIMIT:
        parts += [Text(""), Prose(style.say(opts, "model.glance.maps"), style=style.NOTE),
                  _maps(walk, opts)]
    else:
        parts.append(Prose(style.say(opts, "model.glance.too_long", limit=MAP_LIMIT, n=scn.n),
                           style=style.NOTE))
    return Group(*parts)


def attention_map(A: np.ndarray, opts: ViewOptions) -> list[str]:
    """A as lines of shade characters, one per query, one character per key: weight 0 is blank,
    1 the darkest (each cell's shade is its weight in fifths, rounded)."""
    shades = ASCII_SHADES if opts.ascii else SHADES
    top = len(shades) - 1
    return ["".join(shades[int(round(float(a) * top))] for a in row) for row in A]


def _maps(walk: Walk, opts: ViewOptions) -> FastTable:
    """Each head's map under its number, as many side by side as fit the width."""
    scn = walk.scenario
    width = max(scn.n, 3) + 2  # a map and its border
    per_row = max(1, (opts.width - 2) // (width + 2))
    grid = FastTable.grid(padding=(0, 2))
    for _ in range(min(per_row, scn.heads)):
        grid.add_column(no_wrap=True)
    edge = "|" if opts.ascii else "│"
    line = "-" if opts.ascii else "─"
    cells = []
    for h in range(scn.heads):
        rows = attention_map(walk.heads[h].mats["A"], opts)
        title = str(person(h)).center(width, line)
        cells.append(Text("\n".join([title, *(f"{edge}{row}{edge}" for row in rows)])))
    for start in range(0, len(cells), per_row):
        chunk = cells[start:start + per_row]
        grid.add_row(*chunk, *([None] * (min(per_row, scn.heads) - len(chunk))))
    return grid
