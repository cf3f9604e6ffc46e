"""A graded class shown: Rich tables for the terminal, Markdown, CSV (a row a student, for the
gradebook) and the JSON contract (README "For teachers").

Student names and answers come from the teacher's file: they are shown, never obeyed (layer.safe),
and in the JSON written with \\u escapes for what a terminal would act on.
"""

from __future__ import annotations

import csv
import io
import json

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attnwalk.layer.safe import UNSAFE, escaped, spreadsheet_cell
from attnwalk.text import MissingTextError, text
from attnwalk.tutor.grade import ClassReport, StudentResult


def label(name: str, lang: str) -> str:
    """A misconception's name in words; a name this attnwalk does not know, as it is."""
    try:
        return text(lang).t(f"quiz.mistake_name.{name}")
    except MissingTextError:
        return name


def as_data(report: ClassReport, lang: str = "en") -> dict:
    return {
        "scenario": report.scenario, "seed": report.seed,
        "students": [{"student": s.student, "score": s.score, "of": s.of, "mistakes": s.mistakes,
                      "unread": [{"question": n, "answer": a, "reason": r} for n, a, r in s.unread]}
                     for s in report.students],
        "questions": [{"number": q.number, "topic": q.topic, "right": q.right, "answered": q.answered}
                      for q in report.questions],
        # the grid, a cell a student and question: "mistake" names what a wrong answer shows
        # (names joined by ";" where a wrong option covers several), null where it shows none
        "answers": [{"student": s.student, "question": a.question, "answer": a.answer, "right": a.right,
                     "mistake": ";".join(a.shown) or None} for s in report.students for a in s.answers],
        "mistakes": [{"name": m.name, "label": label(m.name, lang), "students": m.students,
                      "questions": m.questions} for m in report.mistakes],
    }


def as_json(report: ClassReport, lang: str = "en") -> str:
    out = json.dumps(as_data(report, lang), ensure_ascii=False, indent=2)
    # what a terminal would obey is only ever inside strings (json escapes their line breaks)
    return UNSAFE.sub(lambda m: m.group() if m.group() == "\n" else f"\\u{ord(m.group()):04x}", out)


def _shown(student: StudentResult, lang: str) -> str:
    """"forgot to divide by √d_k ×2; softmax down the column": most often first, joined by a
    separator no label holds (labels have commas in them)."""
    ranked = sorted(student.mistakes.items(), key=lambda item: (-item[1], item[0]))
    return _joined([label(name, lang) + (f" ×{n}" if n > 1 else "") for name, n in ranked], lang)


def _joined(labels: list[str], lang: str) -> str:
    return text(lang).t("grade.mistake_sep").join(labels)


def _cell(answer, lang: str) -> str:
    """A cell of the grid: "✓ 0.1089", "✗ 0.0252 (forgot to divide by √d_k)", "—" unanswered."""
    if not answer.answered:
        return "—"
    given = escaped(answer.answer)
    if answer.right:
        return f"✓ {given}"
    shown = f" ({_joined([label(n, lang) for n in answer.shown], lang)})" if answer.shown else ""
    return f"✗ {given}{shown}"


def _grid(report: ClassReport, lang: str):
    """Student × question: each answer as given, right or wrong, and the misconception it shows."""
    tx = text(lang)
    header = [tx.t("grade.student")] + [str(q.number) for q in report.questions]
    return header, [[escaped(s.student)] + [_cell(a, lang) for a in s.answers] for s in report.students]


def _numbers(numbers: list[int], lang: str) -> str:
    return text(lang).t("ui.list_sep").join(map(str, numbers))


def _title(report: ClassReport, lang: str) -> str:
    tx = text(lang)
    seed = tx.t("grade.seed", seed=report.seed) if report.seed is not None else ""
    return tx.t("grade.title", scenario=escaped(report.scenario) or "?", seed=seed,
                students=len(report.students), questions=len(report.questions))


