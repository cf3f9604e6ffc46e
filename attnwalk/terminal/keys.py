"""Where the stepper's keys come from: the learner's terminal, or a script of keys in tests.

A key source is iterated for key names (NEXT, BACK, ... or the raw character pressed) and asked for
a typed line with `read_line(prompt)` (for `g` and `c`). Both kinds end with QUIT when input ends.
"""

from __future__ import annotations

import codecs
import os
import select
import signal
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from typing import IO, Protocol

NEXT, BACK, QUIT, HELP = "next", "back", "quit", "help"
JUMP, CELL, MODE, HEAD = "jump", "cell", "mode", "head"
DOWN, UP, PAGE_DOWN, PAGE_UP = "down", "up", "page down", "page up"  # within a tall screen
SCROLLS = (DOWN, UP, PAGE_DOWN, PAGE_UP)
RESIZE = "resize"  # not a key: the terminal changed size, so the screen is drawn again

ESC, CTRL_C, CTRL_D = "\x1b", "\x03", "\x04"
BACKSPACES = ("\x7f", "\b")

# What each key press means; anything else is passed on as the character itself.
KEYMAP: dict[str, str] = {
    "\r": NEXT, "\n": NEXT, " ": NEXT, "n": NEXT, "\x1b[C": NEXT, "\x1bOC": NEXT,
    "b": BACK, "\x1b[D": BACK, "\x1bOD": BACK,
    "q": QUIT, CTRL_D: QUIT,
    "?": HELP, "g": JUMP, "c": CELL, "m": MODE, "h": HEAD,
    "j": DOWN, "\x1b[B": DOWN, "\x1bOB": DOWN, "k": UP, "\x1b[A": UP, "\x1bOA": UP,
    "d": PAGE_DOWN, "\x1b[6~": PAGE_DOWN, "u": PAGE_UP, "\x1b[5~": PAGE_UP,
}


def key_name(raw: str) -> str:
    """The name of a key press ("n" -> NEXT); Ctrl-C raises KeyboardInterrupt, as in a shell."""
    if raw == CTRL_C:
        raise KeyboardInterrupt
    return KEYMAP.get(raw, raw)


class KeySource(Protocol):
    def __iter__(self) -> Iterator[str]: ...

    def read_line(self, prompt: str) -> str | None:
        """A line typed after `prompt`, or None when the learner cancels (Esc) or input ends."""


