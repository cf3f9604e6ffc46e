"""What the walk asks the learner to type, on a line above the footer: g's stage, c's row and
column (layer/axes.py's pickers, as `attnwalk explain` reads them) and a prediction's answer. The
line itself (PromptLine) serves decode's pager too."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from textual.binding import Binding
from textual.containers import Vertical
from textual.widget import AwaitMount
from textual.widgets import Footer, Input, Label

from attnwalk.app.grid import MatrixGrid
from attnwalk.app.help import translated
from attnwalk.layer.axes import PickError, axes, pick_dim, pick_index
from attnwalk.layer.stages import stage_by_name
from attnwalk.render.style import plain


# The line's style, added to the CSS of each app that has it
PROMPT_CSS = """
    #prompt { height: auto; display: none; padding: 0 1; }
    #prompt.-shown { display: block; }
    #prompt Input { border: none; height: 1; padding: 0; width: 1fr; }
    #prompt Label { width: 1fr; }
"""


class PromptInput(Input):
    """The line's Input, whose two keys the footer shows while it is open (the walk's own keys are
    letters the line takes as typing, so Textual leaves them out of the footer meanwhile)."""

    BINDINGS = [
        Binding("enter", "submit", "app.key.answer", key_display="enter"),
        Binding("escape", "cancel", "app.key.cancel", key_display="esc"),
    ]

    def action_cancel(self) -> None:
        self.app.cancel_prompt()


class PromptLine:
    """A line to type an answer in, above the footer, hidden until asked (a mixin of the walk and
    of decode's pager; each adds PROMPT_CSS to its CSS)."""

    _answer: Callable[[str | None], None] | None = None
    _prompt_mount: AwaitMount | None = None

    def add_prompt(self) -> AwaitMount:
        """Mount the prompt line (hidden until asked) above the footer, once. The walk does it
        after its first frame: composed with the rest, the Input's styling and mounting took
        ~15 ms of the first screen (benchmarks/README.md), for a line no one has asked for yet."""
        if self._prompt_mount is None:
            field = PromptInput(id="prompt-input")
            translated(field, self.opts)
            line = Vertical(Label(id="prompt-label"), field, id="prompt")
            self._prompt_mount = self.mount(line, before=self.query_one(Footer))
        return self._prompt_mount

    def ask(self, prompt: str, answer: Callable[[str | None], None]) -> None:
        """Show `prompt` with a line to type in; `answer` gets what was typed, or None on Esc."""
        self._answer = answer
        field = self.query("#prompt-input")
        if not field or not field.first().is_mounted:  # a key before the line was mounted
            self.call_next(self._ask_when_mounted, prompt)
            return
        self._show_prompt(prompt)

    async def _ask_when_mounted(self, prompt: str) -> None:
        await self.add_prompt()
        self._show_prompt(prompt)

    def _show_prompt(self, prompt: str) -> None:
        self.query_one("#prompt-label", Label).update(prompt)
        field = self.query_one("#prompt-input", Input)
        field.value = ""
        self.query_one("#prompt").add_class("-shown")
        field.focus()

    def _close_prompt(self, value: str | None) -> None:
        self.query_one("#prompt").remove_class("-shown")
        self.focus_after_prompt()
        answer, self._answer = self._answer, None
        if answer is not None:
            answer(value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_prompt(event.value)

    def cancel_prompt(self) -> None:
        """Esc on the line: no answer (PromptInput's binding)."""
        if self._answer is not None:
            self._close_prompt(None)

    def focus_after_prompt(self) -> None:
        """Where the keys go once the line is closed: nowhere in particular, the app's own bindings."""
        self.set_focus(None)


class TypedAnswers(PromptLine):
    """The walk's questions on the prompt line (a mixin of WalkApp: it reads the app's steps, walk
    and cursor)."""

    def focus_after_prompt(self) -> None:
        self.query_one(MatrixGrid).focus()  # the arrows move the cursor again

    def action_jump(self) -> None:
        count = len(self.steps)
        prompt = self.t("ui.jump_prompt", count=count)

        def jumped(answer: str | None) -> None:
            if answer is None or not answer.strip():
                return
            target = self._find_step(answer.strip())
            if target is None:  # say why and ask again: Esc leaves the line
                example = plain(self.steps[-1][0].symbol, self.opts)
                self.say_now(self.t("ui.no_stage", value=answer.strip(), count=count, example=example))
                self.ask(prompt, jumped)
            else:
                self.go(target)

        self.ask(prompt, jumped)

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
        """A row and a column typed as `attnwalk explain` takes them (layer/axes.py's pickers):
        one at a time, or both on the row's line ("bank river"). A wrong answer is said and
        asked again; Esc leaves the line."""
        stage, head = self.step
        if stage.worked is None:
            self.say_now(self.t("ui.no_cells"))
            return
        scn = self.walk.scenario
        row_labels, col_labels = axes(self.walk, stage, head, self.opts.lang)
        row_prompt = self.t("ui.row_prompt")
        col_prompt = self.t("ui.col_prompt") if stage.square else self.t("ui.dim_prompt", count=len(col_labels))

        def pick_row(answer: str) -> int:
            if stage.rows not in ("n", "m"):  # a weight's rows are dimensions (∂L/∂W_Q: d_model rows)
                return pick_dim(answer, row_labels)
            return pick_index(answer, scn.key_tokens if stage.rows == "m" else scn.tokens, row_labels)

        def pick_col(answer: str) -> int:
            return pick_index(answer, scn.key_tokens, col_labels) if stage.square else pick_dim(answer, col_labels)

        def ask_col(row: int) -> None:
            def picked_col(answer: str | None) -> None:
                if answer is None or not answer.strip():
                    return
                try:
                    col = pick_col(answer)
                except PickError as err:
                    say_col_error(err)
                    self.ask(col_prompt, picked_col)
                    return
                self.move_cursor(row, col)

            self.ask(col_prompt, picked_col)

        def say_col_error(err: PickError) -> None:
            self.say_now(self._not_picked("ui.no_col", err, col_labels) if stage.square else
                         self.t("ui.no_dim", value=err.value, count=len(col_labels)))

        def picked_row(answer: str | None) -> None:
            if answer is None or not answer.strip():
                return
            try:
                row = pick_row(answer)
            except PickError as err:
                both = _row_and_col(answer.strip(), pick_row, pick_col)
                if isinstance(both, _WrongColumn):  # a row, then a column that is not one: say so, ask it
                    say_col_error(both.error)
                    ask_col(both.row)
                elif both is not None:
                    self.move_cursor(*both)
                else:
                    self.say_now(self._not_picked("ui.no_row", err, row_labels))
                    self.ask(row_prompt, picked_row)
                return
            ask_col(row)

        self.ask(row_prompt, picked_row)

    def _not_picked(self, key: str, err: PickError, labels) -> str:
        sep = self.t("ui.list_sep")
        if err.repeated:
            return self.t("ui.repeated_token", value=err.value, rows=sep.join(map(str, err.repeated)))
        return self.t(key, value=err.value, count=len(labels), tokens=sep.join(labels))


class _WrongColumn(NamedTuple):
    row: int
    error: PickError


def _row_and_col(answer: str, pick_row, pick_col) -> tuple[int, int] | _WrongColumn | None:
    """A row and a column typed on one line, as `attnwalk explain` takes them ("bank river",
    "2 3"): split at the first space that leaves a row on the left and a column on the right
    (a token may hold spaces of its own). Where no split gives both but one leaves a row, that
    row and what was wrong with the column after it ("2 9": row 2, no column 9); else None."""
    wrong: _WrongColumn | None = None
    for at in (i for i, ch in enumerate(answer) if ch.isspace()):
        try:
            row = pick_row(answer[:at].strip())
        except PickError:
            continue
        try:
            return row, pick_col(answer[at:].strip())
        except PickError as err:
            wrong = wrong or _WrongColumn(row, err)
    return wrong
