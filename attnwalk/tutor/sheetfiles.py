"""Reading what `attnwalk grade` marks: the worksheet as `quiz --format json` wrote it, and a
class's answers as a spreadsheet exports them (CSV, a header `student,1,2,…`, a row a student).

Everything that does not fit ends in one line naming the file, the line and the column: in the
worksheet the character column, in the CSV the cell, counted from 1 as a spreadsheet counts them.
Both files are read only when they are regular files of a bounded size (scenario.files.open_regular),
so a FIFO, a device or a huge file is refused before anything is read.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import json.scanner
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from attnwalk.errors import AttnwalkError
from attnwalk.scenario.files import NotAFileError, megabytes, open_regular, read_capped
from attnwalk.tutor.quiz import Question
from attnwalk.tutor.worksheet import VERSION, ItemError, question_from_item

MAX_SHEET = 4 * 1024 * 1024  # a worksheet of 100 questions is ~100 KB
MAX_ANSWERS = 16 * 1024 * 1024
MAX_STUDENTS = 10_000  # a lecture hall, many times over; judging stays within seconds


class SheetError(AttnwalkError):
    """A worksheet or answers file that cannot be graded: file:line:column: what was expected."""

    def __init__(self, file: str, detail: str, line: int | None = None, col: int | None = None) -> None:
        where = file if line is None else f"{file}:{line}:{col or 1}"
        super().__init__(f"{where}: {detail}")


@dataclass(frozen=True)
class Worksheet:
    scenario: str
    seed: int | None
    lang: str
    questions: tuple[Question, ...]  # question number i is questions[i - 1]


@dataclass(frozen=True)
class Answers:
    numbers: tuple[int, ...]  # the header's question numbers, from 1, in the header's order
    rows: tuple[tuple[str, tuple[str, ...]], ...]  # (student, one cell per header question)
    note: str = ""  # how the file was read, when that is worth saying (not UTF-8)


# -- the worksheet ----------------------------------------------------------------------------


def read_worksheet(path: Path, file: str | None = None) -> Worksheet:
    file = file or str(path)
    text = _utf8(_read(path, MAX_SHEET, file, "worksheet"), file)
    decoder = _LocatedDecoder()
    try:
        # The C parser first: it meets JSON nested 100,000 deep in milliseconds (RecursionError)
        # where the located, pure-Python one below would take seconds; a worksheet is 4 deep.
        json.loads(text, parse_constant=str)
        data = decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise SheetError(file, f"not a worksheet's JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise SheetError(file, "not a worksheet's JSON: it is nested too deeply to read (a worksheet's "
                         "JSON is a few levels deep)") from None
    at = decoder.locator(text, file)
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise at(data, None, "expected a worksheet: the JSON `attnwalk quiz NAME --format json` prints")
    version = data.get("version")
    if version != VERSION:
        again = "; print it again with `attnwalk quiz NAME --seed N --format json`"
        if version is None:
            raise at(data, None, f"this worksheet has no version: an older attnwalk wrote it{again}")
        raise at(data, "version", f"this worksheet is version {json.dumps(version)}; this attnwalk "
                 f"grades version {VERSION}{again}")
    questions = []
    for number, item in enumerate(data["questions"], 1):
        try:
            questions.append(question_from_item(item))
        except ItemError as exc:
            field = f" {exc.field}:" if exc.field else ""
            raise at(item, exc.field or None, f"question {number}:{field} {exc}") from None
    if not questions:
        raise at(data, "questions", "the worksheet has no questions")
    seed, scenario, lang = data.get("seed"), data.get("scenario"), data.get("lang")
    return Worksheet(scenario if isinstance(scenario, str) else "",
                     seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                     lang if lang in ("en", "zh") else "en", tuple(questions))


class _LocatedDecoder(json.JSONDecoder):
    """The standard decoder on its pure-Python scanner, noting where each object and array
    starts and ends, so a field's mistake can be pointed at (json keeps no positions)."""

    def __init__(self) -> None:
        super().__init__(parse_constant=str)  # NaN stays the word "NaN": no number, so refused
        self.spans: dict[int, tuple[int, int]] = {}
        self._keep: list[object] = []  # the located values stay alive, so their ids stay theirs
        parse_object, parse_array = self.parse_object, self.parse_array

        def located(parse):
            def wrapper(s_and_end, *args):
                value, end = parse(s_and_end, *args)
                self.spans[id(value)] = (s_and_end[1] - 1, end)
                self._keep.append(value)
                return value, end
            return wrapper

        self.parse_object, self.parse_array = located(parse_object), located(parse_array)
        self.scan_once = json.scanner.py_make_scanner(self)

    def locator(self, text: str, file: str):
        """at(container, key, detail): a SheetError at `key` of `container` (the container itself
        when key is None or not found)."""

        def at(container: object, key: str | None, detail: str) -> SheetError:
            start, end = self.spans.get(id(container), (0, 0))
            pos = start
            if key and isinstance(container, dict):
                inner = [self.spans[id(v)] for v in container.values() if id(v) in self.spans]
                for match in re.finditer(rf'"{re.escape(key)}"\s*:', text[start:end]):
                    if not any(a <= start + match.start() < b for a, b in inner):
                        pos = start + match.start()
                        break
            line = text.count("\n", 0, pos) + 1
            return SheetError(file, detail, line, pos - (text.rfind("\n", 0, pos) + 1) + 1)

        return at


