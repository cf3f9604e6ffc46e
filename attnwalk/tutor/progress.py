"""What a learner has done, per scenario: the furthest stage of the walk reached, the stage it was
left at (where --resume starts) and quiz results.

One small JSON file in the user's state directory (see `state_dir`), kept safe by progressfile.py:
read bounded, changed under a lock, a damaged one kept aside, never overwritten. It never stops a
walk or a quiz: a file that cannot be used gives one warning on stderr, then attnwalk goes on
without it.

    {"version": 1,
     "scenarios": {
       "girl_bangs": {                                   # a built-in by name, a file by its path
         "walk": {"stage": 6, "total": 11, "stage_key": "S", "head": 0, "furthest": 8,
                  "furthest_key": "A", "when": "2026-11-29T09:20:00+00:00"},
                  # stage: the last one shown, 0-based index into the walk's steps (render.screens.walk_steps); furthest: the highest
         "quiz": {"last": {"score": 12, "answered": 16, "questions": 16, "full": 16, "when": "…",
                           "seed": null, "missed": ["cell:A:0:1:0", "concept:params"]},
                  "best": {… the best whole quiz …}, "attempts": 3,
                  "mistakes": {"column_softmax": 2, "softmax_axis": 1}}}}}
                  # missed: Question.qid of each wrong answer (quiz --review); mistakes: the
                  # misconceptions wrong answers showed, each with how many quizzes showed it
                  # questions: how many were asked (--count N); full: how many the whole quiz has

A quiz is the best only when it is the whole quiz, every question answered: a `--count 2` run
with both right is not a better quiz than 12 of 16, only a shorter one. Records written before
"full" and "furthest_key" were kept read as before.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attnwalk.atomic import PRIVATE, write_whole
from attnwalk.scenario.files import megabytes
from attnwalk.tutor import progressfile
from attnwalk.tutor.progressfile import LOCK_WAIT, MAX_BYTES, VERSION, Snapshot
from attnwalk.numbering import shown as person

FILE_NAME = "progress.json"


def state_dir(environ: Mapping[str, str] = os.environ, platform: str = sys.platform,
              home: Path | None = None) -> Path:
    """$XDG_STATE_HOME/attnwalk, else the platform's place for an application's own state."""
    xdg = environ.get("XDG_STATE_HOME", "")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore a relative path
        return Path(xdg) / "attnwalk"
    home = home if home is not None else Path.home()
    if platform == "darwin":
        return home / "Library" / "Application Support" / "attnwalk"
    if platform.startswith("win"):
        local = environ.get("LOCALAPPDATA", "")
        return (Path(local) if local else home / "AppData" / "Local") / "attnwalk"
    return home / ".local" / "state" / "attnwalk"


def scenario_key(scenario: Any) -> str:
    """A built-in by its name, a scenario file by its absolute path (two files may share a name)."""
    if scenario.path is None:
        return scenario.name
    if scenario.builtin:
        return Path(scenario.path).stem
    return str(Path(scenario.path).resolve())


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def local_time(when: object) -> str:
    """A time from the file as the learner's local "2026-11-29 10:20": ISO text, as attnwalk
    writes it, or a number of seconds since 1970, as another tool or a hand may; "" if neither."""
    try:
        if isinstance(when, str):
            moment = datetime.fromisoformat(when)
        elif isinstance(when, (int, float)) and not isinstance(when, bool):
            moment = datetime.fromtimestamp(when, timezone.utc)
        else:
            return ""
        return moment.astimezone().strftime("%Y-%m-%d %H:%M")
    except (ValueError, OverflowError, OSError):
        return ""


def _stderr_warning(message: str) -> None:
    """One line on stderr, its paths and names escaped (shown, never obeyed); nothing when stderr
    cannot be written (closed, a full disk): a warning never ends a walk or a quiz."""
    from attnwalk.layer.safe import escaped

    try:
        print(f"attnwalk: warning: {escaped(message)}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


class Progress:
    """The progress file at `path` (default: state_dir()/progress.json)."""

    def __init__(self, path: Path | None = None, warn: Callable[[str], None] = _stderr_warning) -> None:
        self.path = path if path is not None else state_dir() / FILE_NAME
        self._warn = warn
        self._said: set[str] = set()

    def warn(self, message: str) -> None:
        """Say `message` once: one broken file is one warning, however often it is touched (and
        a second only to say where a damaged file was kept)."""
        if message not in self._said:
            self._said.add(message)
            self._warn(message)

    # -- reading and writing ---------------------------------------------------------------

    def read(self) -> Snapshot:
        """The file's records, or why it cannot be used (progressfile.read); no warning."""
        return progressfile.read(self.path)

    def problem(self, snapshot: Snapshot) -> str | None:
        """What a command that only reads says about an unusable file, or None."""
        if snapshot.problem is None:
            return None
        if snapshot.kept_as is not None:
            return (f"the progress file {self.path} {snapshot.problem}; nothing is read from it, and "
                    "it is kept: the next quiz or walk renames it beside itself and starts a new one")
        return f"the progress file {self.path} {snapshot.problem}"

    def load(self) -> dict[str, dict]:
        """Every scenario's record; empty when there is no file or it cannot be used (one warning)."""
        snapshot = self.read()
        problem = self.problem(snapshot)
        if problem:
            self.warn(problem)
        return snapshot.scenarios

    def change(self, change: Callable[[dict[str, dict]], None]) -> bool:
        """Read the file afresh under its lock, let `change` change the records, write them back
        whole. A damaged file is renamed aside first (the warning says where); a file that cannot
        be used otherwise (not a regular file, too large, unreadable) is left as it is, unsaved."""
        path = progressfile.target(self.path)
        with progressfile.locked(progressfile.lock_file(self.path)) as held:
            if not self._held(held):
                return False
            snapshot = progressfile.read(path)
            if snapshot.problem is not None and snapshot.kept_as is None:
                self.warn(f"the progress file {self.path} {snapshot.problem}")
                return False
            if snapshot.kept_as is not None and not self._keep(path, snapshot):
                return False
            change(snapshot.scenarios)
            return self._save(path, snapshot.scenarios)

    def _held(self, held: bool) -> bool:
        if not held:
            self.warn(f"the progress file {self.path} was held by another attnwalk for more than "
                      f"{LOCK_WAIT:g} s; this progress is not saved")
        return held

    def _keep(self, path: Path, snapshot: Snapshot) -> bool:
        """Rename the damaged file aside and say where; False (and the file left as it is) when
        it cannot be renamed."""
        try:
            kept = progressfile.keep(path, snapshot)
        except FileNotFoundError:  # gone meanwhile: nothing left to keep
            return True
        except OSError as exc:
            self.warn(f"the progress file {self.path} {snapshot.problem}, and cannot be renamed to keep "
                      f"it ({_reason(exc)}); it is left as it is and this progress is not saved")
            return False
        self.warn(f"the progress file {self.path} {snapshot.problem}; it is kept as {kept}, and a new "
                  "one is started")
        return True

    def _save(self, path: Path, scenarios: dict[str, dict]) -> bool:
        """Write every record whole (atomic.write_whole): never half a file. The learner's own, so
        readable by the learner alone."""
        text = json.dumps({"version": VERSION, "scenarios": scenarios}, ensure_ascii=False, indent=2) + "\n"
        if len(text.encode("utf-8")) > MAX_BYTES:  # it could not be read back
            self.warn(f"progress would be more than the {megabytes(MAX_BYTES)} a progress file may be; "
                      f"not saved to {self.path} (attnwalk reset NAME forgets a scenario)")
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_whole(path, text, mode=PRIVATE)
            return True
        except OSError as exc:
            self.warn(f"cannot save progress to {self.path} ({_reason(exc)}); going on without it")
            return False

    def update(self, key: str, change: Callable[[dict], None]) -> bool:
        """Change one scenario's record (made empty if there is none), under the lock."""
        return self.change(lambda scenarios: change(scenarios.setdefault(key, {})))

    # -- what is recorded ------------------------------------------------------------------

    def record_stage(self, key: str, index: int, steps: list, when: str | None = None,
                     reached: int | None = None) -> bool:
        """The walk of scenario `key` was left at steps[index] (steps: render.screens.walk_steps),
        having reached steps[reached] on the way (a learner who went to Z and back to E has
        reached Z); `reached` defaults to `index`."""
        stage, head = steps[index]
        reached = index if reached is None else max(index, min(reached, len(steps) - 1))

        def change(record: dict) -> None:
            old = record.get("walk") if isinstance(record.get("walk"), dict) else {}
            furthest = old.get("furthest") if isinstance(old.get("furthest"), int) else -1
            furthest_key = old.get("furthest_key")
            if reached >= furthest or furthest >= len(steps):  # further, or the file lost stages
                furthest, furthest_key = reached, steps[reached][0].key
            record["walk"] = {"stage": index, "total": len(steps), "stage_key": stage.key,
                              "head": head, "furthest": furthest, "when": when or now()}
            if isinstance(furthest_key, str):
                record["walk"]["furthest_key"] = furthest_key

        return self.update(key, change)

    def record_quiz(self, key: str, score: int, answered: int, questions: int,
                    when: str | None = None, full: int | None = None, seed: int | None = None,
                    missed: tuple[str, ...] = (), shown: tuple[str, ...] = ()) -> bool:
        """A quiz of `questions` questions (of `full` in the whole quiz; --count asks fewer)
        ended with `score` right out of `answered`. `seed` and `missed` (the questions answered
        wrong, by Question.qid) let --review ask those again; `shown` (the misconceptions the
        wrong answers showed) is counted into the record's "mistakes"."""
        full = questions if full is None else full
        result = {"score": score, "answered": answered, "questions": questions, "full": full,
                  "when": when or now(), "seed": seed, "missed": list(missed)}

        def change(record: dict) -> None:
            old = record.get("quiz") if isinstance(record.get("quiz"), dict) else {}
            best = old.get("best") if isinstance(old.get("best"), dict) else None
            if _whole(result) and (best is None or not _whole(best) or _short(best, full)
                                   or _fraction(result) > _fraction(best)):
                best = result
            attempts = old.get("attempts") if isinstance(old.get("attempts"), int) else 0
            counts = old.get("mistakes") if isinstance(old.get("mistakes"), dict) else {}
            counts = {k: v for k, v in counts.items() if isinstance(v, int)}
            for name in shown:
                counts[name] = counts.get(name, 0) + 1
            record["quiz"] = {"last": result, "best": best, "attempts": attempts + 1, "mistakes": counts}

        return self.update(key, change)

    def last_quiz(self, key: str) -> dict:
        """The last quiz of scenario `key` as recorded (empty if none): its seed and missed."""
        quiz = self.load().get(key, {}).get("quiz")
        last = quiz.get("last") if isinstance(quiz, dict) else None
        return last if isinstance(last, dict) else {}

    def resume_index(self, key: str, steps: list) -> int | None:
        """Where the walk of `key` was left, as an index into `steps`; None if never walked.

        The same stage and head when the scenario still has it (a file may have been edited
        since), else the saved index within range."""
        walk = self.load().get(key, {}).get("walk")
        if not isinstance(walk, dict):
            return None
        for i, (stage, head) in enumerate(steps):
            if stage.key == walk.get("stage_key") and head == walk.get("head"):
                return i
        index = walk.get("stage")
        return min(max(index, 0), len(steps) - 1) if isinstance(index, int) else None

    def reset(self, key: str | None = None) -> int:
        """Forget scenario `key` (or everything); returns how many scenarios were forgotten.
        Everything is forgotten by removing the file a link points to (the link stays, and the
        next save writes through it); a damaged file is kept aside instead."""
        if key is not None:
            forgotten = []
            saved = self.change(lambda scenarios: forgotten.append(scenarios.pop(key, None)))
            return 1 if saved and forgotten and forgotten[0] is not None else 0
        path = progressfile.target(self.path)
        with progressfile.locked(progressfile.lock_file(self.path)) as held:
            if not self._held(held):
                return 0
            snapshot = progressfile.read(path)
            if snapshot.problem is not None:
                if snapshot.kept_as is None:
                    self.warn(f"the progress file {self.path} {snapshot.problem}")
                else:
                    self._keep(path, snapshot)
                return 0
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                self.warn(f"cannot remove {self.path} ({_reason(exc)})")
                return 0
            return len(snapshot.scenarios)


