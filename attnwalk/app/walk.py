"""The interactive walk: one (stage, head) at a time, its matrix with a cell cursor, the cursor's
worked cell and the explanation, moved by the keys of BINDINGS (the footer and the help come from
them).

Layout lives in CSS: at 80 × 24 the header, the matrix (or a window onto it) and the start of the
notes share the screen, the notes opening on the worked cell (after m or h, on its old → new
value) and scrolling in their own pane; from 160 columns the notes sit beside the matrix
(HORIZONTAL_BREAKPOINTS).
"""

from __future__ import annotations

from collections.abc import Callable
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static
from textual.worker import Worker

from attnwalk.app.footer import KeysFooter
from attnwalk.app.grid import MatrixGrid
from attnwalk.app import collect_again, panes
from attnwalk.app.changes import Before, Changes
from attnwalk.app.help import MessageAndExits, translated
from attnwalk.app.kept import KeptPane
from attnwalk.app.offloop import OffTheLoop
from attnwalk.app.scrolling import PaneScroll
from attnwalk.app.signals import exit_on_hangup
from attnwalk.app.typed import PROMPT_CSS, TypedAnswers
from attnwalk.layer.axes import attended, default_cell
from attnwalk.layer.stages import TOKENS, Stage
from attnwalk.layer.walk import Walk, with_mode
from attnwalk.numbering import shown
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import header, walk_steps
from attnwalk.render.style import plain, say


WIDE = 160  # columns from which the notes sit beside the matrix (the CSS's Screen.-wide)


