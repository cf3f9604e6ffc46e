"""`attnwalk serve` (issue 31): the lesson picker, the fixed command each page runs, a page walking a
lesson through the real server, and a stop that leaves no process behind. The page in a real
browser: tests/test_serve_browser.py."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.app.picker import ACTIVITIES, LANGS, Choice, LessonRow, PickerApp
from attnwalk.cli import app
from attnwalk.scenario.builtins import builtin_names, course_order
from rich.cells import cell_len
from attnwalk.serve import lessons as served_lessons
from attnwalk.serve.lessons import Offered

aiohttp = pytest.importorskip("aiohttp")
pytest.importorskip("textual_serve")

from appdriver import screen_text  # noqa: E402
from served import KEYS, Served, alive, open_page  # noqa: E402

runner = CliRunner()
PACKAGE = Path(__file__).resolve().parents[1] / "attnwalk"
RIVER = course_order().index("river_bank")  # downs from the course's first lesson, where the picker opens


# -- the picker ---------------------------------------------------------------------------------


ROWS = {
    "en": [LessonRow("river_bank", "by the river bank", "4 × 4 · none", "The word bank is ambiguous."),
           LessonRow("broken.yaml", "", "", "", problem="broken.yaml:3: W_Q: expected a matrix", own=True),
           LessonRow("mine.yaml", "My lesson", "2 × 2 · causal", "Mine.", own=True)],
    "zh": [LessonRow("river_bank", "河岸边的 bank", "4 × 4 · 无", "bank 有歧义。"),
           LessonRow("broken.yaml", "", "", "", problem="broken.yaml:3: W_Q: expected a matrix", own=True),
           LessonRow("mine.yaml", "我的课", "2 × 2 · 因果", "我的。", own=True)],
}


def picked(keys: list[str], lang: str = "en", selected: str | None = None):
    """The picker's choice after `keys`, and its screen then (None when it had ended)."""
    async def run():
        picker = PickerApp(lambda chosen: ROWS[chosen], lang, selected)
        async with picker.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
            screen = screen_text(picker) if picker.is_running and picker._exit_renderables == [] \
                and picker.return_value is None else None
        return picker.return_value, screen
    return asyncio.run(run())


def test_the_picker_lists_the_lessons_and_ends_with_the_choice() -> None:
    assert picked(["enter"])[0] == Choice("river_bank", "walk", "en")
    assert picked(["down", "down", "t"])[0] == Choice("mine.yaml", "quiz", "en")
    assert picked(["p"], selected="mine.yaml")[0] == Choice("mine.yaml", "predict", "en")
    assert picked(["q"]) == (None, None)
    choice, screen = picked(["down", "enter", "w"])  # a lesson that does not load is not opened
    assert choice is None and "cannot be opened: broken.yaml:3: W_Q: expected a matrix" in screen
    assert (ACTIVITIES, LANGS) == (served_lessons.ACTIVITIES, served_lessons.LANGS)


def test_the_picker_speaks_chinese_after_l_and_keeps_its_lesson() -> None:
    assert picked(["down", "down", "l", "enter"])[0] == Choice("mine.yaml", "walk", "zh")
    _, screen = picked(["l"])
    assert "选一课" in screen and "河岸边的 bank" in screen and "English" in screen and "退出" in screen
    assert "bank 有歧义。" in screen and "4 × 4 · 无" in screen
    _, screen = picked(["down", "down"])
    assert "My lesson" in screen and "your teacher's lesson, mine.yaml" in screen and "Mine." in screen
    assert max(len(line) for line in screen.splitlines()) <= 80


# -- the lessons offered --------------------------------------------------------------------------


def test_the_picker_opens_on_the_courses_first_lesson_marked_start_here() -> None:
    rows = [LessonRow("mine.yaml", "My lesson", "2 × 2 · causal", "Mine.", own=True),
            LessonRow("girl_bangs", "女生撩刘海", "3 × 2 · none", "Every matrix by hand.", start=True),
            LessonRow("river_bank", "by the river bank", "4 × 4 · none", "The word bank is ambiguous.")]

    choice, screen = ended(PickerApp(lambda chosen: rows, "en"), ["enter"])  # its value, its first screen
    assert choice == Choice("girl_bangs", "walk", "en")  # opened on it, not on the first row
    line = next(line for line in screen.splitlines() if "girl_bangs" in line and "女生撩刘海" in line)
    assert "▲ start here" in line and screen.count("start here") == 2  # its row, and its description
    assert "predicting P, QKᵀ, S, A and Z" in " ".join(screen.split())  # what is asked, named
    assert [row["key"] for row in served_lessons.rows(served_lessons.Offered(), "en")][:3] == [
        "girl_bangs", "word_order", "causal_mask"]
    assert [row["start"] for row in served_lessons.rows(served_lessons.Offered(), "en")][:2] == [True, False]


