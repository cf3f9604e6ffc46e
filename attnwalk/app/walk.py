"""The interactive walk: one (stage, head) at a time, its matrix with a cell cursor, its
explanation and the cursor's worked cell, moved by the keys of BINDINGS (the footer and the help
come from them).

Layout lives in CSS: at 80 × 24 the header, the matrix (or a window onto it) and the start of the
explanation share the screen, and the notes scroll in their own pane; from 160 columns the notes
sit beside the matrix (HORIZONTAL_BREAKPOINTS).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from rich.text import Text

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Input, Label, Static

from attnwalk.app.grid import MatrixGrid
from attnwalk.app import panes
from attnwalk.app.help import HelpScreen, translated
from attnwalk.layer.axes import PickError, axes, default_cell, pick_dim, pick_index
from attnwalk.layer.modes import WALK_MODES
from attnwalk.layer.stages import TOKENS, Stage, stage_by_name
from attnwalk.layer.walk import Walk, with_mode
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import header, walk_steps
from attnwalk.render.style import plain, say


SMALL = 64  # tokens or d_model up to this: a worked cell costs a few ms, so it is drawn at once


class WalkApp(App[int]):
    """Walk `walk` from step `start`; the return code is 0 on q or at the end, 130 on Ctrl-C."""

    CSS = """
    Screen { layout: vertical; }
    #header { height: auto; padding: 0 1; }
    #body { height: 1fr; layout: vertical; }
    #matrix { height: auto; max-height: 60%; padding: 0 1; }
    #tokens { height: auto; max-height: 60%; padding: 0 1; scrollbar-size-vertical: 1; }
    #notes { height: 1fr; min-height: 4; padding: 0 1; scrollbar-size-vertical: 1; }
    #message { height: auto; padding: 0 1; color: $text-warning; display: none; }
    #message.-shown { display: block; }
    #prompt { height: auto; display: none; padding: 0 1; }
    #prompt.-shown { display: block; }
    #prompt Input { border: none; height: 1; padding: 0; width: 1fr; }
    #prompt Label { width: 1fr; }
    Screen.-wide #body { layout: horizontal; }
    Screen.-wide #matrix, Screen.-wide #tokens { width: 1fr; max-height: 100%; }
    Screen.-wide #notes { width: 1fr; height: 100%; }
    """
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (160, "-wide")]
    ENABLE_COMMAND_PALETTE = False
    # descriptions are text keys, put into the learner's language when the app starts
    BINDINGS = [
        Binding("n,enter,space", "next", "app.key.next", key_display="n"),
        Binding("b", "back", "app.key.back"),
        Binding("g", "jump", "app.key.jump"),
        Binding("c", "cell", "app.key.cell"),
        Binding("m", "mode", "app.key.mode"),
        Binding("h", "head", "app.key.head"),
        Binding("p", "predict", "app.key.predict"),
        Binding("question_mark", "help", "app.key.help", key_display="?"),
        Binding("q", "quit_walk", "app.key.quit"),
        Binding("ctrl+d", "quit_walk", show=False),  # the end of input, as in a shell
        Binding("j", "scroll_notes(1)", show=False),
        Binding("k", "scroll_notes(-1)", show=False),
        Binding("d,pagedown", "page_notes(1)", show=False),
        Binding("u,pageup", "page_notes(-1)", show=False),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
    ]

    def __init__(self, walk: Walk, opts: ViewOptions, *, start: int = 0, message: str = "",
                 predictor=None, predict: bool = False) -> None:
        super().__init__()
        translated(self, opts)
        self.walk = walk
        self.opts = opts
        self.walks = {walk.mode.name: walk}  # each mode's walk, computed once
        self.steps: list[tuple[Stage, int]] = walk_steps(walk)
        self.index = start
        self.cursor = default_cell(walk, *self._key_head(start)) if self._has_cells(start) else (0, 0)
        self.before: tuple[Walk, int, str] | None = None  # after m or h: what the marks compare with
        self.predictor, self.predict = predictor, predict
        self.predicted: set[tuple[str, int]] = set()
        self.message = message
        self.ended = False  # n on the last stage
        self._answer: Callable[[str | None], None] | None = None
        self._worked_for = 0  # which request the worked pane shows: a late answer is dropped
        self._worked_job = None  # (token, arguments, scroll) for the worked-cell thread
        self._worker: threading.Thread | None = None
        self._next_walks: dict[str, Future] = {}  # modes computed ahead, while the learner reads
        self._pool: ThreadPoolExecutor | None = None

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Horizontal(id="body"):
            yield MatrixGrid(id="matrix")
            with VerticalScroll(id="tokens", can_focus=False):  # a long token list scrolls in its pane
                yield Static(id="token-table")
            with VerticalScroll(id="notes", can_focus=False):
                yield Static(id="explain")
                yield Static(id="worked")
                yield Static(id="extras")
        yield Static(id="message")
        with Vertical(id="prompt"):  # a long question wraps above the line it is answered on
            yield Label(id="prompt-label")
            yield Input(id="prompt-input")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        grid = self.query_one(MatrixGrid)
        translated(grid, self.opts)
        grid.can_focus = True
        grid.focus()
        self.show()
        self.call_after_refresh(self._compute_next_mode)

    def on_unmount(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _next_mode(self):
        modes = list(WALK_MODES)
        mode = self.walk.mode
        return modes[(modes.index(mode) + 1) % len(modes)] if mode in modes else modes[0]

    def _compute_next_mode(self) -> None:
        """On a large layer, the mode m goes to next is computed in a thread while the learner
        reads (numpy's products and exponentials run outside the GIL), so m need not wait for it."""
        scn = self.walk.scenario
        mode = self._next_mode()
        if (max(scn.n, scn.m, scn.d_model) <= SMALL or mode.name in self.walks
                or mode.name in self._next_walks):
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnwalk-mode")
        self._next_walks[mode.name] = self._pool.submit(with_mode, self.walk, mode)

    def on_resize(self) -> None:
        self.call_after_refresh(self.show, False)

    # -- what is shown -------------------------------------------------------------------------

    @property
    def step(self) -> tuple[Stage, int]:
        return self.steps[self.index]

    def _key_head(self, index: int) -> tuple[str, int]:
        stage, head = self.steps[index]
        return stage.key, head

    def _has_cells(self, index: int) -> bool:
        return self.steps[index][0].kind != TOKENS

    def t(self, key: str, **values: object) -> str:
        return say(self.opts, key, **values)

    def pane_opts(self) -> ViewOptions:
        """The notes pane's width (less its scrollbar and padding): worked cells fold to it."""
        notes = self.query_one("#notes")
        width = notes.size.width - 3 if notes.size.width > 10 else self.size.width - 3
        return self.opts.with_(width=max(width, 20))

    def show(self, home: bool = True) -> None:
        """Draw every pane for the current step; `home` puts the notes at their start."""
        stage, head = self.step
        width = max(self.size.width - 2, 20)
        self.query_one("#header", Static).update(
            header(self.walk, stage, head, self.opts.with_(width=width), index=self.index + 1,
                   count=len(self.steps)))
        grid, tokens = self.query_one(MatrixGrid), self.query_one("#tokens")
        opts = self.pane_opts()
        if stage.kind == TOKENS:
            grid.display, tokens.display = False, True
            self.query_one("#token-table", Static).update(panes.tokens_view(self.walk, self.opts.with_(width=width)))
            grid.show(None, (0, 0))
        else:
            grid.display, tokens.display = True, False
            grid.show(panes.matrix_view(self.walk, stage, head, self.opts.with_(width=width),
                                        old=self._old(stage, head)), self.cursor)
        self.query_one("#explain", Static).update(panes.explain_view(self.walk, stage, opts))
        extras = panes.extras_view(self.walk, stage, head, opts, self.index + 1)
        self.query_one("#extras", Static).update(extras if extras is not None else "")
        self.show_worked(scroll=False)
        if home:
            self.query_one("#notes").scroll_home(animate=False)
        self.show_message()

    def _old(self, stage: Stage, head: int):
        if self.before is None or stage.key not in (s.key for s in self.before[0].stages):
            return None
        old_walk, old_head, _ = self.before
        return old_walk.matrix(stage.key, old_head if stage.per_head else 0)

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
        scn = self.walk.scenario
        if max(scn.n, scn.m, scn.d_model) <= SMALL:
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

    def show_message(self) -> None:
        shown = self.query_one("#message", Static)
        shown.update(self.message)
        shown.set_class(bool(self.message), "-shown")

    async def run_action(self, action, default_namespace=None) -> bool:
        """Every key's action: a message stays until the next key (a resize draws it again)."""
        if self.message and not action.startswith("scroll") and not action.startswith("page"):
            self.message = ""
            self.show_message()
        return await super().run_action(action, default_namespace)

    def say_now(self, message: str) -> None:
        self.message = message
        self.show_message()

    # -- moving ------------------------------------------------------------------------------

    def go(self, index: int) -> None:
        """To step `index`, keeping the cursor's row (the query) where the new stage has it, and
        its column where the columns mean the same (keys, or the same dimensions)."""
        old_stage, _ = self.step
        self.index = index
        stage, head = self.step
        if stage.kind != TOKENS:
            rows, cols = self.walk.matrix(stage.key, head).shape
            default = default_cell(self.walk, stage.key, head)
            row, col = self.cursor
            same_rows = old_stage.kind != TOKENS and old_stage.rows == stage.rows
            row = row if same_rows and row < rows else default[0]
            same_cols = old_stage.kind != TOKENS and (old_stage.square and stage.square
                                                      or old_stage.cols == stage.cols)
            if stage.square and not same_cols:  # the key this query attends to most
                col = int(self.walk.matrix("A", head)[row].argmax())
            elif not same_cols or col >= cols:
                col = default[1]
            self.cursor = (row, col)
        self.show()

    def action_next(self) -> None:
        if self.index == len(self.steps) - 1:
            self.ended = True
            self.exit(0)
            return
        stage, head = self.steps[self.index + 1]
        q = self.predictor.ask(self.walk, stage.key, head) if self.predict and self.predictor else None
        if q is None or (stage.key, head) in self.predicted:
            self.go(self.index + 1)
            return
        self.predicted.add((stage.key, head))

        def judged(raw: str | None) -> None:
            verdict = self.predictor.judge(self.walk, q, raw) if raw is not None else ""
            self.message = verdict
            self.go(self.index + 1)

        self.ask(f"{self.t('quiz.predict.before', stage=plain(stage.symbol, self.opts))}: {q.text} ", judged)

    def action_back(self) -> None:
        if self.index == 0:
            self.say_now(self.t("ui.first_stage"))
        else:
            self.go(self.index - 1)

    def action_scroll_notes(self, lines: int) -> None:
        notes = self.query_one("#notes")
        notes.scroll_relative(y=lines, animate=False)

    def action_page_notes(self, pages: int) -> None:
        notes = self.query_one("#notes")
        notes.scroll_relative(y=pages * max(notes.size.height - 1, 1), animate=False)

    def move_cursor(self, row: int, col: int) -> None:
        stage, head = self.step
        if stage.kind == TOKENS:
            return
        rows, cols = self.walk.matrix(stage.key, head).shape
        self.cursor = (min(max(row, 0), rows - 1), min(max(col, 0), cols - 1))
        self.query_one(MatrixGrid).move(self.cursor)
        self.show_worked()

    def on_matrix_grid_cell_picked(self, event: MatrixGrid.CellPicked) -> None:
        self.move_cursor(event.row, event.col)

    def on_matrix_grid_cursor_moved(self, event: MatrixGrid.CursorMoved) -> None:
        self.move_cursor(self.cursor[0] + event.rows, self.cursor[1] + event.cols)

    # -- typed answers: g, c and predictions ---------------------------------------------------

    def ask(self, prompt: str, answer: Callable[[str | None], None]) -> None:
        """Show `prompt` with a line to type in; `answer` gets what was typed, or None on Esc."""
        self._answer = answer
        self.query_one("#prompt-label", Label).update(prompt)
        field = self.query_one("#prompt-input", Input)
        field.value = ""
        self.query_one("#prompt").add_class("-shown")
        field.focus()

    def _close_prompt(self, value: str | None) -> None:
        self.query_one("#prompt").remove_class("-shown")
        self.query_one(MatrixGrid).focus()
        answer, self._answer = self._answer, None
        if answer is not None:
            answer(value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_prompt(event.value)

    def on_key(self, event) -> None:
        if event.key == "escape" and self._answer is not None:
            event.stop()
            self._close_prompt(None)

    def action_jump(self) -> None:
        count = len(self.steps)

        def jumped(answer: str | None) -> None:
            if answer is None or not answer.strip():
                return
            target = self._find_step(answer.strip())
            if target is None:
                example = plain(self.steps[-1][0].symbol, self.opts)
                self.say_now(self.t("ui.no_stage", value=answer.strip(), count=count, example=example))
            else:
                self.go(target)

        self.ask(self.t("ui.jump_prompt", count=count), jumped)

    def _find_step(self, answer: str) -> int | None:
        """A 1-based step number, or a stage's name (in the current head when it is per head)."""
        if answer.isdecimal():
            number = int(answer)
            return number - 1 if 1 <= number <= len(self.steps) else None
        stage = stage_by_name(answer, self.walk.stages)
        if stage is None:
            return None
        head = self.step[1]
        matches = [i for i, (s, h) in enumerate(self.steps) if s.key == stage.key]
        same_head = [i for i in matches if self.steps[i][1] == head]
        return (same_head or matches or [None])[0]

    def action_cell(self) -> None:
        """A row and a column typed as `attnwalk explain` takes them (layer/axes.py's pickers)."""
        stage, head = self.step
        if stage.worked is None:
            self.say_now(self.t("ui.no_cells"))
            return
        scn = self.walk.scenario
        row_labels, col_labels = axes(self.walk, stage, head, self.opts.lang)

        def picked_row(answer: str | None) -> None:
            if answer is None or not answer.strip():
                return
            try:
                row = pick_index(answer, scn.key_tokens if stage.rows == "m" else scn.tokens, row_labels)
            except PickError as err:
                self.say_now(self._not_picked("ui.no_row", err, row_labels))
                return

            def picked_col(answer: str | None) -> None:
                if answer is None or not answer.strip():
                    return
                try:
                    col = (pick_index(answer, scn.key_tokens, col_labels) if stage.square else
                           pick_dim(answer, col_labels))
                except PickError as err:
                    self.say_now(self._not_picked("ui.no_col", err, col_labels) if stage.square else
                                 self.t("ui.no_dim", value=err.value, last=len(col_labels) - 1))
                    return
                self.move_cursor(row, col)

            self.ask(self.t("ui.col_prompt") if stage.square else
                     self.t("ui.dim_prompt", last=len(col_labels) - 1), picked_col)

        self.ask(self.t("ui.row_prompt"), picked_row)

    def _not_picked(self, key: str, err: PickError, labels) -> str:
        sep = self.t("ui.list_sep")
        if err.repeated:
            return self.t("ui.repeated_token", value=err.value, rows=sep.join(map(str, err.repeated)))
        return self.t(key, value=err.value, count=len(labels), tokens=sep.join(labels))

    # -- m, h, p, ?, q -------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "head":  # offered only where there is another head to go to
            return self.walk.scenario.heads > 1
        if action == "predict":
            return self.predictor is not None
        return True

    def action_mode(self) -> None:
        """scaled → unscaled → uniform → scaled, on the same stage with the same cursor."""
        old = self.walk
        mode = self._next_mode()
        if mode.name not in self.walks:
            ahead = self._next_walks.pop(mode.name, None)
            self.walks[mode.name] = ahead.result() if ahead is not None else with_mode(old, mode)
        self.walk = self.walks[mode.name]
        change = f"{self.t(f'mode.{old.mode.name}.name')} → {self.t(f'mode.{mode.name}.name')}"
        self.before = (old, self.step[1], plain(change, self.opts))
        self.message = self.t("ui.mode_changed", mode=self.t(f"mode.{mode.name}.name"))
        self.show(home=False)
        self.call_after_refresh(self._compute_next_mode)

    def action_head(self) -> None:
        heads = self.walk.scenario.heads
        stage, head = self.step
        if heads == 1:
            self.say_now(self.t("ui.one_head"))
            return
        if not stage.per_head:
            per_head = self.t("ui.list_sep").join(dict.fromkeys(plain(s.symbol, self.opts)
                                                                for s, _ in self.steps if s.per_head))
            self.say_now(self.t("ui.shared_stage", stage=plain(stage.symbol, self.opts), stages=per_head))
            return
        target = (head + 1) % heads
        self.before = (self.walk, head, self.t("app.head_change", old=head + 1, new=target + 1))
        self.index = next(i for i, (s, h) in enumerate(self.steps) if s.key == stage.key and h == target)
        self.message = self.t("ui.head_changed", head=target + 1, heads=heads)
        self.show(home=False)  # the same cell: a stage has the same shape in every head

    def action_predict(self) -> None:
        if self.predictor is None:
            return
        self.predict = not self.predict
        self.say_now(self.t("quiz.predict.on" if self.predict else "quiz.predict.off_now"))

    def action_help(self) -> None:
        def closed(quit_now: bool | None) -> None:
            if quit_now:
                self.exit(0)

        self.push_screen(HelpScreen(self.opts), closed)

    def action_quit_walk(self) -> None:
        self.exit(0)

    def action_interrupt(self) -> None:
        self.exit(130, return_code=130)
