"""The screens of `attnwalk decode`: one per generated token, then a summary.

Step t shows what arrives (token t's x_t), what is computed now (its q, k, v), each head's K and V
cache with the rows read from it and the row just appended, the scores and weights of q_t over
the cache, z_t beside row t of the causal walk with their largest difference, and the work done
with the cache and without one. Each screen is one Rich renderable, so any stepper can show it.
The variants show what they change: the K/V head a query head shares (GQA), the rotated query
(RoPE), the ALiBi bias beside the scores, what a rolling window buffer would keep; the formulas
and the explanation panel are render/decodenotes.py's.
"""

from __future__ import annotations

import numpy as np
from rich.console import Console, ConsoleOptions, Group, NewLine, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from attnwalk.layer.axes import dim_labels, token_labels
from attnwalk.layer.decodemath import row_name
from attnwalk.layer.ops import rows_sum_to_one
from attnwalk.layer.kvcache import (Decode, Step, Work, after_weights, cache_numbers, rolling_window, ungrouped_numbers,
                                   window_rows)
from attnwalk.layer.graph import param_symbol
from attnwalk.layer.roles import SCALED, next_token, output
from attnwalk.layer.stages import SIGNED, WEIGHTS
from attnwalk.render import style
from attnwalk.render.decodenotes import explanation, formulas
from attnwalk.render.fasttable import FastTable
from attnwalk.render.heatmap import heat_table
from attnwalk.render.lesson import lesson_panel
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose
from attnwalk.text import text
from attnwalk.numbering import shown as person


def screen_count(dec: Decode) -> int:
    """One screen per token, then the summary."""
    return len(dec.steps) + 1


def decode_screen(dec: Decode, index: int, opts: ViewOptions,
                  heads: list[int] | None = None) -> RenderableType:
    """Screen `index` (0-based) of screen_count(dec): a step, or the summary after the last one.
    `heads` (0-based) are the heads whose caches are shown, every head by default."""
    if index == len(dec.steps):
        return summary_screen(dec, opts)
    return step_screen(dec, dec.steps[index], opts, heads)


def step_screen(dec: Decode, step: Step, opts: ViewOptions,
                heads: list[int] | None = None) -> RenderableType:
    """Step t: its header, (on step 1 the lesson), what it reused and computed, x_t, each head in
    `heads`, the heads' outputs together, the check against the walk and the work."""
    scn = dec.scenario
    tokens = token_labels(scn.tokens)
    parts: list[RenderableType] = [_header(dec, step.t, opts)]
    if step.t == 1:
        opening = lesson_panel(dec.walk, opts)
        if opening is not None:
            parts.append(opening)
    parts.append(Prose(_happened(dec, step, opts)))
    parts.append(_captioned(style.say(opts, "decode.arrives", t=step.t, token=tokens[step.t - 1]),
                            heat_table(step.x[None, :], ["x_t"], _dims(dec, "d_model", scn.d_model, opts),
                                       SIGNED, opts)))
    for h in range(scn.heads) if heads is None else heads:
        parts += _head_view(dec, step, h, opts)
    if scn.heads > 1 or step.o is not None:
        parts.append(_output_rows(dec, step, opts))
    parts += _block_rows(dec, step, opts)
    likeliest = _likeliest(dec, step, opts)
    if likeliest is not None:
        parts.append(likeliest)
    parts.append(_difference_line(step.difference, opts))
    parts.append(_work_table(dec, step, opts))
    if step.t == 1:
        parts.append(explanation(dec, opts))
    return _spaced(parts)


def _spaced(parts: list[RenderableType]) -> Group:
    """The sections of a screen, one blank line between them."""
    spaced: list[RenderableType] = []
    for part in parts:
        spaced += [part, NewLine()]
    return Group(*spaced[:-1])


