"""What a walk shows beyond one head and one sequence: the shapes of every stage, the head each
group of screens belongs to, which columns of Q, K and V each head takes, every head at a glance
(for a printed walk that shows one head in full), and the source sequence of cross-attention. All
of it is read off the stage list and the walk's own matrices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.layer.axes import default_cell, dim_labels, token_labels
from attnwalk.layer.ops import entropy_bits
from attnwalk.layer.safe import escaped
from attnwalk.layer.stages import TOKENS, Stage
from attnwalk.layer.walk import Walk
from attnwalk.text import text
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.heatmap import GAP, heat_table, shown_indices
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose
from attnwalk.numbering import shown as person, span



def wants_overview(walk: Walk, opts: ViewOptions) -> bool:
    """Shapes come first where they are the lesson: several heads, a source, or tables too big to
    show whole."""
    scn = walk.scenario
    return (scn.heads > 1 or scn.source is not None or scn.n > opts.max_rows
            or scn.d_model > opts.max_cols)


def shapes_overview(walk: Walk, opts: ViewOptions) -> RenderableType:
    """A panel: n, d_model, h, d_k, d_v (and m), then every stage's shape in numbers and names."""
    from attnwalk.render.screens import shape_text  # one way of writing a shape, shared with the headers

    scn = walk.scenario
    facts = [f"n = {scn.n}"]
    if scn.source is not None:
        facts.append(f"m = {scn.m}")
    facts.append(f"d_model = {scn.d_model}")
    if scn.heads > 1:
        facts.append(f"h = {scn.heads}")
        if scn.groups < scn.heads:
            facts.append(f"g = {scn.groups}")  # K/V heads
        if scn.d_k == scn.d_v:
            facts.append(f"d_head = d_k = d_v = {scn.d_k}")
    if scn.heads == 1 or scn.d_k != scn.d_v:
        facts += [f"d_k = {scn.d_k}", f"d_v = {scn.d_v}"]
    grid = FastTable.grid(padding=(0, 2))
    grid.add_column(style=style.HEADER, no_wrap=True)
    grid.add_column(style=style.SHAPE, no_wrap=True)
    grid.add_column(style=style.NOTE)
    for stage in walk.stages:
        if stage.kind == TOKENS:
            continue
        note = ""
        if scn.heads > 1 and stage.split and stage.key in walk.heads[0].mats:
            block = walk.heads[0].mats[stage.key].shape
            shared = stage.shared and scn.groups < scn.heads
            key = ("gqa.split_mqa" if scn.groups == 1 else "gqa.split") if shared else "shapes.split"
            note = style.say(opts, key, heads=scn.heads,
                             shape=_shape(block, opts), kv_heads=scn.groups,
                             group=scn.heads // scn.groups)
        elif scn.heads > 1 and stage.per_head:
            note = style.say(opts, "shapes.each_head",
                             heads=scn.heads)
        grid.add_row(style.plain(stage.symbol, opts), shape_text(walk.view(0), stage, opts), Prose(note))
    title = style.say(opts, "shapes.title")
    parts = [Text(f" {style.markers(opts).dot} ".join(facts), style=style.LABEL), grid]
    if scn.groups < scn.heads:
        parts.append(Prose(kv_cache_note(walk, opts), style=style.NOTE))
    return Panel(Group(*parts),
                 title=Text(title), title_align="left", box=style.panel_box(opts),
                 border_style=style.PANEL_BORDER, expand=False)


def kv_cache_note(walk: Walk, opts: ViewOptions) -> str:
    """What sharing K and V saves in the KV cache: numbers kept per token, and for these n tokens."""
    from attnwalk.layer.gqa import kv_cache

    scn = walk.scenario
    shared = kv_cache(scn.groups, scn.d_k, scn.d_v)
    full = kv_cache(scn.heads, scn.d_k, scn.d_v)
    return style.say(opts, "gqa.cache", kv_heads=scn.groups, heads=scn.heads, d_k=scn.d_k,
                     d_v=scn.d_v, shared=shared, full=full, n=scn.m, shared_n=shared * scn.m,
                     full_n=full * scn.m, ratio=scn.heads // scn.groups,
                     saved=f"{100 * (1 - shared / full):.1f}")


def head_intro(view, opts: ViewOptions) -> RenderableType:
    """Where one head's group of screens starts (`view`: that head, Walk.view(head)): which
    columns it takes, its shapes, and why heads are not one attention repeated."""
    walk, head, scn = view.walk, view.head, view.scenario
    tx = text(opts.lang)
    q = view.block("Q")  # (n, d_k): this head's block
    v = view.block("V")  # (m, d_v)
    if scn.groups < scn.heads:  # grouped-query: K and V are the group's K/V head's
        g = scn.kv_head(head)
        sharers = [h + 1 for h in range(scn.heads) if scn.kv_head(h) == g]
        intro = style.say(opts, "gqa.intro", head=person(head), heads=scn.heads,
                          start=person(head * scn.d_k), end=(head + 1) * scn.d_k,  # from 1, as labelled
                          kv_head=person(g), kv_heads=scn.groups,
                          k_start=person(g * scn.d_k), k_end=(g + 1) * scn.d_k, v_start=person(g * scn.d_v),
                          v_end=(g + 1) * scn.d_v,
                          sharers=tx.t("gqa.sep").join(str(h) for h in sharers))
    else:
        intro = style.say(opts, "heads.intro",
                          head=person(head), heads=scn.heads, start=person(head * scn.d_k),  # from 1
                          end=(head + 1) * scn.d_k, v_start=person(head * scn.d_v),
                          v_end=(head + 1) * scn.d_v, q_shape=_shape(q.shape, opts),
                          k_shape=_shape(view.block("K").shape, opts),
                          v_shape=_shape(v.shape, opts))
    body = [Prose(intro)]
    why = "gqa.why" if scn.groups < scn.heads else "heads.why"  # "its own W_K, W_V": not under GQA
    if tx.has(why):
        body.append(Prose(style.plain(tx.t(why), opts), style=style.NOTE))
    title = style.say(opts, "ui.head", head=person(head), heads=scn.heads)
    heading = style.say(opts, "heads.title")
    return Panel(Group(*body), title=Text(f"{heading} {style.markers(opts).dot} {title}"),
                 title_align="left", box=style.panel_box(opts), border_style=style.PANEL_BORDER)


def heads_summary(walk: Walk, shown: int, opts: ViewOptions) -> RenderableType:
    """Every head on one screen, for a printed walk that shows only head `shown` (0-based) in
    full: where the query the screens work through looks in each head (its top key and weight) and
    how spread that row of A is (its entropy), with how to print or step to another head."""

    scn = walk.scenario
    row = default_cell(walk, "A", shown)[0]
    keys = token_labels(scn.key_tokens)
    allowed = int(scn.allowed[row].sum())
    table = FastTable(box=style.table_box(opts), header_style=style.HEADER, show_edge=opts.ascii)
    for key, justify in (("heads.summary_head", "right"), ("heads.summary_columns", "right"),
                         ("heads.summary_top", "left"), ("heads.summary_weight", "right"),
                         ("heads.summary_entropy", "right")):
        table.add_column(Text(style.say(opts, key)), justify=justify, no_wrap=True)
    table.add_column("", no_wrap=True)
    dash = style.plain("–", opts)
    for h in shown_indices(scn.heads, opts.max_rows):
        if h is GAP:
            more = style.say(opts, "ui.more_rows",
                             count=scn.heads - opts.max_rows)
            table.add_row(Text(style.markers(opts).ellipsis), None, Text(more, style=style.NOTE))
            continue
        A = walk.heads[h].mats["A"]  # (n, m): only its row `row` is read
        top = default_cell(walk, "A", h)[1]
        bits = float(entropy_bits(A[row:row + 1])[0])
        mark = style.say(opts, "heads.summary_shown") if h == shown else ""
        table.add_row(Text(str(person(h))), Text(span(h * scn.d_k, (h + 1) * scn.d_k - 1, dash)),
                      Text(keys[top]), Text(style.number(float(A[row, top]), opts)),
                      Text(f"{bits:.2f}"), Text(mark, style=style.NOTE))
    title = style.say(opts, "heads.summary_title", heads=scn.heads)
    what = style.say(opts, "gqa.summary_what" if scn.groups < scn.heads else "heads.summary_what",
                     token=token_labels(scn.tokens)[row], row=person(row))
    entropy = style.say(opts, "heads.summary_entropy_note", max=f"{math.log2(allowed):.2f}", count=allowed)
    more = style.say(opts, "heads.summary_more", head=person(shown))
    return Group(Text(title, style=style.SCREEN_TITLE), Prose(what), Text(""), table,
                 Prose(entropy, style=style.NOTE), Text(""), Prose(more, style=style.NOTE))


def starts_head(walk: Walk, stage: Stage) -> bool:
    """True for the first per-head stage: the screen where each head's group begins."""
    first = next((s for s in walk.stages if s.per_head), None)
    return walk.scenario.heads > 1 and stage is first


def head_blocks(walk: Walk, stage: Stage, opts: ViewOptions) -> Text | None:
    """"Q holds 2 heads side by side: head 1 = columns 1–2 · head 2 = columns 3–4", for the
    full-width matrices made of one block per head, as a note under the table; None elsewhere."""
    line = head_blocks_line(walk, stage, opts)
    return None if line is None else Prose(line, style=style.NOTE)


def head_blocks_line(walk: Walk, stage: Stage, opts: ViewOptions, brief: bool = False) -> str | None:
    """head_blocks' line as text (the interactive walk puts it in the matrix's legend); `brief`:
    one short line, the block width and the first block only (12 blocks take five lines at 80
    columns, room the matrix's rows need first)."""
    scn = walk.scenario
    if scn.heads == 1 or not stage.split:
        return None
    if stage.shared and scn.groups == 1:  # multi-query: K and V are one head, nothing to split
        return None
    grouped = stage.shared and scn.groups < scn.heads
    if brief:
        blocks = scn.groups if grouped else scn.heads
        width = walk.matrix(stage.key).shape[1] // blocks
        return style.say(opts, "gqa.blocks_brief" if grouped else "heads.blocks_brief",
                         symbol=style.plain(stage.symbol, opts), count=blocks, width=width)
    if grouped:  # one block per K/V head, naming its query heads
        width = walk.matrix(stage.key).shape[1] // scn.groups
        blocks = [style.say(opts, "gqa.block", kv_head=person(g), start=person(g * width),  # from 1
                            end=(g + 1) * width,
                            sharers=text(opts.lang).t("gqa.sep").join(
                                str(person(h)) for h in range(scn.heads) if scn.kv_head(h) == g))
                  for g in range(scn.groups)]
        return style.say(opts, "gqa.blocks", symbol=style.plain(stage.symbol, opts),
                         kv_heads=scn.groups, blocks=f" {style.markers(opts).dot} ".join(blocks))
    width = walk.matrix(stage.key).shape[1] // scn.heads
    blocks = [style.say(opts, "heads.block",
                        head=person(h), start=person(h * width), end=(h + 1) * width)  # as labelled, from 1
              for h in range(scn.heads)]
    return style.say(opts, "heads.blocks",
                     symbol=style.plain(stage.symbol, opts), heads=scn.heads,
                     blocks=f" {style.markers(opts).dot} ".join(blocks))


def source_view(walk: Walk, stage: Stage, opts: ViewOptions) -> RenderableType | None:
    """Cross-attention's other sequence beside the tokens, E, P and X screens: its tokens, or its
    matrix with the source's tokens as row labels."""
    scn = walk.scenario
    src = scn.source
    if src is None or stage.key not in ("tokens", "E", "P", "X"):
        return None
    labels = token_labels(src.tokens)
    title = style.say(opts, "cross.source_title", m=src.n)
    if stage.kind == TOKENS:
        return Group(Prose(title, style=style.NOTE), tokens_table(src.tokens, src.ids, opts))
    M = walk.source[stage.key]  # (m, d_model)
    name = style.say(opts, "cross.source_matrix", symbol=style.plain(stage.symbol, opts),
                     shape=_shape(M.shape, opts))
    return Group(Prose(name, style=style.NOTE),
                 heat_table(M, labels, dim_labels(M.shape[1]), stage.kind, opts))


def tokens_table(tokens: Sequence[str], ids: Sequence[int] | None,
                 opts: ViewOptions) -> RenderableType:
    """Each token's row number (#, from 1: what c and `attnwalk explain` take), position (pos, from
    0, as the positional encoding counts) and vocabulary id, and a line saying which is which."""
    table = FastTable(box=style.table_box(opts), header_style=style.HEADER, show_edge=opts.ascii)
    heads = [style.say(opts, key) for key in ("ui.row_col", "ui.position_col", "ui.token", "ui.id")]
    for heading in heads:
        table.add_column(Text(heading), no_wrap=True,
                         justify="left" if heading == heads[2] else "right")
    for i in shown_indices(len(tokens), opts.max_rows):
        if i is GAP:
            more = style.say(opts, "ui.more_rows",
                             count=len(tokens) - opts.max_rows)
            table.add_row(Text(style.markers(opts).ellipsis), None, Text(more, style=style.NOTE))
        else:
            table.add_row(Text(str(person(i))), Text(str(i)), Text(escaped(tokens[i])),
                          Text(str(ids[i]) if ids else "-"))
    legend = style.say(opts, "ui.rows_legend", row=heads[0],
                       pos=heads[1])
    return Group(table, Prose(legend, style=style.NOTE))


def _shape(shape: tuple[int, ...], opts: ViewOptions) -> str:
    return f" {style.markers(opts).times} ".join(str(s) for s in shape)
