"""The walk's layout teaches at 80 × 24 and at 200 × 60: on every stage of every built-in lesson
the header, the whole matrix (or the whole of its window, with the line under it) and the worked
cell's title and first line are on screen together, without scrolling, and after m or h the line
saying how that cell changed; from 160 columns the notes sit beside the matrix. Plus a few screens
checked line by line."""

from __future__ import annotations

import asyncio
import io
import re

import pytest
import numpy as np
from rich.cells import cell_len
from rich.console import Console

from appdriver import screen_text
from attnwalk.app.grid import MatrixGrid
from attnwalk.app.walk import WalkApp
from attnwalk.layer.axes import axes
from attnwalk.layer.stages import TOKENS
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import bracketed, number, plain, say
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario
from attnwalk.render.worked import worked_cell
from attnwalk.text import stage_text


async def settled(pilot, app) -> None:
    """After a key: the worked cell laid out (a worker on a large layer) and drawn."""
    await pilot.pause()
    while app.working:
        await pilot.pause(0.02)
    await pilot.pause()


def every_screen(name: str, size: tuple[int, int], lang: str = "en",
                 changes: bool = False) -> list[tuple[WalkApp, str, dict]]:
    """Each stage's screen (a per-head stage in its first two heads: the others are laid out the
    same), reached as g reaches it, and what the app had in its panes then. With `changes`, each
    stage with cells also after m (and after h where there is another head), as facts["after_m"]
    and facts["after_h"]: (screen, the walk and head before, the walk and head after)."""

    async def run():
        app = WalkApp(compute(load_scenario(name)), ViewOptions(lang=lang))
        seen = []
        async with app.run_test(size=size) as pilot:
            await settled(pilot, app)
            for i, (stage, head) in enumerate(app.steps):
                if head > 1:
                    continue
                if i:
                    app.message = ""  # as the key that goes there clears the first screen's message
                    app.go(i)
                    await settled(pilot, app)
                grid = app.query_one(MatrixGrid)
                facts = {"stage": app.step[0], "head": app.step[1], "window": grid.shown,
                         "index": app.index, "cursor": app.cursor,
                         "tokens_scroll": app.query_one("#tokens").max_scroll_y,
                         "grid": grid.region if grid.display else app.query_one("#tokens").region,
                         "notes": app.query_one("#notes").region,
                         "worked_width": app.pane_opts().width}  # what the worked cell folds to
                seen.append((app, screen_text(app), facts))
                if not changes or stage.kind == TOKENS:
                    continue
                scaled = app.walk
                await pilot.press("m")
                await settled(pilot, app)
                facts["after_m"] = (screen_text(app), scaled, head, app.walk, head)
                app.walk, app.before = scaled, None  # back as it was, without a key
                if stage.per_head and app.walk.scenario.heads > 1:
                    await pilot.press("h")
                    await settled(pilot, app)
                    facts["after_h"] = (screen_text(app), scaled, head, app.walk, app.step[1])
                    app.index, app.before = i, None
        return seen

    return asyncio.run(run())


def first_words(body: str, count: int = 3) -> str:
    """The start of a paragraph as the explanation's first line shows it, whatever its wrapping."""
    return " ".join(body.split()[:count])


def drawn(renderable, width: int) -> list[str]:
    """`renderable`'s lines at `width`, as a pane of that width draws them."""
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    with console.capture() as capture:
        console.print(renderable)
    return [line.rstrip() for line in capture.get().splitlines()]


