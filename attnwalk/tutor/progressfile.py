"""The progress file on disk, the learner's data: read bounded, changed under a lock, never lost.

- Read only when it is a regular file of at most MAX_BYTES (scenario/files.open_regular): a FIFO
  cannot hang a quiz, /dev/zero cannot fill the memory, a 400 MB file is refused unread.
- Changed by read-modify-write under an exclusive lock, so sixteen quizzes ending at once keep
  sixteen records. The lock is fcntl.flock on a lock file beside the progress file as the state
  folder names it (`progress.json.lock`, there even when progress.json links elsewhere: never
  beside a device or in a dotfiles folder), never removed: the progress file itself is replaced
  by a rename at every save, so a lock on it would hold the old file while the next process
  opened the new one. flock
  rather than lockf: its lock belongs to the open file, so closing some other descriptor of the
  same file cannot drop it, and the kernel lets go of it when the process ends however it ends, so
  a killed attnwalk leaves no stale lock behind (a lock made by creating a file would). Windows
  locks the lock file's first byte with msvcrt.
- A damaged file, or one of a version this attnwalk does not know (a newer one wrote it), is never
  overwritten: before anything new is saved it is renamed beside itself with the time,
  `progress-damaged-20261129-102000.json`, and the warning says where.
- A symbolic link (a progress file kept in a dotfiles folder) is read and written through: its
  target is replaced, the link stays (atomic.write_whole).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from attnwalk.atomic import keep_aside
from attnwalk.scenario.files import NotAFileError, megabytes, open_regular, read_capped

VERSION = 1
MAX_BYTES = 4 * 1024 * 1024  # ~8,000 scenarios' records; the file grows by one line a scenario
LOCK_WAIT = 5.0  # seconds: each holder keeps the lock for one read and one write, milliseconds


@dataclass
class Snapshot:
    """What the file held when read: every scenario's record, or why it could not be used."""

    scenarios: dict[str, dict] = field(default_factory=dict)
    problem: str | None = None  # why the file cannot be used, in words; None when it can
    kept_as: str | None = None  # its content is bad: the file is renamed aside with this word
    # ("damaged", "version-2") before a save; None: it is usable, or is left alone


def target(path: Path) -> Path:
    """The file a progress path names: a symbolic link's target, where reads and writes go."""
    return Path(os.path.realpath(path))


def read(path: Path) -> Snapshot:
    """The records in the file at `path` (none when there is no file), or the problem with it."""
    try:
        handle, size = open_regular(path, MAX_BYTES)
        with handle:
            data = read_capped(handle, size, MAX_BYTES)
    except (FileNotFoundError, NotADirectoryError):  # nothing saved yet (saving will say why)
        return Snapshot()
    except NotAFileError as exc:
        return Snapshot(problem=f"{exc}; progress is neither read from it nor saved to it")
    except OSError as exc:
        return Snapshot(problem=f"cannot be read ({exc.strerror or exc}); going on without it")
    if len(data) > MAX_BYTES:  # it grew after it was measured
        return Snapshot(problem=f"is more than the {megabytes(MAX_BYTES)} allowed; progress is "
                        "neither read from it nor saved to it")
    try:
        document = json.loads(data.decode("utf-8"))
        if not isinstance(document, dict):
            raise TypeError("it is not a JSON object")
        version = document["version"]
        if version != VERSION or isinstance(version, bool):
            shown = json.dumps(version)[:20]
            return Snapshot(problem=f"is of version {shown}, which this attnwalk does not know (a newer "
                            "attnwalk may have written it)", kept_as=f"version-{_safe_name(shown)}")
        scenarios = document["scenarios"]
        if not isinstance(scenarios, dict):
            raise TypeError("'scenarios' is not an object")
        _check_records(scenarios)
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        reason = f"no {exc}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__
        return Snapshot(problem=f"is damaged ({reason[:200]})", kept_as="damaged")
    return Snapshot(scenarios)


# What each part of a scenario's record is, where it is there at all (a missing one is a record
# written before it was kept): a part of another kind is a damaged file, kept aside with all it
# holds rather than shown as empty and overwritten by the next save.
_OBJECTS = {"walk": dict, "quiz": dict}
_QUIZ = {"last": (dict, type(None)), "best": (dict, type(None)), "mistakes": dict, "attempts": int}


def _check_records(scenarios: dict) -> None:
    """A TypeError naming the first record, or part of one, that is not of its kind."""
    for key, record in scenarios.items():
        name = json.dumps(key, ensure_ascii=False)[:60]
        if not isinstance(record, dict):
            raise TypeError(f"the record of {name} is not an object")
        for part, kind in _OBJECTS.items():
            if part in record and not isinstance(record[part], kind):
                raise TypeError(f"the {part} of {name} is not an object")
        quiz = record.get("quiz", {})
        for part, kinds in _QUIZ.items():
            if part in quiz and (not isinstance(quiz[part], kinds) or isinstance(quiz[part], bool)):
                raise TypeError(f"the quiz's {part} of {name} is not what attnwalk writes there")
        counts = quiz.get("mistakes", {})
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in counts.values()):
            raise TypeError(f"the quiz's mistakes of {name} are not all counts")


def _safe_name(text: str) -> str:
    """A version as it may appear in a file name: letters, digits, dots and dashes."""
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in ".-") else "_" for ch in text)[:20]


def keep(path: Path, snapshot: Snapshot) -> Path:
    """Rename the file at `path`, whose content `snapshot` found bad, beside itself with what was
    wrong and the time (`progress-damaged-20261129-102000.json`); returns its new name."""
    return keep_aside(path, f"{snapshot.kept_as}-{datetime.now().strftime('%Y%m%d-%H%M%S')}")


def lock_file(path: Path) -> Path:
    """The lock file of the progress file at `path` as the learner's settings name it (the state
    folder's progress.json, not a link's target): `progress.json.lock` beside it, in the state
    folder, so a progress file linked to /dev/null or elsewhere puts no lock file there."""
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def locked(lock: Path) -> Iterator[bool]:
    """Hold the exclusive lock file `lock` (lock_file) while the block runs; yields False when
    another process held it for LOCK_WAIT seconds. Where no lock file can be made (a folder that
    cannot be written), or the name is taken by a link or anything but a regular file, the block
    runs unlocked: its save then fails, or succeeds, and says so."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0), 0o600)
    except OSError:
        yield True
        return
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or a device put in its place: not ours to lock
        os.close(fd)
        yield True
        return
    try:
        yield _acquire(fd)
    finally:
        os.close(fd)  # releases the lock


def _acquire(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows
        return _acquire_windows(fd)
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        except OSError:  # a file system without locks: go on as before there were any
            return True


def _acquire_windows(fd: int) -> bool:
    import msvcrt

    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