def _header(dec: Decode, t: int, opts: ViewOptions) -> RenderableType:
    """Which step, which token; the formulas of a step; the mode."""
    scn = dec.scenario
    tokens = token_labels(scn.tokens)
    title = Text()
    title.append(style.say(opts, "decode.step_header", index=t, count=screen_count(dec)),
                 style=style.POSITION)
    title.append("   " + style.say(opts, "decode.step_title", t=t, token=tokens[t - 1]),
                 style=style.SCREEN_TITLE)
    facts = FastTable.grid(padding=(0, 2))
    facts.add_column(style=style.NOTE, no_wrap=True)
    facts.add_column()
    label = style.say(opts, "ui.formula")
    for line in formulas(dec):
        facts.add_row(Text(label), Text(style.plain(line, opts), style=style.FORMULA))
        label = ""
    key = "decode.variant.cache_shape_gqa" if scn.groups < scn.heads else (
        "decode.cache_shape_heads" if scn.heads > 1 else "decode.cache_shape")
    shape = style.say(opts, key, t=t, heads=scn.heads, kv_heads=scn.groups, d_k=scn.d_k, d_v=scn.d_v,
                      numbers=_count(cache_numbers(scn, t)), full=_count(ungrouped_numbers(scn, t)))
    facts.add_row(Text(style.say(opts, "decode.cache")), Text(shape, style=style.SHAPE))
    w = rolling_window(scn)
    if w is not None and t > w:  # what a rolling buffer would keep
        kept = cache_numbers(scn, window_rows(scn, t))
        facts.add_row(Text(""), Text(style.say(opts, "decode.variant.cache_window", t=t, w=w,
                                               kept=_count(kept)), style=style.SHAPE))
    mode = style.plain(text(opts.lang).t(f"mode.{dec.mode.name}.name"), opts)
    facts.add_row(Text(style.say(opts, "ui.mode")), Text(mode))
    return Group(title, facts)


def _happened(dec: Decode, step: Step, opts: ViewOptions) -> str:
    """What this step read from the cache and what it computed, in one sentence."""
    tokens = token_labels(dec.scenario.tokens)
    token = tokens[step.t - 1]
    if step.t == 1:
        return style.say(opts, "decode.first", token=token)
    earlier = list(tokens[:step.t - 1])
    if len(earlier) > 6:  # a long prefix: its first and last tokens
        earlier = earlier[:3] + [style.markers(opts).ellipsis] + earlier[-2:]
    reused = style.say(opts, "ui.list_sep").join(earlier)
    return style.say(opts, "decode.reused", token=token, t=step.t, reused=reused,
                     count=step.reused, last=step.t - 1)