# -- the answers --------------------------------------------------------------------------------


_NUMBER = re.compile(r"(?:q|#|第)?\s*(\d+)\s*(?:题)?", re.IGNORECASE)


def read_answers(path: Path, questions: int, file: str | None = None) -> Answers:
    """The class's answers to a worksheet of `questions` questions: one row a student, a cell a
    question (the header says which), empty cells unanswered. Rows that are empty are skipped."""
    file = file or str(path)
    text, note = _csv_text(_read(path, MAX_ANSWERS, file, "answers file"), file)
    lines = text.splitlines(keepends=True)
    skip = 0
    sep = re.fullmatch(r"sep=(.)\r?\n?", lines[0]) if lines else None  # Excel's delimiter hint
    if sep:
        skip = 1
    delimiter = sep[1] if sep else _delimiter(lines[0] if lines else "")
    reader = csv.reader(io.StringIO("".join(lines[skip:]), newline=""), delimiter=delimiter)
    records = _records(reader, file, skip)
    header_line, header = next(records, (1 + skip, None))
    if not header or not any(cell.strip() for cell in header):
        raise SheetError(file, "expected a header: student,1,2,… (the question numbers)", header_line, 1)
    numbers, blank = _header(header, questions, file, header_line)
    width = len(header)
    rows: list[tuple[str, tuple[str, ...]]] = []
    seen: dict[str, int] = {}
    for line, cells in records:
        if not any(cell.strip() for cell in cells):
            continue  # an empty row, as a spreadsheet exports one
        if len(cells) == width - blank:  # the empty columns left off: the same row
            cells = cells + [""] * blank
        if len(cells) != width:
            raise SheetError(file, f"this row has {len(cells)} cells, the header {width} (the student "
                             f"and {len(numbers)} questions)", line, min(len(cells), width) + 1)
        for col in range(width - blank, width):
            if cells[col].strip():
                raise SheetError(file, "a cell under an empty header cell: give the column a "
                                 "question number, or empty it", line, col + 1)
        student = cells[0].strip()
        if not student:
            raise SheetError(file, "no student's name in the first cell", line, 1)
        if student in seen:
            raise SheetError(file, f"{student} is already on line {seen[student]}: one row a student",
                             line, 1)
        seen[student] = line
        if len(rows) == MAX_STUDENTS:
            raise SheetError(file, f"more than {MAX_STUDENTS:,} students; grade a class at a time", line, 1)
        rows.append((student, tuple(cell.strip() for cell in cells[1:width - blank])))
    if not rows:
        raise SheetError(file, "no student's answers below the header", header_line + 1, 1)
    return Answers(numbers, tuple(rows), note)


