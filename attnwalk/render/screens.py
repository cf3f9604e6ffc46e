"""One screen per step of the walk: header, matrix, (bars), explanation, worked cell."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Group, NewLine, RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.errors import UsageError
from attnwalk.layer.axes import axes, default_cell, pick_dim, pick_head, pick_index, token_labels
from attnwalk.layer.ops import row_maxima, rows_sum_to_one
from attnwalk.features import catalog
from attnwalk.layer.stages import MASKED, TOKENS, WEIGHTS, Stage, stage_by_name, typed_name
from attnwalk.layer.graph import blocks, segments
from attnwalk.layer.walk import Walk
from attnwalk.text import stage_notes, stage_text, text
from attnwalk.render import style
from attnwalk.render.bars import attention_bars
from attnwalk.render.fasttable import FastTable
from attnwalk.render.heatmap import GAP, heat_table, shown_indices
from attnwalk.render.lesson import lesson_panel, notice
from attnwalk.render.options import ViewOptions
from attnwalk.render.overview import (head_blocks, head_intro, shapes_overview, source_view, starts_head,
                       tokens_table, wants_overview)
from attnwalk.render.worked import worked_cell
from attnwalk.render.wrap import Prose
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.layer.headview import HeadView  # taken by Walk.view, imported where it is made


def stage_screen(walk: Walk, stage: Stage, head: int, opts: ViewOptions, *, index: int,
                 count: int, cell: tuple[int, int] | None = None,
                 explained_at: int | None = None) -> RenderableType:
    """Step `index` of `count` (1-based): `stage` for head `head` (0-based), as one Group.

    `explained_at`: the step that already printed this stage's explanation (head 1's, in a walk
    printed whole); the screen then points there instead of repeating it for every head."""
    view = walk.view(head)  # the head this screen shows, taken once: its matrices, labels, cell
    parts: list[RenderableType] = [header(view, stage, opts, index=index, count=count)]
    opening = lesson_panel(walk, opts) if stage is walk.stages[0] else None  # it opens the walk
    if opening is not None:
        parts.append(opening)
    if index == 1 and wants_overview(walk, opts):  # the shapes first, before any numbers
        parts.append(shapes_overview(walk, opts))
    if stage.per_head and starts_head(walk, stage):
        parts.append(head_intro(view, opts))
    if stage.kind == TOKENS:
        parts.append(token_table(walk, opts))
    else:
        parts += matrix_view(view, stage, opts)
    parts += stage_panels(view, stage, opts)
    source = source_view(walk, stage, opts)
    if source is not None:
        parts.append(source)
    note = notice(walk, stage, opts)
    if note is not None:
        parts.append(note)
    if explained_at is None:
        parts.append(explanation(walk, stage, opts))
    else:
        parts.append(Prose(style.say(opts, "heads.same_text",
                                    index=explained_at), style=style.NOTE))
    if stage.kind != TOKENS:
        row, col = cell if cell is not None else view.cell(stage.key)
        parts.append(worked_cell(view, stage.key, row, col, opts))
        blocked = masked_cell(view, stage, row) if cell is None else None
        if blocked is not None:  # the mask at work: a key it hides, beside the one it allows
            parts.append(worked_cell(view, stage.key, *blocked, opts))
    spaced: list[RenderableType] = []
    for part in parts:  # one blank line between the sections of a screen
        spaced += [part, NewLine()]
    return Group(*spaced[:-1])


def stage_panels(view: HeadView, stage: Stage, opts: ViewOptions) -> list[RenderableType]:
    """What a stage shows besides its matrix: the panel its stage names (the cost of the direct
    form under S, the layer's, once: on the first head's screen; the tiled stage's blocks and
    memory), and each row's sum where a weights matrix's rows do not sum to 1."""
    if stage.panel == "cost" and view.head == 0:
        from attnwalk.render.costview import cost_panel

        return [cost_panel(view.scenario, opts)]
    if stage.panel == "tiles":
        from attnwalk.render.tiles import tiles_view

        return tiles_view(view.walk, view.head, opts)
    if stage.panel == "next":  # the next token: one position's top k at T = 0.5, 1 and 2
        from attnwalk.render.nextview import next_panel

        return [next_panel(view, stage, opts)]
    if stage.kind == WEIGHTS:
        return _row_sums(view, stage, opts)
    return []


def _row_sums(view: HeadView, stage: Stage, opts: ViewOptions) -> list[RenderableType]:
    """Where a stage's weights do not sum to 1 a row (an attention sink took a share), each row's
    sum, read off the matrix itself."""
    W = view.matrix(stage.key)
    if rows_sum_to_one(W):
        return []
    sums = W.sum(axis=1)  # (n,)
    rows = token_labels(view.scenario.tokens)
    shown = [f"{rows[i]} {sums[i]:.{opts.precision}f}" for i in range(len(sums))]
    if len(shown) > 8:
        shown = shown[:6] + ["…", shown[-1]]
    return [Prose(style.say(opts, "ui.row_sums", stage=style.plain(stage.symbol, opts),
                            sums=style.say(opts, "ui.list_sep").join(shown)), style=style.NOTE)]


def walk_renderables(walk: Walk, opts: ViewOptions) -> Iterator[RenderableType]:
    """Every step's screen in order, for printing the whole walk at once."""
    steps = walk_steps(walk)
    for i, (stage, head) in enumerate(steps, start=1):
        yield stage_screen(walk, stage, head, opts, index=i, count=len(steps),
                           explained_at=explained_at(steps, i - 1))


