"""The next-token panel beside p: one position's likeliest next words (the top k by logit, ties by
id), each with its logit and its probability at T = 0.5, 1 and 2 side by side, so the learner sees
temperature reshape the distribution without reordering it. Fits 80 × 24: k ≤ |vocab| rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.features import unembed
from attnwalk.layer.axes import token_labels
from attnwalk.numbering import shown as person
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose

if TYPE_CHECKING:
    from attnwalk.layer.headview import HeadView
    from attnwalk.layer.stages import Stage


def next_panel(view: HeadView, stage: Stage, opts: ViewOptions, row: int | None = None) -> RenderableType:
    """Row `row` (else the row the screen works out) of the next-token probabilities."""
    walk = view.walk
    row = view.cell(stage.key)[0] if row is None else row
    data = unembed.ranked(walk, row)
    label = token_labels(walk.scenario.tokens)[row]
    table = FastTable(box=style.table_box(opts), header_style=style.HEADER, pad_edge=False, show_edge=False)
    table.add_column("#", justify="right")
    table.add_column(style.say(opts, "unembed.panel_word"), overflow="fold")
    table.add_column(style.plain(style.say(opts, "unembed.panel_logit"), opts), justify="right")
    for T in data["temperatures"]:
        table.add_column(style.say(opts, "unembed.panel_at", t=f"{T:g}"), justify="right")
    table.add_column(style.say(opts, "unembed.panel_top_k", k=data["top_k"]), justify="right")
    for k, item in enumerate(data["next"], start=1):
        table.add_row(str(k), style.plain(item["token"], opts), style.number(item["logit"], opts),
                      *(style.number(p, opts) for p in item["p_at"]), style.number(item["p_top_k"], opts))
    title = style.say(opts, "unembed.panel_title", token=label, row=person(row), k=data["top_k"],
                      size=len(unembed.vocabulary(walk.scenario)))
    caption = style.say(opts, "unembed.panel_caption", t=f"{data['temperature']:g}", k=data["top_k"])
    return Panel(Group(table, Prose(style.plain(caption, opts), style=style.NOTE)), box=style.panel_box(opts),
                 border_style=style.PANEL_BORDER, title=Text(style.plain(title, opts)), title_align="left")
