"""The walk's work done off the event loop on a large layer, so keys are never kept waiting: the
cursor's worked cell laid out in a thread, and the next mode's walk computed ahead. Both are
Textual thread workers (`@work(thread=True, exclusive=True)`): a newer cell cancels the older
one's worker, whose result is then never shown."""

from __future__ import annotations

import threading
from functools import partial

from rich.console import Group
from rich.text import Text
from textual import work
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import Worker, WorkerError, WorkerState, get_current_worker

from attnwalk.app import panes
from attnwalk.layer.axes import axes
from attnwalk.layer.modes import next_walk_mode
from attnwalk.layer.stages import TOKENS
from attnwalk.layer.walk import Walk
from attnwalk.render.style import cell_ref

SMALL = 64  # tokens or d_model up to this: a worked cell costs a few ms, so it is drawn at once
# Seconds without a new cell before a large layer's cell is laid out. While keys come faster (n, b
# or an arrow held down), a layout running beside them took the GIL from the key handling: on the
# large layer, keys pressed as fast as the stage was drawn each waited ~40 ms more (app_bench).
SETTLE = 0.12
WORKED, MODES = "worked", "modes"  # the workers' groups


class OffTheLoop:
    """A mixin of WalkApp: the worked pane and the modes computed ahead."""

    # One worked cell laid out at a time. An exclusive worker only marks the older ones cancelled
    # (a thread cannot be stopped), so without this each arrow key on a large layer started another
    # 100-200 ms layout, all of them sharing the GIL with the key handling: the cursor slowed with
    # every key held down. Behind it the superseded workers wait and return at once, unlaid.
    _laying_out = threading.Lock()
    _settling: Timer | None = None  # the cell to lay out once the keys pause

    @property
    def working(self) -> bool:
        """Is a cell waiting to be laid out, or being laid out?"""
        return self._settling is not None or any(w.group == WORKED and w.is_running for w in self.workers)

    def small(self) -> bool:
        scn = self.walk.scenario
        return max(scn.n, scn.m, scn.d_model) <= SMALL

    def _next_mode(self):
        return next_walk_mode(self.walk.mode)

    def _compute_next_mode(self) -> None:
        """On a large layer, the mode m goes to next is computed in a thread while the learner
        reads (numpy's products and exponentials run outside the GIL), so m need not wait for it."""
        mode = self._next_mode()
        if self.small() or mode.name in self.walks or mode.name in self._next_walks:
            return
        self._next_walks[mode.name] = self._walk_in_mode(mode)

    @work(thread=True, exclusive=True, group=MODES, exit_on_error=False, description="the next mode's walk")
    def _walk_in_mode(self, mode) -> Walk:
        return self.walk_in(mode)  # the walk's app: the layer in `mode`; the backward walk's: its gradients

    async def walk_in_mode(self, mode) -> Walk:
        """The walk in `mode`: computed once; m waits here for one being computed ahead."""
        if mode.name not in self.walks:
            ahead: Worker | None = self._next_walks.pop(mode.name, None)
            try:
                walk = await ahead.wait() if ahead is not None else None
            except WorkerError:  # cancelled or failed in its thread: compute it here
                walk = None
            self.walks[mode.name] = walk if walk is not None else self.walk_in(mode)
        return self.walks[mode.name]

    def show_worked(self, scroll: bool = True) -> None:
        """The cursor's cell worked out. On a small lesson at once; on a large layer (a sum over
        hundreds of terms takes 100 ms or more to lay out) in a worker, once the keys have paused
        for SETTLE, so the stage and the cursor are drawn first and keys are never kept waiting:
        the pane says which cell it is working out (after m or h, under the cell's before → now,
        which costs two numbers), and only the latest cell is worked out."""
        stage, head = self.step
        if self._settling is not None:
            self._settling.stop()
            self._settling = None
        if stage.kind == TOKENS or self.small():
            self.workers.cancel_group(self, WORKED)
            shown = Text("") if stage.kind == TOKENS else panes.worked_view(
                self.walk, stage, head, self.cursor, self.pane_opts(), self.before)
            self._put_worked(shown, scroll and stage.kind != TOKENS)
            return
        rows, cols = axes(self.walk, stage, head, self.opts.lang)
        where = cell_ref(stage.symbol, rows[self.cursor[0]], cols[self.cursor[1]], self.opts)
        working = Text(self.t("app.working", cell=where), style="dim")
        args = (self.walk, stage, head, self.cursor, self.pane_opts(), self.before)
        line = panes.change_line(*args)  # after m or h: before → now at once, the arithmetic after
        self._put_worked(working if line is None else Group(line, working), False)
        self._settling = self.set_timer(SETTLE, partial(self._settled, args, scroll))

    def _settled(self, args: tuple, scroll: bool) -> None:
        self._settling = None
        self._work_out(args, scroll)

    @work(thread=True, exclusive=True, group=WORKED, exit_on_error=False, description="the worked cell")
    def _work_out(self, args: tuple, scroll: bool):
        with self._laying_out:
            if get_current_worker().is_cancelled:
                return None  # a newer cell came while this one waited
            return panes.worked_view(*args), scroll

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != WORKED or worker.is_cancelled:
            return  # the cursor or the stage has moved on since
        if event.state == WorkerState.SUCCESS and worker.result is not None:
            self._put_worked(*worker.result)
        elif event.state == WorkerState.ERROR:  # shown, not raised: the walk goes on
            self._put_worked(Text(str(worker.error)), False)

    def _put_worked(self, shown, scroll: bool) -> None:
        worked = self.query_one("#worked", Static)
        worked.update(shown)
        if scroll:
            self.query_one("#notes").scroll_to_widget(worked, animate=False, top=True)