def _records(reader, file: str, skip: int):
    """(line, cells) for each record; the line is where the record starts."""
    while True:
        start = reader.line_num + 1 + skip
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise SheetError(file, f"not readable as CSV: {exc}", reader.line_num + skip, 1) from None
        yield start, cells


def _header(header: list[str], questions: int, file: str, line: int) -> tuple[tuple[int, ...], int]:
    """The question numbers of the header's cells after the first, and how many empty cells end it."""
    cells = list(header)
    blank = 0
    while len(cells) > 1 and not cells[-1].strip():
        cells.pop()
        blank += 1
    if not cells[0].strip() or _question(cells[0]) is not None:
        raise SheetError(file, "the first column is the student's name: start the header with "
                         "student, then the question numbers", line, 1)
    numbers: list[int] = []
    for col, cell in enumerate(cells[1:], 2):
        number = _question(cell)
        if number is None:
            raise SheetError(file, f"expected a question number (1–{questions}), got {cell.strip()!r}",
                             line, col)
        if not 1 <= number <= questions:
            raise SheetError(file, f"question {number}: the worksheet has {questions} questions "
                             f"(1–{questions})", line, col)
        if number in numbers:
            raise SheetError(file, f"question {number} has two columns", line, col)
        numbers.append(number)
    if not numbers:
        raise SheetError(file, "the header names no question: student,1,2,…", line, 2)
    return tuple(numbers), blank


def _question(cell: str) -> int | None:
    match = _NUMBER.fullmatch(unicodedata.normalize("NFKC", cell).strip())
    return int(match[1]) if match else None


def _delimiter(first: str) -> str:
    """The header's separator: a comma, else the semicolon of a spreadsheet set to a decimal
    comma, else the tab of a "text" export."""
    return next((d for d in (",", ";", "\t") if d in first), ",")


# -- bytes and text -----------------------------------------------------------------------------


def _read(path: Path, limit: int, file: str, what: str) -> bytes:
    try:
        handle, size = open_regular(path, limit)
        with handle:
            data = read_capped(handle, size, limit)
    except NotAFileError as exc:
        raise SheetError(file, f"{exc} (a {what} is at most {megabytes(limit)})"
                         if "more than" in str(exc) else str(exc)) from None
    except FileNotFoundError:
        raise SheetError(file, "no such file") from None
    except PermissionError:
        raise SheetError(file, "cannot be read: permission denied") from None
    except (OSError, ValueError) as exc:
        raise SheetError(file, f"cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > limit:
        raise SheetError(file, f"is larger than {megabytes(limit)}, more than a {what} needs")
    return data


def _utf8(data: bytes, file: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SheetError(file, f"is not UTF-8 (byte 0x{data[exc.start]:02x}): save it as UTF-8",
                         line, col) from None


def _csv_text(data: bytes, file: str) -> tuple[str, str]:
    """The CSV's text, and a note when it was not UTF-8: UTF-16 with a byte-order mark (a
    spreadsheet's "Unicode text"), else UTF-8, else GB18030, which a spreadsheet in a Chinese
    locale writes by default, but only when that reads as Chinese."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16"), ""
        except UnicodeDecodeError:
            raise SheetError(file, "starts like UTF-16 text but does not decode; save it as CSV UTF-8") from None
    if b"\x00" in data:
        raise SheetError(file, "is not a text file (it contains NUL bytes); save it as CSV UTF-8")
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        text = ""
    if any(unicodedata.east_asian_width(ch) == "W" for ch in text):
        return text, f"{file} is not UTF-8; it was read as GB18030 (Chinese): if the names look wrong, save it as CSV UTF-8"
    _utf8(data, file)  # raises, naming where
    return "", ""
