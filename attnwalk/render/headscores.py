"""`attnwalk heads` on screen: what the sequence was, one heat table per score (a row per layer, a
column per head), the strongest head of each score named in a sentence, seed 003's caution that a
score says what a head does on this input and not what it is for, and how to walk a head."""

from __future__ import annotations

import shlex

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attnwalk.layer.headscores import SCORES
from attnwalk.numbering import shown as person
from attnwalk.render import style
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose

CLEAR = 0.4  # a head is named as a head of that kind from this mean weight on
WALK_FIRST = ("induction", "previous_token")  # the head offered to walk: a clear one of these, in order


def grids(data: dict) -> dict[str, np.ndarray]:
    """Each score as a layers × heads grid, from the JSON's list of heads."""
    n_layers = max(h["layer"] for h in data["heads"])
    n_heads = max(h["head"] for h in data["heads"])
    given = [score.key for score in SCORES if data["heads"][0].get(score.key) is not None]  # induction may be null
    out = {key: np.zeros((n_layers, n_heads)) for key in given}
    for h in data["heads"]:
        for key in given:
            out[key][h["layer"] - 1, h["head"] - 1] = h[key]
    return out


def strongest(grid: np.ndarray) -> tuple[int, int, float]:
    """(layer, head) from 1 and the score of the grid's largest entry (the first, on a tie)."""
    layer, head = np.unravel_index(int(np.argmax(grid)), grid.shape)
    return person(int(layer)), person(int(head)), float(grid[layer, head])


def heat_grid(grid: np.ndarray, opts: ViewOptions) -> Table:
    """A layers × heads grid of scores in [0, 1], two decimals each, darker for more weight: every
    layer and every head shown (a model's heads fit a terminal at five characters a cell)."""
    # no rules between the columns: SmolLM2's 9 and MiniLM's 12 heads fit 80 columns at 6 a cell
    table = Table(box=None, padding=(0, 0, 0, 2), header_style=style.HEADER, pad_edge=False)
    table.add_column(Text(""), style=style.HEADER, justify="right", no_wrap=True)
    for h in range(grid.shape[1]):
        table.add_column(Text(str(person(h))), justify="right", no_wrap=True)
    for l, row in enumerate(grid):
        table.add_row(Text(str(person(l))), *(Text(f"{v:.2f}", style=style.weight_style(float(v))) for v in row))
    return table


def heads_screen(data: dict, pieces: tuple[str, ...], *, causal: bool, spec: str | None, seed: int,
                 opts: ViewOptions) -> RenderableType:
    """The whole screen of `attnwalk heads`."""
    found = grids(data)
    n_layers, n_heads = next(iter(found.values())).shape
    say = lambda key, **v: style.say(opts, f"headscores.{key}", **v)  # noqa: E731
    first, repeat = data["first"], data["repeat"]
    start = say("start", token=pieces[0]) if first else say("no_start")
    parts: list[RenderableType] = [
        Text(say("title", model=data["model"], layers=n_layers, heads=n_heads), style=style.SCREEN_TITLE),
        Prose(say("sequence", start=start, repeat=repeat, n=len(data["ids"]), seed=seed,
                  sample=" ".join(pieces[first:first + min(repeat, 8)]) + (" …" if repeat > 8 else ""))),
        Prose(say("grid"), style=style.NOTE)]
    if not causal:
        parts.append(Prose(say("bidirectional", model=data["model"]), style=style.NOTE))
    for score in SCORES:
        parts += [Text(""), Prose(say(f"score.{score.key}"), style=style.NOTE),
                  heat_grid(found[score.key], opts)]
    parts += [Text(""), Text(say("strongest"), style=style.LABEL)]
    walkable = []
    for score in SCORES:
        layer, head, value = strongest(found[score.key])
        clear = value >= CLEAR
        parts.append(Prose(f"{style.markers(opts).dot} " + say(f"named.{score.key}" if clear else "weak", layer=layer, head=head,
                                      value=f"{value:.2f}", token=pieces[0],
                                      kind=say(f"kind.{score.key}"))))
        if clear and score.key in WALK_FIRST:
            walkable.append((WALK_FIRST.index(score.key), layer, head))
    parts += [Text(""), Prose(say("caution"), style=style.NOTE)]
    layer, head = min(walkable)[1:] if walkable else strongest(found["previous_token"])[:2]
    command = ["attnwalk", "model", say("sentence")] + (["--model", spec] if spec else []) \
        + ["--layer", str(layer), "--head", str(head)]
    parts += [Text(""), Prose(say("walk", layer=layer, head=head)),
              Text("  " + " ".join(shlex.quote(part) for part in command), style=style.FORMULA)]
    return Group(*parts)


def _count(opts: ViewOptions, what: str, count: int) -> str:
    """"1 layer", "2 layers": a count with its noun."""
    return style.say(opts, f"headscores.scenario.count.{what}_{'one' if count == 1 else 'many'}", count=count)


def scenario_heads_screen(data: dict, spec: str, *, causal: bool, opts: ViewOptions) -> RenderableType:
    """`attnwalk heads --scenario FILE`: the same scores over the scenario's own tokens, every head
    of its layer(s), saying so (and whether the induction score could be taken), the strongest
    head of each kind, and how to walk it."""
    found = grids(data)
    n_layers, n_heads = next(iter(found.values())).shape
    say = lambda key, **v: style.say(opts, f"headscores.{key}", **v)  # noqa: E731
    tokens = data["tokens"]
    sample = " ".join(tokens[:12]) + (" …" if len(tokens) > 12 else "")
    repeat = style.say(opts, "headscores.scenario.repeated", repeat=data["repeat"], first=data["first"]) if data["repeat"] \
        else style.say(opts, "headscores.scenario.not_repeated")
    parts: list[RenderableType] = [
        Text(style.say(opts, "headscores.scenario.title", name=data["scenario"], layers=_count(opts, "layer", n_layers),
                       heads=_count(opts, "head", n_heads)), style=style.SCREEN_TITLE),
        Prose(style.say(opts, "headscores.scenario.sequence", n=len(tokens), sample=sample,
                        mode=style.say(opts, f"mode.{data['mode']}.name"))), Prose(repeat),
        Prose(style.say(opts, "headscores.scenario.grid"), style=style.NOTE)]
    if not causal:
        parts.append(Prose(style.say(opts, "headscores.scenario.bidirectional"), style=style.NOTE))
    for key, grid in found.items():
        parts += [Text(""), Prose(say(f"score.{key}"), style=style.NOTE), heat_grid(grid, opts)]
    parts += [Text(""), Text(say("strongest"), style=style.LABEL)]
    walkable = []
    for key, grid in found.items():
        layer, head, value = strongest(grid)
        clear = value >= CLEAR
        parts.append(Prose(f"{style.markers(opts).dot} " + say(f"named.{key}" if clear else "weak", layer=layer,
                                                             head=head, value=f"{value:.2f}", token=tokens[0],
                                                             kind=say(f"kind.{key}"))))
        if clear and key in WALK_FIRST:
            walkable.append((WALK_FIRST.index(key), layer, head))
    layer, head = min(walkable)[1:] if walkable else strongest(found["previous_token"])[:2]
    command = ["attnwalk", "run", spec] + (["--head", str(head)] if n_heads > 1 else [])
    parts += [Text(""), Prose(style.say(opts, "headscores.scenario.walk", layer=layer, head=head)),
              Text("  " + " ".join(shlex.quote(part) for part in command), style=style.FORMULA)]
    return Group(*parts)
