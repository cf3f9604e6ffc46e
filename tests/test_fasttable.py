"""FastTable draws what rich.table.Table draws: the same characters in the same styles, and the
same measurement, for the tables attnwalk builds and for random ones (hypothesis)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from attnwalk.layer.walk import compute
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import walk_renderables
from attnwalk.scenario.load import load_scenario


def console(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), color_system="truecolor", force_terminal=True,
                   highlight=False, legacy_windows=False)


def cells(renderable, width: int) -> list[list[tuple[str, str]]]:
    """Each drawn line as (character, style) pairs, however Rich cut it into segments."""
    con = console(width)
    out = []
    for line in con.render_lines(renderable, con.options, pad=False):
        chars = []
        for seg in Segment.simplify(line):
            style = str(seg.style) if seg.style else ""
            chars += [(ch, style) for ch in seg.text]
        out.append(chars)
    return out


def both(build) -> tuple[Table, FastTable]:
    """The same table built as a Table and as a FastTable by `build(cls)`."""
    return build(Table), build(FastTable)


def assert_same(build, widths=(12, 20, 33, 47, 60, 80, 100, 140)) -> None:
    slow, fast = both(build)
    for width in widths:
        assert cells(fast, width) == cells(slow, width), width
        con = console(width)
        assert fast.__rich_measure__(con, con.options) == slow.__rich_measure__(con, con.options), width


def test_label_value_grid_wraps_its_last_column_as_rich_does() -> None:
    def build(cls):
        grid = cls.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row(Text("What"), Text("Each id selects one row of the embedding table; stacked "
                                        "in sentence order, those rows form E.", style="cyan"))
        grid.add_row(None, Text("位置从 0 开始数：第一个词的编码是 [sin 0, cos 0] = [0, 1]。"))
        grid.add_row(Text("Common mistake"), "E is [b]not[/b] the table")
        return grid

    assert_same(build)


def test_boxed_tables_with_header_title_and_caption() -> None:
    for box_, edge in ((box.SIMPLE_HEAD, False), (box.ASCII, True), (box.ROUNDED, True)):
        def build(cls):
            table = cls(box=box_, show_edge=edge, title=Text("columns 0–5 of 512"),
                        title_justify="left", caption=Text("… 500 more columns …"),
                        caption_justify="left", header_style="bold", border_style="blue")
            table.add_column("", style="bold", no_wrap=True, min_width=6)
            for j, justify in enumerate(("right", "center", "left")):
                table.add_column(Text(str(j)), justify=justify, no_wrap=True, overflow="ellipsis",
                                 min_width=7)
            table.add_row(Text("女生"), Text("0.0551 ▲", style="white on #cb4335"),
                          Text("-1.5", style="on #eef4fb"), Text("−∞", style="grey50"))
            table.add_row(Text("… 3 more rows …", style="dim"), Text("…"), Text("…"), Text("…"))
            return table

        assert_same(build)


def test_grid_without_padding_at_the_edges_and_a_header() -> None:
    def build(cls):
        table = cls(box=None, padding=(0, 3, 0, 0), pad_edge=False, header_style="dim")
        for head in ("", "e^s", "e^(s − max)"):
            table.add_column(Text(head), no_wrap=True)
        table.add_row(Text("刘海"), Text("e^6.1849 = 485.4"), Text("e^(6.1849 − 6.1849) = 1.000"))
        table.add_row(Text("…"), Text("… (3 more terms) …"), None)
        return table

    assert_same(build)


def test_every_table_of_the_built_in_walks() -> None:
    """Every screen of three walks, drawn with FastTable, equals the same screens drawn by Table."""
    for name, opts in (("girl_bangs", ViewOptions(width=100)), ("causal_mask", ViewOptions(ascii=True)),
                       ("river_bank", ViewOptions(lang="zh", width=60))):
        walk = compute(load_scenario(name))
        fast = list(walk_renderables(walk, opts))
        slow = [_as_rich_tables(r) for r in fast]
        for width in (opts.width, 50):
            assert [cells(r, width) for r in fast] == [cells(r, width) for r in slow]


def _as_rich_tables(renderable):
    """A copy of `renderable` whose FastTables are drawn by Table's own code."""
    if isinstance(renderable, FastTable):
        return _SlowView(renderable)
    if isinstance(renderable, Group):
        return Group(*(_as_rich_tables(r) for r in renderable.renderables))
    if isinstance(renderable, Panel):
        return Panel(_as_rich_tables(renderable.renderable), box=renderable.box,
                     title=renderable.title, title_align=renderable.title_align,
                     expand=renderable.expand, style=renderable.style,
                     border_style=renderable.border_style, padding=renderable.padding)
    return renderable


