"""`attnwalk progress` and `attnwalk reset`: the progress file shown as a table, and cleared."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from attnwalk.errors import UsageError
from attnwalk.text import MissingTextError, text
from attnwalk.tutor.progress import Progress, local_time
from attnwalk.numbering import shown as person

FIRST_LESSON = "girl_bangs"


def progress_view(lang: str, store: Progress | None = None) -> RenderableType:
    """One row per scenario: the furthest stage reached, where --resume starts, the last and the
    best quiz, when, and the mistakes quizzes showed. A file that cannot be used is a UsageError
    (exit 2): one line saying why, and that it is kept."""
    store = store or Progress()
    tx = text(lang)
    snapshot = store.read()
    problem = store.problem(snapshot)
    if problem:  # showing the file is the command's whole job: it cannot be done
        raise UsageError(problem)
    scenarios = snapshot.scenarios
    where = Text(tx.t("progress.file", path=store.path), style="dim")
    if not scenarios:
        return Group(Text(tx.t("progress.none", name=FIRST_LESSON)), where)
    return Group(_Records(tx, [_record(name, record, tx) for name, record in sorted(scenarios.items())]),
                 where)


_FIELDS = ("stage", "resume_at", "quiz", "best", "when")
_NAME_WIDTH = 30
_UNBOUNDED = 10_000  # a width no row reaches: the table measured as it would be, not as it must


def _record(name: str, record: dict, tx) -> tuple[str, list[str], list[str]]:
    """(scenario, its cells in _FIELDS order, the mistakes its quizzes showed)."""
    walk = _dict(record.get("walk"))
    quiz = _dict(record.get("quiz"))
    # the later of the two times, each as the learner's local time; a time the file holds as
    # something else than ISO text (edited by hand, another tool) is left out, not compared
    times = sorted(t for t in (local_time(walk.get("when")), local_time(_dict(quiz.get("last")).get("when"))) if t)
    cells = [_furthest(walk), _stage(walk), _score(_dict(quiz.get("last")), tx),
             _score(_dict(quiz.get("best")), tx), times[-1] if times else ""]
    return name, cells, _mistakes(_dict(quiz.get("mistakes")), tx)


class _Records:
    """A table when every cell fits on one line at the terminal's width; narrower (80 columns
    holds about 60 characters of cells among seven columns, and "2 / 2 (of 16 questions)" alone is
    23), one block per scenario, a label and its value a line, so no short phrase is broken."""

    def __init__(self, tx, records: list[tuple[str, list[str], list[str]]]) -> None:
        self.tx, self.records = tx, records

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self._table()
        natural = Measurement.get(console, options.update_width(_UNBOUNDED), table).maximum
        if natural <= options.max_width:
            yield table
            return
        yield Text(self.tx.t("progress.title"), style="italic")
        for name, cells, mistakes in self.records:
            yield Text("")
            yield Text(name, style="bold", overflow="fold")  # a file's path may be longer than a line
            grid = Table.grid(padding=(0, 2))
            grid.add_column(no_wrap=True, style="dim")
            grid.add_column(overflow="fold")
            for key, cell in zip(_FIELDS, cells):
                if cell:
                    grid.add_row(self.tx.t(f"progress.{key}"), Text(cell))
            for i, mistake in enumerate(mistakes):  # one a line: a list of them wraps anywhere
                grid.add_row(self.tx.t("quiz.review.column") if i == 0 else "", Text(mistake))
            yield Padding(grid, (0, 0, 0, 2), expand=False)
        yield Text("")

    def _table(self) -> Table:
        table = Table(title=self.tx.t("progress.title"), title_justify="left")
        # a file's absolute path would claim a line's width by itself: it folds in its column
        table.add_column(self.tx.t("progress.scenario"), overflow="fold", max_width=_NAME_WIDTH)
        for key in _FIELDS:
            table.add_column(self.tx.t(f"progress.{key}"), overflow="fold")
        table.add_column(self.tx.t("quiz.review.column"), overflow="fold")
        for name, cells, mistakes in self.records:  # Text: a path's "[" is not Rich markup
            table.add_row(*(Text(cell) for cell in (name, *cells, "\n".join(mistakes))))  # mistakes one a line
        return table


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _stage(walk: dict, index_field: str = "stage", key_field: str = "stage_key") -> str:
    """"2 / 11 (E)": a stage of the walk, counted from 1 as the walk shows it."""
    index, total = walk.get(index_field), walk.get("total")
    if not isinstance(index, int) or not isinstance(total, int):
        return ""
    key = walk.get(key_field)
    return f"{person(index)} / {total}" + (f" ({key})" if isinstance(key, str) else "")


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


def _mistakes(counts: dict, tx) -> list[str]:
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
    return out


def reset_question(lang: str, store: Progress | None = None) -> str | None:
    """What `reset` without a name asks before it forgets every scenario it names; None when
    nothing is saved, so there is nothing to ask about."""
    names = sorted((store or Progress()).load())
    if not names:
        return None
    return text(lang).t("reset.question", names=text(lang).t("ui.list_sep").join(names))


# y or yes in any case, and the answers a Chinese learner types (是, 好, 对, 确定); the rest is no.
_YES = {"y", "yes", "是", "是的", "好", "对", "确定"}


def confirmed(answer: str) -> bool:
    return answer.strip().lower() in _YES


def reset_progress(name: str | None, lang: str, store: Progress | None = None) -> str:
    """Forget everything, or one scenario named as a built-in or as a file path; says what it did."""
    store = store or Progress()
    tx = text(lang)
    if name is None:
        count = store.reset()
        return tx.t("progress.cleared_all", count=count) if count else tx.t("reset.empty")
    scenarios = store.load()
    key = name if name in scenarios else str(Path(name).expanduser().resolve())
    if key not in scenarios:
        return tx.t("progress.nothing", name=name)
    store.reset(key)
    return tx.t("progress.cleared_one", name=name)