class WalkApp(TypedAnswers, Changes, OffTheLoop, PaneScroll, MessageAndExits, App[int]):
    """Walk `walk` from step `start`; the return code is 0 on q or at the end, 130 on Ctrl-C."""

    CSS = """
    Screen { layout: vertical; }
    #header { height: auto; padding: 0 1; }
    #body { height: 1fr; layout: vertical; }
    #matrix { height: auto; padding: 0 1; }  /* its height: MatrixGrid.get_content_height */
    #tokens { height: auto; max-height: 60%; padding: 0 1; scrollbar-size-vertical: 1; }
    #notes { height: 1fr; min-height: 3; padding: 0 1; scrollbar-size-vertical: 1; overflow-y: scroll; }
    #worked { margin-bottom: 1; }
    #message { height: auto; padding: 0 1; color: $text-warning; display: none; }
    #message.-shown { display: block; }
    Screen.-wide #body { layout: horizontal; }
    Screen.-wide #matrix { width: auto; max-width: 60%; max-height: 100%; }
    Screen.-wide #tokens { width: 1fr; max-height: 100%; }
    Screen.-wide #notes { width: 1fr; height: 100%; }
    """ + PROMPT_CSS
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE, "-wide")]
    ENABLE_COMMAND_PALETTE = False
    scrolled = "#notes"  # j/k, d/u: PaneScroll
    predict_on_key = "quiz.predict.on"  # what p says: which screens ask first
    # descriptions are text keys, put into the learner's language when the app starts
    BINDINGS = [
        Binding("n,enter,space", "next", "app.key.next", key_display="n"),
        Binding("b", "back", "app.key.back"),
        Binding("g", "jump", "app.key.jump"),
        Binding("c", "cell", "app.key.cell"),
        Binding("m", "mode", "app.key.mode"),
        Binding("h", "head", "app.key.head"),
        Binding("h", "one_head", show=False),  # where "head" is not offered (one head): says why
        Binding("p", "predict", "app.key.predict"),
        Binding("question_mark", "help", "app.key.help", key_display="?"),
        Binding("q", "leave", "app.key.quit"),
        Binding("ctrl+d", "leave", show=False),  # the end of input, as in a shell
        Binding("j", "scroll_lines(1)", show=False),
        Binding("k", "scroll_lines(-1)", show=False),
        Binding("d,pagedown", "scroll_pages(1)", show=False),
        Binding("u,pageup", "scroll_pages(-1)", show=False),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
    ]

    def __init__(self, walk: Walk, opts: ViewOptions, *, start: int = 0, message: str = "",
                 predictor=None, predict: bool = False, ending: Callable[[], list[str]] | None = None) -> None:
        super().__init__()
        translated(self, opts)
        self.walk = walk
        self.opts = opts
        self.walks = {walk.mode.name: walk}  # each mode's walk, computed once
        self.steps: list[tuple[Stage, int]] = walk_steps(walk)
        self.index = start
        self.reached = start  # the furthest step shown, for `attnwalk progress`
        self.cursor = default_cell(walk, *self._key_head(start)) if self._has_cells(start) else (0, 0)
        # where the cursor was last on each axis (a stage's rows "n", its columns "d_k"), so a row
        # picked on Q is still the row on QKᵀ three stages later, through K and V
        self.rows_at: dict[str, int] = {}
        self.cols_at: dict[str, int] = {}
        self.before: Before | None = None  # after m or h: what the marks and the old → new line compare with
        self.predictor, self.predict = predictor, predict
        self.predicted: set[tuple[str, int]] = set()
        self.message = message or (panes.lesson_pointer(walk, opts) if start == 0 else "")
        self.ended = False  # n on the last stage, twice
        self.ending = ending  # what to try next, said at the end (commands/walk.walk_ending)
        self.leaving = False  # the end was said: n again leaves
        self._next_walks: dict[str, Worker] = {}  # modes computed ahead, while the learner reads
        self._drawn_at = None  # the app's size when the panes were last drawn

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield KeptPane(id="header")
        with Horizontal(id="body"):
            grid = MatrixGrid(id="matrix")
            translated(grid, self.opts)  # ←↑↓→'s description, before the footer shows it
            yield grid
            with VerticalScroll(id="tokens", can_focus=False):  # a long token list scrolls in its pane
                yield Static(id="token-table")
            with VerticalScroll(id="notes", can_focus=False):
                yield Static(id="worked")  # first: what the cursor's cell is, where the eye arrives
                yield KeptPane(id="explain")
                yield KeptPane(id="extras")
        yield Static(id="message")
        # #prompt (a Vertical: a long question wraps above the line it is answered on) comes
        # here after the first frame (TypedAnswers.add_prompt)
        yield KeysFooter()

    def on_mount(self) -> None:
        collect_again()  # off during the start: cli.run
        exit_on_hangup(self)  # the terminal closed: the place is saved and the screen given back, as q does
        grid = self.query_one(MatrixGrid)
        grid.can_focus = True
        grid.focus()
        self.show()
        self.call_after_refresh(self.add_prompt)
        self.call_after_refresh(self._compute_next_mode)

    def on_resize(self) -> None:
        self.call_after_refresh(self._resized)

    def _resized(self) -> None:
        """Widths are baked into the renderables (tables split, prose folds): draw them again, but
        only for a new size (the app's start brings a resize to the size it already has)."""
        if self.size != self._drawn_at:
            self.show(home=False)

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
        if notes.size.width > 10:
            width = notes.size.width - 3
        else:  # before the first layout: as the CSS will lay it out (1fr beside 1fr when wide)
            width = (self.size.width // 2 if self.size.width >= WIDE else self.size.width) - 3
        return self.opts.with_(width=max(width, 20))

    def show(self, home: bool = True) -> None:
        """Draw every pane for the current step; `home` puts the notes at their start."""
        self._drawn_at = self.size
        self.reached = max(self.reached, self.index)
        stage, head = self.step
        width = max(self.size.width - 2, 20)
        index, mode = self.index, self.walk.mode.name
        self.query_one("#header", KeptPane).show(
            (index, mode, width), lambda: header(self.walk.view(head), stage, self.opts.with_(width=width),
                                          index=shown(index), count=len(self.steps)))
        grid, tokens = self.query_one(MatrixGrid), self.query_one("#tokens")
        opts = self.pane_opts()
        if stage.kind == TOKENS:
            grid.display, tokens.display = False, True
            self.query_one("#token-table", Static).update(panes.tokens_view(self.walk, self.opts.with_(width=width)))
            grid.show(None, (0, 0))
        else:
            grid.display, tokens.display = True, False
            grid.show(panes.matrix_view(self.walk, stage, head, self.opts.with_(width=width),
                                        old=self.before.old(stage, head) if self.before else None), self.cursor)
        self.query_one("#worked").display = stage.kind != TOKENS
        # Below the worked cell: drawn now if drawn before (n and b going back and forth), else in
        # the next frame, so the stage's own first frame is not kept waiting (~12 ms of a key)
        now = stage.kind == TOKENS or self.query_one("#explain", KeptPane).kept((index, mode, opts.width))
        self._show_below(index, opts, blank=not now)
        if not now:
            self.call_after_refresh(self._show_below, index, opts)
        self.show_worked(scroll=False)
        if home:
            self.query_one("#notes").scroll_home(animate=False)
        self.show_message()

    def _show_below(self, index: int, opts: ViewOptions, blank: bool = False) -> None:
        """What the notes hold after the worked cell: the lesson's note and the explanation, then
        the extras (lesson, shapes, a head's introduction, A's bars); `blank`: nothing yet."""
        if index != self.index:
            return  # the learner has moved on
        stage, head = self.step
        key = None if blank else (index, self.walk.mode.name, opts.width)
        self.query_one("#explain", KeptPane).show(key, lambda: panes.explain_view(self.walk, stage, opts))
        self.query_one("#extras", KeptPane).show(
            key, lambda: panes.extras_view(self.walk, stage, head, opts, index + 1))

    # -- moving ------------------------------------------------------------------------------

    def _row_axis(self, stage: Stage) -> str:
        """What a stage's rows are: without a source the keys' rows (m) are the same tokens as the
        queries' (n), so a row picked on Q is the row on K and V too."""
        return "n" if stage.rows == "m" and self.walk.scenario.source is None else stage.rows

    def _remember(self) -> None:
        stage, _ = self.step
        if stage.kind != TOKENS:
            self.rows_at[self._row_axis(stage)], self.cols_at[stage.cols] = self.cursor

    def go(self, index: int, cell: tuple[int, int] | None = None) -> None:
        """To step `index`, the cursor on `cell` if given; else on the row it was last on among
        rows that mean the same (the query, through K and V), and on the column last picked among
        columns that mean the same (keys, or the same dimensions); on the scores, a query's first
        visit shows the key it attends to most."""
        self._remember()
        self.index = index
        stage, head = self.step
        if cell is not None:
            self.cursor = cell
        elif stage.kind != TOKENS:
            rows, cols = self.walk.matrix(stage.key, head).shape
            default = default_cell(self.walk, stage.key, head)
            row = self.rows_at.get(self._row_axis(stage), default[0])
            row = row if row < rows else default[0]
            col = self.cols_at.get(stage.cols)
            if col is None and stage.square:  # the key this query attends to most, in this block
                col = attended(self.walk, stage, head, row)
            elif col is None or col >= cols:
                col = default[1]
            self.cursor = (row, col)
        self.show()

    def action_next(self) -> None:
        if self.index == len(self.steps) - 1:
            if self.leaving or self.ending is None:
                self.ended = True
                self.exit(0)
                return
            # what to try next, and a second n to leave: a walk never closes on one key too many
            self.say_now("\n".join([*self.ending(), self.t("end.leave")]))
            self.leaving = True
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
            self.go(self.index + 1, cell=q.cell[2:] if q.cell else None)  # the asked cell, worked out

        before = self.t('quiz.predict.before', stage=plain(stage.symbol, self.opts))
        given = f" {q.given}" if q.given else ""  # what it is asked from (q and the keys), as the printed walk says
        self.ask(f"{before}{self.t('ui.colon')}{q.text}{given} ", judged)  # "：" in Chinese

    def action_back(self) -> None:
        if self.index == 0:
            self.say_now(self.t("ui.first_stage"))
        else:
            self.go(self.index - 1)

    def move_cursor(self, row: int, col: int) -> None:
        stage, head = self.step
        if stage.kind == TOKENS:
            return
        rows, cols = self.walk.matrix(stage.key, head).shape
        self.cursor = (min(max(row, 0), rows - 1), min(max(col, 0), cols - 1))
        self._remember()
        self.query_one(MatrixGrid).move(self.cursor)
        self.show_worked()

    def on_matrix_grid_cell_picked(self, event: MatrixGrid.CellPicked) -> None:
        self.move_cursor(event.row, event.col)

    def on_matrix_grid_cursor_moved(self, event: MatrixGrid.CursorMoved) -> None:
        self.move_cursor(self.cursor[0] + event.rows, self.cursor[1] + event.cols)

    # -- the end, p, ?, q ----------------------------------------------------------------------

    async def run_action(self, action, default_namespace=None) -> bool:
        """Any key but n after the end was said takes the walk back from the edge of leaving."""
        if self.leaving and not str(action).startswith(("next", "scroll_", "leave")):
            self.leaving = False
        return await super().run_action(action, default_namespace)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "head":  # offered only where there is another head to go to
            return self.walk.scenario.heads > 1
        if action == "cell":  # as ←↑↓→: not on the tokens, which have no cells (MatrixGrid.show
            return self.step[0].worked is not None  # refreshes the bindings when that changes)
        if action == "predict":
            return self.predictor is not None
        return True

    def walk_in(self, mode) -> Walk:
        """This walk in another mode (the backward walk's app makes its own: app/gradwalk.py)."""
        return with_mode(self.walk, mode)

    def action_leave(self) -> None:
        self.ended = self.leaving  # q after the end was said: its suggestions stay on the terminal too
        super().action_leave()

    def action_one_head(self) -> None:
        """h on a lesson of one head: not a key that does nothing, but why there is nowhere to go."""
        self.say_now(self.t("ui.one_head"))

    def action_predict(self) -> None:
        if self.predictor is None:
            return
        self.predict = not self.predict
        self.say_now(self.t(self.predict_on_key if self.predict else "quiz.predict.off_now"))

