"""Closing the terminal ends an app as q does.

SIGHUP (the window closed, an SSH connection dropped, `tmux kill-session`) and SIGTERM (`kill`)
killed the walk where it stood: the place reached was not saved for --resume, and the terminal
was left in the app's screen. Handled on the app's own loop, they call the app's own exit, so the
command after `app.run()` saves what it keeps and Textual gives the terminal back (the alternate
screen left, the cursor and the keyboard's modes restored), as after q.
"""

from __future__ import annotations

import asyncio
import signal

from textual.app import App


def exit_on_hangup(app: App) -> None:
    """From an app's on_mount (its loop running): SIGHUP and SIGTERM exit `app` with return code
    128 + the signal's number, as a shell reports a process ended by that signal."""
    loop = asyncio.get_running_loop()
    for name in ("SIGHUP", "SIGTERM"):  # Windows has no SIGHUP, and no loop signal handlers
        number = getattr(signal, name, None)
        if number is None:
            continue
        try:
            loop.add_signal_handler(number, lambda code=128 + number: app.exit(return_code=code))
        except (NotImplementedError, RuntimeError, ValueError):
            pass
