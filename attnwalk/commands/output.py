"""Where a command's output file goes (export -o, run/step/decode --save, model -o and --save):
checked before any work, never onto a file the command reads, written whole.

- The path as typed is checked at once: not empty, not a folder, in a folder that exists and can
  be written (a read-only file system is called that).
- A file the command reads (the scenario, its matrix files, a model's files: a GGUF, an Ollama
  manifest and blob; a worksheet, its answers; found by device and inode however it is spelled
  or linked: atomic.is_input) and the learner's progress file are
  refused, exit 2: `export s.yaml -f markdown -o s.yaml` would have replaced the scenario.
- An existing regular file is replaced atomically (that is what -o means); a symbolic link's
  target is replaced and the link kept; a device, a FIFO or /proc/self/fd/1 is written to
  directly (atomic.write_output). What cannot be written is exit 1 (errors.OutputError).
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from attnwalk.errors import OutputError, UsageError
from attnwalk.render.options import ViewOptions

SAVE_FORMATS = {".svg": "svg", ".html": "html", ".htm": "html", ".txt": "text"}


def output_path(raw: str | Path, option: str, example: str) -> Path:
    """The file `option` (--save, --output) names, as typed: refused at once when it is empty,
    names a folder (an existing one, or any path ending in '/'), or lies in a folder that does not
    exist or cannot be written. Checked before any work, and on the string as typed: Path("x/")
    and Path("") lose what the user wrote ("x" and ".")."""
    text = os.fspath(raw)
    if not text.strip():
        raise UsageError(f"{option} needs a file name, e.g. {option} {example}")
    if text.endswith(("/", os.sep)) or os.path.basename(text) in (".", ".."):
        raise UsageError(f"{option} {text}: that names a folder; give a file name, e.g. "
                         f"{option} {text.rstrip('/' + os.sep) or '.'}/{example}")
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"{option} {text}: that is a folder; give a file name, e.g. "
                         f"{option} {Path(text) / example}")
    if _special(path):  # a device, a FIFO, /proc/self/fd/1: written to as it is, not replaced
        return path
    folder = Path(os.path.realpath(path)).parent  # through a link: where its target is replaced
    if not folder.is_dir():
        raise UsageError(f"{option} {text}: cannot write it: the folder {folder} does not exist; "
                         "create it first")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {text}: cannot write in {folder} ({_why_not_writable(folder)})")
    from attnwalk import atomic

    try:  # root passes os.access in /proc and /sys, where no file can be made: try one
        atomic.probe_folder(path)
    except OSError as exc:
        why = _why_not_writable(folder) if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) \
            else exc.strerror or str(exc)
        raise UsageError(f"{option} {text}: cannot write in {folder} ({why})") from None
    return path


def _special(path: Path) -> bool:
    """An existing file that is not a regular one (through links)."""
    import stat

    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _why_not_writable(folder: Path) -> str:
    try:
        if os.statvfs(folder).f_flag & getattr(os, "ST_RDONLY", 1):
            return "a read-only file system"
    except (OSError, AttributeError):  # no statvfs (Windows)
        pass
    return "permission denied"


def check_not_input(path: str | Path, option: str) -> None:
    """Refuse (exit 2) an output onto a file this command reads, or onto the progress file."""
    from attnwalk import atomic
    from attnwalk.tutor.progress import FILE_NAME, state_dir

    shown = os.fspath(path)
    if atomic.is_input(path):
        raise UsageError(f"{option} {shown}: that is a file this command reads (the scenario, one of its "
                         "matrix files, a model's, a worksheet or answers); writing it would destroy it: "
                         "give another file name")
    progress = state_dir() / FILE_NAME
    try:
        same = os.path.samefile(path, progress)
    except (OSError, ValueError):
        same = False
    if same:
        raise UsageError(f"{option} {shown}: that is your progress file; writing it would destroy your "
                         "progress: give another file name")


def write_output(path: str | Path, content: str, option: str = "--save") -> None:
    """Write `content` to `path` (atomic.write_output: whole, through links, a special file
    directly), never onto an input; what cannot be written is an OutputError (exit 1)."""
    from attnwalk import atomic

    check_not_input(path, option)
    try:
        atomic.write_output(path, content)
    except OSError as exc:
        reason = "no process is reading this FIFO" if exc.errno == errno.ENXIO else exc.strerror or str(exc)
        raise OutputError(f"{option} {os.fspath(path)}: cannot write it ({reason})") from None


def save_format(path: str | Path) -> str:
    """The format --save writes for `path` (by its extension), checked before any walking, so a
    bad path fails at once rather than after the learner has stepped through every stage."""
    text = os.fspath(path)
    fmt = SAVE_FORMATS.get(Path(text).suffix.lower()) if text.strip() else "svg"
    if fmt is None:
        allowed = ", ".join(SAVE_FORMATS)
        suffix = Path(text).suffix
        got = f"'{suffix}'" if suffix else "no extension"
        raise UsageError(f"--save {text}: {got} is not a format attnwalk writes; use one of {allowed}")
    output_path(text, "--save", "walk.svg")
    return fmt


def saved_size(size: int, opts: ViewOptions) -> str:
    """A file's size as a person reads it: bytes below 1 KiB, else whole KiB, else MiB to one
    decimal (1 KiB = 1024 bytes, as ls -h counts; halves round up, not to even)."""
    from attnwalk.render.style import say

    if size < 1024:
        return say(opts, "save.bytes", n=size)
    if size < 1024 * 1024 - 512:  # what would round to 1024 KiB is written 1.0 MiB
        return say(opts, "save.kb", n=int(size / 1024 + 0.5))
    return say(opts, "save.mb", n=f"{int(size / (1024 * 1024) * 10 + 0.5) / 10:.1f}")


def save_reported(path: str | Path, content: str, opts: ViewOptions) -> None:
    """--save: the recording written whole (write_output), then one line on stderr naming it
    and its size (what was written: a device or a FIFO has none of its own), so a saved walk is
    not silent (stdout keeps the walk itself). The path is shown as typed; a failure to say it
    is no error."""
    from attnwalk.layer.safe import escaped
    from attnwalk.render.style import say

    write_output(path, content)
    size = saved_size(len(content.encode("utf-8")), opts)
    try:
        print(say(opts, "save.saved", path=escaped(os.fspath(path)), size=size), file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # stderr closed or full (2>/dev/full): the file is written
        pass
