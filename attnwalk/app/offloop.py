"""The walk's work done off the event loop on a large layer, so keys are never kept waiting: the
cursor's worked cell laid out in a thread, and the next mode's walk computed ahead."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from rich.text import Text
from textual.widgets import Static

from attnwalk.app import panes
from attnwalk.layer.axes import axes
from attnwalk.layer.modes import next_walk_mode
from attnwalk.layer.stages import TOKENS
from attnwalk.render.style import plain

SMALL = 64  # tokens or d_model up to this: a worked cell costs a few ms, so it is drawn at once


class OffTheLoop:
    """A mixin of WalkApp: the worked pane and the modes computed ahead."""

    _worked_for = 0  # which request the worked pane shows: a late answer is dropped
    _worked_job = None  # (token, arguments, scroll) for the worked-cell thread
    _worker: threading.Thread | None = None
    _pool: ThreadPoolExecutor | None = None

    def small(self) -> bool:
        scn = self.walk.scenario
        return max(scn.n, scn.m, scn.d_model) <= SMALL

    def on_unmount(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _next_mode(self):
        return next_walk_mode(self.walk.mode)

    def _compute_next_mode(self) -> None:
        """On a large layer, the mode m goes to next is computed in a thread while the learner
        reads (numpy's products and exponentials run outside the GIL), so m need not wait for it."""
        mode = self._next_mode()
        if (self.small() or mode.name in self.walks
                or mode.name in self._next_walks):
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnwalk-mode")
        self._next_walks[mode.name] = self._pool.submit(self.walk_in, mode)

    def show_worked(self, scroll: bool = True) -> None:
        """The cursor's cell worked out. On a small lesson at once; on a large layer (a sum over
        hundreds of terms takes 100 ms or more to lay out) in a thread, so the stage and the cursor
        are drawn first and keys are never kept waiting: the pane says which cell it is working
        out, and only the latest cell is worked out when keys come faster than that."""
        stage, head = self.step
        self._worked_for += 1
        if stage.kind == TOKENS:
            self._put_worked(self._worked_for, Text(""), False)
            return
        job = (self._worked_for, (self.walk, stage, head, self.cursor, self.pane_opts(), self.before), scroll)
        if self.small():
            self._put_worked(job[0], panes.worked_view(*job[1]), scroll)
            return
        self._worked_job = job
        if self._worker is None or not self._worker.is_alive():
            rows, cols = axes(self.walk, stage, head, self.opts.lang)
            where = f"{plain(stage.symbol, self.opts)}[{rows[self.cursor[0]]}, {cols[self.cursor[1]]}]"
            self._put_worked(job[0], Text(self.t("app.working", cell=where), style="dim"), False)
            self._worker = threading.Thread(target=self._work, daemon=True)
            self._worker.start()

    def _work(self) -> None:
        """The worked-cell thread: work out the latest job until no newer one is waiting."""
        done = None
        while self._worked_job is not done:
            done = self._worked_job
            token, args, scroll = done
            try:
                shown = panes.worked_view(*args)
            except Exception as exc:  # shown, not raised in a thread nobody joins
                shown = Text(str(exc))
            try:
                self.call_from_thread(self._put_worked, token, shown, scroll)
            except RuntimeError:  # the app has closed
                return

    def _put_worked(self, token: int, shown, scroll: bool) -> None:
        if token != self._worked_for:
            return  # the cursor or the stage has moved on since
        worked = self.query_one("#worked", Static)
        worked.update(shown)
        if scroll:
            self.query_one("#notes").scroll_to_widget(worked, animate=False, top=True)