def test_a_chinese_description_wraps_between_characters() -> None:
    """The description under the list folds its Chinese at the width, not only at its spaces
    (a space after "bank" left "bank" alone on a line and the Chinese on the next)."""
    about = "bank 有歧义：" + "这一课让你看到上下文怎样决定一个词的意思，注意力把附近的词混进来，" * 2
    rows = [LessonRow("river_bank", "河岸边的 bank", "4 × 4 · 无", about)]

    async def run():
        picker = PickerApp(lambda chosen: rows, "zh")
        async with picker.run_test(size=(60, 24)) as pilot:
            await pilot.pause()
            return screen_text(picker)

    screen = asyncio.run(run())
    first = next(line for line in screen.splitlines() if "bank 有歧义" in line)
    assert cell_len(first.rstrip()) >= 50, screen  # the line is filled with Chinese, not cut after "bank"


def ended(app, keys: list[str]):
    """An app's value after `keys` (an EndingApp's, the picker's), and its screen before them."""
    async def run():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            screen = screen_text(app)
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
        return app.return_value, screen
    return asyncio.run(run())


def test_the_walks_end_page_sums_up_and_offers_what_next_as_choices() -> None:
    from attnwalk.app.ending import EndingApp
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions
    from attnwalk.scenario.load import load_scenario
    from attnwalk.serve.endings import walk_ending

    walk = compute(load_scenario("river_bank"))
    parts = walk_ending(walk, "river_bank", "predict", "Your predictions: 3 right of 5.", Offered(), ViewOptions())
    value, screen = ended(EndingApp(*parts), ["n"])
    assert value == Choice("savings_bank", "walk", "en")  # the course's next lesson, one key away
    said = " ".join(screen.split())
    assert "End of the walk: river_bank. What next?" in said and "Your predictions: 3 right of 5." in said
    assert "Next lesson: savings_bank, at the savings bank" in said and "Take its quiz" in said
    assert "attnwalk run" not in said  # no command a browser cannot type
    assert ended(EndingApp(*parts), ["t"])[0] == Choice("river_bank", "quiz", "en")
    assert ended(EndingApp(*parts), ["w"])[0] == Choice("river_bank", "walk", "en")  # again, not predicting
    assert ended(EndingApp(*parts), ["q"])[0] is None  # back to the lessons


def test_in_a_browser_the_walk_ends_on_its_page_whose_keys_are_its_own() -> None:
    """ServedWalk: n past girl_bangs' last stage opens the end page (the walk goes on running,
    its process is the session's); there the walk's keys neither show nor act, and n is the
    page's next lesson."""
    from appdriver import typed

    from attnwalk.app.ending import EndingScreen
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions
    from attnwalk.scenario.load import load_scenario
    from attnwalk.serve.endings import ServedWalk

    app = ServedWalk(compute(load_scenario("girl_bangs")), ViewOptions(), "girl_bangs", "walk", Offered())
    opened = []
    app.open_url = lambda url, new_tab=True: opened.append(url)

    async def run():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            for key in ["g", *typed("11"), "n", "g", "m"]:
                await pilot.press(key)
                await pilot.pause()
            screen = screen_text(app)
            on_page = isinstance(app.screen, EndingScreen)
            await pilot.press("n")
            await pilot.pause()
        return screen, on_page

    screen, on_page = asyncio.run(run())
    assert on_page and "End of the walk: girl_bangs. What next?" in screen
    footer = screen.rstrip("\n").splitlines()[-1]
    assert "n next lesson" in footer and "g jump" not in footer and "m mode" not in footer, footer
    assert "Jump to stage" not in screen and app.walk.mode.name == "scaled"  # g and m did nothing
    assert opened == ["attnwalk:walk?lesson=word_order&lang=en"]


