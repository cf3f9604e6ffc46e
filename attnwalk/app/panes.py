"""What each pane of the walk shows for one (stage, head): built from the render package's
renderables, so the app and the printed walk say the same things in the same words."""

from __future__ import annotations

import numpy as np
from rich.console import Group, NewLine, RenderableType
from rich.text import Text

from attnwalk.app.changes import Before
from attnwalk.app.grid import MatrixView
from attnwalk.layer.axes import axes, token_labels
from attnwalk.layer.stages import MASKED, TOKENS, WEIGHTS, Stage
from attnwalk.layer.walk import Walk
from attnwalk.render import style
from attnwalk.render.bars import attention_bars
from attnwalk.render.lesson import lesson_panel, notice
from attnwalk.render.options import ViewOptions
from attnwalk.render.overview import (head_blocks_line, head_intro, shapes_overview, source_view, starts_head,
                                      tokens_table, wants_overview)
from attnwalk.render.screens import explanation, matrix_legend
from attnwalk.render.worked import worked_cell
from attnwalk.render.wrap import Prose
from attnwalk.text import pick


def changed_cells(old: np.ndarray | None, new: np.ndarray) -> np.ndarray | None:
    """Where `new` differs from `old` beyond float noise (−∞ and −∞ are equal); None without `old`."""
    if old is None or old.shape != new.shape:
        return None
    with np.errstate(invalid="ignore"):
        same = np.isclose(old, new, rtol=1e-12, atol=1e-15, equal_nan=True) | (old == new)
    return ~same


def legend(walk: Walk, stage: Stage, head: int, opts: ViewOptions) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The lines under the matrix that say what its marks mean (render/screens.matrix_legend),
    and which columns are which head's where the matrix holds several side by side (the printed
    walk's note under the table; h's message points to it); then the same with the heads' blocks
    in short, or () where there are none."""
    masked = walk.scenario.masked and stage.kind == WEIGHTS
    marks = tuple(matrix_legend(stage, walk.view(head).matrix(stage.key), opts, masked_mark=masked))
    blocks = head_blocks_line(walk, stage, opts)
    if blocks is None:
        return marks, ()
    return (*marks, blocks), (*marks, head_blocks_line(walk, stage, opts, brief=True))


def matrix_view(walk: Walk, stage: Stage, head: int, opts: ViewOptions,
                old: np.ndarray | None = None) -> MatrixView:
    scn, view = walk.scenario, walk.view(head)  # the head shown, taken once
    M = view.matrix(stage.key)
    rows, cols = view.axes(stage, opts.lang)
    allowed = scn.allowed if stage.kind in (MASKED, WEIGHTS) and scn.masked else None
    whole, brief = legend(walk, stage, head, opts)
    return MatrixView(M, rows, cols, stage.kind, opts, allowed=allowed, changed=changed_cells(old, M),
                      legend=whole, brief=brief, symbol=style.plain(stage.symbol, opts),
                      diagonal=stage.square and scn.source is None)


def tokens_view(walk: Walk, opts: ViewOptions) -> RenderableType:
    from attnwalk.features import token_ids

    scn = walk.scenario
    return tokens_table(scn.tokens, token_ids(scn), opts)


def lesson_pointer(walk: Walk, opts: ViewOptions) -> str:
    """The first screen's message where the lesson has an introduction (extras_view puts it after
    the first stage's notes, below the fold at 80 × 24): its title and where to find it."""
    scn = walk.scenario
    from attnwalk.render.modelintro import model_title

    named = model_title(walk, opts)  # a real model's layer: which model and layer, as the printed walk opens
    if named is not None:
        return style.say(opts, "lesson.below_model", title=style.plain(named, opts))
    title = pick(scn.title, opts.lang)  # a model's layer has none: its walk opens with the model
    return style.say(opts, "lesson.below", title=style.plain(title, opts)) if title else ""


def explain_view(walk: Walk, stage: Stage, opts: ViewOptions) -> RenderableType:
    """The notes pane after the worked cell: the scenario's note on what to notice, then what,
    why and the common mistake."""
    parts: list[RenderableType] = [explanation(walk, stage, opts)]
    note = notice(walk, stage, opts)
    if note is not None:
        parts.insert(0, note)
    return _spaced(parts)


def extras_view(walk: Walk, stage: Stage, head: int, opts: ViewOptions, index: int) -> RenderableType | None:
    """Below the worked cell: the lesson's opening, the shapes, a head's introduction, A's bars,
    and a cross-attention source, where the stage has them (the head blocks are in the legend)."""
    parts: list[RenderableType] = []
    if stage is walk.stages[0]:
        opening = lesson_panel(walk, opts)
        if opening is not None:
            parts.append(opening)
    if index == 1 and wants_overview(walk, opts):
        parts.append(shapes_overview(walk, opts))
    if stage.per_head and starts_head(walk, stage):
        parts.append(head_intro(walk.view(head), opts))
    if stage.kind == WEIGHTS:
        scn = walk.scenario
        parts.append(attention_bars(walk.matrix(stage.key, head), axes(walk, stage, head, opts.lang)[0],
                                    token_labels(scn.key_tokens), opts))
    source = source_view(walk, stage, opts)
    if source is not None:
        parts.append(source)
    return _spaced(parts) if parts else None


def worked_view(walk: Walk, stage: Stage, head: int, cell: tuple[int, int], opts: ViewOptions,
                before: Before | None = None) -> RenderableType:
    """The cursor's cell worked out; after m or h, first its value before → now."""
    if stage.kind == TOKENS:
        return Text("")
    worked = worked_cell(walk.view(head), stage.key, cell[0], cell[1], opts)
    if stage.panel == "next":  # the cursor's row's next token at T = 0.5, 1 and 2, under its cell
        from attnwalk.render.nextview import next_panel

        worked = Group(worked, Text(""), next_panel(walk.view(head), stage, opts, row=cell[0]))
    line = change_line(walk, stage, head, cell, opts, before)
    return worked if line is None else Group(line, worked)


def change_line(walk: Walk, stage: Stage, head: int, cell: tuple[int, int], opts: ViewOptions,
                before: Before | None) -> Prose | None:
    """After m or h, the cursor's cell before → now ("scaled → unscaled: A[bank, bank] was 0.2500,
    is now 0.1370", or that it did not change); None where nothing is compared. Cheap (two
    numbers), so a large layer shows it at once while its cell is being worked out."""
    said = before is not None and stage.kind != TOKENS and before.said_at(stage, head)
    old = before.old(stage, head) if said else None
    new = walk.matrix(stage.key, head) if old is not None else None
    if old is None or old.shape != new.shape:
        return None
    change = before.change
    row, col = cell
    rows, cols = axes(walk, stage, head, opts.lang)
    cell_name = style.cell_ref(stage.symbol, rows[row], cols[col], opts)
    was, now = float(old[row, col]), float(new[row, col])
    if changed_cells(old[row:row + 1, col:col + 1], new[row:row + 1, col:col + 1])[0, 0]:
        line = style.say(opts, "app.old_new", change=change, cell=cell_name, old=style.number(was, opts),
                         new=style.number(now, opts))
    else:
        line = style.say(opts, "app.unchanged", change=change, cell=cell_name, value=style.number(now, opts))
    return Prose(line, style="bold")


def _spaced(parts: list[RenderableType]) -> RenderableType:
    spaced: list[RenderableType] = []
    for part in parts:
        spaced += [part, NewLine()]
    return Group(*spaced[:-1])
