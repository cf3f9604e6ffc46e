"""Reading a file's bytes safely: only regular files, their size checked before reading; a scenario
file's bytes into text, refusing what is not a small text file."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path
from typing import BinaryIO

from attnwalk.atomic import note_input
from attnwalk.errors import ScenarioError

MAX_BYTES = 16 * 1024 * 1024  # a hand-written scenario is kilobytes; big weights go in .npy files
TOO_LARGE = (f"is larger than {MAX_BYTES // (1024 * 1024)} MB; a scenario file should be small "
             "(put large matrices in .npy files: W_Q: {file: wq.npy})")


class NotAFileError(Exception):
    """A path that is not a regular file, or is larger than asked; str() says why, in words."""


# What a path is, when it is not a regular file, and why attnwalk will not read it.
_SPECIAL = ((stat.S_ISDIR, "a directory"),
            (stat.S_ISFIFO, "a named pipe (FIFO), which could keep attnwalk waiting forever"),
            (stat.S_ISCHR, "a device (such as /dev/zero or /dev/urandom), which may never end"),
            (stat.S_ISBLK, "a block device"),
            (stat.S_ISSOCK, "a socket"))


def open_regular(path: Path, limit: int, *, stdin_ok: bool = False) -> tuple[BinaryIO, int]:
    """The open file at `path` and its size, when it is a regular file of at most `limit` bytes.

    The file is opened with O_NONBLOCK and checked with fstat before anything is read, so a FIFO
    cannot block the open and a device is refused instead of read without end; a symbolic link
    counts as what it points to. With `stdin_ok`, a pipe that is this process's own stdin
    (`--scenario /dev/stdin`, or `-`) is read, up to `limit` bytes: the user is writing to it.
    Raises NotAFileError; OSError (missing, permission) passes through.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            note_input(info)  # an output of this command must not replace it
            if info.st_size > limit:
                raise NotAFileError(f"is {megabytes(info.st_size)}, more than the "
                                    f"{megabytes(limit)} allowed")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb"), info.st_size
        if stdin_ok and stat.S_ISFIFO(info.st_mode) and _is_stdin(info):
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb"), -1
        what = next((name for test, name in _SPECIAL if test(info.st_mode)), "not a regular file")
        raise NotAFileError(f"is {what}; attnwalk reads only regular files")
    except BaseException:
        os.close(fd)
        raise


def _is_stdin(info: os.stat_result) -> bool:
    try:
        own = os.fstat(0)
    except OSError:
        return False
    return (own.st_dev, own.st_ino) == (info.st_dev, info.st_ino)


def read_capped(handle: BinaryIO, size: int, limit: int) -> bytes:
    """At most limit + 1 bytes of `handle` (whose fstat size is `size`, or -1 for a pipe): the
    caller sees the extra byte when there is too much."""
    if size > 0:
        return handle.read(min(size, limit) + 1)  # read(n) allocates n bytes up front
    # a pipe, or a file whose size the system does not know (/proc's say 0): read in pieces
    pieces, total = [], 0
    while total <= limit:
        piece = handle.read(min(1 << 16, limit + 1 - total))
        if not piece:
            break
        pieces.append(piece)
        total += len(piece)
    return b"".join(pieces)


def megabytes(size: int) -> str:
    """A size for a message: '16 MB', '288 MB', '2.5 MB', '12 KB'."""
    if size < 1024 * 1024:
        return f"{-(-size // 1024):,} KB"
    mb = size / (1024 * 1024)
    return f"{mb:,.0f} MB" if mb >= 10 or mb.is_integer() else f"{mb:,.1f} MB"


def read_text(path: Path, file: str | None = None) -> str:
    """The file's text: UTF-8 (a BOM is dropped), or UTF-16/32 with a BOM; at most MAX_BYTES.

    Only a regular file is read (or a pipe that is our own stdin: `--scenario /dev/stdin`), and
    its size is checked before anything is read, so a huge file costs nothing and a FIFO or a
    device cannot hang or flood. `file` is how messages name it (default: the path).
    """
    file = file or str(path)
    try:
        handle, size = open_regular(path, MAX_BYTES, stdin_ok=True)
        with handle:
            data = read_capped(handle, size, MAX_BYTES)
    except NotAFileError as exc:
        if "more than" in str(exc):
            raise ScenarioError(TOO_LARGE, file=file) from None
        if "a directory" in str(exc):
            raise ScenarioError("is a directory, not a scenario file", file=file) from None
        pipe = " (to read a scenario from a pipe, give -: cat my.yaml | attnwalk run -)" \
            if "pipe" in str(exc) else ""
        raise ScenarioError(f"{exc}{pipe}", file=file) from None
    except FileNotFoundError:
        raise ScenarioError("no such file", file=file) from None
    except PermissionError:
        raise ScenarioError("cannot be read: permission denied", file=file) from None
    except IsADirectoryError:
        raise ScenarioError("is a directory, not a scenario file", file=file) from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or "not a usable path"
        raise ScenarioError(f"cannot be read: {reason}", file=file) from None
    if len(data) > MAX_BYTES:
        raise ScenarioError(TOO_LARGE, file=file)
    return decode(data, file)


_BOMS = (  # UTF-32's marks first: UTF-32-LE's begins with UTF-16-LE's
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode(data: bytes, file: str) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                raise ScenarioError(f"starts like {encoding.upper()} text but does not decode; "
                                    "save it as UTF-8", file=file) from None
    if b"\x00" in data:
        if _looks_like_utf16(data):
            raise ScenarioError("looks like UTF-16 text without a byte-order mark; save it as "
                                "UTF-8", file=file)
        raise ScenarioError("is not a text file (it contains NUL bytes); a scenario is a YAML "
                            "text file saved as UTF-8", file=file)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ScenarioError(f"is not valid UTF-8 (byte 0x{data[exc.start]:02x}); it may be "
                            "binary, or saved in another encoding: save it as UTF-8", file=file,
                            line=line) from None


def _looks_like_utf16(data: bytes) -> bool:
    """ASCII text in UTF-16: every other byte of the start is NUL, and only those."""
    head = data[:200]
    even, odd = head[0::2], head[1::2]
    return len(head) >= 4 and (even.count(0) == 0 and odd.count(0) >= len(odd) * 0.9
                               or odd.count(0) == 0 and even.count(0) >= len(even) * 0.9)