def test_a_finished_quiz_keeps_its_last_verdict_until_enter_then_shows_its_end_page() -> None:
    from appdriver import typed

    from attnwalk.app.ending import EndingScreen
    from attnwalk.commands.quiz import run_quiz
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions
    from attnwalk.scenario.load import load_scenario
    from attnwalk.serve.endings import ServedQuiz
    from attnwalk.tutor.questions import questions
    from attnwalk.tutor.quiz import NUMBER

    walk = compute(load_scenario("girl_bangs"))
    quiz = ServedQuiz(walk, "girl_bangs", Offered(), ViewOptions())
    one = next(q for q in questions(walk, "en") if q.kind == NUMBER)  # a quiz of one question
    quiz.quiz = lambda console, answers: run_quiz(walk, [one], console, answers, "en")

    async def run():
        async with quiz.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            for key in typed(one.shown):
                await pilot.press(key)
            await pilot.pause(0.5)
            before = isinstance(quiz.screen, EndingScreen), screen_text(quiz)
            await pilot.press("enter")
            await pilot.pause()
            after = isinstance(quiz.screen, EndingScreen), screen_text(quiz)
        return before, after

    (page_before, verdict), (page_after, screen) = asyncio.run(run())
    assert not page_before and "Score: 1 / 1" in verdict  # the last verdict first
    assert page_after and "End of the quiz: girl_bangs" in screen and "Score: 1 / 1" in screen


def test_the_quizs_end_page_gives_the_score_and_the_mistakes_shown() -> None:
    from attnwalk.app.ending import EndingApp
    from attnwalk.commands.quiz import QuizResult
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions
    from attnwalk.scenario.load import load_scenario
    from attnwalk.serve.endings import quiz_ending

    walk = compute(load_scenario("kv_cache"))  # the course's last lesson: no next one offered
    result = QuizResult(2, 4, 18, shown=("no_scale", "divided_by_d_k"))
    for lang, says in (("en", ["Stopped after 4 of 18 questions.", "Score: 2 / 4",
                               "The wrong answers showed: forgot to divide by √d_k; divided by d_k, not √d_k."]),
                       ("zh", ["得分", "忘了除以 √d_k"])):
        parts = quiz_ending(walk, "kv_cache", result, Offered(), ViewOptions(lang=lang))
        value, screen = ended(EndingApp(*parts), ["t"])
        said = " ".join(screen.split())
        assert all(s in said for s in says), said
        assert value == Choice("kv_cache", "quiz", lang)
        assert [c.key for c in parts[2]] == ["w", "t"]  # no next lesson after the course's last


