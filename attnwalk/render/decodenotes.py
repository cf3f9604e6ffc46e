"""What a decode step computes and why, as this scenario decodes: the formulas of a step and the
explanation panel (what a KV cache is, why it is exact, the mistakes), with a note for each
variant the scenario has (several heads or grouped-query heads, positions, RoPE, ALiBi, a sliding
window, a real model's layer). Used by render/decodeview.py's screens.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.layer.decodemath import rows, step_lines
from attnwalk.layer.kvcache import Decode
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose


def formulas(dec: Decode) -> list[str]:
    """A step's arithmetic as this scenario does it under this mode (math: every language), written
    from its graph (layer/decodemath.py)."""
    return step_lines(dec.scenario, dec.mode)


def explanation(dec: Decode, opts: ViewOptions) -> RenderableType:
    """What a KV cache is, why it is exact, and the mistake learners make about it."""
    scn = dec.scenario
    grid = FastTable.grid(padding=(0, 2))
    grid.add_column(style=style.LABEL, no_wrap=True)
    grid.add_column(overflow="fold")
    for field in ("what", "why", "mistake"):
        grid.add_row(Text(style.say(opts, f"ui.{field}")), Prose(style.say(opts, f"decode.{field}")))
    n = len(dec.steps)
    notes = []
    if "p_t" in rows(scn, dec.mode)["X"]:  # x_t = e_t + p_t: the position is in the cached k and v
        notes.append(style.say(opts, "decode.note_positions"))
    for feature in scn.features:  # what each feature the scenario uses changes in a step
        for key, values in getattr(feature, "decode_notes", lambda scn, n: [])(scn, n):
            values = {k: _count(v) if isinstance(v, int) and k in _COUNTS else v for k, v in values.items()}
            if ".mistake" in key:
                grid.add_row(Text(""), Prose(style.say(opts, key, **values)))
            else:
                notes.append(style.say(opts, key, **values))
    label = style.say(opts, "ui.note")
    for note in notes:
        grid.add_row(Text(label), Prose(note))
        label = ""
    return Panel(grid, box=style.panel_box(opts), border_style=style.PANEL_BORDER,
                 title=Text(style.say(opts, "decode.title")), title_align="left")


_COUNTS = {"numbers", "full", "kept"}  # numbers of cached floats, written 1,536


def _count(n: int) -> str:
    return f"{n:,}"
