"""`attnwalk grade WORKSHEET ANSWERS` (issue 31): a class's answers to a worksheet marked as the quiz
marks one learner's, and every file that does not fit named by file, line and column."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.layer.walk import compute
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario
from attnwalk.tutor.mistakes import diagnose
from attnwalk.tutor.questions import questions
from attnwalk.tutor.quiz import CHOICE, LETTERS, NUMBER, SHAPE, TOKEN, check, parse_number
from attnwalk.tutor.worksheet import as_json, question_from_item

runner = CliRunner()


def worksheet(name: str, seed: int, lang: str = "en") -> dict:
    result = runner.invoke(app, ["quiz", name, "--seed", str(seed), "--format", "json", "--lang", lang])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def grade(tmp_path, sheet: dict | str, answers: str, *args: str):
    ws, csv_file = tmp_path / "worksheet.json", tmp_path / "answers.csv"
    ws.write_text(sheet if isinstance(sheet, str) else json.dumps(sheet, ensure_ascii=False, indent=2),
                  encoding="utf-8")
    csv_file.write_text(answers, encoding="utf-8")
    return runner.invoke(app, ["grade", str(ws), str(csv_file), *args])


# -- the worksheet carries what judging reads -----------------------------------------------------


def probes(q) -> list[str]:
    """Answers to try on a question: right, wrong, each listed mistake, and no answer at all."""
    out = ["", "?", "q", "a", "b", "c", "d", "1", "2", "3", "4x4", "3x4", "(4, 4)"]
    if q.kind == NUMBER:
        x = float(q.answer)
        out += [repr(x), f"{x:.4f}", repr(x + 2 * q.tolerance), repr(x - 0.9 * q.tolerance), "81%", "1/4"]
        out += [f"{value:.4f}" for _, value in q.mistakes]
    if q.kind == TOKEN:
        out += list(q.tokens) + list(q.token_text) + [t.upper() for t in q.token_text]
    return out


@pytest.mark.parametrize("name", builtin_names())
def test_a_worksheet_item_judges_every_answer_as_the_quiz_question_it_was_written_from(name: str) -> None:
    walk = compute(load_scenario(name))
    for seed in (1, 2):
        asked = questions(walk, "en", seed=seed)
        items = json.loads(as_json(asked, "en", name, seed))["questions"]
        assert [item["number"] for item in items] == list(range(1, len(asked) + 1))
        for q, item in zip(asked, items):
            again = question_from_item(json.loads(json.dumps(item)))  # through the file's text
            assert (again.kind, again.covers) == (q.kind, q.covers)
            for raw in probes(q):
                assert check(again, raw) == check(q, raw), (name, seed, item["number"], raw)
                if q.kind == NUMBER and check(q, raw) is False:
                    assert diagnose(list(again.mistakes), parse_number(raw), again.tolerance,
                                    float(again.answer)) == \
                        diagnose(list(q.mistakes), parse_number(raw), q.tolerance, float(q.answer))


# -- a class built from the worksheet's own answers and mistakes ----------------------------------


def unambiguous(item: dict) -> list[tuple[str, float]]:
    """The listed mistakes whose value no other reading could explain: farther than the tolerance
    (and the 4 decimals a student writes) from the right answer and from every other mistake's."""
    margin = item["tolerance"] + 1e-4
    values = [(m["name"], m["value"]) for m in item.get("mistakes", [])]
    return [(name, v) for name, v in values
            if abs(v - item["answer"]) > margin
            and all(abs(v - w) > margin for other, w in values if other != name)]


