"""Reading a scenario file's bytes into text, refusing what is not a small text file."""

from __future__ import annotations

import codecs
from pathlib import Path

from .errors import ScenarioError

MAX_BYTES = 16 * 1024 * 1024  # a hand-written scenario is kilobytes; big weights go in .npy files


def read_text(path: Path) -> str:
    """The file's text: UTF-8 (a BOM is dropped) or UTF-16 with a BOM; nothing larger than MAX_BYTES."""
    file = str(path)
    try:
        if path.is_dir():
            raise ScenarioError("is a directory, not a scenario file", file=file)
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ScenarioError("no such file", file=file) from None
    except PermissionError:
        raise ScenarioError("cannot be read: permission denied", file=file) from None
    except IsADirectoryError:
        raise ScenarioError("is a directory, not a scenario file", file=file) from None
    except OSError as exc:
        raise ScenarioError(f"cannot be read: {exc.strerror or exc}", file=file) from None
    if len(data) > MAX_BYTES:
        raise ScenarioError(f"is larger than {MAX_BYTES // (1024 * 1024)} MB; a scenario file "
                            "should be small (put large matrices in .npy files: "
                            "W_Q: {file: wq.npy})", file=file)
    return decode(data, file)


def decode(data: bytes, file: str) -> str:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise ScenarioError("looks like UTF-16 but does not decode; save it as UTF-8",
                                file=file) from None
    if b"\x00" in data:
        raise ScenarioError("is not a text file (it contains NUL bytes); a scenario is a "
                            "YAML text file saved as UTF-8", file=file)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScenarioError(f"is not valid UTF-8 (byte 0x{data[exc.start]:02x}); save the file "
                            "as UTF-8", file=file, line=line) from None
    return text
