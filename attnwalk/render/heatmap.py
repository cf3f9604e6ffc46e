"""A matrix as a coloured table whose numbers are always printed and never squeezed.

Big matrices show their head and tail rows and columns with a visible count of the rest (as many
head and tail columns as fit the width, so a 100 × 512 matrix is one table, not two); tables wider
than the terminal that show every column are split into several, each repeating the row labels.
Only the shown cells are ever formatted or coloured (colours scale to the largest value shown), so
a 512 × 512 matrix costs what a 16 × 12 one does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.text import Text

from attnwalk.layer.ops import row_maxima
from attnwalk.layer.stages import MASKED, WEIGHTS
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.numbering import runs

GAP = None  # stands for the hidden rows or columns in a list of shown indices


def shown_indices(total: int, limit: int) -> list[int | None]:
    """All of range(total), or its first and last limit // 2 with GAP between them."""
    if total <= limit:
        return list(range(total))
    head = max(limit // 2, 1)
    tail = max(limit - head, 1)
    return [*range(head), GAP, *range(total - tail, total)]


def heat_table(M: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], kind: str,
               opts: ViewOptions, *, allowed: np.ndarray | None = None,
               mark_row_max: bool = False, title: str | None = None) -> RenderableType:
    """M as one table, or several side by side in reading order when it is wider than opts.width.

    kind (stages.SIGNED / WEIGHTS / MASKED) picks the colours; `allowed` greys forbidden cells,
    and a forbidden weight (exactly 0) is written as a mark the caption explains, not as 0.0000;
    `mark_row_max` puts a marker beside each row's largest value, beside every one where several
    tie (works without colour).
    """
    M = np.asarray(M, dtype=np.float64)
    n_rows, n_cols = M.shape
    mk = style.markers(opts)
    rows = shown_indices(n_rows, opts.max_rows)
    cols = shown_indices(n_cols, opts.max_cols)
    ri = [r for r in rows if r is not GAP]
    ci = [c for c in cols if c is not GAP]
    shown = M[np.ix_(ri, ci)]  # (shown rows, shown cols): the only cells formatted below
    finite = shown[np.isfinite(shown)]
    top = float(np.max(np.abs(finite))) if finite.size else 0.0  # colours scale to what is shown
    row_max: dict[int, set[int]] = {}
    if mark_row_max:
        maxima = row_maxima(M[ri])  # (shown rows, n_cols)
        row_max = {r: set(np.flatnonzero(row).tolist()) for r, row in zip(ri, maxima)}
    pad = " " * (1 + cell_len(mk.row_max)) if mark_row_max else ""
    marked = False  # some shown cell carries the masked mark: the caption then says what it means

    def cell(r: int, c: int, value: float) -> Text:
        nonlocal marked
        forbidden = allowed is not None and not allowed[r, c]
        # A masked weight is exactly 0 and would print 0.0000, told apart only by grey, which
        # NO_COLOR and a printout lose: it carries a mark instead (a −∞ score says so itself).
        # Only an exact 0 is marked, so a masked cell that somehow got weight is never hidden.
        masked_zero = forbidden and value == 0.0
        marked = marked or masked_zero
        body = mk.times if masked_zero else style.number(value, opts)
        body += f" {mk.row_max}" if c in row_max.get(r, ()) else pad
        if forbidden or (kind == MASKED and np.isneginf(value)):
            return Text(body, style=style.MASKED_CELL)
        if kind == WEIGHTS:
            return Text(body, style=style.weight_style(value))
        return Text(body, style=style.signed_style(value, top))

    # One list of cells per shown column (GAP column included), in display order.
    gap_text = Text(mk.ellipsis, style=style.GAP_CELL)
    columns: list[tuple[str, list[Text]]] = []
    position = {c: k for k, c in enumerate(ci)}
    for c in cols:
        if c is GAP:
            columns.append((mk.ellipsis, [gap_text] * len(rows)))
            continue
        k = position[c]
        body, i = [], 0
        for r in rows:
            if r is GAP:
                body.append(gap_text)
            else:
                body.append(cell(r, c, float(shown[i, k])))
                i += 1
        columns.append((str(col_labels[c]), body))
    labels = [style.say(opts, "ui.more_rows", count=n_rows - len(ri))
              if r is GAP else str(row_labels[r]) for r in rows]

    label_width = max([cell_len(s) for s in labels] + [1])
    widths = [max([cell_len(h)] + [t.cell_len for t in body]) for h, body in columns]
    edge = opts.ascii  # ASCII tables get a frame; Unicode ones only a rule under the header
    # However narrow the terminal, a number is never cut unseen: the row labels give way first
    # (cut with "…"), then a number too wide for what is left shows "…" where it was cut.
    frame = 2 + 3 + (2 if edge else 0)  # the label column's padding, one column's, the frame
    room = max(1, opts.width - frame - max(widths, default=1))
    if label_width > room:
        labels = [_cut(label, room, mk.ellipsis) for label in labels]
        label_width = room
    cap = max(1, opts.width - frame - label_width)
    for k, (header, body) in enumerate(columns):
        if widths[k] > cap:  # cut here, with "…", rather than cropped unseen at the screen's edge
            for t in body:
                t.plain = _cut(t.plain, cap, mk.ellipsis)
            columns[k] = (_cut(header, cap, mk.ellipsis), body)
            widths[k] = cap
    if GAP in cols:  # some columns are hidden anyway: hide a few more rather than split the table
        keep = _fitting(cols, label_width, widths, opts.width, edge)
        cols, columns, widths = ([seq[k] for k in keep] for seq in (cols, columns, widths))
    pieces = _split(label_width, widths, opts.width, edge)
    notes = []
    shown_cols = sum(c is not GAP for c in cols)
    if n_cols > shown_cols:
        notes.append(style.say(opts, "ui.more_cols", count=n_cols - shown_cols))
    if marked:
        notes.append(style.say(opts, "marks.masked_weight", mark=mk.times))
    caption = f" {mk.dot} ".join(notes) or None

    tables = []
    for p, piece in enumerate(pieces):
        piece_title = title
        if len(pieces) > 1:
            span = style.say(opts, "ui.columns_range",
                             range=_span([cols[j] for j in piece], opts), total=n_cols)
            piece_title = f"{title} · {span}" if title else span
        last = p == len(pieces) - 1
        table = FastTable(box=style.table_box(opts), show_edge=edge, expand=False,
                      title=Text(piece_title) if piece_title else None, title_justify="left",
                      title_style=style.NOTE, caption=Text(caption) if caption and last else None,
                      caption_justify="left", caption_style=style.NOTE, header_style=style.HEADER)
        table.add_column("", style=style.HEADER, no_wrap=True, min_width=label_width)
        for j in piece:
            header, _ = columns[j]
            table.add_column(Text(header), justify="right", no_wrap=True, overflow="ellipsis",
                             min_width=widths[j])
        for i, label in enumerate(labels):
            table.add_row(Text(label, style=style.NOTE if rows[i] is GAP else ""),
                          *(columns[j][1][i] for j in piece))
        tables.append(table)
    return tables[0] if len(tables) == 1 else Group(*tables)


