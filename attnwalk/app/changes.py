"""m and h: the same stage and cell in another mode or head, and what that changed: the cells
underlined in the matrix (old) and the cursor's old → new value at the top of the notes
(panes.change_line, from `before`). A mixin of WalkApp: it reads and sets the app's walk, step,
message and `before`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnwalk.layer.stages import Stage
from attnwalk.layer.walk import Walk
from attnwalk.numbering import shown
from attnwalk.render.style import plain


@dataclass(frozen=True, eq=False)
class Before:
    """What m or h left to compare with: the walk before and the change's name ("scaled →
    unscaled", "head 1 → head 2"). After m each head is compared with itself in the old mode,
    wherever the learner goes; after h only the head h went to, with the head it left (on
    another head, "head 1 → head 2" would name numbers that are neither)."""

    walk: Walk
    change: str
    left: int | None = None  # after h: the head it left
    went: int | None = None  # after h: the head it went to
    made_at: tuple[str, int] | None = None  # the (stage, head) where m or h was pressed

    def said_at(self, stage: Stage, head: int) -> bool:
        """Is the old → new line said here? Only on the stage where the change was made: on a
        later stage it would read as news about a key pressed screens ago (the marks stay)."""
        return self.made_at is None or self.made_at == (stage.key, head)

    def old(self, stage: Stage, head: int) -> np.ndarray | None:
        """`stage`'s matrix before the change, for `head` as now shown; None where nothing compares."""
        if stage.key not in (s.key for s in self.walk.stages):
            return None
        if self.went is not None:
            if not stage.per_head or head != self.went:
                return None
            head = self.left
        return self.walk.matrix(stage.key, head if stage.per_head else 0)


class Changes:
    """The actions m and h, and what they changed (`before`)."""

    async def action_mode(self) -> None:
        """scaled → unscaled → uniform → scaled, on the same stage with the same cursor."""
        old = self.walk
        mode = self._next_mode()
        self.walk = await self.walk_in_mode(mode)
        change = f"{self.t(f'mode.{old.mode.name}.name')} → {self.t(f'mode.{mode.name}.name')}"
        stage, head = self.step
        self.before = Before(old, plain(change, self.opts), made_at=(stage.key, head))
        self.message = self.t("ui.mode_changed", mode=self.t(f"mode.{mode.name}.name"))
        self._compute_next_mode()  # started now, not after the frame: a quick second m finds it further on
        self.show(home=False)

    def action_head(self) -> None:
        heads = self.walk.scenario.heads
        stage, head = self.step
        if heads == 1:
            self.say_now(self.t("ui.one_head"))
            return
        if not stage.per_head:
            per_head = self.t("ui.list_sep").join(dict.fromkeys(plain(s.symbol, self.opts)
                                                                for s, _ in self.steps if s.per_head))
            # Q, K, V, concat hold each head's own columns; E, X, O are one matrix for all heads
            key = "ui.split_stage" if stage.split else "ui.shared_stage"
            self.say_now(self.t(key, stage=plain(stage.symbol, self.opts), stages=per_head))
            return
        target = (head + 1) % heads
        self.before = Before(self.walk, self.t("app.head_change", old=shown(head), new=shown(target)), head, target,
                             made_at=(stage.key, target))
        self.index = next(i for i, (s, h) in enumerate(self.steps) if s.key == stage.key and h == target)
        self.message = self.t("ui.head_changed", head=shown(target), heads=heads)
        self.show(home=False)  # the same cell: a stage has the same shape in every head