def class_of_twenty(sheet: dict) -> tuple[str, dict]:
    """20 students' answers to every question, each cell one of: the right answer, a listed
    mistake's value (4 decimals), a wrong option, a wrong token or shape, an empty cell or an
    answer of no kind; and what a correct grading must report for it, counted while it is built."""
    items = sheet["questions"]
    expect = {"students": [], "questions": {i["number"]: [0, 0] for i in items}, "mistakes": {}, "answers": []}
    rows = [["student"] + [str(i["number"]) for i in items]]
    for s in range(20):
        name = f"学生{s + 1:02d}" if s % 3 == 0 else f"student {s + 1}"
        row, score, shown, unread = [name], 0, {}, 0
        for j, item in enumerate(items):
            choices: list[tuple[str, str, tuple[str, ...]]] = [("right", "", ())]  # (what, cell, shows)
            if item["kind"] == NUMBER:
                choices[0] = ("right", f"{item['answer']:.4f}", ())
                choices += [("wrong", f"{v:.4f}", (n,)) for n, v in unambiguous(item)]
            elif item["kind"] == CHOICE:
                choices[0] = ("right", item["answer"], ())
                covers = tuple(c["name"] for c in item.get("covers", []))
                choices += [("wrong", letter, covers) for letter in LETTERS[:len(item["options"])]
                            if letter != item["answer"]]
            elif item["kind"] == TOKEN:
                choices[0] = ("right", item["answer"], ())
                choices += [("wrong", label, ()) for label in item["labels"] if label != item["answer"]]
            else:
                assert item["kind"] == SHAPE
                choices[0] = ("right", item["answer"], ())
                choices.append(("wrong", "1x1", ()))
            choices += [("empty", "", ()), ("unread", "I don't know", ())]
            what, cell, shows = choices[(s * 7 + j * 3 + s * j) % len(choices)]
            row.append(cell)
            expect["answers"].append({"student": name, "question": item["number"], "answer": cell,
                                      "right": what == "right", "mistake": ";".join(shows) or None})
            counts = expect["questions"][item["number"]]
            counts[1] += what != "empty"
            if what == "right":
                score += 1
                counts[0] += 1
            unread += what == "unread"
            for mistake in shows:
                shown[mistake] = shown.get(mistake, 0) + 1
                by = expect["mistakes"].setdefault(mistake, {})
                by.setdefault(name, set()).add(item["number"])
        rows.append(row)
        expect["students"].append({"student": name, "score": score, "of": len(items), "mistakes": shown,
                                   "unread": unread})
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue(), expect


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_twenty_students_of_river_bank_get_the_scores_and_misconceptions_built_into_their_answers(
        tmp_path, lang: str) -> None:
    sheet = worksheet("river_bank", 1, lang)
    answers, expect = class_of_twenty(sheet)
    assert sum(s["unread"] for s in expect["students"]) > 0 and len(expect["mistakes"]) >= 4  # the class is varied
    result = grade(tmp_path, sheet, answers, "--format", "json", "--lang", lang)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    for got, want in zip(report["students"], expect["students"], strict=True):
        assert (got["student"], got["score"], got["of"]) == (want["student"], want["score"], want["of"])
        assert got["mistakes"] == want["mistakes"], got["student"]
        assert len(got["unread"]) == want["unread"]
        assert all(u["answer"] == "I don't know" and u["reason"] for u in got["unread"])
    assert {q["number"]: [q["right"], q["answered"]] for q in report["questions"]} == expect["questions"]
    assert {m["name"]: (m["students"], m["questions"]) for m in report["mistakes"]} == {
        name: (len(by), sorted(set().union(*by.values()))) for name, by in expect["mistakes"].items()}
    counts = [m["students"] for m in report["mistakes"]]
    assert counts == sorted(counts, reverse=True)  # most common first


def test_the_report_reads_as_a_teacher_needs_it_in_each_format(tmp_path) -> None:
    sheet = worksheet("river_bank", 1)
    answers, expect = class_of_twenty(sheet)
    text = grade(tmp_path, sheet, answers)
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80  # the test console's width
    assert lines[0] == f"Grades: worksheet river_bank (--seed 1) · students: 20 · questions: {len(sheet['questions'])}"
    assert text.stdout.index("To teach again") < text.stdout.index("Questions") < text.stdout.index("Students")
    assert "student 2, question" in text.stdout and "I don't know (not " in text.stdout
    md = grade(tmp_path, sheet, answers, "--format", "markdown", "--lang", "zh").stdout
    assert md.startswith("# 批改：测验 river_bank（--seed 1）") and "## 需要再讲的" in md and "| 学生01 |" in md
    rows = list(csv.reader(io.StringIO(grade(tmp_path, sheet, answers, "--format", "csv").stdout)))
    assert rows[0][:3] == ["student", "score", "of"] and len(rows) == 21
    assert [int(r[1]) for r in rows[1:]] == [s["score"] for s in expect["students"]]


def test_an_answer_is_read_as_the_quiz_reads_it(tmp_path) -> None:
    sheet = worksheet("river_bank", 1)
    number = next(q for q in sheet["questions"] if q["kind"] == NUMBER and q["answer"] > 0.1)
    token = next(q for q in sheet["questions"] if q["kind"] == TOKEN)
    position = token["labels"].index(token["answer"]) + 1
    wide = f"{number['answer']:.4f}".translate(str.maketrans("0123456789.", "０１２３４５６７８９．"))
    answers = (f"student,{number['number']},{token['number']}\n"
               f"a,{wide},{position}\n"  # full-width digits; a token by its position from 1
               f"b,0.5.5,{token['answer'].upper()}\n")  # no number; the token in another case
    report = json.loads(grade(tmp_path, sheet, answers, "-f", "json").stdout)
    assert [s["score"] for s in report["students"]] == [2, 1]
    assert report["students"][1]["unread"][0]["reason"] == "(not a number: counted as wrong)"