def _rows(report: ClassReport, lang: str):
    """The three tables' headers and rows, as strings: students, questions, misconceptions."""
    tx = text(lang)
    total = len(report.students)
    students = ([tx.t("grade.student"), tx.t("grade.score"), tx.t("grade.mistakes")],
                [[escaped(s.student), f"{s.score} / {s.of}", _shown(s, lang)] for s in report.students])
    questions = ([tx.t("grade.question"), tx.t("grade.topic"), tx.t("grade.right"), tx.t("grade.answered"),
                  tx.t("grade.answer")],
                 [[str(q.number), escaped(q.topic), tx.t("grade.of_class", count=q.right, total=total),
                   tx.t("grade.of_class", count=q.answered, total=total), escaped(q.answer)]
                  for q in report.questions])
    mistakes = ([tx.t("grade.misconception"), tx.t("grade.how_many"), tx.t("grade.on")],
                [[label(m.name, lang), tx.t("grade.of_class", count=m.students, total=total),
                  _numbers(m.questions, lang)] for m in report.mistakes])
    return students, questions, mistakes


def _unread(report: ClassReport, lang: str) -> list[str]:
    tx = text(lang)
    return [tx.t("grade.unread", student=escaped(s.student), number=n, answer=escaped(a), reason=r)
            for s in report.students for n, a, r in s.unread]


def as_view(report: ClassReport, lang: str = "en") -> RenderableType:
    """The report for a terminal: what to teach again first, then the questions, then each student."""
    tx = text(lang)
    students, questions, mistakes = _rows(report, lang)
    parts: list[RenderableType] = [Text(_title(report, lang), style="bold"), Text("")]
    if report.mistakes:
        parts.append(_table(tx.t("grade.teach"), *mistakes, numeric=(1,)))
    else:
        parts.append(Text(tx.t("grade.no_mistakes")))
    parts += [Text(""), _table(tx.t("grade.questions"), *questions, numeric=(2, 3)), Text(""),
              _table(tx.t("grade.students"), *students, numeric=(1,))]
    unread = _unread(report, lang)
    if unread:
        parts += [Text(""), Text(tx.t("grade.unread_title"), style="bold")]
        parts += [Text(f"  {line}") for line in unread]
    return Group(*parts)


def _table(title: str, header: list[str], rows: list[list[str]], numeric: tuple[int, ...]) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold")
    for i, name in enumerate(header):
        table.add_column(name, overflow="fold", justify="right" if i in numeric else "left")
    for row in rows:
        table.add_row(*row)
    return table


def as_markdown(report: ClassReport, lang: str = "en") -> str:
    tx = text(lang)
    students, questions, mistakes = _rows(report, lang)
    lines = [f"# {_title(report, lang)}", ""]
    sections = [(tx.t("grade.teach"), mistakes), (tx.t("grade.questions"), questions),
                (tx.t("grade.students"), students), (tx.t("grade.answers"), _grid(report, lang))]
    for title, (header, rows) in sections:
        lines += [f"## {title}", ""]
        if not rows:
            lines += [tx.t("grade.no_mistakes"), ""]
            continue
        lines += [_md_row(header), "| " + " | ".join("---" for _ in header) + " |"]
        lines += [_md_row(row) for row in rows] + [""]
    unread = _unread(report, lang)
    if unread:
        lines += [f"## {tx.t('grade.unread_title')}", ""] + [f"- {line}" for line in unread] + [""]
    return "\n".join(lines)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("\\", "\\\\").replace("|", "\\|") for cell in cells) + " |"


def as_csv(report: ClassReport, lang: str = "en") -> str:
    """A row a student: name, score, of, then how many questions showed each misconception (the
    class's order, most common first), for pasting beside the class list; then the grid: each
    question's answer as given and whether it was right (1, 0, empty when unanswered)."""
    tx = text(lang)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    # Text cells (the header, a student's name, an answer) go through spreadsheet_cell: a name such
    # as =HYPERLINK(...) or -2+3 is shown, not computed; the counts are numbers, written as they are.
    writer.writerow([spreadsheet_cell(cell) for cell in [tx.t("grade.student"), tx.t("grade.score"), tx.t("grade.of")]
                     + [escaped(label(m.name, lang)) for m in report.mistakes]
                     + [name for q in report.questions
                        for name in (tx.t("grade.csv_answer", number=q.number), tx.t("grade.csv_right", number=q.number))]])
    for s in report.students:
        grid = [cell for a in s.answers
                for cell in (spreadsheet_cell(escaped(a.answer)), int(a.right) if a.answered else "")]
        writer.writerow([spreadsheet_cell(escaped(s.student)), s.score, s.of]
                        + [s.mistakes.get(m.name, 0) for m in report.mistakes] + grid)
    return out.getvalue()