def masked_cell(view: HeadView, stage: Stage, row: int) -> tuple[int, int] | None:
    """On the masked scores' screen, a cell the mask hides to work out beside the default one: in
    `row` if the mask hides a key there (else in the first row where it does), the hidden key
    with the highest score, the one the mask overrules most. None on other screens."""
    allowed = view.scenario.allowed
    if stage.kind != MASKED or allowed.all():
        return None
    if allowed[row].all():
        row = int(np.flatnonzero(~allowed.all(axis=1))[0])
    S = view.scores[row]
    hidden = np.flatnonzero(~allowed[row])
    return row, int(hidden[np.argmax(S[hidden])])


def walk_steps(walk: Walk) -> list[tuple[Stage, int]]:
    """The screens of a walk in order: (stage, head). Per-head stages repeat for each head (all
    stages of head 0, then of head 1, ...); other stages carry head 0. Which stages come after the
    heads is read off every stage computed: one head's concat is hidden, and O, made from it, comes
    after the heads all the same. Several blocks: block by block, each in that order."""
    shown = {s.key for s in walk.stages}
    by_block = {stages[0].block: stages for stages in blocks(walk.computed)}
    out: list[tuple[Stage, int]] = []
    for b in dict.fromkeys(s.block for s in walk.stages):  # as shown: the backward walk's last block first
        before, per_head, after = ([s for s in part if s.key in shown] for part in segments(by_block[b]))
        out += [(s, 0) for s in before]
        for h in range(walk.scenario.heads):
            out += [(s, h) for s in per_head]
        out += [(s, 0) for s in after]
    return out


def explained_at(steps: list[tuple[Stage, int]], i: int) -> int | None:
    """In a walk printed whole: the 1-based step where step i's explanation was first printed, when
    step i repeats a per-head stage for a later head; else None (explain it here)."""
    stage, head = steps[i]
    if not stage.per_head or head == 0:
        return None
    return next(j for j, (s, h) in enumerate(steps, start=1) if s is stage and h == 0)


def header(view: HeadView, stage: Stage, opts: ViewOptions, *, index: int,
           count: int) -> RenderableType:
    """Position, symbol and title; formula; shape in named dimensions; mode and head."""
    tx = text(opts.lang)
    walk, head, scn = view.walk, view.head, view.scenario
    title = Text()
    title.append(style.say(opts, "ui.stage_header", index=index,
                           count=count), style=style.POSITION)
    title.append("   ")
    if stage.kind != TOKENS:  # the tokens stage has no symbol of its own
        title.append(style.plain(stage.symbol, opts) + "  ", style=style.SCREEN_TITLE)
    title.append(style.plain(stage_text(opts.lang, stage, scn, walk.mode), opts),
                 style=style.SCREEN_TITLE)
    if scn.heads > 1 and stage.per_head:  # which head, in the line that names the screen
        title.append("   " + style.say(opts, "ui.head", head=person(head),
                                       heads=scn.heads), style=style.POSITION)
    facts = FastTable.grid(padding=(0, 2))
    facts.add_column(style=style.NOTE, no_wrap=True)
    facts.add_column()
    facts.add_row(Text(style.say(opts, "ui.formula")),
                  Text(style.plain(stage.formula_in(scn, walk.mode), opts), style=style.FORMULA))
    if stage.kind != TOKENS:
        shape = Text(shape_text(view, stage, opts), style=style.SHAPE)
        if scn.heads > 1 and stage.per_head:
            shape.append("   (" + style.say(opts, "ui.per_head")
                         + ")", style=style.NOTE)
        facts.add_row(Text(style.say(opts, "ui.shape")), shape)
    mode = style.plain(tx.t(f"mode.{walk.mode.name}.name"), opts)
    if walk.amplify != 1.0:
        mode += "   " + style.say(opts, "compare.amplified",
                                  k=style.short(walk.amplify, opts))
    facts.add_row(Text(style.say(opts, "ui.mode")), Text(mode))
    stack = len(blocks(walk.graph))
    if stack > 1:  # several blocks: which one (a row of its own: the title line stays within 80 columns)
        facts.add_row(Text(style.say(opts, "ui.block_row")),
                      Text(style.say(opts, "ui.block", block=person(stage.block), blocks=stack)))
    return Group(title, facts)


