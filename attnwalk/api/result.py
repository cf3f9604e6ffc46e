"""What `attnwalk.walk` and `attnwalk.model` return: one layer's walk, every stage's matrix by its
key as numpy, a head's own stages, a cell's worked arithmetic as text, the JSON contract as a dict,
and the walk shown in a notebook as the terminal shows it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.layer.compare import Comparison
    from attnwalk.layer.graph import Stage
    from attnwalk.layer.walk import Walk
    from attnwalk.render.options import ViewOptions
    from attnwalk.scenario.scenario import Scenario

Exporter = Callable[["Walk", int], dict]


def _walk_data(walk: Walk, head: int) -> dict[str, Any]:
    from attnwalk.export.data import walk_data

    return walk_data(walk)


def head_index(scn: Scenario, head: int | str | None) -> int:
    """A head counted from 1 (None: head 1), checked as --head is, 0-based."""
    from attnwalk.layer.axes import pick_head

    return pick_head(scn, head) or 0  # None only for "all", which only the printed walk takes


class WalkResult:
    """One layer walked: `w["A"]` is stage A's matrix (of the chosen head where A is per head),
    `w.head(2)["A"]` head 2's (heads count from 1), `w.stages` the stage keys in walk order.
    In a notebook it shows as the printed walk, heat tables and worked cells."""

    def __init__(self, walk: Walk, head: int = 0, *, lang: str | None = None,
                 exporter: Exporter = _walk_data) -> None:
        self._walk, self._head, self._lang, self._exporter = walk, head, lang, exporter

    # -- the numbers ------------------------------------------------------------------------------

    @property
    def walk(self) -> Walk:
        """The layer's Walk itself (attnwalk.layer.walk), for what this class does not wrap."""
        return self._walk

    @property
    def name(self) -> str:
        return self._walk.scenario.name

    @property
    def mode(self) -> str:
        return self._walk.mode.name

    @property
    def tokens(self) -> list[str]:
        """The query tokens, one per row, in order."""
        return list(self._walk.scenario.tokens)

    @property
    def key_tokens(self) -> list[str]:
        """The tokens the keys and values come from (the source sentence under cross-attention)."""
        return list(self._walk.scenario.key_tokens)

    @property
    def heads(self) -> int:
        return self._walk.scenario.heads

    @property
    def head_number(self) -> int:
        """The head `w[...]` reads per-head stages from, counted from 1."""
        return person(self._head)

    @property
    def stages(self) -> list[str]:
        """The keys of the stages that have a matrix, in the order the walk shows them."""
        return [s.key for s in self._matrices()]

    def _matrices(self) -> list[Stage]:
        walk = self._walk
        return [s for s in walk.stages if s.key in walk.mats or s.key in walk.heads[self._head].mats]

    def __getitem__(self, key: str) -> np.ndarray:
        """Stage `key`'s matrix (a key or symbol: "A", "QK^T", "QKᵀ"), float64, read-only. A
        per-head stage is the chosen head's; Q, K and V are full width (every head's columns)."""
        stage = self._stage(key)
        matrix = np.asarray(self._walk.matrix(stage.key, self._head), dtype=np.float64).view()
        matrix.flags.writeable = False
        return matrix

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.stages

    def __iter__(self):
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def keys(self) -> list[str]:
        return self.stages

    def head(self, number: int | str) -> WalkResult:
        """The same walk read at head `number`, counted from 1 (as --head counts)."""
        return self._with(self._walk, head_index(self._walk.scenario, number))

    def _with(self, walk: Walk, head: int) -> WalkResult:
        return type(self)(walk, head, lang=self._lang, exporter=self._exporter)

    def _stage(self, key: str) -> Stage:
        from attnwalk.layer.stages import stage_by_name, typed_name

        matrices = self._matrices()
        stage = stage_by_name(str(key), tuple(matrices)) if isinstance(key, str) else None
        if stage is None:
            raise UsageError(f"unknown stage '{key}'; choose one of: {', '.join(typed_name(s) for s in matrices)}")
        return stage

    # -- words and exports ------------------------------------------------------------------------

    def explain(self, stage: str, row: str | int, col: str | int, *, head: int | str | None = None,
                precision: int = 4) -> str:
        """The worked arithmetic of one cell, as `attnwalk explain` prints it: the row and column
        as tokens or numbers from 1, the head from 1 (this result's head when not given)."""
        from attnwalk.api.display import options, text_of
        from attnwalk.render.screens import explain_view

        opts = options(self._lang, precision)
        chosen = self.head_number if head is None else head
        return text_of([explain_view(self._walk, stage, str(row), str(col), chosen, opts)], opts.width)

    def export(self) -> dict[str, Any]:
        """The JSON contract as a dict: what `attnwalk export SCENARIO --format json` prints
        (for a model, `attnwalk model … --format json`)."""
        import json

        from attnwalk.export.data import to_json

        return json.loads(to_json(self._exporter(self._walk, self._head)))

    def in_mode(self, mode: str) -> WalkResult:
        """The same layer under another mode (scaled, unscaled, uniform, hard, …)."""
        from attnwalk.layer.walk import with_mode

        return self._with(with_mode(self._walk, mode), self._head)

    def compare(self, mode: str | Sequence[str] | None = None, *, amplify: float = 1.0) -> Compared:
        """This head under other modes, as `attnwalk compare` sets them side by side: one mode
        beside scaled, several in order, none for the walk's three (scaled, unscaled, uniform)."""
        from attnwalk.commands.compare import check_bounds
        from attnwalk.layer.compare import compare

        modes = [] if mode is None else [mode] if isinstance(mode, str) else list(mode)
        check_bounds(self._walk.scenario, 1, modes, "text")
        return Compared(compare(self._walk.scenario, modes, amplify, self._head), self._lang)

    # -- in a notebook ----------------------------------------------------------------------------

    def printed(self, opts: ViewOptions) -> Callable[[Any], None]:
        """What draws this walk on a console as `attnwalk run --no-pause --head N` prints it."""
        from attnwalk.commands.walk import print_walk

        return lambda console: print_walk(console, self._walk, opts, head=self._head)

    def show(self) -> Any:
        """A stepper (next and back, the stage, the mode and the head, a cell clicked for its
        arithmetic) where ipywidgets is installed (`pip install attnwalk[notebook]`); else this
        walk, which a notebook shows as its static HTML."""
        from attnwalk.api.stepper import stepper

        return stepper(self)

    def _repr_html_(self) -> str:
        from attnwalk.api.display import html_of, options

        opts = options(self._lang)
        return html_of(self.printed(opts), opts)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": repr(self), "text/html": self._repr_html_()}

    def __repr__(self) -> str:
        head = f", head {self.head_number} of {self.heads}" if self.heads > 1 else ""
        return (f"<attnwalk walk {self.name!r} ({self.mode}{head}): {len(self.tokens)} tokens, "
                f"stages {' '.join(self.stages)}>")


