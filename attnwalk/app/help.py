"""The help screen, the bindings' descriptions in the learner's language, and what the walk and
decode's pager share: the message line, ? for help, q and Ctrl-C."""

from __future__ import annotations

import re
from dataclasses import replace

from rich.panel import Panel
from rich.table import Table
from textual.app import ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Static

from attnwalk.render import style
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import prose_line


def translated(node, opts: ViewOptions) -> None:
    """Replace each binding's description, a text key ("app.key.next"), by its text in opts.lang,
    so the footer speaks the learner's language (BINDINGS are declared once, on the class)."""
    bindings = node._bindings.key_to_bindings
    for key, found in bindings.items():
        bindings[key] = [replace(b, description=style.say(opts, b.description))
                         if b.description.startswith("app.") else b for b in found]


def keys_table(body: str) -> Table:
    """The help's text ("key   what it does" lines, a continuation indented under its
    description) as two columns, so a description that wraps at 80 columns stays under itself
    instead of running back under the keys."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, style="bold")
    table.add_column()
    rows: list[list[str]] = []
    for line in body.strip("\n").splitlines():
        if line[:1].isspace() and rows:  # the description goes on, on its own line
            rows[-1][1] += "\n" + line.strip()
        else:
            parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            rows.append([parts[0], parts[1] if len(parts) > 1 else ""])
    for key, what in rows:
        table.add_row(key, what)
    return table


class HelpScreen(ModalScreen[bool]):
    """Every key of the walk (or of decode's pager); any key closes it, q closes it and quits."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Static { width: auto; max-width: 100%; height: auto; max-height: 100%; }
    """

    def __init__(self, opts: ViewOptions, body_key: str = "app.help") -> None:
        super().__init__()
        self.opts, self.body_key = opts, body_key
        self._dismissing = False

    def compose(self) -> ComposeResult:
        body = keys_table(style.say(self.opts, self.body_key))
        yield Static(Panel(body, title=style.say(self.opts, "ui.help_title"),
                           subtitle=style.say(self.opts, "ui.help_close"), expand=False,
                           box=style.panel_box(self.opts), border_style=style.PANEL_BORDER))

    def on_key(self, event) -> None:
        event.stop()
        if not self._dismissing:  # keys typed fast arrive before the screen is gone: dismiss once
            self._dismissing = True
            self.dismiss(event.key == "q")


class MessageAndExits:
    """A mixin of the walk and decode's pager (their App is next in the MRO): one message line
    (#message) that the next key clears unless it only scrolls, ? for the help (whose q quits),
    q with exit code 0 and Ctrl-C with 130."""

    message: str = ""
    help_key = "app.help"  # the text key of the help's body

    def show_message(self) -> None:
        shown = self.query_one("#message", Static)
        shown.update(prose_line(self.message) if self.message else "")  # Chinese wraps as in the panes
        shown.set_class(bool(self.message), "-shown")

    def say_now(self, message: str) -> None:
        self.message = message
        self.show_message()

    async def run_action(self, action, default_namespace=None) -> bool:
        """Every key's action: a message stays until the next key (a resize draws it again)."""
        if self.message and not action.startswith("scroll_"):  # PaneScroll's keys keep it
            self.message = ""
            self.show_message()
        return await super().run_action(action, default_namespace)

    def action_help(self) -> None:
        def closed(quit_now: bool | None) -> None:
            if quit_now:
                self.exit(0)

        self.push_screen(HelpScreen(self.opts, self.help_key), closed)

    def action_leave(self) -> None:
        self.exit(0)

    def action_interrupt(self) -> None:
        self.exit(130, return_code=130)