def test_a_lesson_is_found_by_its_key_and_never_by_a_path(tmp_path) -> None:
    (tmp_path / "mine.yaml").write_text("tokens: [a]\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    offered = Offered(tmp_path)
    keys = [lesson.key for lesson in offered.lessons()]
    assert keys == ["mine.yaml"] + course_order()  # the teacher's first, then the course in order
    assert offered.find("river_bank").builtin and offered.find("mine.yaml").path == tmp_path / "mine.yaml"
    for key in ("../mine.yaml", str(tmp_path / "mine.yaml"), "notes.txt", "..", "", "sub/mine.yaml",
                "/etc/passwd", "river_bank.yaml", "mine.yaml\x00"):
        assert offered.find(key) is None, key
    assert Offered().find("mine.yaml") is None


def test_an_activity_runs_only_an_offered_lesson(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "attnwalk.serve.activity", "--run", "walk", "--lesson",
                             "../../etc/passwd"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "no lesson '../../etc/passwd' is offered" in result.stderr
    result = subprocess.run([sys.executable, "-m", "attnwalk.serve.activity", "--run", "shell"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "invalid choice: 'shell'" in result.stderr


def test_a_broken_lesson_stops_the_server_before_it_listens(tmp_path) -> None:
    (tmp_path / "broken.yaml").write_text("tokens: [a, b]\nembeddings: [[1, 0]]\n", encoding="utf-8")
    result = runner.invoke(app, ["serve", "--lessons", str(tmp_path), "--port", "1"])
    assert result.exit_code == 2 and result.stderr.startswith(f"attnwalk: {tmp_path / 'broken.yaml'}:")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["serve", "--lessons", str(empty)])
    assert result.exit_code == 2 and "no scenario files" in result.stderr
    result = runner.invoke(app, ["serve", "--lessons", str(tmp_path / "none")])
    assert result.exit_code == 2 and "no such folder" in result.stderr


def test_without_textual_serve_serve_says_how_to_add_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # import fails as if not installed
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 2
    assert result.stderr == "attnwalk: attnwalk serve needs textual-serve: in attnwalk's checkout, pip install '.[serve]'\n"


def test_only_serve_imports_the_web_server() -> None:
    importing = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] in ("textual_serve", "aiohttp") for n in names):
                importing.add(path.relative_to(PACKAGE).as_posix())
    assert importing == {"serve/command.py", "serve/server.py", "serve/session.py"}
    out = subprocess.run([sys.executable, "-c", "import sys, attnwalk.cli; "
                          "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual_serve', 'aiohttp')))"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"


# -- the server --------------------------------------------------------------------------------


def run(coroutine):
    return asyncio.run(coroutine)


def command_lines(pids) -> list[list[str]]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1])
        except OSError:
            pass
    return out


def test_every_page_runs_the_one_fixed_command_whatever_it_asks(tmp_path) -> None:
    (tmp_path / "mine.yaml").write_text((PACKAGE.parent / "scenarios" / "causal_mask.yaml").read_text(
        encoding="utf-8"), encoding="utf-8")

    async def visit(url: str) -> list[list[str]]:
        async with aiohttp.ClientSession() as http:
            # tall enough for every built-in and the folder's lesson, listed last, on one screen
            page = await open_page(http, url, height=60, query="&command=sh&lessons=/etc&lang=en&run=quiz")
            await page.wait_for("选一课")
            await page.wait_for("mine.yaml")
            lines = command_lines(served.descendants())
            await page.close()
        return lines

    with Served("--lessons", str(tmp_path), "--lang", "zh") as served:
        listing = Path(os.environ["XDG_CACHE_HOME"]) / "attnwalk" / f"serve-lessons-{served.process.pid}.json"
        lines = run(visit(served.url))
        assert json.loads(listing.read_text(encoding="utf-8"))["zh"][0]["key"] == "mine.yaml"  # the class's first
    assert not listing.exists()  # the server's listing goes with it
    folder = ["--lessons", str(tmp_path.resolve())]
    fixed = [sys.executable, "-m", "attnwalk.serve", "--lang", "zh", *folder, "--listing", str(listing)]
    # the session as the server was told to run it (no shell left between), and its picker
    assert sorted(lines) == sorted([fixed, [sys.executable, "-m", "attnwalk.serve.activity", "--run", "picker",
                                            "--lang", "zh", *folder, "--listing", str(listing)]])
    from attnwalk.serve.server import session_command

    assert session_command(tmp_path, "zh", listing) == "exec " + shlex.join(fixed)


def test_the_listing_holds_what_the_picker_would_work_out(tmp_path) -> None:
    from attnwalk.serve.activity import listed
    from attnwalk.serve.lessons import write_listing

    (tmp_path / "broken.yaml").write_text("tokens: [a]\n", encoding="utf-8")
    offered, listing = Offered(tmp_path), tmp_path / "cache" / "listing.json"
    write_listing(offered, listing)
    for lang in LANGS:
        assert listed(offered, listing, lang) == listed(offered, None, lang)
        assert listed(offered, tmp_path / "missing.json", lang) == listed(offered, None, lang)
    rows = {row.key: row for row in listed(offered, listing, "zh")}
    assert rows["river_bank"].facts == "4 × 4 · 无" and rows["broken.yaml"].problem.startswith(str(tmp_path))


def test_a_page_picks_a_lesson_walks_it_and_takes_its_quiz() -> None:
    async def visit(url: str) -> None:
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as response:  # the page itself, as a browser fetches it first
                assert response.status == 200
            page = await open_page(http, url)
            await page.wait_for("pick a lesson")
            mark = await page.keys(*[KEYS["down"]] * RIVER, KEYS["enter"])
            await page.wait_for(r"Stage 1 / 11", since=mark)
            await page.wait_for(r"by the river bank", since=mark)
            mark = await page.keys("n")
            await page.wait_for(r"Stage 2 / 11", since=mark)
            mark = await page.keys("q")  # the walk ends: back to the picker, on the same lesson
            await page.wait_for(r"pick a lesson", since=mark)
            mark = await page.keys("l")
            await page.wait_for(r"选一课", since=mark)
            mark = await page.keys("t")
            await page.wait_for(r"测验：river_bank", since=mark)
            await page.wait_for(r"第 1 / \d+ 题", since=mark)
            mark = await page.keys("q", KEYS["enter"])  # stopped: the score before the picker
            await page.wait_for(r"river_bank 的测验结束了", since=mark)
            await page.wait_for(r"得分：0 / 0", since=mark)
            mark = await page.keys("w")  # a choice of the end page: the walk, not the picker
            await page.wait_for(r"阶段 1 / 11", since=mark)
            mark = await page.keys("g")
            await page.wait_for(r"跳到第几个阶段", since=mark)
            mark = await page.keys("1", "1", KEYS["enter"])
            await page.wait_for(r"阶段 11 / 11", since=mark)
            mark = await page.keys("n")  # past the last stage: the end page, what next as choices
            await page.wait_for(r"river_bank 学完了", since=mark)
            await page.wait_for(r"下一课：savings_bank", since=mark)
            mark = await page.keys("q")
            await page.wait_for(r"选一课", since=mark)
            await page.close()

    with Served() as served:
        run(visit(served.url))
        served.stop()
        # the teacher's terminal: one line as the session starts, one as it ends; no access lines
        log = [line for line in served.output().splitlines()[1:] if line.strip()]
        sessions = [line for line in log if line.startswith("attnwalk: session")]
        assert sessions == ["attnwalk: session 1 started (1 open)", "attnwalk: session 1 ended after 0 min (0 open)"], log
        assert not any("GET /" in line or "HTTP/1.1" in line for line in log), log


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sighup"])
def test_stopping_the_server_ends_every_session_and_leaves_no_process(how: str) -> None:
    async def classroom(url: str, served: Served) -> set[int]:
        async with aiohttp.ClientSession() as http:
            pages = [await open_page(http, url) for _ in range(3)]
            for page in pages:
                await page.wait_for("pick a lesson")
            mark = await pages[0].keys(*[KEYS["down"]] * RIVER, KEYS["enter"])  # one is mid-walk
            await pages[0].wait_for("Stage 1 / 11", since=mark)
            processes = served.descendants()
            took = await asyncio.get_running_loop().run_in_executor(None, served.stop, how)
            assert took < 10, took
            for page in pages:  # every page is told its session is over
                assert await page.closes(timeout=5)
            return processes

    with Served() as served:
        processes = run(classroom(served.url, served))
    assert len(processes) == 6  # three sessions, each with its activity
    assert served.process.returncode is not None
    assert alive(processes) == set()
    # its handler ran (SIGHUP killed it outright before issue 39): the listing file is gone too
    assert served.process.returncode >= 0
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "attnwalk"
    assert not (cache / f"serve-lessons-{served.process.pid}.json").exists()


def test_a_port_in_use_is_said_before_anything_is_announced() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["serve", "--port", str(port)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"attnwalk: cannot listen on 127.0.0.1:{port}: Address already in use; choose another --port\n"
    result = runner.invoke(app, ["serve", "--public-url", "ftp://example"])
    assert result.exit_code == 2 and "expected a URL starting with http:// or https://" in result.stderr


def test_the_session_takes_only_a_choice_of_the_lessons_offered(tmp_path) -> None:
    from attnwalk.serve.session import Session

    (tmp_path / "mine.yaml").write_text("tokens: [a]\n", encoding="utf-8")
    session = Session(None, tmp_path, "en")
    good = {"activity": "quiz", "lesson": "mine.yaml", "lang": "zh"}
    assert session.valid(good) and session.valid(dict(good, lesson="river_bank"))
    for bad in (dict(good, activity="shell"), dict(good, lang="fr"), dict(good, lesson="../mine.yaml"),
                dict(good, lesson=str(tmp_path / "mine.yaml")), dict(good, lesson="nothing")):
        assert not session.valid(bad), bad
    assert session.argv("picker", None)[-2:] == ["--lessons", str(tmp_path)]
    assert session.argv("walk", "mine.yaml")[-2:] == ["--lesson", "mine.yaml"]


def test_the_picker_shows_a_lesson_s_opening_not_what_to_notice() -> None:
    """A description as the loader reads it (YAML folds its blank line to one newline): the picker
    shows the first paragraph, not the numbers a learner is about to be asked to predict."""
    from attnwalk.scenario.builtins import builtin_path

    folded = yaml.safe_load(builtin_path("girl_bangs").read_text(encoding="utf-8"))["description"]["en"]
    assert "0.8078" in folded  # its "what to notice"
    rows = {"en": [LessonRow("girl_bangs", "女生撩刘海", "3 × 2 · none", folded)]}

    async def run():
        picker = PickerApp(lambda chosen: rows[chosen], "en")
        async with picker.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            return screen_text(picker)
    screen = asyncio.run(run())
    assert "whole-number embeddings" in screen and "0.8078" not in screen and "What to notice" not in screen
