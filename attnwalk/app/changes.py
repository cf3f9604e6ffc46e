"""m and h: the same stage and cell in another mode or head, and what that changed: the cells
underlined in the matrix (old) and the cursor's old → new value at the top of the notes
(panes.worked_view, from `before`). A mixin of WalkApp: it reads and sets the app's walk, step,
message and `before`."""

from __future__ import annotations

from attnwalk.layer.stages import Stage
from attnwalk.numbering import shown
from attnwalk.render.style import plain


class Changes:
    """The actions m and h, and the matrix m or h left for the marks to compare with."""

    def _old(self, stage: Stage, head: int):
        if self.before is None or stage.key not in (s.key for s in self.before[0].stages):
            return None
        old_walk, old_head, _ = self.before
        return old_walk.matrix(stage.key, old_head if stage.per_head else 0)

    async def action_mode(self) -> None:
        """scaled → unscaled → uniform → scaled, on the same stage with the same cursor."""
        old = self.walk
        mode = self._next_mode()
        self.walk = await self.walk_in_mode(mode)
        change = f"{self.t(f'mode.{old.mode.name}.name')} → {self.t(f'mode.{mode.name}.name')}"
        self.before = (old, self.step[1], plain(change, self.opts))
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
        self.before = (self.walk, head, self.t("app.head_change", old=shown(head), new=shown(target)))
        self.index = next(i for i, (s, h) in enumerate(self.steps) if s.key == stage.key and h == target)
        self.message = self.t("ui.head_changed", head=shown(target), heads=heads)
        self.show(home=False)  # the same cell: a stage has the same shape in every head
