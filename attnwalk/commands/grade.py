"""The body of `attnwalk grade WORKSHEET ANSWERS`: read the worksheet and the class's answers, mark
every answer as the quiz would, and print the class's report (tutor/grade.py, tutor/gradeview.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from attnwalk.errors import UsageError

FORMATS = ("text", "json", "markdown", "csv")


def grade_command(*, worksheet: Path, answers: Path, format: str, lang: str | None,
                  output: str | None, write) -> int:
    """`write(content, json)` prints to stdout (the CLI fits it to stdout's encoding); the text
    report goes to the console, which wraps its tables to the terminal."""
    from attnwalk.text import detect_lang
    from attnwalk.tutor import gradeview
    from attnwalk.tutor.grade import grade
    from attnwalk.tutor.sheetfiles import read_answers, read_worksheet

    fmt = format.strip().lower()
    if fmt not in FORMATS:
        raise UsageError(f"unknown --format '{format}'; choose {', '.join(FORMATS)}")
    lang = detect_lang(lang)
    target = None
    if output is not None:
        from attnwalk.commands.output import output_path

        if fmt == "text":
            raise UsageError("--output writes json, markdown or csv: add --format markdown (or json, csv)")
        target = output_path(output, "--output", f"grades.{'md' if fmt == 'markdown' else fmt}")
    sheet = read_worksheet(worksheet)
    report = grade(sheet, read_answers(answers, len(sheet.questions)), lang)
    if report.note:
        print(f"attnwalk: {report.note}", file=sys.stderr)
    if fmt == "text":
        from attnwalk.terminal.console import make_console

        make_console().print(gradeview.as_view(report, lang))
        return 0
    content = {"json": gradeview.as_json, "markdown": gradeview.as_markdown, "csv": gradeview.as_csv}[fmt](report, lang)
    content = content if content.endswith("\n") else content + "\n"
    if target is not None:
        from attnwalk.commands.output import check_not_input, write_output

        check_not_input(target, "--output")  # never onto the worksheet or the answers
        write_output(target, content, option="--output")
        return 0
    write(content, fmt == "json")
    return 0
