"""Writing a file whole or not at all, for every package that writes one (the progress file, a saved
walk or export, `init`'s new scenario, the text files' cache). Reading files is scenario/files.py's.

The data goes to a temporary file in the same folder, which then takes the file's name in one step
(os.replace, or os.link where an existing file must not be replaced): a crash, a full disk or Ctrl-C
leaves the old file or none, never half of one. Standard library only, and not tempfile (~3 ms to
import), so that any package may use it and startup pays nothing for it; the layer, which does no
I/O, does not.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PUBLIC, PRIVATE = 0o666, 0o600  # a new file's permissions, before the umask


def write_whole(path: str | Path, data: str | bytes, *, replace: bool = True, mode: int = PUBLIC,
                sync: bool = False) -> None:
    """Write `data` (text as UTF-8) to `path` through a temporary file beside it.

    With replace (the default) an existing file is replaced; without, FileExistsError is raised
    if `path` exists or appears meanwhile, and nothing is overwritten. `sync` flushes the data to
    the disk before the name is given. The temporary file never outlives the call; any other
    OSError is the caller's to report.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd, tmp = _temporary(path, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # fails, rather than replaces, when the name is taken
        except FileExistsError:
            raise
        except (OSError, NotImplementedError):  # no hard links here (some network or FAT drives)
            _write_exclusive(path, data, mode)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # after os.replace it is gone already; after os.link, a second name


def _temporary(path: Path, mode: int) -> tuple[int, str]:
    """A new file `.NAME.<random>.tmp` beside `path`, opened for writing, that no one else has."""
    for _ in range(100):
        tmp = str(path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp"))
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                           mode), tmp
        except FileExistsError:  # 1 in 4 billion: draw another name
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _write_exclusive(path: Path, data: bytes, mode: int) -> None:
    """Create `path` (FileExistsError if it exists) and write it, removing it if the write fails."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)  # ours: O_EXCL created it, so no one else's file is removed
        raise
