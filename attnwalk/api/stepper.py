"""The walk stepped in a notebook with ipywidgets (`pip install attnwalk[notebook]`): back and
next, the stage, the mode and the head chosen from lists, and the stage's matrix as a grid of
cells, one clicked to work out its arithmetic under the screen. Without ipywidgets, the result
itself, which a notebook shows as its static HTML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.api.result import WalkResult

MAX_GRID = 16  # rows or columns beyond this: the grid is left out (the screen still shows corners)


def stepper(result: WalkResult) -> Any:
    """An ipywidgets box stepping `result`, or `result` where ipywidgets is not installed."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return result
    return Stepper(result).box


class Stepper:
    """The widgets and what each does; `box` is what a notebook shows."""

    def __init__(self, result: WalkResult) -> None:
        import ipywidgets as w

        from attnwalk.api.display import options
        from attnwalk.layer.modes import WALK_MODES

        self.result, self.index = result, 0
        self.cell: tuple[int, int] | None = None  # the cell clicked, else the screen's own
        self.opts = options(result._lang)
        self.back = w.Button(description="◀ back", layout=w.Layout(width="7em"))
        self.next = w.Button(description="next ▶", layout=w.Layout(width="7em"))
        self.stage = w.Dropdown(description="stage", layout=w.Layout(width="16em"))
        modes = [m.name for m in WALK_MODES]
        self.mode = w.Dropdown(options=modes if result.mode in modes else [result.mode, *modes],
                               value=result.mode, description="mode", layout=w.Layout(width="14em"))
        heads = [str(h) for h in range(1, result.heads + 1)]
        self.head = w.Dropdown(options=heads, value=str(result.head_number), description="head",
                               disabled=len(heads) == 1, layout=w.Layout(width="10em"))
        self.grid = w.VBox()
        self.screen = w.HTML()
        self.back.on_click(lambda _: self.go(self.index - 1))
        self.next.on_click(lambda _: self.go(self.index + 1))
        self.stage.observe(self._staged, names="value")
        self.mode.observe(self._moded, names="value")
        self.head.observe(self._headed, names="value")
        self.box = w.VBox([w.HBox([self.back, self.next, self.stage, self.mode, self.head]),
                           self.grid, self.screen])
        self._restage()

    @property
    def steps(self) -> list:
        """The walk's stages, each with the head chosen: the stepper moves through one head."""
        return [s for s in self.result.walk.stages]

    def go(self, index: int) -> None:
        """Step `index` (clamped to the walk), its default cell worked."""
        self.index = max(0, min(index, len(self.steps) - 1))
        self.cell = None
        if self.stage.value != self.index:
            self.stage.value = self.index  # _staged draws it
        else:
            self.draw()

    def pick(self, row: int, col: int) -> None:
        """Cell (row, col), 0-based, worked out under the matrix."""
        self.cell = (row, col)
        self.draw()

    def draw(self) -> None:
        from attnwalk.api.display import html_of
        from attnwalk.render.screens import stage_screen

        stage = self.steps[self.index]
        head = self.result.head_number - 1
        self.back.disabled = self.index == 0
        self.next.disabled = self.index == len(self.steps) - 1
        self.screen.value = html_of([stage_screen(self.result.walk, stage, head, self.opts,
                                                  index=person(self.index), count=len(self.steps),
                                                  cell=self.cell)], self.opts, height="none")
        self.grid.children = self._cells(stage, head)

    def _cells(self, stage, head: int) -> tuple:
        """The matrix as buttons, one a cell, with its rows' and columns' labels; none for a
        stage without cells, or one too big to click through."""
        import ipywidgets as w

        from attnwalk.layer.axes import axes

        walk = self.result.walk
        if stage.worked is None or stage.key not in self.result:
            return ()
        M = walk.matrix(stage.key, head)
        if M.ndim != 2 or max(M.shape) > MAX_GRID:
            return ()
        rows, cols = axes(walk, stage, head, self.opts.lang)
        size = w.Layout(width="7em", height="1.9em")
        items = [w.Label("", layout=size), *(w.Label(c, layout=size) for c in cols)]
        for r, label in enumerate(rows):
            items.append(w.Label(label, layout=size))
            for c in range(M.shape[1]):
                button = w.Button(description=f"{M[r, c]:.{self.opts.precision}f}", layout=size,
                                  tooltip=f"{stage.key}[{label}, {cols[c]}]",
                                  button_style="info" if self.cell == (r, c) else "")
                button.on_click(lambda _, r=r, c=c: self.pick(r, c))
                items.append(button)
        width = len(cols) + 1  # the row labels' column, then one a column of M (a count, not a label)
        return (w.GridBox(items, layout=w.Layout(grid_template_columns=f"repeat({width}, 7em)")),)

    def _restage(self) -> None:
        labels = [(f"{person(i)}. {s.symbol}", i) for i, s in enumerate(self.steps)]
        self.index = min(self.index, len(labels) - 1)
        self.stage.unobserve(self._staged, names="value")
        self.stage.options, self.stage.value = labels, self.index
        self.stage.observe(self._staged, names="value")
        self.draw()

    def _staged(self, change: dict) -> None:
        self.index, self.cell = change["new"], None
        self.draw()

    def _moded(self, change: dict) -> None:
        key = self.steps[self.index].key
        self.result = self.result.in_mode(change["new"])
        keys = [s.key for s in self.steps]
        self.index = keys.index(key) if key in keys else 0  # hard has no S on its own path, say
        self._restage()

    def _headed(self, change: dict) -> None:
        self.result = self.result.head(change["new"])
        self.draw()
