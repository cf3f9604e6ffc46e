"""The interactive walk: one (stage, head) screen at a time, moved by keys.

The stepper is given its console and its key source, so tests drive it with ScriptedKeys and a
fixed-width console, and the CLI with TerminalKeys and the real terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.segment import SegmentLines
from rich.text import Text

from attnwalk.layer.axes import PickError, axes, pick_dim, pick_index
from attnwalk.layer.modes import BASELINE, WALK_MODES, Mode
from attnwalk.layer.stages import TOKENS, Stage, stage_by_name
from attnwalk.layer.walk import Walk, compute
from attnwalk.render import style
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import walk_steps
from attnwalk.render.style import plain, say
from attnwalk.scenario.model import Scenario
from attnwalk.terminal import keys as K
from attnwalk.terminal.keys import KeySource
from attnwalk.terminal.viewport import Line, Window, render_lines, split_header, window

# stage_screen(walk, stage, head, opts, *, index, count, cell) -> renderable; see render/screens.py
ScreenFn = Callable[..., RenderableType]


def _default_screen() -> ScreenFn:
    from attnwalk.render.screens import stage_screen

    return stage_screen


class Stepper:
    """Walk `scenario` screen by screen; `run()` returns the exit code (0 when the learner quits)."""

    def __init__(self, scenario: Scenario, console: Console, keys: KeySource, opts: ViewOptions,
                 *, mode: Mode | str = BASELINE, amplify: float = 1.0, screen: ScreenFn | None = None,
                 walk: Walk | None = None) -> None:
        self.scenario = scenario
        self.console = console
        self.keys = keys
        self.opts = opts
        self.amplify = amplify
        self.screen = screen or _default_screen()
        # a caller that has already computed this walk passes it: a large layer is not computed twice
        self.walk: Walk = walk if walk is not None else compute(scenario, mode, amplify)
        self.index = 0  # into self.steps
        self.cell: tuple[int, int] | None = None  # (row, col), 0-based, shown below the stage
        self.message = ""
        self.offset = 0  # the first line of the screen's body in view (_END: its end), on a tall screen
        self.shown = Window(0, 0, 0, 0, 0)  # the window last drawn: how far the keys can scroll it
        self.predict = False  # --predict, or p: ask before S, A, Z (S + M) what they will show
        self.predictor = None  # what asks and judges (tutor/predict.StepPredictions, given by the command)
        self.predicted: set[tuple[str, int]] = set()  # (stage key, head) already asked

    # -- what is on screen -------------------------------------------------------------------

    @property
    def steps(self) -> list[tuple[Stage, int]]:
        return walk_steps(self.walk)

    @property
    def step(self) -> tuple[Stage, int]:
        return self.steps[self.index]

    def t(self, key: str, **values: object) -> str:
        """A UI string from attnwalk/text/<lang>.toml (spelled in ASCII under --ascii)."""
        said = say(self.opts, key, **values)
        return said.translate(_ARROWS_IN_ASCII) if self.opts.ascii else said

    def view_options(self) -> ViewOptions:
        """The options for this screen: its width is the terminal's now, so resizing re-renders."""
        return self.opts.with_(width=self.console.size.width)

    def current_screen(self) -> RenderableType:
        stage, head = self.step
        return self.screen(self.walk, stage, head, self.view_options(), index=self.index + 1,
                           count=len(self.steps), cell=self.cell)

    def footer(self) -> Text:
        return Text(self.t("ui.footer"), style=style.NOTE)

    def status(self) -> Text:
        """Where the learner is, at the bottom: it stays in view over the help, and when a screen too
        tall to pin its header scrolls."""
        stage, head = self.step
        where = self.t("ui.stage_header", index=self.index + 1, count=len(self.steps))
        where += f"  {plain(stage.symbol, self.opts)}" if stage.kind != TOKENS else ""
        if self.scenario.heads > 1 and stage.per_head:
            where += "  " + self.t("ui.head", head=head + 1, heads=self.scenario.heads)
        where += "  " + self.t(f"mode.{self.walk.mode.name}.name")
        return Text(where, style=style.POSITION)

    def draw(self, body: RenderableType | None = None) -> None:
        """Clear the terminal and show `body` (the current stage by default), then where the learner
        is, the footer and any message. A body taller than the terminal shows a window of its lines
        from self.offset, with the stage's header pinned above it. Clearing does nothing when the
        console is not a terminal."""
        width, height = self.console.size
        lines = render_lines(self.console, self.current_screen() if body is None else body, width)
        bottom = [Text(""), self.status(), self.footer()]
        if self.message:
            bottom.append(Text(self.message, style=style.RESULT))
        below = render_lines(self.console, Group(*bottom), width)
        rows = height - 1  # the last row keeps the cursor, and the prompt of g or c
        header, rest = split_header(lines, most=rows // 3) if body is None else ([], lines)
        if rows - len(header) - len(below) < 3:
            header, rest = [], lines  # too little room left below a pinned header: let it scroll
        self.shown = window(len(rest), rows - len(header) - len(below), self.offset)
        at_end = self.shown.last > 0 and self.shown.offset == self.shown.last
        self.offset = _END if at_end else self.shown.offset  # the end stays in view when the room changes
        in_view = rest[self.shown.offset:self.shown.offset + self.shown.shown]
        self.console.clear()
        self.console.print(SegmentLines(header + in_view + self.more_lines(width) + below, new_lines=True))
        self.message = ""

    def more_lines(self, width: int) -> list[Line]:
        """The row under a window that says how many lines are hidden above and below it."""
        above, below = self.shown.above, self.shown.below
        parts = []
        if above:
            parts.append(self.t("ui.more_above_one") if above == 1 else self.t("ui.more_above", count=above))
        if below:
            parts.append(self.t("ui.more_below_one") if below == 1 else self.t("ui.more_below", count=below))
        if not parts:
            return []
        return render_lines(self.console, Text("   ".join(parts), style=style.NOTE, no_wrap=True,
                                               overflow="ellipsis"), width)

    def help_panel(self) -> Panel:
        return Panel(Text(self.t("ui.help").strip("\n")), title=self.t("ui.help_title"),
                     subtitle=self.t("ui.help_close"), expand=False,
                     box=box.ASCII if self.opts.ascii else box.ROUNDED, border_style=style.PANEL_BORDER)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        pressed: Iterator[str] = iter(self.keys)
        self.draw()
        for key in pressed:
            if key == K.QUIT:
                return 0
            if key == K.HELP:
                if not self.show_help(pressed):
                    return 0
            elif key in K.SCROLLS:
                if not self.scroll(key):
                    continue  # already at that end, or the whole screen is in view
            elif key == K.NEXT:
                if self.index == len(self.steps) - 1:
                    self.console.print(Text(self.t("ui.end"), style=style.RESULT))
                    return 0
                verdict = self.ask_prediction(self.index + 1) if self.predict else ""
                self.go(self.index + 1)
                self.message = verdict or self.message
            elif key == "p" and self.predictor is not None:  # predictions on or off
                self.predict = not self.predict
                self.message = self.t("quiz.predict.on" if self.predict else "quiz.predict.off_now")
            elif key == K.BACK:
                if self.index == 0:
                    self.message = self.t("ui.first_stage")
                else:
                    self.go(self.index - 1)
            elif key == K.JUMP:
                self.jump()
            elif key == K.CELL:
                self.choose_cell()
            elif key == K.MODE:
                self.next_mode()
            elif key == K.HEAD:
                self.next_head()
            elif key != K.RESIZE:
                continue  # a key with no meaning: leave the screen as it is
            self.draw()
        return 0  # input ended (Ctrl-D, EOF): leave quietly

    def ask_prediction(self, index: int) -> str:
        """Before step `index` is shown, its prediction asked once (at the prompt line); the
        verdict to show under the stage, or "" when there is none (Esc skips)."""
        stage, head = self.steps[index]
        q = self.predictor.ask(self.walk, stage.key, head) if self.predictor is not None else None
        if q is None or (stage.key, head) in self.predicted:
            return ""
        self.predicted.add((stage.key, head))
        raw = self.keys.read_line(f"{self.t('quiz.predict.before', stage=plain(stage.symbol, self.opts))}: {q.text} ")
        return self.predictor.judge(self.walk, q, raw) if raw is not None else ""

    def show_help(self, pressed: Iterator[str]) -> bool:
        """The help instead of the stage until a key is pressed; False when it is q. A help taller
        than the terminal scrolls with the scrolling keys, like a stage."""
        stage_offset, self.offset = self.offset, 0
        self.draw(self.help_panel())
        for key in pressed:
            scrolls = key in K.SCROLLS and self.shown.last > 0
            if scrolls or key == K.RESIZE:
                if not scrolls or self.scroll(key):
                    self.draw(self.help_panel())
                continue
            self.offset = stage_offset
            return key != K.QUIT
        return False

    # -- the actions -------------------------------------------------------------------------

    def go(self, index: int) -> None:
        """Move to step `index`, at the top of its screen; a chosen cell belongs to its stage, so it
        is dropped."""
        if index != self.index:
            self.cell = None
            self.offset = 0
        self.index = index

    def scroll(self, key: str) -> bool:
        """Move the window on a tall screen by a line or a page; False when it cannot move."""
        page = max(self.shown.shown - 1, 1)  # a page down keeps the last line in view, as less does
        step = {K.DOWN: 1, K.UP: -1, K.PAGE_DOWN: page, K.PAGE_UP: -page}[key]
        offset = min(max(self.shown.offset + step, 0), self.shown.last)
        if offset == self.shown.offset:
            return False
        self.offset = offset
        return True

    def jump(self) -> None:
        count = len(self.steps)
        answer = self.keys.read_line(self.t("ui.jump_prompt", count=count))
        if answer is None or not answer.strip():
            return
        target = self._find_step(answer.strip())
        if target is None:
            example = plain(self.steps[-1][0].symbol, self.opts)
            self.message = self.t("ui.no_stage", value=answer.strip(), count=count, example=example)
        else:
            self.go(target)

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

    def choose_cell(self) -> None:
        """Ask for a row and a column, as `attnwalk explain` takes them: a row by its 1-based
        position or its token; a column by position or token when columns are keys, else by the
        dimension label the table shows (1 … d, or its name)."""
        stage, head = self.step
        if stage.worked is None:
            self.message = self.t("ui.no_cells")
            return
        scn = self.scenario
        row_labels, col_labels = axes(self.walk, stage, head, self.opts.lang)
        answer = self.keys.read_line(self.t("ui.row_prompt"))
        if answer is None or not answer.strip():
            return
        try:
            row = pick_index(answer, scn.key_tokens if stage.rows == "m" else scn.tokens, row_labels)
        except PickError as err:
            self.message = self._not_picked("ui.no_row", err, row_labels)
            return
        if stage.square:
            answer = self.keys.read_line(self.t("ui.col_prompt"))
        else:
            answer = self.keys.read_line(self.t("ui.dim_prompt", count=len(col_labels)))
        if answer is None or not answer.strip():
            return
        try:
            col = (pick_index(answer, scn.key_tokens, col_labels) if stage.square else
                   pick_dim(answer, col_labels))
        except PickError as err:
            self.message = (self._not_picked("ui.no_col", err, col_labels) if stage.square else
                            self.t("ui.no_dim", value=err.value, count=len(col_labels)))
            return
        self.cell = (row, col)
        self.offset = _END  # the worked cell closes the screen: show it

    def _not_picked(self, key: str, err: PickError, labels: Sequence[str]) -> str:
        """"No such row: 4; choose 1–3 or a token: 女生, 撩, 刘海", or that a repeated token needs
        its number, in the learner's language."""
        sep = self.t("ui.list_sep")
        if err.repeated:
            return self.t("ui.repeated_token", value=err.value, rows=sep.join(map(str, err.repeated)))
        return self.t(key, value=err.value, count=len(labels), tokens=sep.join(labels))

    def next_mode(self) -> None:
        """scaled → unscaled → uniform → scaled: recompute the walk, stay on the same screen."""
        modes = list(WALK_MODES)
        mode = modes[(modes.index(self.walk.mode) + 1) % len(modes)] if self.walk.mode in modes else modes[0]
        self.walk = compute(self.scenario, mode, self.amplify)
        self.message = self.t("ui.mode_changed", mode=self.t(f"mode.{mode.name}.name"))

    def next_head(self) -> None:
        """The same stage in the next head (multi-head scenarios, per-head stages)."""
        heads = self.scenario.heads
        stage, head = self.step
        if heads == 1:
            self.message = self.t("ui.one_head")
            return
        if not stage.per_head:
            per_head = self.t("ui.list_sep").join(dict.fromkeys(plain(s.symbol, self.opts)
                                                                for s, _ in self.steps if s.per_head))
            self.message = self.t("ui.shared_stage", stage=plain(stage.symbol, self.opts), stages=per_head)
            return
        target = (head + 1) % heads
        index = next(i for i, (s, h) in enumerate(self.steps) if s.key == stage.key and h == target)
        cell, offset = self.cell, self.offset
        self.go(index)
        # the same cell and the same place on the same stage: its shape is the same in every head
        self.cell, self.offset = cell, offset
        self.message = self.t("ui.head_changed", head=target + 1, heads=heads)


_END = 1 << 30  # an offset past the end of any screen: draw() clamps it to the last line
# --ascii draws the arrows of the scrolling keys as v and ^ (style's table has only ← and →), one
# character each so that the help's columns stay in line
_ARROWS_IN_ASCII = str.maketrans({"↓": "v", "↑": "^"})
