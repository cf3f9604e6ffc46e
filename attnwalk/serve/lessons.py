"""The lessons a server offers: the built-ins, then the scenario files of the teacher's folder
(`serve --lessons DIR`), each known by a key: a built-in's name, a file's name with its .yaml.

A key is all that travels from the picker to the session and on to an activity's command line, and
each of them looks it up here again: a key that names no offered lesson is refused, so no path a
student could type ever reaches a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnwalk.errors import AttnwalkError
from attnwalk.scenario.builtins import builtin_names, builtin_path

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
        found = [Lesson(name, builtin_path(name), True) for name in builtin_names()]
        if self.folder is not None:
            files = sorted(p for p in self.folder.iterdir() if p.suffix.lower() in SUFFIXES and p.is_file())
            found += [Lesson(p.name, p, False) for p in files[:MAX_FILES]]
        return found

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
        return Lesson(key, path, False) if path.is_file() else None


def checked_folder(folder: Path) -> Offered:
    """The teacher's folder, every scenario file in it loaded once, so a broken one stops the server
    at its start with the file's line (exit 2) rather than in front of a class."""
    from attnwalk.scenario.model import load_scenario

    if not folder.is_dir():
        raise AttnwalkError(f"--lessons {folder}: no such folder" if not folder.exists()
                            else f"--lessons {folder}: not a folder; give the folder of your scenario files")
    offered = Offered(folder)
    own = [lesson for lesson in offered.lessons() if not lesson.builtin]
    if not own:
        raise AttnwalkError(f"--lessons {folder}: no scenario files (*.yaml) in it")
    for lesson in own:
        load_scenario(str(lesson.path))  # raises ScenarioError: file:line: field: what was expected
    return offered
