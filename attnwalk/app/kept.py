"""A pane that keeps the lines it has drawn, by what they show: the walk's header, explanation and
extras. n and b go back and forth between stages, and a Static draws the same explanation again
at every visit (its Panel of wrapped prose was ~12 ms of each key on the large layer, as much as
the rest of the frame); this pane draws each (stage, mode, width) once and reuses the lines.
Textual's Line API: the widget hands over its lines as Strips, row by row.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

from rich.console import RenderableType
from textual.geometry import Size
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget

KEPT = 48  # drawings kept per pane: a walk's stages at one or two widths


class KeptPane(Widget):
    """Shows `make()`'s renderable for `key`; the lines drawn for (key, width) are kept."""

    DEFAULT_CSS = """
    KeptPane { height: auto; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._key: Hashable = None
        self._make: Callable[[], RenderableType | None] | None = None
        self._drawn: OrderedDict[tuple[Hashable, int], list[Strip]] = OrderedDict()

    def show(self, key: Hashable, make: Callable[[], RenderableType | None]) -> None:
        """Show what `make` returns (None: nothing), drawing it only if `key` was not drawn before
        at this width; `key` names everything the drawing depends on but the width (None: show
        nothing)."""
        if key == self._key:
            return
        self._key, self._make = key, (make if key is not None else None)
        self.refresh(layout=True)

    def kept(self, key: Hashable) -> bool:
        """Has `key` been drawn at the pane's present width?"""
        return (key, self.size.width) in self._drawn

    def _lines(self, width: int) -> list[Strip]:
        at = (self._key, width)
        if at in self._drawn:
            self._drawn.move_to_end(at)
            return self._drawn[at]
        renderable = self._make() if self._make is not None else None
        if renderable is None or width <= 0:
            lines: list[Strip] = []
        else:  # as a Static draws it (the widget's colours, dim text blended as Textual blends it)
            lines = Visual.to_strips(self, visualize(self, renderable, markup=False), width, None, self.visual_style)
        self._drawn[at] = lines
        if len(self._drawn) > KEPT:
            self._drawn.popitem(last=False)
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def render_line(self, y: int) -> Strip:
        lines = self._lines(self.size.width)
        return lines[y] if y < len(lines) else Strip.blank(self.size.width, self.visual_style.rich_style)
