"""What `attnwalk train` prints: the run's header, a table of every k-th step (the loss, the size of
the gradient, the weights the target asks about), how far the loss fell, and the watched head's A
at the start and at the end. The live view (app/train.py) shows the same pieces as they grow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Group, NewLine, RenderableType
from rich.text import Text

from attnwalk.layer.axes import token_labels
from attnwalk.layer.stages import WEIGHTS
from attnwalk.layer.train import Step
from attnwalk.render import sequences, style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.heatmap import heat_table
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose
from attnwalk.numbering import shown

MAX_PAIRS = 3  # asked weights shown as columns; a target asking more shows its first ones


def every_default(steps: int) -> int:
    """Every k-th step piped: about ten rows whatever the number of steps."""
    return max(1, -(-steps // 10))


def rows_shown(steps: int, every: int) -> list[int]:
    """Step 0, every `every`-th, and the last."""
    return sorted({0, steps, *range(0, steps + 1, every)})


def kept(run: Iterable[Step], shown: Sequence[int]) -> list[Step]:
    """The steps of `run` numbered in `shown`, and the last one: the run is read as it comes and
    every other step let go, so a printed run's memory stays flat however many steps it takes
    (each Step holds a whole forward and backward walk)."""
    wanted, out = set(shown), []
    last = None
    for step in run:
        if step.step in wanted:
            out.append(step)
        last = step
    if last is not None and (not out or out[-1] is not last):
        out.append(last)
    return out


def run_header(runs: dict[str, list[Step]], lr: float, head: int, opts: ViewOptions,
               steps: int | None = None, title_only: bool | None = None) -> RenderableType:
    """What is trained and how: the scenario, steps, modes, η, the rule, the head whose A is shown;
    `title_only`, its first line alone; False, the lines after it alone."""
    scn = next(iter(runs.values()))[0].walk.scenario
    modes = style.say(opts, "ui.list_sep").join(style.say(opts, f"mode.{m}.name") for m in runs)
    steps = next(iter(runs.values()))[-1].step if steps is None else steps
    adam = _optimizer(scn) == "adam"
    line = style.say(opts, "train.header_adam" if adam else "train.header", name=scn.name, modes=modes,
                     lr=style.short(lr, opts), steps=steps)
    parts: list[RenderableType] = [Text(style.plain(line, opts), style=style.SCREEN_TITLE)]
    if title_only:
        return parts[0]
    if title_only is False:
        parts = []
    from attnwalk.layer.graph import param_symbol, trained  # what train moves, as the graph says (W_U, a sink's logit)

    weights = style.say(opts, "ui.list_sep").join(style.plain(param_symbol(scn.graph, name), opts)
                                                  for name in trained(scn.graph))
    parts.append(Text(style.plain(style.say(opts, "train.rule_adam" if adam else "train.rule", weights=weights),
                                  opts), style=style.FORMULA))
    first = next(iter(runs.values()))[0]
    if sequences.drawn(first):
        parts.append(Prose(style.plain(sequences.sampled_line(first, opts), opts), style=style.NOTE))
    elif scn.heads > 1:  # (a drawn run shows every head)
        parts.append(Text(style.say(opts, "train.watched", head=shown(head), heads=scn.heads), style=style.NOTE))
    return Group(*parts)


def _optimizer(scn) -> str:
    from attnwalk.features.target import target_of

    return target_of(scn).optimizer


def asked_pairs(step: Step) -> list[tuple[int, int]]:
    from attnwalk.features.target import target_of

    target = target_of(step.walk.scenario)
    return list(target.pairs[:MAX_PAIRS]) if target.kind == "attend" else []


def steps_table(runs: dict[str, list[Step]], shown: Sequence[int], head: int,
                opts: ViewOptions) -> RenderableType:
    """One row per shown step: L and |∂L/∂W|, and the weights an attend target asks about; with
    --compare the two modes' L and |∂L/∂W| side by side (so 80 columns still hold them)."""
    first = next(iter(runs.values()))[0]
    scn = first.walk.scenario
    tokens, keys = token_labels(scn.tokens), token_labels(scn.key_tokens)
    several = len(runs) > 1
    pairs = [] if several else asked_pairs(first)
    table = FastTable(box=style.table_box(opts), header_style=style.HEADER, show_edge=opts.ascii)
    table.add_column(Text(style.say(opts, "train.step")), justify="right", no_wrap=True)
    named = {mode: f" {style.say(opts, f'mode.{mode}.name')}" if several else "" for mode in runs}
    for mode in runs:
        table.add_column(Text("L" + named[mode]), justify="right", no_wrap=True)
    for mode in runs:
        table.add_column(Text(style.plain("|∂L/∂W|", opts) + named[mode]), justify="right", no_wrap=True)
    for q, k in pairs:
        table.add_column(Text(f"A[{tokens[q]}, {keys[k]}]"), justify="right", no_wrap=True)
    drawn = not several and sequences.drawn(first)
    if drawn:  # the loss on the second copies, and where the two heads of the circuit are
        table.add_column(Text(style.say(opts, "train.sequences.repeat_column")), justify="right", no_wrap=True)
        for kind in sequences.KINDS:
            table.add_column(Text(style.say(opts, f"train.sequences.{kind}_column")), justify="right", no_wrap=True)
    numbered = [{step.step: step for step in run} for run in runs.values()]
    for i in shown:
        steps = [run[i] for run in numbered]
        cells = [Text(str(i))]
        cells += [Text(style.number(step.loss, opts)) for step in steps]
        cells += [Text(style.number(step.grad_norm, opts)) for step in steps]
        A = steps[0].walk.matrix("A", head)
        cells += [Text(style.number(float(A[q, k]), opts)) for q, k in pairs]
        if drawn:
            cells += [Text(style.number(float(steps[0].numbers["loss_repeat"]), opts))]
            cells += [Text(sequences.strongest_text(steps[0], kind, opts)) for kind in sequences.KINDS]
        table.add_row(*cells)
    return table


