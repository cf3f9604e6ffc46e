"""The process's I/O policy: how a command meets its three standard streams and how it ends. cli.py
runs every command through `run` and wraps each in `handles_errors`; nothing else turns an error
into an exit code.

- A user's mistake (AttnwalkError) is one line on stderr and exit 2; Ctrl-C is exit 130.
- A reader that has gone (`attnwalk run x | head -1`) ends the command quietly with exit 0, as
  ripgrep, fd and bat do: the reader has what it asked for, and `set -o pipefail` scripts pass.
- Output that cannot be written (a full disk, any other write error) is one line on stderr and
  exit 1, as coreutils do: "attnwalk: cannot write the output: No space left on device".
- An encoding that cannot hold the text gets the --ascii spelling, then escapes, and one line on
  stderr says so (exit 0: nothing is lost).
- A standard stream the shell closed (`>&-`, `<&-`, `2>&-`) is reopened on /dev/null before the
  command runs, so no file attnwalk opens lands on descriptor 0, 1 or 2 and is written over: a
  closed stdin reads as an input that has ended, a closed stderr takes the messages without
  showing them, and a closed stdout is output that cannot be written (exit 1, the line on stderr).
- COLUMNS or LINES that is not a whole number from 1 to 10,000 is ignored (80 columns, or the
  terminal's own width): COLUMNS=0 printed nothing at all, and a huge one drew rules gigabytes long.

Standard library only at import time (cli.py imports it for `attnwalk --help`, which must not
load numpy or yaml); Rich and the rest are imported where they are needed.
"""

from __future__ import annotations

import errno
import functools
import gc
import os
import sys
from typing import Callable

MAX_COLUMNS = 10_000

_state = {"debug": False}


def set_debug(debug: bool) -> None:
    """--debug: errors end in their traceback instead of one line."""
    _state["debug"] = debug


def handles_errors(func: Callable) -> Callable:
    """Run a command: a user's mistake becomes one line on stderr and its exit code (2); Ctrl-C
    exits 130. Output that cannot be written is run()'s to report: the last of it is only written
    at exit."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from attnwalk.errors import AttnwalkError

        try:
            return func(*args, **kwargs)
        except AttnwalkError as exc:
            if _state["debug"]:
                raise
            from attnwalk.layer.safe import escaped  # a message may quote a token: shown, not obeyed

            say(f"attnwalk: {escaped(str(exc))}")
            raise SystemExit(exc.exit_code) from None
        except KeyboardInterrupt:
            say("")
            raise SystemExit(130) from None
        except BrokenPipeError:  # `attnwalk run x | head`: the reader left, nothing is wrong
            silence_stdout()
            raise SystemExit(0) from None
        except OSError as exc:
            if exc.errno not in _TYPED or _state["debug"]:
                raise
            # a path no file system holds (5,000 letters, a loop of links): the user's input,
            # however deep it was found, not output that could not be written (exit 1)
            from attnwalk.layer.safe import escaped

            name = os.fspath(exc.filename) if exc.filename is not None else ""
            name = name if len(name) <= 100 else f"{name[:100]}… ({len(name):,} characters)"
            say(f"attnwalk: {escaped(str(name))}: {exc.strerror or exc}")
            raise SystemExit(2) from None

    return wrapper


# OSErrors that say what was typed cannot name a file: a name too long, too many links
_TYPED = (errno.ENAMETOOLONG, errno.ELOOP)


def say(line: str) -> None:
    """One line on stderr, spelled as --ascii spells it where stderr's encoding needs that;
    nothing if stderr cannot be written either (2>/dev/full)."""
    try:
        encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
        if not encoding.lower().startswith("utf"):
            try:
                line.encode(encoding)
            except UnicodeEncodeError:
                from attnwalk.render.style import ascii_spelling

                line = ascii_spelling(line)
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def silence_stdout() -> None:
    """Point stdout at /dev/null, so what is still buffered is dropped at exit rather than failing
    again there (Python would print "Exception ignored ... BrokenPipeError" and exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def fit_stdout(content: str, json: bool = False) -> str:
    """`content` as stdout's encoding can hold it: JSON with \\u escapes (the same JSON); a
    handout spelled as --ascii spells it, escaped where that is not enough."""
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower()
    if encoding.startswith("utf"):
        return content
    from attnwalk.terminal.console import ascii_json, fit_encoding

    if json:
        return ascii_json(content)
    return fit_encoding(content, encoding)


def write_out(content: str, json: bool = False) -> None:
    """A command's whole result (an export, a worksheet) on stdout, as its encoding can hold it."""
    sys.stdout.write(fit_stdout(content, json=json))


def stdin_is_terminal() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # no stdin, or a closed one
        return False


class _ClosedStdout:
    """sys.stdout when the shell closed it (`attnwalk list >&-`): every write is the OSError a
    closed descriptor gives, which run_command reports in one line on stderr with exit 1."""

    encoding, errors, closed = "utf-8", "strict", False

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "stdout is closed")