# -- what does not fit: file, line, column, exit 2 -----------------------------------------------


@pytest.mark.parametrize(("answers", "where", "says"), [
    ("student,1,2,99\na,1,2,3\n", "1:4", "question 99: the worksheet has"),
    ("student,1,1\na,1,2\n", "1:3", "question 1 has two columns"),
    ("student,1,x\na,1,2\n", "1:3", "expected a question number"),
    ("1,2\na,1\n", "1:1", "the first column is the student's name"),
    ("student,1,2\na,1\n", "2:3", "this row has 2 cells, the header 3"),
    ("student,1,2\n\na,1,2\nb,1,2,3,4\n", "4:4", "this row has 5 cells"),
    ("student,1,2\na,1,2\n,1,2\n", "3:1", "no student's name"),
    ("student,1,2\na,1,2\na,2,1\n", "3:1", "a is already on line 2"),
    ("student,1,2\n", "2:1", "no student's answers"),
    ("", "1:1", "expected a header"),
])
def test_answers_that_do_not_fit_the_worksheet_are_named_by_line_and_column(tmp_path, answers, where, says) -> None:
    result = grade(tmp_path, worksheet("river_bank", 1), answers)
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert message.startswith(f"attnwalk: {tmp_path / 'answers.csv'}:{where}: ") and says in message
    assert "Traceback" not in result.output and len(message.splitlines()) == 1


def position(text: str, at: int) -> str:
    """line:column (from 1) of the character at index `at`."""
    return f"{text.count(chr(10), 0, at) + 1}:{at - text.rfind(chr(10), 0, at)}"


def test_a_worksheet_of_another_version_or_with_a_broken_question_is_pointed_at(tmp_path) -> None:
    sheet = worksheet("river_bank", 1)
    answers = "student,1\na,1\n"
    file = tmp_path / "worksheet.json"
    later = json.dumps(dict(sheet, version=2), indent=2)
    result = grade(tmp_path, later, answers)
    assert result.exit_code == 2
    where = position(later, later.index('"version"'))
    assert result.stderr.startswith(f"attnwalk: {file}:{where}: this worksheet is version 2")
    older = json.dumps({k: v for k, v in sheet.items() if k != "version"}, indent=2)
    assert "no version: an older attnwalk" in grade(tmp_path, older, answers).stderr
    broken = json.loads(json.dumps(sheet))
    choice = next(q for q in broken["questions"] if q["kind"] == CHOICE)
    choice["answer"] = "z"
    text = json.dumps(broken, indent=2)
    start = text.index(f'"number": {choice["number"]},')
    result = grade(tmp_path, text, answers)
    at = text.index('"answer": "z"', start)
    assert result.stderr.strip() == (f"attnwalk: {file}:{position(text, at)}: "
                                     f"question {choice['number']}: answer: expected one of the options' letters (a/b/c)")
    cut = text[:200]
    result = grade(tmp_path, cut, answers)
    assert result.exit_code == 2 and re.match(rf"attnwalk: {re.escape(str(file))}:\d+:\d+: not a worksheet's JSON", result.stderr)
    nan = text.replace(f'"tolerance": {choice["tolerance"]}', '"tolerance": NaN', 1)
    assert "tolerance: expected a number" in grade(tmp_path, nan, answers).stderr


def test_a_spreadsheets_export_is_read_as_it_comes(tmp_path) -> None:
    sheet = worksheet("river_bank", 1)
    q = next(q for q in sheet["questions"] if q["kind"] == NUMBER)
    right = f"{q['answer']:.4f}"
    ws = tmp_path / "worksheet.json"
    ws.write_text(json.dumps(sheet), encoding="utf-8")
    exports = {
        "excel-utf8.csv": ("\ufeffstudent,{n}\r\n李雷,{a}\r\n", "utf-8"),
        "decimal-comma.csv": ("sep=;\nstudent;Q{n}\n李雷;{c}\n", "utf-8"),
        "semicolons.csv": ("student;{n}\n李雷;{c}\n", "utf-8"),
        "tabs.csv": ("student\t{n}\n李雷\t{a}\n", "utf-16"),
        "gbk.csv": ("student,{n}\n李雷,{a}\n", "gb18030"),
        "trailing-empty-columns.csv": ("student,{n},,\n李雷,{a},,\n,,,\n", "utf-8"),
    }
    for name, (body, encoding) in exports.items():
        path = tmp_path / name
        path.write_bytes(body.format(n=q["number"], a=right, c=right.replace(".", ",")).encode(encoding))
        result = runner.invoke(app, ["grade", str(ws), str(path), "-f", "json"])
        assert result.exit_code == 0, (name, result.output)
        report = json.loads(result.stdout)
        assert [(s["student"], s["score"]) for s in report["students"]] == [("李雷", 1)], name
        assert ("read as GB18030" in result.stderr) == (encoding == "gb18030"), name