class ScriptedKeys:
    """Keys from a list, as a learner would press them: ScriptedKeys(["n", "g", "3", "\\n", "q"]).

    Items are raw keys ("n", "\\r", "\\x1b[C") or whole strings typed at a prompt ("刘海").
    When the script runs out, input has ended: the stepper sees QUIT.
    """

    def __init__(self, script: Iterable[str]) -> None:
        self._script = iter(list(script))
        self.prompts: list[str] = []  # every prompt shown, for tests to check

    def __iter__(self) -> Iterator[str]:
        for raw in self._script:
            yield key_name(raw)

    def read_line(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        typed: list[str] = []
        for raw in self._script:
            if raw in ("\r", "\n"):
                return "".join(typed)
            if raw == ESC:
                return None
            if raw == CTRL_C:
                raise KeyboardInterrupt
            if raw in BACKSPACES:
                if typed:
                    typed.pop()
                continue
            typed.append(raw)
        return None


def _cells(ch: str) -> int:
    """Columns a character takes on screen: 2 for CJK and other wide characters."""
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


class TerminalKeys:
    """Single key presses from a terminal, read in cbreak mode (no echo, no waiting for Enter).

    Use it as a context manager: the terminal's settings are saved on entry and restored on exit,
    whatever happens (q, Ctrl-C, an exception). Ctrl-C raises KeyboardInterrupt; Ctrl-D or the end
    of input is QUIT. While waiting, a change of the window's size yields RESIZE.
    """

    ESCAPE_WAIT = 0.05  # seconds to wait for the rest of an arrow key's escape sequence

    def __init__(self, fd: int | None = None, out: IO[str] | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self.out = sys.stdout if out is None else out
        self._saved: list | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._eof = False
        self._wake_r: int | None = None
        self._wake_w: int | None = None
        self._old_wakeup_fd: int | None = None
        self._old_handlers: dict[int, object] = {}

    # -- terminal settings -------------------------------------------------------------------

    def __enter__(self) -> "TerminalKeys":
        import termios

        self._saved = termios.tcgetattr(self.fd)
        self._cbreak()
        self._watch_signals()
        return self

    def _cbreak(self) -> None:
        import termios
        import tty

        tty.setcbreak(self.fd, termios.TCSANOW)

    def __exit__(self, *exc: object) -> None:
        import termios

        self._unwatch_signals()
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _watch_signals(self) -> None:
        """Wake the key reader on SIGWINCH (a resize) and SIGCONT (back from Ctrl-Z, when the shell
        has put the terminal back in line mode) through signal.set_wakeup_fd."""
        if not hasattr(signal, "SIGWINCH"):
            return
        try:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_w, False)
            for signum in (signal.SIGWINCH, signal.SIGCONT):
                self._old_handlers[signum] = signal.signal(signum, lambda signum, frame: None)
            self._old_wakeup_fd = signal.set_wakeup_fd(self._wake_w)
        except (ValueError, OSError):  # not the main thread: resizing shows on the next key
            self._unwatch_signals()

    def _unwatch_signals(self) -> None:
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        self._old_handlers.clear()
        if self._old_wakeup_fd is not None:
            signal.set_wakeup_fd(self._old_wakeup_fd)
            self._old_wakeup_fd = None
        for fd in (self._wake_r, self._wake_w):
            if fd is not None:
                os.close(fd)
        self._wake_r = self._wake_w = None

    # -- reading -----------------------------------------------------------------------------

    def _read_byte(self, timeout: float | None = None, wake: bool = False) -> bytes | None:
        """One byte from the terminal; b"" at end of input (or a hung-up terminal); None on
        timeout or (wake) a signal that calls for a redraw."""
        watched = [self.fd] + ([self._wake_r] if wake and self._wake_r is not None else [])
        try:
            ready, _, _ = select.select(watched, [], [], timeout)
            if self._wake_r is not None and self._wake_r in ready:
                signums = os.read(self._wake_r, 512)  # drain: several signals may have arrived
                if hasattr(signal, "SIGCONT") and signal.SIGCONT in signums and self._saved is not None:
                    self._cbreak()
                return None
            if self.fd not in ready:
                return None
            return os.read(self.fd, 1)
        except OSError:  # EIO once the terminal is gone
            return b""

    def _read_char(self, wake: bool = False) -> str | None:
        """One whole character (UTF-8 decoded), "" at end of input, None on a resize."""
        while True:
            byte = self._read_byte(wake=wake)
            if byte is None:
                return None
            if byte == b"":
                return ""
            ch = self._decoder.decode(byte)
            if ch:
                return ch

    def _read_raw(self) -> str | None:
        """One key press as typed: a character, or an arrow key's whole escape sequence."""
        ch = self._read_char(wake=True)
        if ch != ESC:
            return ch
        seq = ch
        while len(seq) < 8:
            byte = self._read_byte(self.ESCAPE_WAIT)
            if not byte:
                break
            seq += byte.decode("ascii", errors="replace")
            if len(seq) >= 3 and (seq[-1].isalpha() or seq[-1] == "~"):
                break
        return seq

    def __iter__(self) -> Iterator[str]:
        while not self._eof:
            raw = self._read_raw()
            if raw is None:
                yield RESIZE
                continue
            if raw == "":
                self._eof = True
                break
            yield key_name(raw)
        yield QUIT

    def read_line(self, prompt: str) -> str | None:
        """Read a line with echo: backspace erases, Enter accepts, Esc cancels, Ctrl-C interrupts."""
        self._write(prompt)
        typed: list[str] = []
        try:
            while True:
                ch = self._read_char(wake=True)  # a signal: cbreak is restored, keep reading
                if ch is None:
                    continue
                if ch in ("", CTRL_D):
                    self._eof = ch == ""
                    return None
                if ch == CTRL_C:
                    raise KeyboardInterrupt
                if ch in ("\r", "\n"):
                    return "".join(typed)
                if ch == ESC:
                    self._drain_escape()
                    return None
                if ch in BACKSPACES:
                    if typed:
                        w = _cells(typed.pop())
                        self._write("\b" * w + " " * w + "\b" * w)
                    continue
                if ch.isprintable():
                    typed.append(ch)
                    self._write(ch)
        finally:
            self._write("\n")

    def _drain_escape(self) -> None:
        while self._read_byte(self.ESCAPE_WAIT):
            pass

    def _write(self, s: str) -> None:
        self.out.write(s)
        self.out.flush()
