"""A run on drawn sequences (`sequences:`, the induction lesson) on screen: what each step trains
on, the strongest previous-token and induction heads of a step, and every head of every block as a
small map of its A on the scenario's own tokens with its two scores (Step.numbers["heads"], scored
as `attnwalk heads` scores them: layer/headscores.py). The printed run (render/trainview.py) and
the live view (app/train.py) show these beside the loss."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from attnwalk.layer import roles
from attnwalk.layer.train import Step
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.headmaps import attention_map
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose

KINDS = ("previous_token", "induction")  # the two the lesson is about, in the order they form


def drawn(step: Step) -> bool:
    """Was this run trained on drawn sequences (its steps carry the heads' scores)?"""
    return "heads" in step.numbers


def sampled_line(step: Step, opts: ViewOptions) -> str:
    """What every step trains on: the batch, the range of R, the seed."""
    from attnwalk.features.sequences import setting

    spec = setting(step.walk.scenario)
    return style.say(opts, "train.sequences.each_step", batch=spec.batch, low=spec.low, high=spec.high,
                     seed=spec.seed, n=step.walk.scenario.n)


def strongest(step: Step, kind: str) -> dict:
    """The head with the highest `kind` score at this step (the first, on a tie)."""
    return max(step.numbers["heads"], key=lambda h: h[kind])


def strongest_text(step: Step, kind: str, opts: ViewOptions) -> str:
    """"L1 H2 0.57": where the strongest head of `kind` is, and its score."""
    h = strongest(step, kind)
    return style.say(opts, "train.sequences.where", layer=h["layer"], head=h["head"],
                     value=style.number(h[kind], opts.with_(precision=2)))


def map_width(step: Step) -> int:
    """The columns one head's map takes: the map and its border, or the scores' line if wider."""
    return max(step.walk.scenario.n + 2, 19)


def circuit_first(heads: list[dict]) -> list[dict]:
    """The heads with the strongest score of each kind (the circuit's two heads, once each) first,
    then the others in order: a screen with room for one row of maps shows the two that matter."""
    first = []
    for kind in KINDS:
        best = max(heads, key=lambda h: h[kind])
        if best not in first:
            first.append(best)
    return first + [h for h in heads if h not in first]


def heads_maps(step: Step, opts: ViewOptions, legend: bool = True, circuit: bool = False) -> RenderableType:
    """Every head's A on the scenario's tokens as a map (a row per query, a character per key,
    darker for more weight), titled with its block and head and its two scores; as many side by
    side as fit the width; with `circuit`, the strongest previous-token and induction heads first."""
    walk = step.walk
    stages = roles.softmaxes(walk.graph)
    width = map_width(step)
    per_row = max(1, (opts.width + 2) // (width + 2))  # columns 2 apart, none after the last
    heads = circuit_first(step.numbers["heads"]) if circuit else step.numbers["heads"]
    grid = FastTable.grid(padding=(0, 2))
    for _ in range(min(per_row, len(heads))):
        grid.add_column(no_wrap=True)
    edge = "|" if opts.ascii else "│"
    two = opts.with_(precision=2)
    cells = []
    for h in heads:
        A = walk.matrix(stages[h["layer"] - 1].key, h["head"] - 1)
        title = style.say(opts, "train.sequences.map_title", layer=h["layer"], head=h["head"])
        scores = style.say(opts, "train.sequences.map_scores", previous=style.number(h["previous_token"], two),
                           induction=style.number(h["induction"], two))
        lines = [title, *(f"{edge}{row}{edge}" for row in attention_map(A, opts)), scores]
        cells.append(Text("\n".join(lines)))
    for start in range(0, len(cells), per_row):
        chunk = cells[start:start + per_row]
        grid.add_row(*chunk, *([None] * (min(per_row, len(heads)) - len(chunk))))
    if not legend:
        return grid
    return Group(maps_legend(step, opts), grid)


def maps_legend(step: Step, opts: ViewOptions) -> RenderableType:
    """What the maps show and how their two scores are taken."""
    tokens = " ".join(step.walk.scenario.tokens)
    return Prose(style.plain(style.say(opts, "train.sequences.maps", tokens=tokens), opts), style=style.NOTE)