def test_files_that_are_no_files_are_refused_before_reading(tmp_path) -> None:
    ws = tmp_path / "worksheet.json"
    ws.write_text(json.dumps(worksheet("river_bank", 1)), encoding="utf-8")
    for path, says in (("/dev/zero", "is a device"), (str(tmp_path), "is a directory"),
                       (str(tmp_path / "none.csv"), "no such file")):
        result = runner.invoke(app, ["grade", str(ws), path])
        assert result.exit_code == 2 and says in result.stderr, path


def test_a_students_name_is_shown_never_obeyed(tmp_path) -> None:
    sheet = worksheet("river_bank", 1)
    result = grade(tmp_path, sheet, "student,1\n\"a\x1b[2Jb\u202e\",4x4\n")
    assert result.exit_code == 0 and "a\\x1b[2Jb\\u202e" in result.stdout and "\x1b" not in result.stdout
    data = grade(tmp_path, sheet, "student,1\n\"a\x1b[2Jb\u202e\",4x4\n", "-f", "json").stdout
    assert "\x1b" not in data and "\u202e" not in data and json.loads(data)["students"][0]["student"] == "a\x1b[2Jb\u202e"


def test_a_teacher_gets_each_students_answer_to_each_question(tmp_path) -> None:
    """JSON's answers list, the Markdown grid and the CSV's per-question columns hold each cell as
    the class was built: the answer given, right or wrong, the misconception it was built to show."""
    sheet = worksheet("river_bank", 1)
    answers, expect = class_of_twenty(sheet)
    report = json.loads(grade(tmp_path, sheet, answers, "--format", "json").stdout)
    assert report["answers"] == expect["answers"]
    topics = {q["number"]: q["topic"] for q in report["questions"]}
    for item in sheet["questions"]:
        want = f"cell {item['id'].split(':')[1]}" if item["id"].startswith("cell:") else item["topic"]
        assert topics[item["number"]] == want
    assert "cell QK^T" in topics.values()

    md = grade(tmp_path, sheet, answers, "--format", "markdown").stdout
    grid = md[md.index("## Answers"):].splitlines()
    header = grid[2]
    assert header == "| student | " + " | ".join(str(i["number"]) for i in sheet["questions"]) + " |"
    first = expect["answers"][:len(sheet["questions"])]
    cells = [c.strip() for c in grid[4].strip("|").split(" | ")]
    assert cells[0] == first[0]["student"]
    for cell, want in zip(cells[1:], first, strict=True):
        if want["answer"] == "":
            assert cell == "—"
        else:
            assert cell.startswith(("✓ " if want["right"] else "✗ ") + want["answer"])
    assert "| topic |" in md

    rows = list(csv.reader(io.StringIO(grade(tmp_path, sheet, answers, "--format", "csv").stdout)))
    n = len(sheet["questions"])
    assert rows[0][-2 * n:][:2] == ["Q1", "Q1 right"]
    for row, student in zip(rows[1:], range(20)):
        built = expect["answers"][student * n:(student + 1) * n]
        assert row[-2 * n::2] == [a["answer"] for a in built]
        assert row[-2 * n + 1::2] == [("1" if a["right"] else "0") if a["answer"] else "" for a in built]


def test_misconceptions_with_commas_are_joined_unambiguously(tmp_path) -> None:
    """A student's misconceptions split back into exactly the labels shown (some hold ", ")."""
    from attnwalk.tutor.gradeview import label

    sheet = worksheet("river_bank", 1)
    answers, expect = class_of_twenty(sheet)
    md = grade(tmp_path, sheet, answers, "--format", "markdown").stdout
    rows = md[md.index("## Students"):md.index("## Answers")].splitlines()[4:]
    cells = {r.strip("|").split(" | ")[0].strip(): r.strip("|").split(" | ")[2].strip() for r in rows if r}
    comma = 0
    for want in expect["students"]:
        got = cells[want["student"]]
        names = [label(n, "en") + (f" ×{k}" if k > 1 else "") for n, k in want["mistakes"].items()]
        assert sorted(got.split("; ")) == sorted(names) if names else got == ""
        comma += any(", " in name for name in names) and len(names) > 1
    assert comma  # a label with a comma beside another: the case the separator is for
