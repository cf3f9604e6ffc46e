"""The terminal attnwalk writes to: one Console factory, so every command treats it the same way.

Rich already honours NO_COLOR (no colours), FORCE_COLOR (colours even when piped) and TERM=dumb
(no escape codes); piped output gets plain text because Rich sees no terminal.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader left (`attnwalk run x | head`): stop writing and leave it to the CLI, which
        exits 0 for every command (rich's own handler exits 1)."""
        self.quiet = True
        raise BrokenPipeError


def make_console(*, record: bool = False, width: int | None = None, stderr: bool = False) -> Console:
    """A Console for stdout (or stderr). Wide tables are never squeezed: renderers split them."""
    return _Console(record=record, width=width, stderr=stderr, highlight=False, soft_wrap=False,
                    emoji=False)


def interactive() -> bool:
    """True only when both stdin and stdout are terminals: the only time attnwalk waits for keys."""
    try:
        return os.isatty(sys.stdin.fileno()) and os.isatty(sys.stdout.fileno())
    except (AttributeError, ValueError, OSError):
        return False