def _cut(text: str, width: int, ellipsis: str) -> str:
    """`text` in at most `width` cells, ending in `ellipsis` when it was cut."""
    if cell_len(text) <= width:
        return text
    if cell_len(ellipsis) > width:
        return ellipsis[:width]
    used, keep = cell_len(ellipsis), []
    for ch in text:  # one pass: a token may be very long
        used += cell_len(ch)
        if used > width:
            break
        keep.append(ch)
    return "".join(keep) + ellipsis


def _split(label_width: int, widths: list[int], width: int, edge: bool) -> list[list[int]]:
    """Group column indices into tables that each fit in `width` (at least one column each).

    A boxed Rich table with padding (0, 1) is Σ (column width + 2) + (columns − 1) cells wide,
    plus 2 for the frame when it shows its edge.
    """
    start = label_width + 2 + (2 if edge else 0)
    pieces: list[list[int]] = [[]]
    used = start
    for j, w in enumerate(widths):
        if pieces[-1] and used + w + 3 > width:
            pieces.append([])
            used = start
        pieces[-1].append(j)
        used += w + 3
    return pieces


def _fitting(cols: list[int | None], label_width: int, widths: list[int], width: int,
             edge: bool) -> list[int]:
    """Positions in `cols` (head columns, GAP, tail columns) to keep: the most head and tail
    columns, balanced as shown_indices balances them, that fit in one table of `width` (at least
    one of each, however narrow the terminal)."""
    gap = cols.index(GAP)
    head, tail = list(range(gap)), list(range(gap + 1, len(cols)))
    keep = list(range(len(cols)))
    for limit in range(len(head) + len(tail), 1, -1):
        first = min(max(limit // 2, 1), len(head))
        last = min(max(limit - first, 1), len(tail))
        keep = head[:first] + [gap] + tail[len(tail) - last:]
        if len(_split(label_width, [widths[k] for k in keep], width, edge)) == 1:
            break
    return keep


def _span(indices: list[int | None], opts: ViewOptions) -> str:
    """Shown columns as ranges counted from 1, as the columns are labelled: "1–6", or "4–6 …
    295–297" across the hidden ones."""
    sides: list[list[int]] = [[]]
    for i in indices:
        if i is GAP:
            sides.append([])
        else:
            sides[-1].append(i)
    dash = style.plain("–", opts)
    return f" {style.markers(opts).ellipsis} ".join(runs(side, dash) for side in sides if side)
