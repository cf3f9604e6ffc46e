"""Under A: one line per query saying where it looks, e.g. "bank → river ██████████ 69%"."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.text import Text

from attnwalk.layer.ops import row_maxima
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.heatmap import GAP, shown_indices
from attnwalk.render.options import ViewOptions

MIN_BAR = 5  # on a narrow terminal the bars shrink to this before anything wraps
TIED_SHOWN = 4  # a tie among more keys than this names the first TIED_SHOWN - 1 and "…"


def attention_bars(A: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str],
                   opts: ViewOptions) -> RenderableType:
    """For each query: its most-attended key (every key, when several tie), a bar as long as that
    weight, and the runner-up (every key, when several tie for second place). On a narrow terminal
    the bars shrink, then each note moves under its bar, and what still does not fit wraps at its
    spaces: every percentage is printed whole."""
    mk = style.markers(opts)
    n = A.shape[0]
    rows = shown_indices(n, max(opts.bar_rows, 2))
    top_rows = A[[r for r in rows if r is not GAP]]  # (shown rows, m)
    maxima = row_maxima(top_rows)
    # The runner-up is found the same way as the top: the largest weight once the top keys are set
    # aside, with every key that ties with it (causal_mask's T3 looks at T1 and T2 equally)
    seconds = row_maxima(np.where(maxima, -np.inf, top_rows))  # (shown rows, m)
    lines = []  # per shown row: label, key(s), weight, note; None for the hidden rows' "…"
    for r in rows:
        if r is GAP:
            lines.append(None)
            continue
        k = len(lines) - lines.count(None)  # this row among the shown ones
        tied = np.flatnonzero(maxima[k])  # every key at the peak, in key order
        peak = float(A[r, tied[0]])
        sep = style.say(opts, "ui.list_sep")
        notes = []
        if len(tied) > 1:
            notes.append(style.say(opts, "ui.bars_tie", count=len(tied)))
        next_keys = np.flatnonzero(seconds[k])  # every key at the runner-up weight
        if next_keys.size and A[r, next_keys[0]] >= 0.005:  # a runner-up at 0% says nothing
            percent = _percent(A[r, next_keys[0]])
            if next_keys.size == 1:
                notes.append(style.say(opts, "ui.bars_next", token=col_labels[next_keys[0]],
                                       percent=percent))
            else:
                notes.append(style.say(opts, "marks.bars_next_tie", count=next_keys.size,
                                       tokens=sep.join(_named(next_keys, col_labels, mk.ellipsis)),
                                       percent=percent))
        lines.append((row_labels[r], sep.join(_named(tied, col_labels, mk.ellipsis)), peak,
                      " ".join(notes)))
    shown = [line for line in lines if line is not None]
    widest = [max((cell_len(line[k]) for line in shown), default=0) for k in (0, 1, 3)]
    room = opts.width - widest[0] - cell_len(mk.arrow) - 4 - 4  # less label, arrow, "100%", gaps
    beside = room - widest[1] - 1 - widest[2] >= MIN_BAR  # the notes fit beside their bars
    if beside:
        width = min(style.BAR_WIDTH, room - widest[1] - 1 - widest[2])
    else:  # each note on the line under its bar, in the key column, which wraps at its spaces
        width = max(MIN_BAR, min(style.BAR_WIDTH, room - max(widest[1:])))
    grid = FastTable.grid(padding=(0, 1))
    # label, arrow, key(s), bar, percent, and the notes: the one column that may wrap
    for justify, no_wrap in (("left", True), ("center", True), ("left", beside), ("left", True),
                             ("right", True), ("left", False))[:6 if beside else 5]:
        grid.add_column(justify=justify, no_wrap=no_wrap, overflow="fold")
    for line in lines:
        if line is None:
            more = style.say(opts, "ui.more_rows", count=n - len(rows) + 1)
            grid.add_row(Text(mk.ellipsis, style=style.NOTE), None, None, Text(more, style=style.NOTE))
            continue
        label, keys, peak, note = line
        length = round(peak * width)
        bar = mk.bar * max(length, 1 if peak > 0 else 0)
        # Keys and notes break only at their spaces, so a token (刘海) is never split
        cells = [Text(label), Text(mk.arrow), Text(keys), Text(bar.ljust(width), style=style.BAR),
                 Text(_percent(peak))]
        if beside:
            grid.add_row(*cells, Text(note, style=style.NOTE))
        else:
            grid.add_row(*cells)
            if note:
                grid.add_row(None, None, Text(note, style=style.NOTE))
    heading = Text(style.say(opts, "ui.bars_heading"), style=style.HEADER)
    return Group(heading, grid)


def _named(keys: np.ndarray, col_labels: Sequence[str], ellipsis: str) -> list[str]:
    """The labels of tied `keys`: all of them, or the first TIED_SHOWN - 1 and `ellipsis`."""
    names = [col_labels[k] for k in keys]
    return names if len(names) <= TIED_SHOWN else names[:TIED_SHOWN - 1] + [ellipsis]


def _percent(weight: float) -> str:
    """A weight as a whole percent; under 1%, to a tenth (uniform's 1/512 is 0.2%, not 0%), in the
    four characters "100%" takes."""
    percent = 100 * weight
    return f"{percent:.1f}%" if 0.05 <= percent < 0.95 else f"{percent:.0f}%"
