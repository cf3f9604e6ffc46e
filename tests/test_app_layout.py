"""The walk's layout teaches at 80 × 24 and at 200 × 60: on every stage of every built-in lesson
the header, the whole matrix (or the whole of its window, with the line under it) and the first
line of the explanation are on screen together, without scrolling; from 160 columns the notes sit
beside the matrix. Plus a few screens checked line by line."""

from __future__ import annotations

import asyncio
import re

import pytest
from rich.cells import cell_len

from appdriver import screen_text
from attnwalk.app.grid import MatrixGrid
from attnwalk.app.walk import WalkApp
from attnwalk.layer.stages import TOKENS
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import plain
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario
from attnwalk.text import stage_text


def every_screen(name: str, size: tuple[int, int], lang: str = "en") -> list[tuple[WalkApp, str, dict]]:
    """Each stage's screen (a per-head stage in its first two heads: the others are laid out the
    same), reached as g reaches it, and what the app had in its panes then."""

    async def run():
        app = WalkApp(compute(load_scenario(name)), ViewOptions(lang=lang))
        seen = []
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            for i, (stage, head) in enumerate(app.steps):
                if head > 1:
                    continue
                if i:
                    app.message = ""  # as the key that goes there clears the first screen's message
                    app.go(i)
                    await pilot.pause()
                grid = app.query_one(MatrixGrid)
                facts = {"stage": app.step[0], "head": app.step[1], "window": grid.shown,
                         "index": app.index, "cursor": app.cursor,
                         "tokens_scroll": app.query_one("#tokens").max_scroll_y,
                         "grid": grid.region if grid.display else app.query_one("#tokens").region,
                         "notes": app.query_one("#notes").region}
                seen.append((app, screen_text(app), facts))
        return seen

    return asyncio.run(run())


def first_words(body: str, count: int = 3) -> str:
    """The start of a paragraph as the explanation's first line shows it, whatever its wrapping."""
    return " ".join(body.split()[:count])


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=["80x24", "200x60"])
@pytest.mark.parametrize("name", builtin_names())
def test_header_matrix_and_explanation_start_are_on_screen_together(name: str, size) -> None:
    width, height = size
    for app, screen, facts in every_screen(name, size):
        stage, head = facts["stage"], facts["head"]
        lines = screen.splitlines()
        assert len(lines) == height
        where = f"{name} {stage.key} head {head + 1} at {width}x{height}"
        assert re.match(rf" Stage {facts['index'] + 1} / {len(app.steps)}\b", lines[0]), where
        walk = app.walk
        if stage.kind == TOKENS:
            # the tokens table whole, or its start in a pane that scrolls
            assert walk.scenario.tokens[0] in screen, where
            assert walk.scenario.tokens[-1] in screen or facts["tokens_scroll"] > 0, where
        else:
            window = facts["window"]
            M = walk.matrix(stage.key, head)
            assert window.rows >= 1 and window.cols >= 1, where
            # every row label of the window, in order, each on its own line of the matrix pane
            grid_top = facts["grid"].y
            grid_lines = lines[grid_top:grid_top + facts["grid"].height]
            from attnwalk.layer.axes import axes

            rows, cols = axes(walk, stage, head, "en")
            labels = [line[3:].split("  ")[0].strip() for line in grid_lines[2:2 + window.rows]]
            assert labels == [rows[r] for r in range(window.top, window.top + window.rows)], where
            # the line under the table: the cursor's cell and value, so nothing above it was cut
            r, c = facts["cursor"]
            assert f"[{rows[r]}, {cols[c]}] = " in screen, where
            if window.rows < M.shape[0] or window.cols < M.shape[1]:
                assert f"of {M.shape[0]} · columns" in screen, where
        what = plain(stage_text("en", stage, walk.scenario, walk.mode, "what"), app.opts)
        assert first_words(what) in " ".join(screen.split()), where
        notes = facts["notes"]
        assert notes.height >= 4, where
        if width >= 160:  # the notes beside the matrix, not under it
            assert notes.x > facts["grid"].x and notes.y == facts["grid"].y, where


def test_at_80x24_river_bank_a_shows_its_table_then_the_explanation() -> None:
    # the 4 × 4 weights whole, each row's ▲, the status, the legend, then What begins
    _, screen, _ = every_screen("river_bank", (80, 24))[9]
    lines = screen.splitlines()
    assert lines[0].startswith(" Stage 10 / 11   A  Attention weights")
    assert lines[4].split() == ["by", "the", "river", "bank"]
    assert lines[9].split()[:2] == ["▸", "bank"] and "0.6854 ▲" in lines[9]  # 69% to river
    assert lines[10].strip() == "A[bank, river] = 0.6854"
    assert any(line.startswith(" │ What            A = softmax(S + M)") for line in lines[12:23])
    assert lines[-1].startswith("←↑↓→ move n next b back g jump c cell m mode")


def test_the_large_layer_shows_a_window_that_follows_the_cursor() -> None:
    # shapes: 100 tokens, d_model 512; E at 80 × 24 shows a window, and → moves it
    async def run():
        app = WalkApp(compute(load_scenario("shapes")), ViewOptions(), start=1)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            before = app.query_one(MatrixGrid).shown
            for _ in range(12):
                await pilot.press("right")
            await pilot.pause()
            return before, app.query_one(MatrixGrid).shown, app.cursor, screen_text(app)

    before, after, cursor, screen = asyncio.run(run())
    assert before.left == 0 and before.cols < 12
    assert cursor[1] == 12 and after.left <= 12 < after.left + after.cols
    assert f"columns {after.left + 1}–{after.left + after.cols} of 512" in screen