def _head_view(dec: Decode, step: Step, h: int, opts: ViewOptions) -> list[RenderableType]:
    """One head: q_t, its K and V caches (the new row marked), s_t and a_t over the cache, z_t."""
    scn = dec.scenario
    head = step.heads[h]
    t = step.t
    keys = token_labels(scn.tokens)[:t]
    rows = [style.say(opts, "decode.new_row", token=label) if j == t - 1 else
            style.say(opts, "decode.cached_row", token=label, step=person(j)) for j, label in enumerate(keys)]
    d_k, d_v = _dims(dec, "d_k", scn.d_k, opts), _dims(dec, "d_v", scn.d_v, opts)
    out: list[RenderableType] = []
    if scn.heads > 1:
        label = style.say(opts, "ui.head", head=person(h), heads=scn.heads)
        if scn.groups < scn.heads:  # which cache it reads, and who else reads it
            sharing = [str(person(other)) for other in range(scn.heads) if scn.kv_head(other) == head.kv]
            label += "   " + style.say(opts, "decode.variant.head_gqa", kv=person(head.kv), kv_heads=scn.groups,
                                       sharing=style.say(opts, "ui.list_sep").join(sharing))
        out.append(Text(label, style=style.POSITION))
    # a feature that turns q and k before the scores (RoPE) names its own captions (DECODE_TEXT)
    said = {part: key for feature in scn.features for part, key in getattr(feature, "DECODE_TEXT", {}).items()}
    query = style.say(opts, said.get("query", "decode.query"), pos=t - 1)
    out.append(_captioned(query, heat_table(head.q[None, :], ["q_t"], d_k, SIGNED, opts)))
    if "cache" in said:
        out.append(Text(style.say(opts, said["cache"]), style=style.NOTE))
    out.append(SideBySide(_captioned("K_cache", heat_table(head.K_cache, rows, d_k, SIGNED, opts)),
                             _captioned("V_cache", heat_table(head.V_cache, rows, d_v, SIGNED, opts))))
    allowed = scn.allowed[t - 1:t, :t]
    s_name = "s_t" if dec.mode.scales(scn.scorer) else style.plain("q_t · k_j", opts)
    # every stage between the scores and the softmax (roles.score_stages), a_t the softmax of the last
    names = [s_name if key == SCALED else style.plain(row_name(dec.walk.stage(key).symbol), opts)
             for key in head.scores]
    scores = heat_table(np.where(allowed, np.stack(list(head.scores.values())), -np.inf), names, keys,
                        SIGNED, opts)
    caption = style.say(opts, "decode.scores") if len(names) == 1 else style.say(
        opts, "decode.scores_path", last=names[-1])
    for feature in scn.features:  # a feature's own words for those rows (ALiBi: this head's slope)
        said = getattr(feature, "decode_scores_caption", lambda scn, head: None)(scn, h)
        if said is not None:
            key, values = said
            caption = style.say(opts, key, **{k: f"{v:.{opts.precision}g}" if isinstance(v, float) else v
                                               for k, v in values.items()})
    weights = heat_table(head.a[None, :], ["a_t"], keys, WEIGHTS, opts, allowed=allowed, mark_row_max=True)
    out.append(SideBySide(_captioned(caption, scores),
                             _captioned(_weights_caption(head.a, opts), weights)))
    Z = dec.walk.matrix("Z", h)[t - 1]
    out.append(_captioned(style.say(opts, "decode.output"), heat_table(
        np.stack([head.z, Z]), ["z_t", style.say(opts, "decode.walk_row", t=t)], d_v, SIGNED, opts)))
    for key, row in head.later.items():  # a feature's stages after z_t: their rows, beside the walk's
        stage = dec.walk.stage(key)
        label = style.plain(row_name(stage.symbol), opts)
        out.append(heat_table(np.stack([row, dec.walk.matrix(key, h)[t - 1]]),
                              [label, style.say(opts, "decode.walk_row", t=t)], _dims(dec, stage.cols, row.shape[0], opts),
                              SIGNED, opts))
    return out


def _weights_caption(a: np.ndarray, opts: ViewOptions) -> str:
    """a_t's caption: they sum to 1, or (an attention sink took a share) to what they sum to."""
    if rows_sum_to_one(a):
        return style.say(opts, "decode.weights")
    return style.say(opts, "decode.weights_short", total=f"{float(a.sum()):.{opts.precision}f}")


def _captioned(caption: str, table: RenderableType) -> RenderableType:
    """A table under its caption: a line of its own, not a title wrapped to the table's width."""
    return Group(Text(caption, style=style.NOTE), table)


class SideBySide:
    """Small tables next to each other where the width allows, else one under the other with a
    blank line between them."""

    def __init__(self, *parts: RenderableType) -> None:
        self.parts = parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [Measurement.get(console, options, part).maximum for part in self.parts]
        if sum(widths) + _GUTTER * (len(widths) - 1) <= options.max_width:
            grid = Table.grid(padding=(0, _GUTTER, 0, 0))
            for _ in self.parts:
                grid.add_column(no_wrap=True)
            grid.add_row(*self.parts)
            yield grid
            return
        for i, part in enumerate(self.parts):
            if i:
                yield NewLine()
            yield part


_GUTTER = 4


