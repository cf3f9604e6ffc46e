"""The footer of the walk, the quiz and decode's pager: Textual's Footer, its keys drawn in the
first frame and rebuilt only when the keys on offer change.

Textual's Footer composes no keys until the screen first reports its bindings, then rebuilds all
of them after every report, one refresh later. A walk's start makes three reports (the screen
resuming, the matrix taking the focus, the prompt line mounting), all with the same keys: three
rebuilds of ten keys at ~7 ms each, and "q quit" reached the terminal only in the fourth frame,
~45 ms after the walk itself (app_bench.py --first-screen, benchmarks/README.md). Here the keys
are composed with the rest of the screen, a burst of reports is answered once, and only when a
key came, went or changed (n from the tokens to E brings ←↑↓→; a stage without cells takes it
away).
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """Footer(compact=True, show_command_palette=False), keys in the first frame, rebuilt on change."""

    def __init__(self) -> None:
        super().__init__(compact=True, show_command_palette=False)
        # Footer composes nothing until this is set by its first bindings_changed: the app's and
        # screen's bindings are known before it mounts, so compose them at once
        self.set_reactive(Footer._bindings_ready, True)
        self._shown: tuple = ()  # the keys of the last compose
        self._asked = False  # a check of the keys is waiting for the next refresh

    def _keys(self) -> tuple:
        return tuple((binding.key, binding.action, binding.description, binding.key_display, enabled, tooltip)
                     for _, binding, enabled, tooltip in self.screen.active_bindings.values()
                     if binding.show)

    def compose(self):
        self._shown = self._keys()
        yield from super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        if not self._asked:
            self._asked = True
            self.call_after_refresh(self._rebuild_if_changed, screen)

    def _rebuild_if_changed(self, screen: Screen) -> None:
        self._asked = False
        if self.is_attached and screen is self.screen and self._keys() != self._shown:
            super().bindings_changed(screen)  # Footer's own rule: rebuild after the next refresh
