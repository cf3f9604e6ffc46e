"""`attnwalk progress` and `attnwalk reset`: the progress file shown as a table, and cleared."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attnwalk.text import MissingTextError, text
from attnwalk.tutor.progress import Progress, local_time

FIRST_LESSON = "girl_bangs"


def progress_view(lang: str, store: Progress | None = None) -> RenderableType:
    """One row per scenario: the furthest stage reached, where --resume starts, the last and the
    best quiz, when."""
    store = store or Progress()
    tx = text(lang)
    scenarios = store.load()
    where = Text(tx.t("progress.file", path=store.path), style="dim")
    if not scenarios:
        return Group(Text(tx.t("progress.none", name=FIRST_LESSON)), where)
    table = Table(title=tx.t("progress.title"), title_justify="left")
    for key in ("scenario", "stage", "resume_at", "quiz", "best", "when"):
        table.add_column(tx.t(f"progress.{key}"), overflow="fold")
    table.add_column(tx.t("quiz.review.column"), overflow="fold")
    for name, record in sorted(scenarios.items()):
        walk = _dict(record.get("walk"))
        quiz = _dict(record.get("quiz"))
        times = [t for t in (walk.get("when"), _dict(quiz.get("last")).get("when")) if t]
        table.add_row(name, _furthest(walk), _stage(walk), _score(_dict(quiz.get("last")), tx),
                      _score(_dict(quiz.get("best")), tx), local_time(max(times)) if times else "",
                      _mistakes(_dict(quiz.get("mistakes")), tx))
    return Group(table, where)


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _stage(walk: dict, index_field: str = "stage", key_field: str = "stage_key") -> str:
    """"2 / 11 (E)": a stage of the walk, counted from 1 as the walk shows it."""
    index, total = walk.get(index_field), walk.get("total")
    if not isinstance(index, int) or not isinstance(total, int):
        return ""
    key = walk.get(key_field)
    return f"{index + 1} / {total}" + (f" ({key})" if isinstance(key, str) else "")


def _furthest(walk: dict) -> str:
    """The furthest stage reached (a record from before "furthest" was kept knows only the last)."""
    furthest = walk.get("furthest")
    if not isinstance(furthest, int) or furthest == walk.get("stage"):
        return _stage(walk)
    return _stage(walk, "furthest", "furthest_key")


def _score(result: dict, tx) -> str:
    """"12 / 16", or "2 / 2 (of 16 questions)" for a quiz stopped early or cut short by --count."""
    score, answered, questions = (result.get(k) for k in ("score", "answered", "questions"))
    if not all(isinstance(v, int) for v in (score, answered, questions)):
        return ""
    full = result.get("full")
    whole = max(questions, full) if isinstance(full, int) else questions
    if answered < whole:
        return tx.t("progress.stopped", score=score, answered=answered, questions=whole)
    return f"{score} / {answered}"


def _mistakes(counts: dict, tx) -> str:
    """The misconceptions quizzes showed, most often first: "softmax down the column ×2"."""
    shown = sorted(((n, name) for name, n in counts.items() if isinstance(n, int) and n > 0),
                   key=lambda item: -item[0])
    out = []
    for n, name in shown:
        try:
            label = tx.t(f"quiz.mistake_name.{name}")
        except MissingTextError:  # a name from a later version of attnwalk: show it as saved
            label = name
        out.append(label + (f" ×{n}" if n > 1 else ""))
    return tx.t("ui.list_sep").join(out)


def reset_progress(name: str | None, lang: str, store: Progress | None = None) -> str:
    """Forget everything, or one scenario named as a built-in or as a file path; says what it did."""
    store = store or Progress()
    tx = text(lang)
    if name is None:
        return tx.t("progress.cleared_all", count=store.reset())
    scenarios = store.load()
    key = name if name in scenarios else str(Path(name).expanduser().resolve())
    if key not in scenarios:
        return tx.t("progress.nothing", name=name)
    store.reset(key)
    return tx.t("progress.cleared_one", name=name)
