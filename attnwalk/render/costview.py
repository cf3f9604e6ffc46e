"""The cost panel: every matrix of the layer in numbers and bytes (float32 and float64), the
multiply-adds of each stage, and the same at the sizes --at asks for, marking what grows with n²."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.layer.cost import Dims, dims_of, matrices, quadratic_share, work
from attnwalk.features import stage_named
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")  # powers of 1024, named as such


def size_text(size: int) -> str:
    """Bytes as a person reads them: 1 KiB = 1024 B, one decimal from KiB up (1.5 MiB, 64.0 GiB)."""
    value, unit = float(size), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{size} B" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


def at_text(d: Dims) -> str:
    """"n=4096, d_model=4096, heads=32, d_k=128": the projected sizes, as --at names them."""
    parts = [f"n={d.n}"] + ([f"m={d.m}"] if d.cross else [])
    return ", ".join(parts + [f"d_model={d.d_model}", f"heads={d.heads}", f"d_k={d.d_k}", f"d_v={d.d_v}"])


def cost_panel(scn: Scenario, opts: ViewOptions) -> RenderableType:
    """The panel for this scenario, then the same figures at opts.at when --at gave sizes."""
    here = dims_of(scn)
    at: Dims | None = opts.at if isinstance(opts.at, Dims) else None
    parts: list[RenderableType] = [size_table(here, opts), work_table(here, opts)]
    cross = "_cross" if here.cross else ""  # n·m, not n²: doubling n alone doubles it
    notes = [style.say(opts, f"cost.share{cross}", share=f"{100 * quadratic_share(here):.1f}")]
    if at is not None:
        parts += [Text(style.plain(style.say(opts, "cost.title_at", at=at_text(at)), opts),
                       style=style.SCREEN_TITLE), size_table(at, opts), work_table(at, opts)]
        notes.append(style.say(opts, f"cost.share_at{cross}",
                               share=f"{100 * quadratic_share(at):.1f}", at=at_text(at)))
    else:
        notes.append(style.say(opts, "cost.try_at"))
    s = style.say(opts, "cost.legend_s" if here.scaled else "cost.legend_s_undivided")
    notes.append(style.say(opts, "cost.legend_cross" if here.cross else "cost.legend", s=s))
    parts += [Prose(style.plain(n, opts), style=style.NOTE) for n in notes]
    return Panel(Group(*parts), box=style.panel_box(opts), border_style=style.PANEL_BORDER,
                 title=Text(style.plain(style.say(opts, "cost.title"), opts)), title_align="left")


# The columns fold rather than end in "…" where the console is too narrow: no figure is cut short.


def size_table(d: Dims, opts: ViewOptions) -> RenderableType:
    """Every matrix at sizes `d`: its shape, how many numbers, its bytes in float32 and float64."""
    mk = style.markers(opts)
    table = FastTable(box=style.table_box(opts), header_style=style.HEADER, pad_edge=False, show_edge=False)
    headings = (style.say(opts, "cost.matrix"), style.say(opts, "cost.shape"), "#", "float32", "float64",
                style.say(opts, "cost.grows"))
    for k, heading in enumerate(headings):
        table.add_column(heading, justify="right" if 2 <= k <= 4 else "left", overflow="fold")
    for x in matrices(d):
        shape = f"{x.rows} {mk.times} {x.cols}"
        if x.copies > 1:
            shape = f"{x.copies} {mk.times} " + shape
        cells = (x.name, shape, f"{x.numbers:,}", size_text(4 * x.numbers), size_text(8 * x.numbers),
                 _grows(x.grows, d, opts))
        table.add_row(*_styled(cells, x.grows))
    return table


def work_table(d: Dims, opts: ViewOptions) -> RenderableType:
    """The multiply-adds of each stage at sizes `d`."""
    table = FastTable(box=style.table_box(opts), header_style=style.HEADER, pad_edge=False, show_edge=False)
    headings = (style.say(opts, "cost.stage"), style.say(opts, "cost.formula"), "#",
                style.say(opts, "cost.grows"))
    for k, heading in enumerate(headings):
        table.add_column(heading, justify="right" if k == 2 else "left", overflow="fold")
    for w in work(d):
        cells = (style.plain(stage_named(w.stage).symbol, opts), style.plain(w.formula, opts),
                 f"{w.count:,}", _grows(w.grows, d, opts))
        table.add_row(*_styled(cells, w.grows))
    return table


def _styled(cells: tuple[str, ...], grows: str) -> list[Text]:
    """The n² rows in bold, cell by cell: a row style would send the table down Rich's slow path
    (render/fasttable.py), ~15 ms a table."""
    return [Text(cell, style="bold" if grows == "n²" else "") for cell in cells]


def _grows(grows: str, d: Dims, opts: ViewOptions) -> str:
    if grows == "n²":
        return style.plain("n·m" if d.cross else "n²", opts)
    return grows or style.say(opts, "cost.fixed")
