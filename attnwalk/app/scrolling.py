"""The keys that scroll an app's one long pane (the walk's notes, decode's page, the quiz's log)
by lines and by pages: a mixin of each app, which names the pane in `scrolled`."""

from __future__ import annotations


class PaneScroll:
    """Actions scroll_lines(n) and scroll_pages(n) for the pane `scrolled` (a selector); a page is
    the pane's height less one line, so a line of the last page stays in view."""

    scrolled = ""

    def action_scroll_lines(self, lines: int) -> None:
        self.query_one(self.scrolled).scroll_relative(y=lines, animate=False)

    def action_scroll_pages(self, pages: int) -> None:
        pane = self.query_one(self.scrolled)
        pane.scroll_relative(y=pages * max(pane.size.height - 1, 1), animate=False)
