"""`attnwalk compare` as Rich renderables: one panel per mode (A, Z and each row's entropy, peak and
signal), side by side as far as the width allows and stacked beyond it, then what each mode shows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from attnwalk.layer.compare import Comparison, ModeResult
from attnwalk.text import pick
from attnwalk.layer.axes import dim_labels, token_labels
from attnwalk.layer.safe import escaped
from attnwalk.layer.modes import Mode
from attnwalk.layer.graph import get
from attnwalk.layer.roles import SCORES
from attnwalk.layer.stages import SIGNED, WEIGHTS, dot_scores, stage_named
from attnwalk.render import style
from attnwalk.render.heatmap import GAP, heat_table, shown_indices
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose
from attnwalk.numbering import shown as person

PANEL_FRAME = 4  # a panel's border and padding take 2 cells on each side
PANEL_GAP = 2  # blank cells between panels side by side


def compare_view(cmp: Comparison, opts: ViewOptions) -> RenderableType:
    """The whole comparison: header, the focus row under every mode, the panels, the explanations."""
    from attnwalk.render.costview import cost_panel

    panels = [mode_panel(cmp, r, opts) for r in cmp.results]
    return Group(header(cmp, opts), Text(), row_summary(cmp, opts), Text(),
                 SideBySide(panels, gap=PANEL_GAP), Text(), explanations(cmp, opts), Text(),
                 cost_panel(cmp.scenario, opts))


def header(cmp: Comparison, opts: ViewOptions) -> RenderableType:
    scn = cmp.scenario
    title = pick(scn.title, opts.lang)
    name = f"{scn.name} · {title}" if title else scn.name
    heading = Text(name, style=style.SCREEN_TITLE)
    names = style.say(opts, "ui.list_sep").join(mode_name(m, opts) for m in cmp.modes)
    facts = [style.say(opts, "compare.modes", modes=names)]
    if cmp.amplify != 1.0:
        facts.append(style.say(opts, "compare.amplified", k=f"{cmp.amplify:g}"))
    if scn.heads > 1:
        facts.append(style.say(opts, "ui.head", head=person(cmp.head), heads=scn.heads))
    lines = [heading, Text(" · ".join(facts), style=style.NOTE)]
    scoring = get(scn.graph, SCORES)
    if scoring.compute is not dot_scores:  # a feature scores another way: every mode starts from these
        how = style.say(opts, "compare.scores", formula=style.plain(scoring.formula_in(scn), opts))
        if not scn.scorer.divides:  # so scaled and unscaled agree
            how += " · " + style.say(opts, "compare.additive_same")
        lines.append(Prose(how, style=style.NOTE))
    if scn.source is not None:
        lines.append(Prose(style.say(opts, "compare.cross", n=scn.n, m=scn.m), style=style.NOTE))
    return Group(*lines)


def row_summary(cmp: Comparison, opts: ViewOptions) -> RenderableType:
    """One query row (the scenario's focus, else the first) under every mode: its weights beside
    its entropy, peak and signal (one under the other when the width is short)."""
    scn = cmp.scenario
    row = scn.focus if scn.focus is not None else 0
    rows, keys = token_labels(scn.tokens), token_labels(scn.key_tokens)
    names = [mode_name(r.mode, opts) for r in cmp.results]
    body = [[name, small(r.entropy[row], opts), peak_cell(r, row, keys, opts), signal_cell(r, row, opts)]
            for name, r in zip(names, cmp.results)]
    mode_heading = style.say(opts, "compare.mode")
    title = Text(style.say(opts, "compare.title",
                           row=person(row), token=rows[row]), style=style.SCREEN_TITLE)
    # Wide enough: one table, weights then stats. Else the weights (split as heat maps are) over the stats.
    wide = stats_table(mode_heading, body, opts, weights=[r.A[row] for r in cmp.results],
                       keys=keys, allowed=scn.allowed[row])
    weights = np.stack([r.A[row] for r in cmp.results])  # (modes, m)
    narrow = Group(heat_table(weights, names, keys, WEIGHTS, opts,
                              allowed=np.broadcast_to(scn.allowed[row], weights.shape)),
                   stats_block(mode_heading, body, opts))
    return Group(title, FirstThatFits([wide, narrow]))


def mode_panel(cmp: Comparison, r: ModeResult, opts: ViewOptions) -> Panel:
    """A and Z of one mode as heat maps, then a table of each row's entropy, peak and signal."""
    scn = cmp.scenario
    inner = opts.with_(width=max(opts.width - PANEL_FRAME, 20))
    rows, keys = token_labels(scn.tokens), token_labels(scn.key_tokens)
    # A row whose weights all tie (uniform) has no peak worth marking
    A = heat_table(r.A, rows, keys, WEIGHTS, inner, allowed=scn.allowed, mark_row_max=bool((r.ties == 1).any()),
                   title=style.plain(stage_named("A").symbol, opts))
    names = scn.dimension_names("d_v", opts.lang)  # as the walk labels Z's columns: named, else 1 … d_v
    dims = (tuple(escaped(name) for name in names) if names is not None and len(names) == r.Z.shape[1]
            else dim_labels(r.Z.shape[1]))
    Z = heat_table(r.Z, rows, dims, SIGNED, inner, title=style.plain(stage_named("Z").formula, opts))
    return Panel(Group(A, Z, row_stats(r, rows, keys, inner)),
                 title=Text(mode_name(r.mode, opts), style=style.SCREEN_TITLE), title_align="left",
                 box=style.panel_box(opts), border_style=style.PANEL_BORDER, expand=False, padding=(0, 1))


def row_stats(r: ModeResult, rows: Sequence[str], keys: Sequence[str], opts: ViewOptions) -> RenderableType:
    """Per query row: entropy in bits, the peak weight and its key, the softmax's learning signal."""
    body = [None if i is GAP else
            [rows[i], small(r.entropy[i], opts), peak_cell(r, i, keys, opts), signal_cell(r, i, opts)]
            for i in shown_indices(len(rows), opts.max_rows)]
    return stats_block(style.say(opts, "ui.token"), body, opts)


def stats_table(first: str, body: list[list[str] | None], opts: ViewOptions, *,
                weights: Sequence[np.ndarray] | None = None, keys: Sequence[str] = (),
                allowed: np.ndarray | None = None) -> Table:
    """Rows of [label, entropy, peak, signal] (None: the hidden rows' "…") under narrow headings that
    wrap at their spaces; with `weights`, each row's weights over `keys` come after the label."""
    headers = [first, style.say(opts, "compare.entropy"),
               style.say(opts, "compare.peak"), style.say(opts, "compare.signal")]
    table = Table(box=style.table_box(opts), header_style=style.HEADER)
    mk = style.markers(opts)
    cols = shown_indices(len(keys), opts.max_cols) if weights is not None else []
    for j, (heading, justify) in enumerate(zip(headers, ("left", "right", "left", "right"))):
        table.add_column(heading, justify=justify, style=style.HEADER if j == 0 else "",
                         width=_narrow_width(heading, [line[j] for line in body if line is not None]))
        if j == 0:
            for c in cols:
                table.add_column(mk.ellipsis if c is GAP else keys[c], justify="right", no_wrap=True)
    for i, line in enumerate(body):
        if line is None:
            table.add_row(Text(mk.ellipsis, style=style.GAP_CELL))
            continue
        cells = [Text(mk.ellipsis, style=style.GAP_CELL) if c is GAP else
                 Text(mk.times, style=style.MASKED_CELL) if not allowed[c] and weights[i][c] == 0.0 else
                 Text(style.number(weights[i][c], opts),
                      style=style.MASKED_CELL if not allowed[c] else style.weight_style(weights[i][c]))
                 for c in cols]  # a masked weight carries the mark heat tables give it (heatmap.py)
        table.add_row(line[0], *cells, *line[1:])
    if any(c is not GAP and not allowed[c] and w[c] == 0.0 for w in weights or () for c in cols):
        table.caption = Text(style.say(opts, "marks.masked_weight", mark=mk.times), style=style.NOTE)
        table.caption_justify = "left"
    return table


def stats_block(first: str, body: list[list[str] | None], opts: ViewOptions) -> RenderableType:
    """The stats as a table, or on a terminal too narrow for it one wrapped line per row
    ("女生  entropy (bits) 0.8723  peak 0.8078 → 刘海  signal 0.1553"): numbers stay whole."""
    names = [style.say(opts, "compare.entropy"), style.say(opts, "compare.peak"),
             style.say(opts, "compare.signal")]
    lines = []
    for line in body:
        if line is None:
            lines.append(Text(style.markers(opts).ellipsis, style=style.GAP_CELL))
            continue
        text = Text(line[0], style=style.HEADER)
        for name, value in zip(names, line[1:]):
            text.append("  ")
            text.append(name, style=style.NOTE)
            text.append(f" {value}")
        lines.append(text)
    return FirstThatFits([stats_table(first, body, opts), Group(*lines)])


def _narrow_width(heading: str, cells: list[str]) -> int:
    """A column as wide as its widest cell; a longer heading wraps at its spaces instead of widening
    it ("entropy (bits)" over two lines), so the panels stay narrow enough to sit side by side."""
    return max([cell_len(c) for c in cells] + [cell_len(w) for w in heading.split()] + [1])


def explanations(cmp: Comparison, opts: ViewOptions) -> RenderableType:
    """What each shown mode does, then how to read entropy, signal and (when used) --amplify."""
    lines: list[RenderableType] = [Text(style.say(opts, "compare.explain_heading"),
                                        style=style.LABEL)]
    for mode in cmp.modes:
        name = mode_name(mode, opts)
        line = Prose(style.say(opts, "compare.mode_line", name=name,
                              explain=style.say(opts, f"mode.{mode.name}.explain")))
        line.stylize(style.LABEL, 0, len(name))
        lines.append(line)
    lines.append(Text())
    legends = ["entropy_legend", "signal_legend"] + (["amplified_legend"] if cmp.amplify != 1.0 else [])
    for key in legends:
        lines.append(Prose(style.say(opts, f"compare.{key}", k=f"{cmp.amplify:g}"), style=style.NOTE))
    return Group(*lines)


def mode_name(mode: Mode, opts: ViewOptions) -> str:
    return style.say(opts, f"mode.{mode.name}.name")


def small(x: float, opts: ViewOptions) -> str:
    """A number at opts.precision, but one that would print as zero without being zero keeps its
    size (7.1e-07): a saturated row's signal is tiny, not absent."""
    if x != 0 and abs(x) < 0.5 * 10.0 ** -opts.precision:
        return f"{x:.1e}"
    return style.number(x, opts)


def peak_cell(r: ModeResult, row: int, keys: Sequence[str], opts: ViewOptions) -> str:
    weight = style.number(r.peak[row], opts)
    if r.ties[row] > 1:
        return f"{weight} " + style.say(opts, "compare.tie", count=int(r.ties[row]))
    return f"{weight} {style.markers(opts).arrow} {keys[int(r.peak_index[row])]}"


def signal_cell(r: ModeResult, row: int, opts: ViewOptions) -> str:
    """The signal, or "none" where the weights do not depend on the scores at all."""
    if not r.mode.smooth:
        return style.say(opts, "compare.no_gradient")
    return small(r.signal[row], opts)


class SideBySide:
    """Renderables left to right, as many to a line as fit at their natural widths, the rest on
    the next lines (one under another on a narrow terminal): never squeezed."""

    def __init__(self, items: Sequence[RenderableType], gap: int = PANEL_GAP) -> None:
        self.items, self.gap = list(items), gap

    def _widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        return [Measurement.get(console, options, item).maximum for item in self.items]

    def _lines(self, widths: list[int], room: int) -> list[list[int]]:
        lines: list[list[int]] = []
        used = room + 1  # start a new line at once
        for i, w in enumerate(widths):
            if not lines or used + self.gap + w > room:
                lines.append([i])
                used = w
            else:
                lines[-1].append(i)
                used += self.gap + w
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self._widths(console, options)
        for line in self._lines(widths, options.max_width):
            if len(line) == 1:
                yield self.items[line[0]]
                continue
            grid = Table.grid(padding=(0, self.gap, 0, 0))
            for i in line:
                grid.add_column(width=widths[i], no_wrap=True)
            grid.add_row(*(self.items[i] for i in line))
            yield grid

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widths = self._widths(console, options)
        return Measurement(max(widths, default=0), sum(widths) + self.gap * max(len(widths) - 1, 0))


class FirstThatFits:
    """The first renderable whose natural width fits the space, else the last one."""

    def __init__(self, choices: Sequence[RenderableType]) -> None:
        self.choices = list(choices)

    def _choice(self, console: Console, options: ConsoleOptions) -> RenderableType:
        for choice in self.choices[:-1]:
            if Measurement.get(console, options.update(width=10**6), choice).maximum <= options.max_width:
                return choice
        return self.choices[-1]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._choice(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._choice(console, options))