def shape_text(view: HeadView, stage: Stage, opts: ViewOptions) -> str:
    """"3 × 2 = n × d_k": the matrix's shape in numbers and in named dimensions."""
    scn = view.scenario
    rows, cols = view.matrix(stage.key).shape
    cross = scn.source is not None
    names = [stage.rows, stage.cols]
    if not cross:  # in self-attention the keys are the same tokens as the queries
        names = ["n" if name == "m" else name for name in names]
    if scn.heads > 1 and stage.split and "·" not in names[1]:  # Q, K, V (a later block's too): every head's columns
        shared = stage.shared and scn.groups < scn.heads  # K and V: g K/V heads
        names[1] = ("g·" if shared else "h·") + names[1]
    t = style.markers(opts).times
    return style.plain(f"{rows} {t} {cols} = {names[0]} {t} {names[1]}", opts)


def token_table(walk: Walk, opts: ViewOptions) -> RenderableType:
    """Row number, position, token and vocabulary id of each token."""
    from attnwalk.features import token_ids

    scn = walk.scenario
    return tokens_table(scn.tokens, token_ids(scn), opts)


def matrix_view(view: HeadView, stage: Stage, opts: ViewOptions) -> list[RenderableType]:
    """The stage's matrix as a heat table, its legend, and for A the per-query bars."""
    walk, scn = view.walk, view.scenario
    M = view.matrix(stage.key)
    rows, cols = view.axes(stage, opts.lang)
    if opts.ascii and not stage.square:  # dimension names such as a LayerNorm's μ, σ
        cols = tuple(style.plain(label, opts) for label in cols)
    if opts.ascii and stage.rows not in ("n", "m"):  # a weight's rows are dimensions too (∂L/∂W_Q)
        rows = tuple(style.plain(label, opts) for label in rows)
    allowed = scn.allowed if stage.kind in (MASKED, WEIGHTS) and scn.masked else None
    out: list[RenderableType] = [heat_table(M, rows, cols, stage.kind, opts, allowed=allowed,
                                            mark_row_max=stage.kind == WEIGHTS)]
    shown = [r for r in shown_indices(M.shape[0], opts.max_rows) if r is not GAP]
    legend = matrix_legend(stage, M[shown], opts)
    if legend:
        out.append(Prose(f" {style.markers(opts).dot} ".join(legend), style=style.NOTE))
    blocks = head_blocks(walk, stage, opts)
    if blocks is not None:
        out.append(blocks)
    if stage.panel == "glance":  # a real model's heads: each one's map and where it looks most
        from attnwalk.render.headmaps import heads_glance

        out.append(heads_glance(walk, stage, opts))
    if stage.kind == WEIGHTS:
        out.append(attention_bars(M, rows, token_labels(scn.key_tokens), opts))
    return out


def matrix_legend(stage: Stage, shown: np.ndarray, opts: ViewOptions, *,
                  masked_mark: bool = False) -> list[str]:
    """What a matrix's marks mean: the axes of a square one, the masked cells, rows that sum to 1
    and the ▲ on each row's largest weight (the tie wording when a row of `shown`, the rows on
    screen, has a tie); `masked_mark` adds what × means in A (the app's grid, which has no caption)."""
    legend = []
    if stage.square:
        legend.append(style.say(opts, "ui.axes_legend"))
    if stage.kind == MASKED:
        legend.append(style.say(opts, "ui.masked_legend"))
    if stage.kind == WEIGHTS:
        if rows_sum_to_one(shown):  # not where a sink took a share (_row_sums says each row's sum)
            legend.append(style.say(opts, "ui.rows_sum_legend"))
        ties = (row_maxima(shown).sum(axis=1) > 1).any()
        legend.append(style.say(opts, "ui.bars_legend_ties" if ties else "ui.bars_legend"))
        if masked_mark:
            legend.append(style.say(opts, "marks.masked_weight", mark=style.markers(opts).times))
    return legend