class Compared:
    """One head under several modes: `c["unscaled"]["A"]`, `c.modes`, `c.export()` (what
    `attnwalk compare --format json` prints); shown in a notebook as compare shows it."""

    def __init__(self, comparison: Comparison, lang: str | None = None) -> None:
        self.comparison, self._lang = comparison, lang

    @property
    def modes(self) -> list[str]:
        return [m.name for m in self.comparison.modes]

    def __getitem__(self, mode: str) -> dict[str, np.ndarray]:
        for r in self.comparison.results:
            if r.mode.name == mode:
                return {"A": r.A, "Z": r.Z, "entropy": r.entropy, "peak": r.peak, "signal": r.signal}
        raise UsageError(f"this comparison has no mode '{mode}'; it has {', '.join(self.modes)}")

    def export(self) -> dict[str, Any]:
        import json

        from attnwalk.export.data import to_json
        from attnwalk.layer.compare import comparison_data

        return json.loads(to_json(comparison_data(self.comparison)))

    def _repr_html_(self) -> str:
        from attnwalk.api.display import html_of, options
        from attnwalk.render.compareview import compare_view

        opts = options(self._lang)
        return html_of([compare_view(self.comparison, opts)], opts)

    def __repr__(self) -> str:
        return f"<attnwalk comparison of {self.comparison.scenario.name!r}: {', '.join(self.modes)}>"
