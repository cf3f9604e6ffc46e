"""Reading a scenario file's bytes into text, refusing what is not a small text file."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

from attnwalk.errors import ScenarioError

MAX_BYTES = 16 * 1024 * 1024  # a hand-written scenario is kilobytes; big weights go in .npy files
TOO_LARGE = (f"is larger than {MAX_BYTES // (1024 * 1024)} MB; a scenario file should be small "
             "(put large matrices in .npy files: W_Q: {file: wq.npy})")


def read_text(path: Path, file: str | None = None) -> str:
    """The file's text: UTF-8 (a BOM is dropped), or UTF-16/32 with a BOM; at most MAX_BYTES.

    A regular file's size is checked before anything is read, so a huge file costs nothing.
    `file` is how messages name it (default: the path).
    """
    file = file or str(path)
    try:
        if path.is_dir():
            raise ScenarioError("is a directory, not a scenario file", file=file)
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode):
                if info.st_size > MAX_BYTES:
                    raise ScenarioError(TOO_LARGE, file=file)
                data = handle.read(info.st_size + 1)  # read(n) allocates n bytes up front
            else:  # a pipe or a device has no size: read up to the cap, a piece at a time
                data = _read_bounded(handle)
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


def _read_bounded(handle) -> bytes:
    pieces, total = [], 0
    while total <= MAX_BYTES:
        piece = handle.read(1 << 16)
        if not piece:
            break
        pieces.append(piece)
        total += len(piece)
    return b"".join(pieces)


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
