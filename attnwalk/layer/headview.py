"""One head of a walk, taken once: what every screen of that head reads.

A renderer showing stage S of head h needs that head's matrix of S, the scores its softmax read,
the labels of S's rows and columns in the learner's language, and the cell the screen works out.
Asking the walk for each, head in hand, at every turn spread one choice (which head) over a dozen
functions; a HeadView is that choice made once (`Walk.view(head)`), each answer computed on first
use and kept, so the renderers take the view and never the (walk, head) pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer.axes import axes, default_cell

if TYPE_CHECKING:
    from attnwalk.layer.graph import Stage
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.scenario import Scenario


@dataclass(eq=False)
class HeadView:
    """Head `head` (0-based) of `walk`: its matrices, labels and worked cells."""

    walk: Walk
    head: int
    _mats: dict[str, np.ndarray] = field(default_factory=dict)
    _axes: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    _cells: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def scenario(self) -> Scenario:
        return self.walk.scenario

    @property
    def mode(self) -> Mode:
        return self.walk.mode

    def matrix(self, key: str) -> np.ndarray:
        """Stage `key`'s matrix as this head has it: its own per-head one, else the shared one."""
        if key not in self._mats:
            self._mats[key] = self.walk.matrix(key, self.head)
        return self._mats[key]

    def block(self, key: str) -> np.ndarray:
        """This head's own block of a split stage (its columns of Q; its K/V head's of K, V), else
        as `matrix`."""
        own = self.walk.heads[self.head].mats
        return own[key] if key in own else self.matrix(key)

    @cached_property
    def scores(self) -> np.ndarray:
        """What this head's softmax read, before the mask (S, S + B, a feature's stage)."""
        return self.walk.scores(self.head)

    def axes(self, stage: Stage, lang: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The labels of the stage's rows and columns in `lang` (tokens, or named dimensions)."""
        key = (stage.key, lang)
        if key not in self._axes:
            self._axes[key] = axes(self.walk, stage, self.head, lang)
        return self._axes[key]

    def cell(self, key: str) -> tuple[int, int]:
        """The cell stage `key`'s screen works out for this head (axes.default_cell)."""
        if key not in self._cells:
            self._cells[key] = default_cell(self.walk, key, self.head)
        return self._cells[key]