def assert_worked_start(walk, stage, head: int, cursor, opts: ViewOptions, screen: str, width: int,
                        where: str, before=None) -> None:
    """The cursor's worked cell starts on screen: its title and first line as a pane `width`
    wide draws them; with `before` (the walk and head m or h left), the line saying how the cell
    changed, above them, with both values computed here from the two walks."""
    r, c = cursor
    rows, cols = axes(walk, stage, head, opts.lang)
    symbol = plain(stage.symbol, opts)
    cell = f"{bracketed(stage.symbol, opts)}[{rows[r]}, {cols[c]}]"  # (S + M)[T2, T2]; a block's (S + M)⁽²⁾[…]
    lines = screen.splitlines()
    title = next((i for i, line in enumerate(lines) if f"─ {say(opts, 'ui.worked_cell')}" in line
                  and f"{cell} ─" in line), None)
    assert title is not None, f"{where}: no worked cell title for {cell}\n{screen}"
    body = drawn(worked_cell(walk.view(head), stage.key, r, c, opts.with_(width=width)), width)
    first = next(line for line in body[1:] if line.strip("│ "))
    assert first.strip("│ ") in lines[title + 1], f"{where}: {first!r} is not the line under the title\n{screen}"
    if before is None:
        return
    old_walk, old_head = before
    was = float(old_walk.matrix(stage.key, old_head if stage.per_head else 0)[r, c])
    now = float(walk.matrix(stage.key, head if stage.per_head else 0)[r, c])
    said = " ".join(" ".join(lines[:title]).split())
    if np.isclose(was, now, rtol=1e-12, atol=1e-15) or was == now:
        expected = say(opts, "app.unchanged", change="", cell=cell, value=number(now, opts))
    else:
        expected = say(opts, "app.old_new", change="", cell=cell, old=number(was, opts), new=number(now, opts))
    expected = " ".join(expected.lstrip(":： ").split())
    assert expected in said, f"{where}: no {expected!r}\n{screen}"


def assert_stage_screen(app, screen: str, facts: dict, size, where: str) -> None:
    """The header, the whole matrix (or a window with the cursor's cell) and the worked cell's
    first line, or on the tokens the table and the explanation's start."""
    width, height = size
    stage, head = facts["stage"], facts["head"]
    lines = screen.splitlines()
    assert len(lines) == height
    assert lines[0].startswith(" " + app.t("ui.stage_header", index=facts["index"] + 1, count=len(app.steps))), where
    walk = app.walk
    if stage.kind == TOKENS:
        # the tokens table whole, or its start in a pane that scrolls; the explanation begins
        assert walk.scenario.tokens[0] in screen, where
        assert walk.scenario.tokens[-1] in screen or facts["tokens_scroll"] > 0, where
        what = plain(stage_text(app.opts.lang, stage, walk.scenario, walk.mode, "what"), app.opts)
        assert what.replace(" ", "")[:8] in screen.replace(" ", "").replace("│", ""), where
        return
    window = facts["window"]
    M = walk.matrix(stage.key, head)
    assert window.rows >= 1 and window.cols >= 1, where
    # every row label of the window, in order, each on its own line of the matrix pane
    grid_lines = lines[facts["grid"].y:facts["grid"].y + facts["grid"].height]
    rows, cols = axes(walk, stage, head, app.opts.lang)
    labels = [line[3:].split("  ")[0].split(" ")[0].strip() for line in grid_lines[2:2 + window.rows]]
    assert labels == [rows[r].split(" ")[0] for r in range(window.top, window.top + window.rows)], where
    r, c = facts["cursor"]
    assert window.top <= r < window.top + window.rows and window.left <= c < window.left + window.cols, where
    # the line under the table: the cursor's cell and value, so nothing above it was cut
    assert f"[{rows[r]}, {cols[c]}] = " in screen, where
    if stage.square and walk.scenario.source is None and M.shape[1] <= 16:  # a few keys: all in view
        assert window.cols == M.shape[1], where
    if M.shape[0] <= 8:  # a lesson's matrix: every row
        assert window.rows == M.shape[0], where
    assert facts["notes"].height >= 3, where
    assert_worked_start(walk, stage, head, facts["cursor"], app.opts, screen, facts["worked_width"], where)
    if width >= 160:  # the notes beside the matrix, not under it
        assert facts["notes"].x > facts["grid"].x and facts["notes"].y == facts["grid"].y, where