def _closed_streams() -> None:
    """Reopen each standard descriptor the shell closed on /dev/null (os.open takes the lowest
    free one, so in order 0, 1, 2 each lands on its own), and give Python a stream for it."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
        except OSError:
            continue
        if fd == 0 and sys.stdin is None:  # reading it ends at once, as a finished pipe does
            sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
        elif fd == 1 and sys.stdout is None:
            sys.stdout = _ClosedStdout()
        elif fd == 2 and sys.stderr is None:  # nothing can be said; what would be is dropped
            sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)


def _sane_size() -> None:
    """Drop COLUMNS and LINES unless each is a whole number from 1 to MAX_COLUMNS: Rich took
    COLUMNS=0 for a width of nothing and printed nothing, not even an error."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and not (value.strip().isdecimal() and 1 <= int(value) <= MAX_COLUMNS):
            del os.environ[name]


def _tolerant_streams() -> None:
    """stdout and stderr write a character their encoding cannot hold as an escape (\\u5973)
    instead of raising UnicodeEncodeError (PYTHONIOENCODING=ascii, a latin-1 terminal); the
    console spells symbols as --ascii does first (terminal/console.py)."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def _write_error(exc: OSError) -> str:
    """The one line for output that could not be written: stdout's when the error names no file."""
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"{exc.filename}: {reason}"
    return f"cannot write the output: {reason}"


def run(app: Callable[[], object]) -> None:
    """The console script: the command, then an exit that skips the interpreter's teardown.

    Once the command has finished, its output flushed and its files written (every write is
    atomic and done before this point; the Textual app has left the alternate screen and restored
    the terminal when its run returns), nothing is left for Python's shutdown but freeing ~900
    modules' objects: measured, that teardown is ~20 ms of a ~170 ms walk (benchmarks/README.md),
    so the process ends with os._exit. An error that escapes as a traceback (--debug) takes the
    ordinary way out.

    The cyclic garbage collector is off meanwhile: a start imports and builds a few hundred
    thousand long-lived objects (modules, classes, Textual's styles) and the collector scanned
    them again and again for nothing, ~20 ms of the interactive walk's first screen
    (benchmarks/README.md). A printed walk or an export ends soon after (os._exit); a Textual
    app turns the collector back on once it is mounted (app.collect_again)."""
    gc.disable()
    try:
        run_command(app)
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if isinstance(code, str):  # SystemExit("message"): Python would print it
        say(code)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # already reported, or a stream closed by a gone reader
            pass
    os._exit(code if isinstance(code, int) else 0)


def run_command(app: Callable[[], object]) -> None:
    """The command (`app`, the Typer app), its output flushed here, not at exit, where Python
    could only report a failure as "Exception ignored"; what cannot be written ends as the
    module's docstring says."""
    _closed_streams()
    _sane_size()
    _tolerant_streams()
    try:
        try:
            app()
        except SystemExit as exc:
            if exc.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
                raise SystemExit(0) from None  # click's answer to a closed pipe during --help
            raise
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        raise SystemExit(0) from None
    except OSError as exc:
        if _state["debug"]:  # --debug: the traceback, as for every other error
            raise
        silence_stdout()
        say(f"attnwalk: {_write_error(exc)}")
        raise SystemExit(1) from None
    finally:
        console = sys.modules.get("attnwalk.terminal.console")
        if console is not None and console.escaped_for_encoding:
            say(f"attnwalk: the output's encoding ({sys.stdout.encoding}) cannot show some characters; "
                "they are written as \\uXXXX escapes (a UTF-8 locale or PYTHONIOENCODING=utf-8 shows them)")
