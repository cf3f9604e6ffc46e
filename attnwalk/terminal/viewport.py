"""A screen taller than the terminal, shown one window at a time.

The stepper renders a screen to lines at the terminal's width, pins the screen's header above the
window and its status and footer below, and lets the learner scroll the lines in between. Printing
the whole screen instead would let the terminal scroll its top away: the stage, formula and shape.
"""

from __future__ import annotations

from typing import NamedTuple

from rich.console import Console, RenderableType
from rich.segment import Segment

Line = list[Segment]


def render_lines(console: Console, renderable: RenderableType, width: int) -> list[Line]:
    """`renderable` as lines of `width` cells, every one of them (not cropped to the terminal)."""
    options = console.options.update(width=width, height=None)
    return console.render_lines(renderable, options, pad=False)


def _blank(line: Line) -> bool:
    return not "".join(segment.text for segment in line).strip()


def split_header(lines: list[Line], most: int) -> tuple[list[Line], list[Line]]:
    """(header, rest): the screen's first paragraph, up to its first blank line, to pin above the
    window, when it has at most `most` lines; else no header, and every line scrolls."""
    for i, line in enumerate(lines):
        if _blank(line):
            return (lines[:i], lines[i:]) if 0 < i <= most else ([], lines)
    return [], lines  # a screen of one paragraph has no header apart from its body


class Window(NamedTuple):
    """Which body lines a window shows: `shown` lines from `offset`, with `above` hidden above
    them and `below` hidden below; `last` is the offset that shows the end."""

    offset: int
    shown: int
    above: int
    below: int
    last: int


def window(total: int, room: int, offset: int) -> Window:
    """The window on `total` body lines in `room` rows of the terminal, scrolled to `offset`
    (clamped). When the lines do not all fit, the window's last row says how many are hidden
    above and below, so room - 1 lines show."""
    if total <= room:
        return Window(0, total, 0, 0, 0)
    shown = max(room - 1, 1)
    last = total - shown
    offset = min(max(offset, 0), last)
    return Window(offset, shown, offset, last - offset, last)