@pytest.mark.parametrize("name", builtin_names())
def test_at_80x24_each_stage_shows_its_matrix_and_worked_cell_and_m_h_what_changed(name: str) -> None:
    """The issue's test of done (issue 28): at 80 × 24, for every built-in and every stage, the
    first screen shows the header, the matrix (or a window with the cursor's cell) and the worked
    cell's first line; after m, and after h, the line saying how the cursor's cell changed."""
    for app, screen, facts in every_screen(name, (80, 24), changes=True):
        where = f"{name} {facts['stage'].key} head {facts['head'] + 1} at 80x24"
        assert_stage_screen(app, screen, facts, (80, 24), where)
        for key in ("after_m", "after_h"):
            if key in facts:
                after, old_walk, old_head, new_walk, new_head = facts[key]
                assert_worked_start(new_walk, facts["stage"], new_head, facts["cursor"], app.opts, after,
                                    facts["worked_width"], f"{where} {key}", before=(old_walk, old_head))


@pytest.mark.parametrize("name", builtin_names())
def test_at_80x24_in_chinese_and_at_200x60_each_stage_shows_the_same(name: str) -> None:
    for size, lang in (((80, 24), "zh"), ((200, 60), "en")):
        for app, screen, facts in every_screen(name, size, lang):
            assert_stage_screen(app, screen, facts, size, f"{name} {facts['stage'].key} head "
                                f"{facts['head'] + 1} at {size} in {lang}")


def test_at_80x24_river_bank_a_shows_its_table_then_the_worked_cell() -> None:
    # the 4 × 4 weights whole, each row's ▲, the status, the legend, then the worked cell begins
    _, screen, _ = every_screen("river_bank", (80, 24))[9]
    lines = screen.splitlines()
    assert lines[0].startswith(" Stage 10 / 11   A  Attention weights")
    assert lines[4].split() == ["by", "the", "river", "bank"]
    assert lines[9].split()[:2] == ["▸", "bank"] and "0.6854 ▲" in lines[9]  # 69% to river
    assert lines[10].strip() == "A[bank, river] = 0.6854"
    at = next(i for i, line in enumerate(lines) if line.startswith(" ╭─ Worked cell: A[bank, river] ─"))
    assert 12 < at and lines[at + 1].startswith(" │ S[bank] = [0.4600, 0.0000, 2.3000, 0.6900]")
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
    """sliding_window's 8 × 8 A: the band of three keys is the lesson, so all 8 rows and all 8
    columns show (they fit one cell apart: two apart cut off 步, the band's last cell), with the
    worked cell's start under them; shapes' 100 × 100 A keeps a window of at most 60% of the
    room below the header, the rest for the notes."""
    for lang, title in (("en", "─ Worked cell: A[步, 里] ─"), ("zh", "─ 单格演算：A[步, 里] ─")):
        seen = {facts["stage"].key: (screen, facts)
                for _, screen, facts in every_screen("sliding_window", (80, 24), lang)}
        screen, facts = seen["A"]
        assert facts["window"] == (0, 0, 8, 8), lang
        lines = screen.splitlines()
        assert lines[4].split() == ["小明", "今天", "早上", "在", "公园", "里", "跑", "步"], lang
        assert lines[13].split()[:2] == ["▸", "步"] and lines[13].split()[-2:] == ["0.3333", "▲"], lang
        assert facts["notes"].height >= 3 and title in screen, lang
        if lang == "en":  # the legend breaks between its items, not inside one
            assert "× masked: weight 0" in screen

    async def run():
        app = WalkApp(compute(load_scenario("shapes")), ViewOptions(), start=9)  # A, head 1
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            return app.step[0].key, app.query_one(MatrixGrid).region, app.query_one("#body").region

    key, grid, body = asyncio.run(run())
    assert key == "A" and grid.height <= body.height * 3 // 5


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
    assert at < next(i for i, line in enumerate(q_lines) if "╭─ Worked cell: Q[" in line)
    k = seen["K"]
    assert "K holds 2 K/V heads side by side: K/V head 1 = columns 1–2" in k
    assert k.index("K holds 2 K/V heads") < k.index("╭─ Worked cell: K[")


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