def fall(steps: list[Step]) -> tuple[float, float, float]:
    """(first loss, last loss, how much it fell)."""
    return steps[0].loss, steps[-1].loss, steps[0].loss - steps[-1].loss


def summary(runs: dict[str, list[Step]], opts: ViewOptions) -> RenderableType:
    """How far each run's loss fell, and with --compare how the two falls compare. The loss and
    the percentage in the walk's number format (style.number: a run that diverged to 1e273 says
    -3.8997e+275%, not 274 digits)."""
    lines = []
    for mode, steps in runs.items():
        first, last, drop = fall(steps)
        share = style.number(100 * drop / first, opts.with_(precision=1)) if first else "0"
        lines.append(style.say(opts, "train.fell", mode=style.say(opts, f"mode.{mode}.name"),
                               first=style.number(first, opts), last=style.number(last, opts),
                               drop=style.number(drop, opts), share=share, steps=steps[-1].step))
    if len(runs) == 2:
        (_, a), (_, b) = runs.items()
        drop_a, drop_b = fall(a)[2], fall(b)[2]
        if drop_a > 0:
            lines.append(style.say(opts, "train.ratio", ratio=f"{drop_b / drop_a:.3g}"))  # 3 digits: bounded
    return Group(*(Prose(style.plain(line, opts)) for line in lines))


BLOCKS = " ▁▂▃▄▅▆▇█"
ASCII_BLOCKS = " .:-=+*#%"


def loss_curve(losses: Sequence[float], top: float, steps: int, width: int, height: int,
               opts: ViewOptions) -> Text:
    """The loss so far as columns of blocks, on a fixed scale from 0 to `top` and `steps` steps
    across, so two runs drawn with the same `top` compare by eye. Textual's Sparkline scales each
    series to its own range, which would draw a loss that falls by 1e-9 as steeply as one that
    falls by 0.4: the one thing this view must not do (the saturation lesson)."""
    blocks = ASCII_BLOCKS if opts.ascii else BLOCKS
    columns = max(1, min(width, steps + 1))
    per = (steps + 1) / columns
    levels = []
    for c in range(columns):
        span = losses[int(c * per):max(int((c + 1) * per), int(c * per) + 1)]
        levels.append(None if not span else (max(span) / top if top > 0 else 0.0))
    rows = []
    for r in range(height - 1, -1, -1):  # the top line first
        line = ""
        for level in levels:
            if level is None:
                line += " "
                continue
            fill = min(max(level * height - r, 0.0), 1.0)  # how much of this line the column fills
            line += blocks[int(round(fill * (len(blocks) - 1)))]
        rows.append(line)
    return Text("\n".join(rows), style=style.FORMULA)


def weights_view(step: Step, head: int, opts: ViewOptions, label: str) -> RenderableType:
    """The watched head's A at one step, as the walk's A screen draws it: every block's (the graph's
    softmaxes, block 1's first), each titled with its block where there are several."""
    from attnwalk.layer import roles

    scn = step.walk.scenario
    stages = roles.softmaxes(step.walk.graph)
    parts: list[RenderableType] = []
    for b, stage in enumerate(stages):
        title = style.plain(label, opts)
        if len(stages) > 1:
            title += " · " + style.say(opts, "ui.block_title", block=shown(b), blocks=len(stages))
        table = heat_table(step.walk.matrix(stage.key, head), token_labels(scn.tokens),
                           token_labels(scn.key_tokens), WEIGHTS, opts,
                           allowed=scn.allowed if scn.masked else None, mark_row_max=True)
        parts += [NewLine()] * (b > 0) + [Text(title, style=style.LABEL), table]
    return Group(*parts)


def train_report(runs: dict[str, list[Step]], lr: float, head: int, every: int,
                 opts: ViewOptions) -> RenderableType:
    """The whole printed run: header, the table of every k-th step, the summary, A before and after."""
    steps = next(iter(runs.values()))[-1].step
    parts: list[RenderableType] = [run_header(runs, lr, head, opts), NewLine(),
                                   steps_table(runs, rows_shown(steps, every), head, opts), NewLine(),
                                   summary(runs, opts)]
    for mode, run in runs.items():
        name = style.say(opts, f"mode.{mode}.name")
        if sequences.drawn(run[0]):  # every head of every block, at the start and at the end
            parts += [NewLine(), Text(style.say(opts, "train.a_start", mode=name), style=style.LABEL),
                      sequences.heads_maps(run[0], opts), NewLine(),
                      Text(style.say(opts, "train.a_end", mode=name, step=run[-1].step), style=style.LABEL),
                      sequences.heads_maps(run[-1], opts, legend=False)]
            continue
        parts += [NewLine(), weights_view(run[0], head, opts, style.say(opts, "train.a_start", mode=name)),
                  NewLine(), weights_view(run[-1], head, opts,
                                          style.say(opts, "train.a_end", mode=name, step=run[-1].step))]
    return Group(*parts)