class _SlowView:
    """A FastTable drawn and measured by rich.table.Table's own methods."""

    def __init__(self, table: FastTable) -> None:
        self.table = table

    def __rich_console__(self, console, options):
        return Table.__rich_console__(self.table, console, options)

    def __rich_measure__(self, console, options):
        return Table.__rich_measure__(self.table, console, options)


texts = st.text(st.sampled_from(list("ab xyz01.-刘海…▲")), max_size=14)
styles = st.sampled_from(["", "bold", "dim", "white on #cb4335", "black on #fff3c4", "cyan"])


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.lists(st.tuples(texts, styles), min_size=3, max_size=3), max_size=4),
       headers=st.lists(texts, min_size=3, max_size=3),
       justify=st.lists(st.sampled_from(["left", "right", "center"]), min_size=3, max_size=3),
       no_wrap=st.lists(st.booleans(), min_size=3, max_size=3),
       column_style=st.lists(styles, min_size=3, max_size=3),
       kind=st.sampled_from(["grid", "simple", "ascii", "plain"]),
       show_header=st.booleans(), width=st.integers(4, 70))
def test_random_tables_draw_alike(rows, headers, justify, no_wrap, column_style, kind, show_header,
                                  width) -> None:
    def build(cls):
        if kind == "grid":
            table = cls.grid(padding=(0, 2))
        elif kind == "plain":
            table = cls(box=None, padding=(0, 3, 0, 0), pad_edge=False, show_header=show_header)
        else:
            table = cls(box=box.SIMPLE_HEAD if kind == "simple" else box.ASCII,
                        show_edge=kind == "ascii", show_header=show_header, header_style="bold")
        for h, j, w, s in zip(headers, justify, no_wrap, column_style):
            table.add_column(Text(h), justify=j, no_wrap=w, style=s)
        for row in rows:
            table.add_row(*(Text(t, style=s) for t, s in row))
        return table

    slow, fast = both(build)
    assert cells(fast, width) == cells(slow, width)
    con = console(width)
    assert fast.__rich_measure__(con, con.options) == slow.__rich_measure__(con, con.options)


def test_chinese_prose_cells_measure_and_wrap_as_in_a_table() -> None:
    from attnwalk.render.wrap import Prose

    def build(cls):
        grid = cls.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row(Text("为什么"), Prose("注意力本身不考虑顺序：把 E 的行打乱，输出也只是按同样的方式打乱。"))
        grid.add_row(Text("常见误区"), Prose("位置从 0 开始数：第一个词的编码是 [sin 0, cos 0] = [0, 1]。"))
        return grid

    assert_same(build)
    assert_same(lambda cls: Panel(build(cls), expand=False))


def test_a_wrapped_paragraph_in_one_style_draws_as_table_draws_it() -> None:
    """The shortcut for a cell of several lines without spans (the explanation panel's texts)."""
    paragraph = ("Softmax runs along the key axis of each query's row, never down a column, and "
                 "A reads the same way: e^800 would overflow to inf.")

    def build(cls):
        grid = cls.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold", style="italic")
        grid.add_row(Text("What"), Text(paragraph, style="dim"))
        grid.add_row(Text("Why"), Text(paragraph, justify="right"))
        grid.add_row(None, Text("x" * 90 + " y", style="red"))
        grid.add_row(Text("Note"), Text(""))
        return grid

    assert_same(build)
    assert_same(lambda cls: Panel(build(cls)))