def _output_rows(dec: Decode, step: Step, opts: ViewOptions) -> RenderableType:
    """Several heads: the heads' z_t side by side; and o_t = concat · W_O (one head: z_t · W_O),
    beside the walk's row."""
    t = step.t
    cols = dim_labels(len(step.concat))
    parts: list[RenderableType] = [] if dec.scenario.heads == 1 else [_captioned(
        style.say(opts, "decode.concat"), heat_table(np.stack([step.concat, dec.walk.mats["concat"][t - 1]]),
                                                     ["concat_t", style.say(opts, "decode.walk_concat", t=t)],
                                                     cols, SIGNED, opts))]
    if step.o is not None:
        made = "concat_t" if dec.scenario.heads > 1 else "z_t"
        parts.append(_captioned(style.plain(f"o_t = {made} · W_O", opts), heat_table(
            np.stack([step.o, dec.walk.mats[output(dec.walk.computed).key][t - 1]]), ["o_t", style.say(opts, "decode.walk_o", t=t)],
            _dims(dec, "d_model", dec.scenario.d_model, opts), SIGNED, opts)))
    return Group(*parts)


def _block_rows(dec: Decode, step: Step, opts: ViewOptions) -> list[RenderableType]:
    """The block after the attention's output (the residual, the FFN, a norm): each stage's row t,
    made from row t alone, beside row t of the whole walk, under its formula."""
    from attnwalk.layer.decodemath import row_name

    out: list[RenderableType] = []
    for key, row in step.block.items():
        stage = dec.walk.stage(key)
        label = style.plain(row_name(stage.symbol), opts)
        table = heat_table(np.stack([row, dec.walk.mats[key][step.t - 1]]),
                           [label, style.say(opts, "decode.walk_stage", t=step.t,
                                             symbol=style.plain(stage.symbol, opts))],
                           _dims(dec, stage.cols, row.shape[0], opts), SIGNED, opts)
        out.append(_captioned(style.plain(stage.formula_in(dec.scenario, dec.mode), opts), table))
    return out


def _likeliest(dec: Decode, step: Step, opts: ViewOptions) -> RenderableType | None:
    """Where the step ends on next-token probabilities p_t: the likeliest next token, argmax p_t."""
    found = next_token(dec.walk.computed)
    if found is None or found.key not in step.block:
        return None
    p = step.block[found.key]
    words = dec.scenario.dimension_names(found.cols, opts.lang)
    best = int(np.argmax(p))  # the first of equals: the earlier id
    word = words[best] if words and len(words) == len(p) else person(best)
    token = token_labels(dec.scenario.tokens)[step.t - 1]
    return Prose(style.plain(style.say(opts, "decode.likeliest", token=token, word=word,
                                       p=style.number(float(p[best]), opts)), opts), style=style.RESULT)


def _difference_line(difference: float, opts: ViewOptions, every: bool = False) -> RenderableType:
    """The largest gap to the causal walk: exactly 0, or float64 rounding (of one step, or of
    `every` step)."""
    key = ("decode.all_same" if every else "decode.same") if difference == 0.0 else (
        "decode.all_rounding" if every else "decode.rounding")
    return Prose(style.say(opts, key, difference=gap(difference)), style=style.RESULT)


def gap(difference: float) -> str:
    """A difference as the screens print it: 0 when there is none, else 1.2e-16."""
    return "0" if difference == 0.0 else f"{difference:.1e}"


def _dims(dec: Decode, dim: str, width: int, opts: ViewOptions) -> tuple[str, ...]:
    names = dec.scenario.dimension_names(dim, opts.lang)
    return tuple(style.plain(n, opts) for n in names) if names and len(names) == width else dim_labels(width)


def _count(n: int) -> str:
    return f"{n:,}"