def test_a_matrix_that_fits_is_shown_whole_and_a_large_one_in_a_window_at_80x24() -> None:
    """sliding_window's 8 × 8 A: the band of three keys is the lesson, so all 8 rows show (they
    fit, with the notes' frame and first lines under them); shapes' 100 × 100 A keeps a window of
    at most 60% of the room below the header, the rest for the explanation."""
    seen = {facts["stage"].key: (screen, facts) for _, screen, facts in every_screen("sliding_window", (80, 24))}
    screen, facts = seen["A"]
    assert facts["window"].rows == 8 and "rows 1–8 of 8" in screen
    assert facts["notes"].height >= 4 and "│ What            A = softmax(S + M)" in screen
    assert "× masked: weight 0" in screen  # the legend breaks between its items, not inside one

    async def run():
        app = WalkApp(compute(load_scenario("shapes")), ViewOptions(), start=9)  # A, head 1
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            return app.step[0].key, app.query_one(MatrixGrid).region, app.query_one("#body").region

    key, grid, body = asyncio.run(run())
    assert key == "A" and grid.height <= body.height * 3 // 5


def test_chinese_explanation_starts_on_screen_at_80x24() -> None:
    for app, screen, facts in every_screen("girl_bangs", (80, 24), lang="zh"):
        stage = facts["stage"]
        what = plain(stage_text("zh", stage, app.walk.scenario, app.walk.mode, "what"), app.opts)
        assert what.replace(" ", "")[:8] in screen.replace(" ", "").replace("│", ""), stage.key


def test_a_tiny_terminal_still_shows_where_the_learner_is() -> None:
    # 40 × 12: cramped, but every stage draws its header and the cursor's row, and nothing breaks
    for app, screen, facts in every_screen("causal_mask", (40, 12)):
        assert screen.splitlines()[0].startswith(f" Stage {facts['index'] + 1} / "), facts["stage"].key
        if facts["stage"].kind != TOKENS:
            assert "▸ " in screen, facts["stage"].key  # the window keeps the cursor's row in view


def test_the_heads_blocks_are_named_under_the_matrix_where_h_and_q_s_text_point() -> None:
    """grouped_query's Q and K hold several heads' columns side by side. Q's text and h's message
    say the line under the table names the blocks; in the walk that line was at the end of the
    notes, below the worked cell. It is the matrix's legend now, above the notes."""
    seen = {facts["stage"].key: screen for _, screen, facts in every_screen("grouped_query", (80, 24))}
    q_lines = seen["Q"].splitlines()
    at = next(i for i, line in enumerate(q_lines) if "Q holds 4 heads side by side" in line)
    assert "head 1 = columns 1–2" in q_lines[at]
    assert at < next(i for i, line in enumerate(q_lines) if "╭─ Queries" in line)
    k = seen["K"]
    assert "K holds 2 K/V heads side by side: K/V head 1 = columns 1–2" in k
    assert k.index("K holds 2 K/V heads") < k.index("╭─ Keys")


def test_a_window_whose_rows_have_longer_labels_still_fits_its_lines() -> None:
    """shapes' QKᵀ at 80 × 24 with a two-line message under it: the window (rows t96–t100) was
    laid out with the label width of rows t1–t9 and a narrower column, so every row ran one
    cell past the pane and wrapped its last number onto a line of its own."""

    async def run():
        app = WalkApp(compute(load_scenario("shapes")), ViewOptions())
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app.say_now("A message of two lines at 80 columns, as the first screen's lesson pointer is: "
                        "it takes the room the matrix had")
            app.go(next(i for i, (s, h) in enumerate(app.steps) if s.key == "QK^T"))
            await pilot.pause()
            return app.query_one(MatrixGrid).shown, screen_text(app)

    shown, screen = asyncio.run(run())
    lines = screen.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.strip().startswith("──"))
    body = lines[rule + 1:rule + 1 + shown.rows]
    assert shown.rows >= 3 and all(re.match(r" [ ▸] t\d+ ", line) for line in body), body
    assert lines[rule + 1 + shown.rows].startswith(" QKᵀ[")  # the cursor's line right after them
    assert f"columns {shown.left + 1}–{shown.left + shown.cols} of 100" in screen


def test_the_first_screen_says_what_the_lesson_is_and_d_reaches_its_introduction() -> None:
    """A new user found the lesson's introduction only by paging stage 1's notes: the first
    screen names the lesson and says where its introduction is; d (twice at most) brings it."""
    from appdriver import drive

    d = drive("river_bank", ["d", "d"], size=(80, 24))
    first = " ".join(d.screens[0].split())
    assert "This lesson: by the river bank: context makes bank a place. Its introduction follows" in first
    assert any("╭─ by the river bank: context makes bank a place" in s for s in d.screens[1:])
    zh = drive("river_bank", [], size=(80, 24), opts=ViewOptions(lang="zh"))
    assert "本课：" in zh.screen and "课程介绍在分词说明的后面" in "".join(zh.screen.split())
    # the message wraps Chinese between characters: its first line is filled, not cut at "按 d"
    gb = drive("girl_bangs", [], size=(80, 24), opts=ViewOptions(lang="zh"))
    said = [line for line in gb.screen.splitlines() if line.startswith(" 本课：")][0]
    assert cell_len(said.rstrip()) >= 74, said  # was cut at "按 d" (69 cells)
    resumed = drive("river_bank", [], size=(80, 24), start=3)
    assert "This lesson" not in resumed.screen  # not where the walk resumes later on
