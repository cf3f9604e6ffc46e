"""The lessons a server offers: the built-ins, then the scenario files of the teacher's folder
(`serve --lessons DIR`), each known by a key: a built-in's name, a file's name with its .yaml.

A key is all that travels from the picker to the session and on to an activity's command line, and
each of them looks it up here again: a key that names no offered lesson is refused, so no path a
student could type ever reaches a file.

What the picker lists of each lesson (title, size, mask, description, in both languages) is
worked out once, when the server starts, and written to a listing file every tab's picker reads:
measured, loading the sixteen built-ins took each picker ~0.2 s and imported numpy and PyYAML
(~0.3 s more), which thirty tabs opened together paid thirty times over.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from attnwalk.errors import AttnwalkError
from attnwalk.scenario.builtins import builtin_path, course_order

SUFFIXES = (".yaml", ".yml")
# What a picker's choice may be (app/picker.py holds the same, for the page's side) and how it
# travels to the session: a URL of this scheme the picker asks the page to open (session.py).
ACTIVITIES = ("walk", "predict", "quiz")
LANGS = ("en", "zh")
SCHEME = "attnwalk:"
MAX_FILES = 500  # a folder of lessons, not a disk to scan


@dataclass(frozen=True)
class Lesson:
    key: str
    path: Path
    builtin: bool


class Offered:
    """The lessons of one server: built-ins and, with a folder, its *.yaml and *.yml files."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder

    def lessons(self) -> list[Lesson]:
        """The teacher's files first (what the class was sent to do, in view without scrolling past
        every built-in), then the built-ins in course order. A link that leads out of the folder is
        not offered: a teacher shares a folder, not the disk (checked_folder refuses one at the start)."""
        found = []
        if self.folder is not None:
            files = [p for p in self.files() if inside(self.folder, p)]
            found += [Lesson(p.name, p, False) for p in files[:MAX_FILES]]
        return found + [Lesson(name, builtin_path(name), True) for name in course_order()]

    def files(self) -> list[Path]:
        """The folder's *.yaml and *.yml files (through links), wherever a link leads."""
        if self.folder is None:
            return []
        return sorted(p for p in self.folder.iterdir() if p.suffix.lower() in SUFFIXES and p.is_file())

    def find(self, key: str) -> Lesson | None:
        """The lesson `key` names, or None: a built-in's name, or the name of a file directly in the
        folder (never a path: no separator, no '..')."""
        if not key or "/" in key or "\\" in key or key in (".", "..") or "\x00" in key:
            return None
        if Path(key).suffix.lower() not in SUFFIXES:
            path = builtin_path(key)
            return Lesson(key, path, True) if path is not None else None
        if self.folder is None:
            return None
        path = self.folder / key
        return Lesson(key, path, False) if path.is_file() and inside(self.folder, path) else None


def inside(folder: Path, path: Path) -> bool:
    """True when `path`, followed through every link, is a file within `folder` (itself followed)."""
    home, real = os.path.realpath(folder), os.path.realpath(path)
    return real.startswith(home.rstrip(os.sep) + os.sep)


def not_offered(lesson_path: Path, exc: AttnwalkError) -> str:
    """What is said of a teacher's file that does not load, at the start and in the picker: the
    file, the line and that it is no scenario, never the file's own text (its first line would be
    quoted: for a file that is not a lesson at all, someone else's words)."""
    from attnwalk.errors import ScenarioError

    if not isinstance(exc, ScenarioError):
        return str(exc)  # a file that cannot be read: said by its path and kind, nothing of its text
    where = f"{lesson_path}:{exc.line}" if exc.line is not None else str(lesson_path)
    return (f"{where}: not a scenario attnwalk can offer; `attnwalk run {lesson_path}` says what is "
            "wrong there")


def checked_folder(folder: Path) -> Offered:
    """The teacher's folder, every scenario file in it loaded once, so a broken one stops the server
    at its start with the file's line (exit 2) rather than in front of a class."""
    from attnwalk.scenario.load import load_scenario

    if not folder.is_dir():
        raise AttnwalkError(f"--lessons {folder}: no such folder" if not folder.exists()
                            else f"--lessons {folder}: not a folder; give the folder of your scenario files")
    offered = Offered(folder)
    for path in offered.files():
        if not inside(folder, path):
            raise AttnwalkError(f"--lessons {folder}: {path.name} is a link to a file outside the folder; "
                                "serve offers only the folder's own files: copy the lesson in, or "
                                "remove the link")
    own = [lesson for lesson in offered.lessons() if not lesson.builtin]
    if not own:
        raise AttnwalkError(f"--lessons {folder}: no scenario files (*.yaml) in it")
    for lesson in own:
        try:
            load_scenario(str(lesson.path))
        except AttnwalkError as exc:
            raise AttnwalkError(not_offered(lesson.path, exc)) from None
    return offered


# -- what the picker lists ----------------------------------------------------------------------


def rows(offered: Offered, lang: str) -> list[dict[str, object]]:
    """Each lesson as the picker lists it (app/picker.LessonRow's fields); a file that does not
    load, with its problem."""
    from attnwalk.layer.safe import escaped
    from attnwalk.render.lessons import lesson_facts
    from attnwalk.text import pick

    out: list[dict[str, object]] = []
    first = next(iter(course_order()), None)  # the course's first lesson: marked, the picker opens on it
    for lesson in offered.lessons():
        row: dict[str, object] = {"key": lesson.key, "title": "", "facts": "", "about": "", "problem": "",
                                  "own": not lesson.builtin, "start": lesson.builtin and lesson.key == first}
        try:
            scn = load(lesson)
        except AttnwalkError as exc:
            row["problem"] = escaped(not_offered(lesson.path, exc) if not lesson.builtin else str(exc))
        else:
            shape, mask = lesson_facts(scn, lang)
            row.update(title=escaped(pick(scn.title, lang)), facts=f"{shape} · {mask}",
                       about=escaped(pick(scn.description, lang).strip(), keep_newlines=True))
        out.append(row)
    return out


def load(lesson: Lesson):
    """The lesson's scenario: a built-in by its name, as `attnwalk run NAME` loads it; a file of
    the teacher's folder by its path."""
    from attnwalk.scenario.load import load_scenario

    return load_scenario(lesson.key if lesson.builtin else str(lesson.path))


def write_listing(offered: Offered, path: Path) -> None:
    from attnwalk.atomic import PRIVATE, write_whole

    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, json.dumps({lang: rows(offered, lang) for lang in LANGS}, ensure_ascii=False),
                mode=PRIVATE)


def read_listing(path: Path | None, lang: str) -> list[dict[str, object]] | None:
    """The rows of a listing file, or None when there is none to read (then the picker works
    them out itself)."""
    if path is None:
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get(lang)
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, list) else None


def listing_path() -> Path:
    """Where a server keeps its listing while it runs: $XDG_CACHE_HOME/attnwalk (else
    ~/.cache/attnwalk), named for the server's process."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "attnwalk" / f"serve-lessons-{os.getpid()}.json"