def _work_table(dec: Decode, step: Step, opts: ViewOptions) -> RenderableType:
    """This step's multiply-adds, with the cache and without (the layer rerun on tokens 1 … t),
    by product, and the totals of every step so far."""
    scn = dec.scenario
    t = step.t
    table = FastTable(box=style.table_box(opts), show_edge=opts.ascii, header_style=style.HEADER,
                      title=Text(style.say(opts, "decode.work_title", t=t)), title_justify="left",
                      title_style=style.NOTE)
    table.add_column("", overflow="fold")  # the labels give way on a narrow terminal, never a number
    table.add_column(Text(style.say(opts, "decode.with_cache")), justify="right", no_wrap=True)
    table.add_column(Text(style.say(opts, "decode.without_cache")), justify="right", no_wrap=True)
    rows = [("decode.work_projections", 0), ("decode.work_scores", 1), ("decode.work_mixing", 2)]
    if scn.W_O is not None:
        rows.append(("decode.work_output", 3))
    if step.cached.after:  # the FFN, the unembedding: one row each through their weights
        rows.append(("decode.work_after", 4))
    weights = ", ".join(param_symbol(scn.graph, name) for name in after_weights(scn))  # E_vocab, not its key
    for key, i in rows:
        table.add_row(Text(style.plain(style.say(opts, key, weights=weights), opts)), Text(_count(step.cached[i])),
                      Text(_count(step.rerun[i])))
    table.add_row(Text(style.say(opts, "decode.work_total"), style=style.RESULT),
                  Text(_count(step.cached.total), style=style.RESULT),
                  Text(_count(step.rerun.total), style=style.RESULT))
    cached, rerun = _so_far(dec, t)
    table.add_row(Text(style.say(opts, "decode.work_so_far", t=t)), Text(_count(cached.total)),
                  Text(_count(rerun.total)))
    ratio = style.say(opts, "decode.work_ratio", ratio=f"{rerun.total / cached.total:.2f}", t=t)
    return Group(table, Prose(ratio, style=style.NOTE))


def _so_far(dec: Decode, t: int) -> tuple[Work, Work]:
    """The multiply-adds of steps 1 … t, with the cache and without."""
    cached = rerun = Work(0, 0, 0, 0)
    for step in dec.steps[:t]:
        cached, rerun = cached + step.cached, rerun + step.rerun
    return cached, rerun


TOKEN_CELLS = 12  # the summary's token column at most: the work columns must keep 80 columns readable


def summary_screen(dec: Decode, opts: ViewOptions) -> RenderableType:
    """After the last token: every step's cache, work and difference in one table, and the totals."""
    scn = dec.scenario
    n = len(dec.steps)
    tokens = token_labels(scn.tokens)
    title = Text()
    title.append(style.say(opts, "decode.step_header", index=person(n), count=n + 1), style=style.POSITION)
    title.append("   " + style.say(opts, "decode.summary_title"), style=style.SCREEN_TITLE)
    table = FastTable(box=style.table_box(opts), show_edge=opts.ascii, header_style=style.HEADER)
    for key in ("decode.col_step", "decode.col_token", "decode.col_reused", "decode.col_cached",
                "decode.col_rerun", "decode.col_difference"):
        table.add_column(Text(style.say(opts, key)), justify="left" if key == "decode.col_token" else "right",
                         no_wrap=True)
    for step in dec.steps:
        token = Text(tokens[step.t - 1])
        token.truncate(TOKEN_CELLS, overflow="ellipsis")  # a model's long special tokens (<|begin_of_text|>)
        table.add_row(Text(str(step.t)), token, Text(str(step.reused)),
                      Text(_count(step.cached.total)), Text(_count(step.rerun.total)),
                      Text(gap(step.difference)))
    cached, rerun = _so_far(dec, n)
    table.add_row(Text(style.say(opts, "decode.work_total"), style=style.RESULT), Text(""), Text(""),
                  Text(_count(cached.total), style=style.RESULT), Text(_count(rerun.total), style=style.RESULT),
                  Text(gap(dec.difference), style=style.RESULT))
    w = rolling_window(scn)
    key = ("decode.variant.summary_totals_window" if w is not None  # work capped by w
           else "decode.variant.summary_totals_gqa" if scn.groups < scn.heads else "decode.summary_totals")
    totals = style.say(opts, key, n=n, cached=_count(cached.total), w=w or 0,
                       rerun=_count(rerun.total), ratio=f"{rerun.total / cached.total:.2f}",
                       numbers=_count(cache_numbers(scn, n)), kv_heads=scn.groups,
                       full=_count(ungrouped_numbers(scn, n)))
    parts: list[RenderableType] = [title, table, Prose(totals), _difference_line(dec.difference, opts, every=True),
                                   explanation(dec, opts)]
    return _spaced(parts)
