"""`attnwalk compare A B` as Rich renderables: what is identical and what differs, then every stage
of both walks, the two matrices side by side as far as the width allows (stacked beyond it, never
squeezed), each marked identical or different and, when different, where.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attnwalk.layer.axes import axes, token_labels
from attnwalk.layer.pair import (DIFFERENT, IDENTICAL, LEFT_ONLY, RIGHT_ONLY, ROUNDING, Difference,
                                 Pair, StagePair)
from attnwalk.features import stage_named
from attnwalk.layer.stages import MASKED, TOKENS, WEIGHTS, Stage
from attnwalk.layer.walk import Walk
from attnwalk.render import style
from attnwalk.render.compareview import PANEL_GAP, SideBySide, small
from attnwalk.render.heatmap import heat_table
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose
from attnwalk.text import pick, stage_text
from attnwalk.numbering import shown as person

MAX_ROWS_NAMED = 6  # beyond this many differing rows, count them instead of naming each
REORDERED = "reordered"  # different in place, the same rows once matched to the tokens


def pair_view(pair: Pair, opts: ViewOptions) -> RenderableType:
    """The whole comparison: header and summary, one block per stage, the legend."""
    parts: list[RenderableType] = [header(pair, opts), Text()]
    for index, sp in enumerate(pair.stages, start=1):
        parts += [stage_block(pair, sp, opts, index=index, count=len(pair.stages)), Text()]
    parts.append(legend(opts))
    return Group(*parts)


def header(pair: Pair, opts: ViewOptions) -> RenderableType:
    a, b = pair.scenarios
    lines: list[RenderableType] = [
        Text(style.say(opts, "pair.title", left=a.name, right=b.name), style=style.SCREEN_TITLE)]
    for scn in (a, b):
        title = pick(scn.title, opts.lang)
        if title:
            lines.append(Prose(f"{scn.name}{style.say(opts, 'ui.colon')}{style.plain(title, opts)}",
                               style=style.NOTE))
    facts = [style.say(opts, "pair.mode", mode=style.say(opts, f"mode.{pair.mode.name}.name"))]
    if pair.left.amplify != 1.0:
        facts.append(style.say(opts, "compare.amplified", k=style.short(pair.left.amplify, opts)))
    if a.heads > 1:
        facts.append(style.say(opts, "ui.head", head=person(pair.head), heads=a.heads))
    lines.append(Text(f" {style.markers(opts).dot} ".join(facts), style=style.NOTE))
    lines.append(Text())
    lines += summary(pair, opts)
    return Group(*lines)


def summary(pair: Pair, opts: ViewOptions) -> list[RenderableType]:
    """The verdict in a few lines: what is identical, what differs, what only one side has. The
    learned matrices come just before the stage they make (W_Q before Q)."""
    a, b = pair.scenarios
    groups: dict[str, list[str]] = {}
    items = [(d, item_name(d, opts)) for d in differences(pair)]
    for d, name in items:
        groups.setdefault(REORDERED if d.reordered else d.status, []).append(name)
    sep = style.say(opts, "ui.list_sep")
    keys = {IDENTICAL: ("summary_identical", {}), ROUNDING: ("summary_rounding", {}),
            REORDERED: ("summary_reordered", {}),
            DIFFERENT: ("summary_different", {}), LEFT_ONLY: ("summary_only", {"name": a.name}),
            RIGHT_ONLY: ("summary_only", {"name": b.name})}
    lines: list[RenderableType] = []
    for status, (key, values) in keys.items():
        if groups.get(status):
            line = Prose(style.say(opts, f"pair.{key}", items=sep.join(groups[status]), **values))
            lines.append(line)
    return lines


def differences(pair: Pair) -> list[Difference]:
    """Every compared item in the order a reader meets it: weights before their stage, the mask
    (when either scenario has one) before the masked scores."""
    out = []
    masked = any(scn.masked for scn in pair.scenarios)
    for sp in pair.stages:
        if sp.weight is not None:
            out.append(sp.weight)
        if sp.stage.kind == MASKED and masked:
            out.append(pair.mask)
        out.append(sp.diff)
    if masked and not any(x is pair.mask for x in out):  # no S+M stage listed: say it anyway
        out.append(pair.mask)
    return out


def item_name(d: Difference, opts: ViewOptions) -> str:
    if d.key == "mask":
        return style.say(opts, "pair.mask")
    if isinstance(d.left, tuple) or isinstance(d.right, tuple):
        return style.say(opts, "pair.tokens")
    try:
        return style.plain(stage_named(d.key).symbol, opts)
    except KeyError:  # a weight: W_Q
        return d.key


def stage_block(pair: Pair, sp: StagePair, opts: ViewOptions, *, index: int, count: int) -> RenderableType:
    """One stage: its heading, the verdict (and the learned matrix's), then both matrices."""
    stage, d = sp.stage, sp.diff
    walk = pair.left if d.left is not None else pair.right
    title = Text()
    title.append(style.say(opts, "ui.stage_header", index=index, count=count), style=style.POSITION)
    title.append("   ")
    if stage.kind != TOKENS:
        title.append(style.plain(stage.symbol, opts) + "  ", style=style.SCREEN_TITLE)
    title.append(style.plain(stage_text(opts.lang, stage, walk.scenario, walk.mode), opts),
                 style=style.SCREEN_TITLE)
    heads = walk.scenario.heads
    if heads > 1 and stage.per_head:  # the other heads are not compared: say which one this is
        title.append("   " + style.say(opts, "ui.head", head=person(pair.head), heads=heads), style=style.POSITION)
    lines: list[RenderableType] = [title, verdict(pair, stage, d, opts)]
    if sp.weight is not None:
        lines.append(labelled(sp.weight.key, weight_verdict(pair, sp.weight, opts), opts))
    if stage.kind == MASKED and any(scn.masked for scn in pair.scenarios):
        lines.append(labelled(style.say(opts, "pair.mask"), weight_verdict(pair, pair.mask, opts), opts))
    lines.append(token_table(pair, d, opts) if stage.kind == TOKENS else matrices(pair, stage, d, opts))
    return Group(*lines)


def labelled(label: str, body: str, opts: ViewOptions) -> RenderableType:
    return Prose(f"{label}{style.say(opts, 'ui.colon')}{body}", style=style.NOTE)


def verdict(pair: Pair, stage: Stage, d: Difference, opts: ViewOptions) -> RenderableType:
    """"= identical in both", or "≠ different: 2 of 16 numbers, in row 3 (river / savings); …"."""
    a, b = pair.scenarios
    if d.status in (LEFT_ONLY, RIGHT_ONLY):
        return Prose(style.say(opts, "pair.only", name=(a if d.status == LEFT_ONLY else b).name))
    if d.status != DIFFERENT:
        return Prose(f"= {weight_verdict(pair, d, opts)}")
    if d.reordered:
        return Prose(f"{_unequal(opts)} {style.say(opts, 'pair.reordered')}")
    rows_l, rows_r, cols = labels(pair, stage, opts.lang)
    if stage.kind == TOKENS:
        body = style.say(opts, "pair.tokens_differ", count=len(d.rows), total=len(d.left),
                         rows=row_list(d.rows, rows_l, rows_r, opts))
    else:
        r, c = d.max_at
        key = "pair.cell_index" if cols[c] == str(person(c)) else "pair.cell_named"  # 1 … d, or names
        body = style.say(opts, "pair.different", count=len(d.cells), total=d.left.size,
                         rows=row_list(d.rows, rows_l, rows_r, opts), diff=small(d.max_diff, opts),
                         cell=style.say(opts, key, row=person(r), token=both(rows_l[r], rows_r[r]), col=cols[c]))
    return Prose(f"{_unequal(opts)} {body}")


def weight_verdict(pair: Pair, d: Difference, opts: ViewOptions) -> str:
    """A verdict without row labels: for W_Q, the mask, and identical stages."""
    if d.status == IDENTICAL:
        return style.say(opts, "pair.identical")
    if d.status == ROUNDING:
        return style.say(opts, "pair.rounding", diff=small(d.max_diff, opts))
    if d.status == DIFFERENT and d.key == "mask":
        return style.say(opts, "pair.mask_different", count=len(d.cells), total=np.asarray(d.left).size)
    if d.status == DIFFERENT:
        return style.say(opts, "pair.different_short", count=len(d.cells), total=np.asarray(d.left).size,
                         diff=small(d.max_diff, opts))
    a, b = pair.scenarios
    return style.say(opts, "pair.only_short", name=(a if d.status == LEFT_ONLY else b).name)


def labels(pair: Pair, stage: Stage, lang: str) -> tuple[Sequence[str], Sequence[str], Sequence[str]]:
    """Row labels of each side and the left's column labels (a side without the stage borrows
    the other's)."""
    if stage.kind == TOKENS:
        a, b = pair.scenarios
        return token_labels(a.tokens), token_labels(b.tokens), ()
    sides = [w for w in (pair.left, pair.right) if any(s.key == stage.key for s in w.stages)]
    rows_l, cols = axes(sides[0], stage, pair.head if stage.per_head else 0, lang)
    rows_r, _ = axes(sides[-1], stage, pair.head if stage.per_head else 0, lang)
    return rows_l, rows_r, cols


def both(left: str, right: str) -> str:
    """One row's token in both scenarios: "bank", or "river / savings" where they differ."""
    return left if left == right else f"{left} / {right}"


def row_list(rows: Sequence[int], rows_l: Sequence[str], rows_r: Sequence[str], opts: ViewOptions) -> str:
    """"row 3 (river / savings)", several of them, "every row", or "12 of 100 rows"."""
    if len(rows) == len(rows_l):
        return style.say(opts, "pair.every_row")
    if len(rows) > MAX_ROWS_NAMED:
        return style.say(opts, "pair.rows_count", count=len(rows), total=len(rows_l))
    return style.say(opts, "ui.list_sep").join(
        style.say(opts, "pair.row", row=person(i), token=both(rows_l[i], rows_r[i])) for i in rows)


def _unequal(opts: ViewOptions) -> str:
    return "!=" if opts.ascii else "≠"


def matrices(pair: Pair, stage: Stage, d: Difference, opts: ViewOptions) -> RenderableType:
    """Both sides' matrices as heat tables, titled by scenario; rows that differ carry ≠."""
    tables = []
    for walk, M in ((pair.left, d.left), (pair.right, d.right)):
        if M is None:
            continue
        tables.append(side_table(walk, stage, M, set(d.rows) if d.status == DIFFERENT else set(),
                                 pair.head if stage.per_head else 0, opts))
    return SideBySide(tables, gap=PANEL_GAP + 2)


def side_table(walk: Walk, stage: Stage, M: np.ndarray, differing: set[int], head: int,
               opts: ViewOptions) -> RenderableType:
    scn = walk.scenario
    rows, cols = axes(walk, stage, head, opts.lang)
    mark = _unequal(opts)
    rows = [f"{label} {mark}" if i in differing else label for i, label in enumerate(rows)]
    allowed = scn.allowed if stage.kind in (MASKED, WEIGHTS) and scn.masked else None
    return heat_table(M, rows, cols, stage.kind, opts, allowed=allowed,
                      mark_row_max=stage.kind == WEIGHTS, title=scn.name)


def token_table(pair: Pair, d: Difference, opts: ViewOptions) -> RenderableType:
    """The tokens of both, one row per position, ≠ where they differ."""
    a, b = pair.scenarios
    table = Table(box=style.table_box(opts), header_style=style.HEADER, show_edge=opts.ascii)
    table.add_column("#", justify="right", style=style.NOTE)
    table.add_column(a.name, overflow="fold")
    table.add_column(b.name, overflow="fold")
    table.add_column("", no_wrap=True)
    for i, (x, y) in enumerate(zip(d.left, d.right)):
        table.add_row(str(person(i)), x, y, _unequal(opts) if i in d.rows else "")
    return table


def legend(opts: ViewOptions) -> RenderableType:
    return Group(*(Prose(style.say(opts, f"pair.{key}", mark=_unequal(opts)), style=style.NOTE)
                   for key in ("legend_mark", "legend_identical")))