MANY_HEADS = """\
tokens: [a, b, c, d, e, f, g, h, i, j]
embeddings: {random: {seed: 1, rows: 10, cols: 24}}
heads: 12
W_Q: {random: {seed: 2, rows: 24, cols: 24}}
W_K: {random: {seed: 3, rows: 24, cols: 24}}
W_V: {random: {seed: 4, rows: 24, cols: 24}}
"""


def test_the_legend_gives_way_before_the_rows_do(tmp_path) -> None:
    """A new user's `attnwalk model` Q at 80 × 24: the twelve heads' blocks took five lines of
    legend and left two rows of seven. Where the whole legend does not fit beside every row,
    the blocks are said in one line; the rows all show."""
    path = tmp_path / "heads.yaml"
    path.write_text(MANY_HEADS, encoding="utf-8")
    seen = {facts["stage"].key: (screen, facts) for _, screen, facts in every_screen(str(path), (80, 24))}
    screen, facts = seen["Q"]
    assert facts["window"].rows == 10, facts["window"]
    assert "Q: 12 heads side by side, 2 columns each (head 1 = columns 1–2, …)" in screen
    assert "head 2 = columns 3–4" not in screen  # the whole list, five lines, gave way
    whole = [screen for _, screen, facts in every_screen(str(path), (200, 60)) if facts["stage"].key == "Q"][0]
    assert "head 12 = columns 23–24" in whole  # where there is room, the whole list


def test_a_window_onto_a_wide_a_keeps_the_cursor_rows_own_key_in_view(tmp_path) -> None:
    """On A the diagonal is where a token attends to itself (sliding_window's band ends there): a
    window moved to the cursor's column keeps the row's own column too, where both fit."""
    tokens = [f"t{i}" for i in range(1, 21)]
    path = tmp_path / "wide.yaml"
    path.write_text(f"tokens: [{', '.join(tokens)}]\nembeddings: [{', '.join(['[1, 0]'] * 20)}]\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", encoding="utf-8")

    async def run():
        app = WalkApp(compute(load_scenario(str(path))), ViewOptions())
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("g", *"A", "enter", "c", *"16 12", "enter")
            await pilot.pause()
            return app.cursor, app.query_one(MatrixGrid).shown, screen_text(app)

    cursor, shown, screen = asyncio.run(run())
    assert cursor == (15, 11)
    assert shown.cols < 20 and shown.left <= 11 and 15 < shown.left + shown.cols, shown
    labels = next(line for line in screen.splitlines() if "t12" in line and "t16" in line)
    assert labels.split()[0] == f"t{shown.left + 1}"


def test_at_200x60_the_notes_start_next_to_a_small_matrix() -> None:
    """About 50 empty columns separated girl_bangs' 3 × 3 A from the notes at 200 × 60 (each pane
    took half): the matrix pane is as wide as its table and the lines under it, the notes take
    the rest; a large matrix takes at most 60%."""
    seen = {facts["stage"].key: (screen, facts) for _, screen, facts in every_screen("girl_bangs", (200, 60))}
    screen, facts = seen["A"]
    hint = "arrows or a click move the cursor; its cell is worked out in the notes"
    assert facts["grid"].width <= len(hint) + 4 and facts["notes"].x == facts["grid"].right
    assert hint in screen and "▸ 撩    0.1000    0.1896    0.7104 ▲" in screen  # nothing cut
    shapes = {facts["stage"].key: facts for _, _, facts in every_screen("shapes", (200, 60))}
    assert 100 <= shapes["A"]["grid"].width <= 120 and shapes["A"]["notes"].width >= 78