def _whole(result: dict) -> bool:
    """Every question of the whole quiz answered (not stopped early, not --count N of them)."""
    questions = result.get("questions")
    return result.get("answered") == questions and result.get("full", questions) == questions


def _short(best: dict, full: int) -> bool:
    """A best saved before "full" was kept, with fewer questions than the whole quiz: a --count run."""
    questions = best.get("questions")
    return "full" not in best and isinstance(questions, int) and questions < full


def _fraction(result: dict) -> float:
    try:
        return result["score"] / result["answered"]
    except (KeyError, TypeError, ZeroDivisionError):
        return -1.0


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


# -- the walk's side: `run --resume` and remembering where the learner left off -------------------


def resume_start(scenario: Any, steps: list, lang: str, store: Progress | None = None) -> tuple[int, str]:
    """The step to start at for --resume, and a line saying so in `lang`."""
    from attnwalk.text import text

    tx = text(lang)
    index = (store or Progress()).resume_index(scenario_key(scenario), steps)
    if index is None:
        return 0, tx.t("progress.no_resume", name=scenario.name)
    return index, tx.t("progress.resume", index=person(index), count=len(steps))


def remember_stage(scenario: Any, steps: list, index: int, store: Progress | None = None,
                   reached: int | None = None) -> None:
    (store or Progress()).record_stage(scenario_key(scenario), index, steps, reached=reached)
