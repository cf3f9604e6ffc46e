"""Under A: one line per query saying where it looks, e.g. "bank → river ██████████ 69%"."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text

from . import style
from .fasttable import FastTable
from .heatmap import GAP, shown_indices
from .options import ViewOptions


def attention_bars(A: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str],
                   opts: ViewOptions) -> RenderableType:
    """For each query: its most-attended key, a bar as long as that weight, and the runner-up."""
    mk = style.markers(opts)
    n, m = A.shape
    rows = shown_indices(n, max(opts.bar_rows, 2))
    grid = FastTable.grid(padding=(0, 1))
    for justify in ("left", "center", "left", "left", "right", "left"):
        grid.add_column(justify=justify, no_wrap=True)
    for r in rows:
        if r is GAP:
            more = style.say(opts, "ui.more_rows", "… {count} more rows …", count=n - len(rows) + 1)
            grid.add_row(Text(mk.ellipsis, style=style.NOTE), None, None, Text(more, style=style.NOTE))
            continue
        order = np.argsort(-A[r], kind="stable")  # (m,) keys by weight, ties in key order
        best = int(order[0])
        peak = float(A[r, best])
        length = round(peak * style.BAR_WIDTH)
        bar = mk.bar * max(length, 1 if peak > 0 else 0)
        runner_up = ""
        if m > 1 and A[r, order[1]] >= 0.005:  # a runner-up that rounds to 0% says nothing
            second = int(order[1])
            runner_up = style.say(opts, "ui.bars_next", "(next: {token} {percent})",
                                  token=col_labels[second], percent=_percent(A[r, second]))
        grid.add_row(Text(row_labels[r]), Text(mk.arrow), Text(col_labels[best]),
                     Text(bar.ljust(style.BAR_WIDTH), style=style.BAR),
                     Text(_percent(peak)), Text(runner_up, style=style.NOTE))
    heading = Text(style.say(opts, "ui.bars_heading", "Where each token looks"), style=style.HEADER)
    return Group(heading, grid)


def _percent(weight: float) -> str:
    return f"{100 * weight:.0f}%"
