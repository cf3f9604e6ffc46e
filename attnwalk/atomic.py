"""Writing a file whole or not at all, for every package that writes one (the progress file, a saved
walk or export, `init`'s new scenario, the text files' cache). Reading files is scenario/files.py's.

The data goes to a temporary file in the same folder, which then takes the file's name in one step
(os.replace, or os.link where an existing file must not be replaced): a crash, a full disk or Ctrl-C
leaves the old file or none, never half of one. A symbolic link is written through: its target is
replaced and the link kept (a progress file linked from a dotfiles folder stays linked), and an
existing file keeps its permissions. Standard library only, and not tempfile (~3 ms to import), so
that any package may use it and startup pays nothing for it; the layer, which does no I/O, does not.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

PUBLIC, PRIVATE = 0o666, 0o600  # a new file's permissions, before the umask

# The files this process has read (device, inode), so an output never replaces one of them: the
# readers note each file as they open it (scenario/files.py, models/find.py).
_inputs: set[tuple[int, int]] = set()


def note_input(path_or_info: str | Path | os.stat_result) -> None:
    """Remember a file this command reads (a path, followed through links, or its stat)."""
    try:
        info = path_or_info if isinstance(path_or_info, os.stat_result) else os.stat(path_or_info)
    except (OSError, ValueError):
        return
    _inputs.add((info.st_dev, info.st_ino))


def is_input(path: str | Path) -> bool:
    """True when `path` (through links, hard links and other spellings too) is a file this
    process has read."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return False
    return (info.st_dev, info.st_ino) in _inputs


def write_whole(path: str | Path, data: str | bytes, *, replace: bool = True, mode: int = PUBLIC,
                sync: bool = False) -> None:
    """Write `data` (text as UTF-8) to `path` through a temporary file beside it.

    With replace (the default) an existing file is replaced; without, FileExistsError is raised
    if `path` exists or appears meanwhile, and nothing is overwritten. `sync` flushes the data to
    the disk before the name is given. A symbolic link's target is written (the link stays). The
    temporary file never outlives the call; any other OSError is the caller's to report.
    """
    path = Path(os.path.realpath(path))  # through links: the file itself, in its own folder
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd, tmp = _temporary(path, mode)
    try:
        with contextlib.suppress(OSError, NotImplementedError):  # an existing file keeps its permissions, as `>` does
            old = os.stat(path)
            if stat.S_ISREG(old.st_mode):
                os.chmod(fd, stat.S_IMODE(old.st_mode))
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


def probe_folder(path: str | Path) -> None:
    """Create and remove a temporary file where write_whole would put one for `path` (through
    links): the OSError that writing there would meet, raised now, before any work. os.access
    says yes to root in /proc and /sys, where no file can be created."""
    fd, tmp = _temporary(Path(os.path.realpath(path)), PRIVATE)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


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


def write_output(path: str | Path, data: str | bytes) -> None:
    """Write a command's output file (-o, --save): a regular file, new or existing, whole through
    write_whole (a link's target replaced, the link kept); a special file (a device such as
    /dev/null, a FIFO, /proc/self/fd/1) written to directly, as a shell's `>` writes to it,
    since it cannot be replaced by a file without breaking what it is. A FIFO that no one reads
    is an OSError (ENXIO) at once, not a wait without end."""
    try:
        info = os.stat(path)  # through links
    except FileNotFoundError:
        info = None
    if info is None or stat.S_ISREG(info.st_mode):
        write_whole(path, data)
        return
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                 | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def keep_aside(path: str | Path, suffix: str) -> Path:
    """Rename `path` to a new name beside it, `NAME-<suffix>.EXT` (`-2`, `-3`… if that is taken),
    never over another file; returns the new name. FileNotFoundError when `path` has gone."""
    path = Path(path)
    for i in range(1, 100):
        new = path.with_name(f"{path.stem}-{suffix}{'' if i == 1 else f'-{i}'}{path.suffix}")
        try:
            os.link(path, new)  # fails, rather than replaces, when the name is taken
        except FileExistsError:
            continue
        except (OSError, NotImplementedError) as exc:
            if isinstance(exc, FileNotFoundError) and not path.exists():
                raise
            if os.path.lexists(new):  # no hard links here: rename, after looking first
                continue
            os.rename(path, new)
            return new
        os.unlink(path)
        return new
    raise FileExistsError(f"no free name beside {path}")