def explanation(walk: Walk, stage: Stage, opts: ViewOptions) -> RenderableType:
    """What / why / common mistake, then under "Note" what this scenario or mode does differently
    at this stage; no text twice. Prose wraps Chinese between characters at the panel's width."""
    scn = walk.scenario
    grid = FastTable.grid(padding=(0, 2))
    grid.add_column(style=style.LABEL, no_wrap=True)
    grid.add_column(overflow="fold")  # a word wider than the panel is folded, never cut
    shown = set()
    for field in ("what", "why", "mistake"):
        body = style.plain(stage_text(opts.lang, stage, scn, walk.mode, field), opts)
        shown.add(body)
        grid.add_row(Text(style.say(opts, f"ui.{field}")), Prose(body))
    label: Text | None = Text(style.say(opts, "ui.note"))
    for note in stage_notes(opts.lang, stage, scn, walk.mode):
        body = style.plain(note, opts)
        if body not in shown:
            shown.add(body)
            grid.add_row(label, Prose(body))
            label = None  # one label over all the notes
    return Panel(grid, box=style.panel_box(opts), border_style=style.PANEL_BORDER,
                 title=Text(style.plain(stage_text(opts.lang, stage, scn, walk.mode), opts)),
                 title_align="left")


# -- one cell on its own: `attnwalk explain` ------------------------------------------------------


def explain_view(walk: Walk, stage_name: str, row: str, col: str, head: str | int,
                 opts: ViewOptions) -> RenderableType:
    """The worked arithmetic of one cell named as a user types it: stage key or symbol, row and
    column as 1-based indices or token text (dimension columns by their label 1 … d), head
    1-based. Raises UsageError naming the valid choices."""
    stage = pick_stage(walk, stage_name)
    scn = walk.scenario
    chosen = pick_head(scn, head)  # checked on every stage: a wrong --head is never ignored
    h = chosen if stage.per_head else 0
    rows, cols = axes(walk, stage, h, opts.lang)
    tokens = scn.key_tokens if stage.rows == "m" else scn.tokens
    r = pick_index(row, tokens, rows, "row")
    c = pick_index(col, scn.key_tokens, cols, "column") if stage.square else pick_dim(col, cols)
    title = Text()
    title.append(style.plain(stage.symbol, opts), style=style.SCREEN_TITLE)
    title.append("  " + style.plain(stage_text(opts.lang, stage, scn, walk.mode), opts),
                 style=style.SCREEN_TITLE)
    title.append("   " + style.plain(stage.formula_in(scn, walk.mode), opts), style=style.FORMULA)
    facts = Text(shape_text(walk.view(h), stage, opts), style=style.SHAPE)
    facts.append("   " + style.say(opts, "ui.mode") + style.say(opts, "ui.colon")
                 + style.plain(text(opts.lang).t(f"mode.{walk.mode.name}.name"), opts), style=style.NOTE)
    if scn.heads > 1 and stage.per_head:
        facts.append("   " + style.say(opts, "ui.head", head=person(h),
                                       heads=scn.heads), style=style.NOTE)
    return Group(title, facts, worked_cell(walk.view(h), stage.key, r, c, opts))


def pick_stage(walk: Walk, name: str) -> Stage:
    """The stage `name` means, if this walk shows it and it has cells."""
    choices = ", ".join(typed_name(s) for s in walk.stages if s.worked is not None)
    stage = stage_by_name(name, walk.stages) or stage_by_name(name, catalog())
    if stage is None:
        readers = [s.key for s in walk.stages if s.worked is not None
                   and any(p.lower() == name.lower() for p in s.params)]
        if readers:  # W_K: a weight is worked out inside the cells made from it
            raise UsageError(f"'{name}' is a weight, not a stage: each cell of {' or '.join(readers)} is "
                             f"worked out from a column of it; choose one of: {choices}")
        raise UsageError(f"unknown stage '{name}'; choose one of: {choices}")
    if stage.worked is None:
        raise UsageError(f"the tokens stage has no cells to work out; choose one of: {choices}")
    if stage not in walk.stages:
        raise UsageError(f"this scenario has no {stage.key} stage; choose one of: {choices}")
    return stage
