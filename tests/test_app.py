"""The interactive walk (attnwalk/app/walk.py) driven by Textual's pilot: its keys, the cell cursor
and the worked pane that follows it, m and h keeping the learner in place, predictions, the help.

Golden numbers are typed in from lesson 002 (女生撩刘海), ../shared/seeds/002_*.txt:
QKᵀ[撩, 刘海] = 0.3274×1.3872 + 1.2872×5.3083 = 7.2868, S[撩, 刘海] = 7.2868 / √2 = 5.1526,
A[女生, 刘海] = 0.8078. Uniform weights over 3 keys are 1/3 = 0.3333 (computed here).
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from appdriver import drive, typed
from attnwalk.layer.modes import WALK_MODES
from attnwalk.layer.walk import compute, with_mode
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario

STAGES_002 = ["tokens", "E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z"]

TWO_HEADS = """\
tokens: [the, cat, sat]
embeddings: [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]
heads: 2
W_Q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]]
W_K: [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]]
W_V: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
"""


def stage_keys(d) -> str:
    return d.app.step[0].key


def footer(screen: str) -> str:
    return screen.rstrip("\n").splitlines()[-1]


# -- moving --------------------------------------------------------------------------------------


def test_n_enter_space_go_on_and_b_goes_back() -> None:
    d = drive("girl_bangs", ["n", "enter", "space", "b"])
    assert [s.splitlines()[0].split()[1] for s in d.screens] == ["1", "2", "3", "4", "3"]


def test_back_at_the_first_stage_stays_and_says_so() -> None:
    d = drive("girl_bangs", ["b"])
    assert d.app.index == 0 and "Already at the first stage." in d.screen


def test_the_eleven_stages_of_lesson_002_in_order_and_n_at_the_end_asks_then_ends_with_0() -> None:
    d = drive("girl_bangs", ["n"] * 12, app=ended_app("girl_bangs"))
    assert [line.split("   ")[0] for line in (s.splitlines()[0] for s in d.screens[:11])] == [
        f" Stage {i} / 11" for i in range(1, 12)]
    assert [step[0].key for step in d.app.steps] == STAGES_002
    assert d.screens[-2] is not None and "n or Enter again leaves the walk; b goes back." in d.screens[-2]
    assert d.screens[-1] is None and d.app.ended and d.code == 0


def ended_app(name: str, lang: str = "en"):
    """A walk that says, at its end, what commands/walk says there."""
    from attnwalk.app.walk import WalkApp
    from attnwalk.commands.walk import walk_ending

    walk, opts = compute(load_scenario(name)), ViewOptions(lang=lang)
    return WalkApp(walk, opts, ending=lambda: walk_ending(walk, opts))


def test_the_end_of_a_walk_says_what_to_try_next_and_asks_before_leaving() -> None:
    """n on the last stage quit at once with "End of the walk." and nothing on what to try next
    (issue 28): it now names the quiz, compare and the next lesson (its title from its file), and
    leaves on a second n; b goes back instead, and then n at the end asks again."""
    d = drive("girl_bangs", ["g", *typed("11"), "n"], size=(80, 24), app=ended_app("girl_bangs"))
    said = " ".join(d.screen.split())
    assert "End of the walk. What next:" in said and d.screens[-1] is not None and d.code is None
    assert "attnwalk quiz girl_bangs: questions on this scenario's own numbers" in said
    assert "attnwalk compare girl_bangs: scaled, unscaled and uniform side by side" in said
    assert "attnwalk run word_order: the next lesson, 刘海撩女生: does word order matter to attention?" in said
    assert "attnwalk decode" not in said  # girl_bangs has no causal mask: decode would refuse it
    back = drive("girl_bangs", ["g", *typed("11"), "n", "b", "n", "n", "n"], app=ended_app("girl_bangs"))
    assert "Stage 10 / 11" in back.screens[-4]  # b went back instead of leaving
    assert "Stage 11 / 11" in back.screens[-3] and "End of the walk" not in back.screens[-3]
    assert "End of the walk" in back.screens[-2]  # n at the end asks again
    assert back.screens[-1] is None and back.app.ended and back.code == 0


def test_the_last_lesson_points_at_decode_and_a_real_model_in_chinese() -> None:
    from attnwalk.scenario.builtins import course

    assert course()[-1] == "kv_cache"
    app = ended_app("kv_cache", "zh")
    d = drive("kv_cache", ["g", *typed(str(len(app.steps))), "n"], app=app, opts=ViewOptions(lang="zh"))
    said = "".join(d.screen.split())
    assert "讲解结束。接下来可以：" in said
    assert "attnwalkdecodekv_cache：同一层改为逐个token生成，用上KV缓存" in said
    assert "attnwalkmodel\"自己写的一句话\"：看真实预训练模型的一层" in said
    assert "再按n或Enter结束讲解；按b返回。" in said


def test_the_course_is_every_built_in_lesson_in_docs_lessons_order() -> None:
    import re
    from pathlib import Path

    from attnwalk.scenario.builtins import course, next_lesson

    lessons = (Path(__file__).resolve().parents[1] / "docs" / "lessons.md").read_text(encoding="utf-8")
    table = lessons.split("# The lessons", 1)[1]
    assert tuple(re.findall(r"^\| `(\w+)` \|", table, re.M)) == course()
    assert sorted(course()) == builtin_names()
    assert next_lesson("girl_bangs") == "word_order" and next_lesson("kv_cache") is None
    assert next_lesson("my_own") is None


def test_q_quits_with_0_ctrl_c_with_130_ctrl_d_with_0() -> None:
    assert drive("girl_bangs", ["n", "q"]).code == 0
    interrupted = drive("girl_bangs", ["n", "ctrl+c"])
    assert interrupted.code == 130 and interrupted.app.index == 1  # the place, for --resume
    assert drive("girl_bangs", ["ctrl+d"]).code == 0


def test_unknown_keys_change_nothing() -> None:
    d = drive("girl_bangs", ["x", "Z", "n"])
    assert d.screens[0] == d.screens[1] == d.screens[2] and d.app.index == 1


# -- g: jump ---------------------------------------------------------------------------------------


def test_jump_by_number_and_by_stage_name() -> None:
    d = drive("girl_bangs", ["g", *typed("10")])
    assert d.app.index == 9 and "Stage 10 / 11   A  Attention weights" in d.screen
    d = drive("girl_bangs", ["g", *typed("QKT"), "g", *typed("z")])
    assert stage_keys(d) == "Z"
    assert "Jump to stage (1–11):" in d.screens[1]  # the prompt, above the footer


@pytest.mark.parametrize("value", ["0", "12", "nonsense"])
def test_jump_out_of_range_says_so_and_asks_again(value: str) -> None:
    d = drive("girl_bangs", ["n", "g", *typed(value)])
    assert d.app.index == 1
    assert f"No such stage: {value}; choose 1–11 or a stage name such as Z" in d.screen
    assert "Jump to stage (1–11):" in d.screen  # the line stays open for another try
    d = drive("girl_bangs", ["n", "g", *typed(value), *typed("Z")])
    assert d.app.step[0].key == "Z"
    d = drive("girl_bangs", ["n", "g", *typed(value), "escape", "n"])
    assert d.app.index == 2  # Esc left the line: n is the walk's again


def test_while_a_line_is_open_the_footer_says_how_to_answer_or_leave_it() -> None:
    """The walk's keys are letters the line takes as typing, so Textual drops them from the
    footer while it is open: the footer was blank. It now offers enter and esc, in zh too."""
    d = drive("girl_bangs", ["n", "g", "x", "escape", "n"], size=(80, 24))
    assert footer(d.screens[2]).split() == ["enter", "answer", "esc", "cancel"]
    assert d.app.index == 2 and "q quit" in footer(d.screen)  # esc left the line, n went on
    zh = drive("girl_bangs", ["n", "c"], size=(80, 24), opts=ViewOptions(lang="zh"))
    assert footer(zh.screen).split() == ["enter", "确定", "esc", "取消"]


def test_c_takes_row_and_column_on_one_line_and_asks_again_after_a_wrong_one() -> None:
    """A new user typed `bank river` at c's row prompt, as `attnwalk explain` takes it: it said
    "No such row: bank river", closed the line, and the retyped letters ran as keys (b, n)."""
    d = drive("river_bank", ["g", *typed("QK^T"), "c", *typed("bank river")])
    assert d.app.step[0].key == "QK^T" and d.app.cursor == (3, 2)
    d = drive("river_bank", ["g", *typed("A"), "c", *typed("2 3")])
    assert d.app.cursor == (1, 2)
    d = drive("river_bank", ["g", *typed("A"), "c", *typed("shore"), *typed("bank"), *typed("river")])
    assert "No such row: shore; rows are numbered from 1, so choose 1–4" in d.screens[-6 - 5]
    assert d.app.step[0].key == "A" and d.app.cursor == (3, 2)
    d = drive("river_bank", ["g", *typed("A"), "c", *typed("by"), *typed("9"), *typed("the")])
    assert "No such column: 9" in d.screens[-4] and d.app.cursor == (0, 1)
    # both on one line, the column wrong: the column is named, and asked for that row
    d = drive("river_bank", ["g", *typed("A"), "c", *typed("2 9")])
    assert "No such column: 9; columns are numbered from 1, so choose 1–4" in d.screen
    assert "Column (number from 1, or token):" in d.screen
    d = drive("river_bank", ["g", *typed("A"), "c", *typed("2 9"), *typed("river")])
    assert d.app.cursor == (1, 2)
    d = drive("girl_bangs", ["g", *typed("Q"), "c", *typed("撩 刘海")], opts=ViewOptions(lang="zh"))
    assert "没有这一列：刘海" in d.screen and "没有这一行" not in d.screen  # Q's columns are dimensions


def test_a_jump_typed_before_the_prompt_line_is_mounted_still_asks() -> None:
    """The prompt line is mounted after the first frame (it would slow the first screen); a g
    that comes first waits for it instead of failing."""
    from attnwalk.app.walk import WalkApp

    class KeyFirst(WalkApp):  # as if g arrived before the after-the-first-frame callbacks ran
        def call_after_refresh(self, callback, *args, **kwargs):
            if getattr(callback, "__name__", "") == "add_prompt":
                return True
            return super().call_after_refresh(callback, *args, **kwargs)

    app = KeyFirst(compute(load_scenario("girl_bangs"), "scaled"), ViewOptions())
    d = drive("girl_bangs", ["g", *typed("10")], app=app)
    assert "Jump to stage" not in d.screens[0]
    assert "Jump to stage (1–11):" in d.screens[1]
    assert d.app.index == 9 and "Stage 10 / 11   A  Attention weights" in d.screen


def test_an_app_turns_the_collector_back_on_only_if_the_start_had_it_off() -> None:
    import gc

    from attnwalk.app import collect_again

    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    collect_again()  # as in every test: the collector is on, nothing is frozen
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    gc.disable()  # as the console script starts (cli.run)
    try:
        collect_again()
        assert gc.isenabled() and gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()
        gc.enable()


def test_escape_cancels_a_jump() -> None:
    d = drive("girl_bangs", ["n", "g", "5", "escape", "n"])
    assert d.app.index == 2  # the n after Esc is a key again, not typed into the prompt


# -- the cursor and the worked pane ------------------------------------------------------------------


def test_the_worked_pane_follows_the_arrows() -> None:
    d = drive("girl_bangs", ["g", *typed("8"), "up", "left"], size=(120, 50))
    first, moved = d.screens[3], d.screen
    # QKᵀ opens on the focus row 撩 and the key it attends to most, 刘海
    assert "Worked cell: QKᵀ[撩, 刘海]" in first and "7.2868" in first
    assert "0.32736 × 1.38719" in first  # the lesson's 0.3274 × 1.3872, to 5 decimals
    assert d.app.cursor == (0, 1)  # up to 女生, left to 撩
    assert "Worked cell: QKᵀ[女生, 撩]" in moved and "QKᵀ[女生, 撩] = 6.2388" in moved
    q = compute(load_scenario("girl_bangs")).matrix("Q")[0] @ compute(load_scenario("girl_bangs")).matrix("K")[1]
    assert f"{q:.4f}" == "6.2388"  # q_女生 · k_撩, computed apart from the app


def test_arrows_stop_at_the_edges() -> None:
    d = drive("girl_bangs", ["g", *typed("8"), "down", "down", "down", "right", "right", "right"])
    assert d.app.cursor == (2, 2)


def test_a_click_moves_the_cursor_to_that_cell() -> None:
    import asyncio

    from attnwalk.app.grid import MatrixGrid, TOP_LINES
    from attnwalk.app.walk import WalkApp

    async def run():
        app = WalkApp(compute(load_scenario("girl_bangs")), ViewOptions(), start=7)
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            grid = app.query_one(MatrixGrid)
            x0, x1, col = grid._col_x[0]  # 女生's column, where the last drawing put it
            await pilot.click("#matrix", offset=(1 + (x0 + x1) // 2, TOP_LINES + 2))  # 1: the padding
            await pilot.pause()
            return app.cursor, col

    cursor, col = asyncio.run(run())
    assert col == 0 and cursor == (2, 0)  # row 刘海, column 女生


def test_c_puts_the_cursor_on_a_typed_row_and_column() -> None:
    d = drive("girl_bangs", ["g", *typed("8"), "up", "c", *typed("2"), *typed("刘海")], size=(120, 50))
    assert d.app.cursor == (1, 2) and "Worked cell: QKᵀ[撩, 刘海]" in d.screen
    assert "Row (number from 1, or token):" in d.screens[5 + 1]  # after c
    assert "Column (number from 1, or token):" in d.screens[5 + 1 + 2]


def test_c_on_a_d_model_stage_takes_dimensions_as_the_table_labels_them() -> None:
    d = drive("girl_bangs", ["g", *typed("4"), "c", *typed("1"), *typed("刘海")])
    assert "No such column: 刘海; columns are numbered from 1, so choose 1–2" in d.screen
    d = drive("girl_bangs", ["g", *typed("4"), "c", *typed("撩"), *typed("2")])
    assert d.app.cursor == (1, 1) and "Column (dimension 1–2):" in d.screens[-3]


def test_c_with_a_repeated_token_asks_for_its_number(tmp_path) -> None:
    path = tmp_path / "repeat.yaml"
    path.write_text("tokens: [the, dog, the]\nembeddings: [[1, 0], [0, 1], [1, 1]]\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", encoding="utf-8")
    d = drive(str(path), ["g", *typed("A"), "c", *typed("the#3"), *typed("the#1")])
    assert d.app.cursor == (2, 0)
    d = drive(str(path), ["g", *typed("A"), "c", *typed("the")])
    assert "the appears more than once (rows 1, 3); type its row number instead" in d.screen


def test_rows_of_k_are_the_source_tokens_in_cross_attention(tmp_path) -> None:
    path = tmp_path / "cross.yaml"
    path.write_text("tokens: [je, suis]\nembeddings: [[1, 0], [0, 1]]\n"
                    "source:\n  tokens: [I, am, here]\n  embeddings: [[1, 1], [0, 1], [1, 0]]\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", encoding="utf-8")
    d = drive(str(path), ["g", *typed("K"), "c", *typed("here"), *typed("1")])
    assert d.app.cursor == (2, 0) and "K[here, 1]" in d.screen
    d = drive(str(path), ["g", *typed("A"), "c", *typed("suis"), *typed("am")])
    assert d.app.cursor == (1, 1)


def test_bad_row_names_the_choices_and_the_tokens_stage_offers_no_cell() -> None:
    d = drive("girl_bangs", ["g", *typed("10"), "c", *typed("4")])
    assert "No such row: 4; rows are numbered from 1, so choose 1–3 or a token: 女生, 撩, 刘海" in d.screen
    d = drive("girl_bangs", ["c", "n", "b"])
    assert "c cell" not in footer(d.screens[0]) and "Row (number from 1" not in d.screens[1]  # c: nothing to ask
    assert "c cell" in footer(d.screens[2]) and "c cell" not in footer(d.screens[3])


def test_the_query_row_is_marked_and_kept_in_the_related_matrices() -> None:
    # the cursor on 女生's row of QKᵀ: S, A and Z mark the same query
    d = drive("girl_bangs", ["g", *typed("8"), "up", "n", "n", "n"], size=(120, 50))
    for screen in d.screens[-4:]:
        assert "▸ 女生" in screen
    assert d.app.cursor[0] == 0 and stage_keys(d) == "Z"
    a_screen = d.screens[-2]
    assert "A[女生, 刘海] = 0.8078" in a_screen  # the lesson's weight, in the status under A


def test_a_row_picked_on_q_is_still_the_row_on_qkt_three_stages_later() -> None:
    # river_bank opens on bank's row; river picked on Q stays through K and V (the same tokens)
    # to QKᵀ, S and A, and the column picked on Q (a dimension, d_k) is K's column too
    d = drive("river_bank", ["g", *typed("5"), "up", "right", "n", "n", "n", "n"], size=(120, 50))
    keys = [s for s in d.screens[-5:]]
    assert all("▸ river" in screen for screen in keys)
    assert d.app.cursor[0] == 2 and stage_keys(d) == "S"
    assert "K[river, finance] = " in d.screens[-4] and "QKᵀ[river, " in d.screens[-2]
    d = drive("river_bank", ["g", *typed("5"), "up", "n", "n", "n", "b", "b", "b"])
    assert stage_keys(d) == "Q" and d.app.cursor[0] == 2  # and back again


# -- m and h: the same place, what changed -----------------------------------------------------------


def test_m_cycles_the_modes_on_the_same_stage_and_cell() -> None:
    d = drive("girl_bangs", ["g", *typed("10"), "up", "m", "m", "m"], size=(120, 50))
    assert [w for w in d.app.walks] == ["scaled", "unscaled", "uniform"]
    assert d.app.index == 9 and d.app.cursor == (0, 2)
    scaled, unscaled, uniform, again = d.screens[-4:]
    assert "mode     scaled" in scaled and "mode     unscaled" in unscaled and "mode     uniform" in uniform
    assert "Mode: unscaled" in unscaled
    assert "A[女生, 刘海] = 0.8078" in scaled
    assert "A[女生, 刘海] = 0.3333" in uniform and f"{1 / 3:.4f}" == "0.3333"
    assert "unscaled → uniform: A[女生, 刘海] was" in uniform and "is now 0.3333" in uniform
    assert "9 cells changed (underlined)" in uniform  # every weight of a 3 × 3 A moves to 1/3
    assert "uniform → scaled" in again and "is now 0.8078" in again


def test_m_s_before_and_now_is_said_on_the_stage_where_m_was_pressed_only() -> None:
    d = drive("girl_bangs", ["g", *typed("9"), "m", "n", "n"], size=(120, 50))
    on_s, on_a, on_z = d.screens[-3:]
    assert "scaled → unscaled: S[" in on_s
    assert "scaled → unscaled" not in on_a and "scaled → unscaled" not in on_z
    assert "cells changed (underlined)" in on_a  # the marks stay: A did change


def test_h_on_a_lesson_of_one_head_says_so() -> None:
    d = drive("girl_bangs", ["g", *typed("10"), "h"])
    assert "This scenario has only one head." in d.screen
    assert "h head" not in footer(d.screen)  # not offered, but not silent either


def test_m_marks_nothing_where_the_mode_changes_nothing() -> None:
    d = drive("girl_bangs", ["g", *typed("5"), "m"])  # Q is computed before any score
    assert "cells changed" not in d.screen and "Q[撩, 1] is unchanged" in d.screen


def test_each_mode_is_computed_once() -> None:
    d = drive("girl_bangs", ["g", *typed("10"), "m", "m", "m", "m"])
    assert d.app.walk is d.app.walks["unscaled"] and len(d.app.walks) == 3


@pytest.mark.parametrize("name", builtin_names())
def test_with_mode_gives_what_compute_gives(name: str) -> None:
    scn = load_scenario(name)
    base = compute(scn)
    for mode in WALK_MODES:
        fresh, shared = compute(scn, mode), with_mode(base, mode)
        for stage in fresh.stages:
            if stage.compute is None:
                continue
            for h in range(scn.heads if stage.per_head else 1):
                np.testing.assert_array_equal(shared.matrix(stage.key, h), fresh.matrix(stage.key, h))


def test_h_is_offered_only_with_several_heads(tmp_path) -> None:
    one = drive("girl_bangs", ["g", *typed("10"), "h"])
    assert " head " not in footer(one.screen) and "h head" not in footer(one.screens[0])
    assert one.app.index == 9  # h did nothing
    path = tmp_path / "two.yaml"
    path.write_text(TWO_HEADS, encoding="utf-8")
    two = drive(str(path), ["g", *typed("A")])
    assert "h head" in footer(two.screen)


def test_h_goes_to_the_same_stage_and_cell_in_the_next_head(tmp_path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(TWO_HEADS, encoding="utf-8")
    d = drive(str(path), ["g", *typed("A"), "up", "h", "h", "g", *typed("X"), "h"], size=(120, 50))
    head1, head2, back = d.screens[4:7]
    assert "Stage 10 / 16   A  Attention weights   head 1 / 2" in head1
    assert "Stage 14 / 16   A  Attention weights   head 2 / 2" in head2 and "Head 2 / 2" in head2
    walk = compute(load_scenario(path))
    cursor = d.app.cursor
    old, new = walk.matrix("A", 0)[cursor], walk.matrix("A", 1)[cursor]
    assert "head 1 → head 2: A[" in head2 and f"is now {new:.4f}" in head2 and f"was {old:.4f}" in head2
    assert "Stage 10 / 16" in back
    assert "X is shared by every head; h works on the per-head stages" in d.screen
    # K is not one matrix shared by the heads: it holds each head's own columns side by side
    k = drive(str(path), ["g", *typed("K"), "h"], size=(120, 50))
    assert "K holds the heads' columns side by side, in the blocks marked under the table" in k.screen
    assert "shared by every head" not in k.screen


# -- predictions, help, language ----------------------------------------------------------------------


def test_p_asks_each_prediction_before_its_evidence_once() -> None:
    """Before P the word order (its options in the prompt), before QKᵀ where 撩 looks, before S,
    A and Z their cells; back and on again asks none twice."""
    from attnwalk.tutor.predict import StepPredictions

    keys = (["p", "n", "n"] + typed("z") + ["n"] * 5 + typed("刘海") + ["n"] + typed("5.15") + ["n"]
            + typed("0.2384") + ["n"] + typed("1.7") + ["b", "n"])
    d = drive("girl_bangs", keys, size=(120, 50), predictor=StepPredictions("en"))
    assert "Predictions on" in d.screens[1]
    assert any(s and "If 女生 and 刘海 traded places" in s and "a) " in s and "c) " in s for s in d.screens)
    assert any(s and "Your prediction: 刘海 · the walk: 刘海 · right" in s for s in d.screens)
    s_screen = next(s for s in d.screens if s and "Your prediction: 5.15" in s)
    assert "Stage 9 / 11" in s_screen and "the walk: 5.1526 · right" in s_screen
    # A[撩, 刘海] = 0.7104; 0.2384 is softmax down its column (seed 002's S), named as such
    assert any(s and "0.2384 is softmax taken down the column" in s for s in d.screens)
    assert any(s and "Your prediction: 1.7 · the walk: 1.6145 · wrong" in s for s in d.screens)
    assert any(s and "· wrong: softmax down the column" in s for s in d.screens)  # named in the verdict
    assert d.app.index == 10 and len(d.app.predicted) == 5  # back and on again: not asked twice


def test_after_a_prediction_the_cursor_is_on_the_cell_asked_about() -> None:
    """The worked pane then shows how the asked cell comes out (a new user found the cursor on
    S[撩, 女生] after being asked about S[撩, 刘海])."""
    from attnwalk.tutor.predict import StepPredictions

    keys = ["g", *typed("QK^T"), "up", "up", "p", "n", *typed("5")]
    d = drive("girl_bangs", keys, size=(120, 50), predictor=StepPredictions("en"))
    assert d.app.step[0].key == "S" and d.app.cursor == (1, 2)  # 撩, 刘海
    assert "S[撩, 刘海] = 5.1526" in d.screen


def test_help_lists_the_keys_and_any_key_closes_it_q_quits() -> None:
    d = drive("girl_bangs", ["n", "question_mark", "x"])
    assert "Keys" in d.screens[2] and "jump to a stage by its number or its name" in d.screens[2]
    assert "Any key goes back; q quits." in d.screens[2]  # q quits the walk, as the box says
    assert "Keys" not in d.screen and d.app.index == 1 and d.code is None
    assert drive("girl_bangs", ["question_mark", "q"]).code == 0


def test_at_80_columns_a_wrapped_help_line_stays_under_its_description() -> None:
    """A new user saw "m   switch mode: … (same stage, same" with "cell)" back under the keys."""
    d = drive("river_bank", ["question_mark"], size=(80, 24))
    lines = [line for line in d.screen.splitlines() if line.startswith("│")]
    start = next(i for i, line in enumerate(lines) if "switch mode: scaled, unscaled, uniform" in line)
    column = lines[start].index("switch mode")
    wrapped = lines[start + 1]
    assert wrapped[1:column].strip() == "" and wrapped[column:].strip().startswith("cell)"), wrapped
    for line in lines:  # every line's text starts at the description column or at the key
        text = line.strip("│ ")
        assert line.index(text[0]) in (2, column), line


def test_keys_typed_in_a_burst_close_the_help_once() -> None:
    """A paste, or a command typed ahead, reaches the help screen as several keys before it is
    gone: each one dismissing it popped the walk's own screen too (ScreenStackError, a traceback)."""
    import asyncio

    from textual import events

    from attnwalk.app.walk import WalkApp

    app = WalkApp(compute(load_scenario("girl_bangs")), ViewOptions())

    async def run() -> tuple[bool, int]:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("question_mark")
            await pilot.pause()
            help_screen = app.screen
            for ch in "xyz":  # posted together, before the first is handled
                help_screen.post_message(events.Key(ch, ch))
            await pilot.pause()
            await pilot.pause()
            return app.is_running, len(app.screen_stack)

    assert asyncio.run(run()) == (True, 1)  # the help closed, the walk is still there


def test_the_footer_fits_80_columns_without_splitting_a_key() -> None:
    d = drive("girl_bangs", ["g", *typed("8")], size=(80, 24))
    line = footer(d.screen)
    for shown in ("←↑↓→ move", "n next", "b back", "g jump", "c cell", "m mode", "? help", "q quit"):
        assert shown in line
    assert len(line.rstrip()) <= 80


def test_the_footer_has_its_keys_before_the_first_frame() -> None:
    """Textual's Footer composes its keys only once the screen has reported its bindings, a frame
    or more after the walk is drawn (~45 ms of the first screen, benchmarks/README.md); the
    walk's footer has them when the app mounts, before anything reaches the terminal."""
    import asyncio

    from textual.widgets._footer import FooterKey

    from attnwalk.app.walk import WalkApp

    class Watched(WalkApp):
        keys_at_mount: list[str] = []

        def on_mount(self) -> None:
            self.keys_at_mount = [key.key for key in self.query(FooterKey)]
            super().on_mount()

    app = Watched(compute(load_scenario("girl_bangs")), ViewOptions())

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()

    asyncio.run(run())
    assert app.keys_at_mount == ["n", "b", "g", "m", "question_mark", "q"]  # no p: no predictor; no c on the tokens


def test_the_footer_is_rebuilt_only_when_the_keys_on_offer_change() -> None:
    """The screen reports its bindings on every focus change, mount and resume, mostly with the
    same keys: those reports leave the footer's keys as they are (the same widgets). tokens → E
    brings the cursor's ←↑↓→ (a new footer), E → P offers the same keys, and back on the tokens
    ←↑↓→ goes again."""
    import asyncio

    from textual.widgets._footer import FooterKey

    from attnwalk.app.walk import WalkApp

    app = WalkApp(compute(load_scenario("girl_bangs")), ViewOptions())

    async def run() -> list[list[FooterKey]]:
        seen = []
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            seen.append(list(app.query(FooterKey)))
            for _ in range(3):  # reports with nothing changed, as a focus change makes
                app.screen.refresh_bindings()
            await pilot.pause()
            await pilot.pause()
            seen.append(list(app.query(FooterKey)))
            for key in ("n", "n", "b", "b"):
                await pilot.press(key)
                await pilot.pause()
                await pilot.pause()
                seen.append(list(app.query(FooterKey)))
        return seen

    tokens, reported, e, p, e_again, tokens_again = asyncio.run(run())
    assert reported == tokens  # the same FooterKey objects: not rebuilt
    keys = [[k.key_display for k in shown] for shown in (tokens, e, p, e_again, tokens_again)]
    assert "←↑↓→" not in keys[0] and keys[1][0] == "←↑↓→" and keys[4] == keys[0]
    assert p == e and e_again == e
    assert tokens_again != tokens  # rebuilt, as ←↑↓→ went


def test_chinese_walk_speaks_chinese() -> None:
    d = drive("girl_bangs", ["g", *typed("99"), *typed("10"), "c", *typed("4"), "escape", "h"],
              opts=ViewOptions(lang="zh"))
    assert "没有这个阶段：99；请输入 1–11 或阶段名，例如 Z" in d.screens[4]
    assert d.app.index == 9  # asked again, 10 answered it
    assert "没有这一行：4；行号从 1 数起，请输入 1–3 或一个 token：女生、撩、刘海" in d.screens[-3]
    assert "下一步" in footer(d.screen) and "退出" in footer(d.screen)
    assert "本场景只有一个头。" in d.screen and "头" not in footer(d.screen)  # h not offered, but answered


def test_ascii_prompts_and_messages_are_ascii() -> None:
    d = drive("girl_bangs", ["g"], opts=ViewOptions(ascii=True))
    prompt = next(line for line in d.screen.splitlines() if "Jump to stage" in line)
    assert "Jump to stage (1-11):" in prompt and prompt.isascii()


def test_the_first_screen_of_a_resumed_walk_says_where_it_starts() -> None:
    import asyncio

    from appdriver import screen_text
    from attnwalk.app.walk import WalkApp

    async def run():
        app = WalkApp(compute(load_scenario("girl_bangs")), ViewOptions(), start=6, message="Resuming at 7 / 11")
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            return screen_text(app)

    shown = asyncio.run(run())
    assert "Stage 7 / 11" in shown and "Resuming at 7 / 11" in shown


def test_math_of_the_goldens() -> None:
    # the independent arithmetic behind this file's golden numbers
    assert f"{0.3274 * 1.3872 + 1.2872 * 5.3083:.3f}" == "7.287"
    assert abs(7.2868 / math.sqrt(2) - 5.1526) < 1e-4  # S from QKᵀ's 4 decimals, within their rounding


def test_on_a_large_layer_the_worked_pane_catches_up_with_the_cursor() -> None:
    # shapes (100 tokens, d_model 512): the worked cell is laid out in a thread; after three quick
    # presses the pane shows the cell the cursor ended on, not one it passed over
    import asyncio

    from appdriver import screen_text
    from attnwalk.app.walk import WalkApp
    from attnwalk.layer.axes import axes

    async def run():
        app = WalkApp(compute(load_scenario("shapes")), ViewOptions(), start=9)  # A, head 1
        async with app.run_test(size=(120, 50)) as pilot:
            await pilot.pause()
            await pilot.press("left", "left", "up")
            for _ in range(200):
                await pilot.pause(0.05)
                if not app.working:
                    break
            await pilot.pause(0.05)  # the finished worker's result drawn
            laid_out = [w for w in app.workers if w.group == "worked"]
            return app.cursor, screen_text(app), app.walk, laid_out

    cursor, shown, walk, laid_out = asyncio.run(run())
    rows, cols = axes(walk, walk.stage("A"), 0)
    name = f"A[{rows[cursor[0]]}, {cols[cursor[1]]}]"
    assert f"Worked cell: {name}" in shown
    assert f"{name} = {walk.matrix('A', 0)[cursor]:.4f}" in shown
    assert laid_out == []  # every worker done (Textual drops a worker once finished)


def test_on_a_large_layer_the_next_mode_is_computed_ahead_in_a_worker_and_m_takes_it() -> None:
    """shapes: the mode m goes to next is computed in a thread worker while the learner reads;
    m then shows that walk (the same object), and the one after it is started in turn."""
    import asyncio

    from attnwalk.app.walk import WalkApp

    async def run():
        app = WalkApp(compute(load_scenario("shapes")), ViewOptions(), start=9)  # A, head 1
        async with app.run_test(size=(120, 50)) as pilot:
            await pilot.pause()
            ahead = app._next_walks["unscaled"]
            assert ahead.is_running or ahead.result is not None  # started without a key
            await ahead.wait()
            await pilot.press("m")
            await pilot.pause()
            return app.walk, ahead.result, set(app._next_walks), app.walks

    walk, computed, next_up, walks = asyncio.run(run())
    assert walk is computed and walk.mode.name == "unscaled"
    assert next_up == {"uniform"} and set(walks) == {"scaled", "unscaled"}
    fresh = compute(load_scenario("shapes"), "unscaled")
    np.testing.assert_array_equal(walk.matrix("A", 0), fresh.matrix("A", 0))


def test_a_masked_weight_under_the_cursor_reads_as_the_table_marks_it() -> None:
    """causal_mask's A: the table marks a masked weight × (not 0.0000, which NO_COLOR could not
    tell from a tiny weight); the cursor's line said "A[…] = 0.0000" (a new user's review)."""
    d = drive("causal_mask", ["g", *typed("A"), "home", "up", "up", "up", "end"], size=(100, 40))
    assert d.app.cursor == (0, 2)  # the first token's row, the last key: masked
    lines = [line for line in d.screen.splitlines() if line.strip().startswith("A[")]
    assert len(lines) == 1 and lines[0].strip().endswith("= × masked: weight 0"), lines
    assert "0.0000" not in lines[0]


def test_j_k_d_u_scroll_the_notes_and_keep_the_message() -> None:
    """The walk's scrolling keys (PaneScroll, shared with decode's pager and the quiz): j/k a
    line, d/u a page of the notes' height less one; a message on screen stays, as the help says."""
    import asyncio

    from attnwalk.app.walk import WalkApp

    app = WalkApp(compute(load_scenario("river_bank")), ViewOptions())

    async def run() -> list[tuple[float, str]]:
        seen = []
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            notes = app.query_one("#notes")
            for key in ("j", "j", "k", "d", "u"):
                await pilot.press(key)
                await pilot.pause()
                seen.append((notes.scroll_y, app.message))
            page = max(notes.size.height - 1, 1)
        return seen, page

    seen, page = asyncio.run(run())
    assert [y for y, _ in seen] == [1, 2, 1, 1 + page, 1]
    assert all(message.startswith("This lesson: by the river bank") for _, message in seen)


def test_on_a_large_layer_only_the_cell_the_keys_stop_on_is_laid_out(monkeypatch) -> None:
    """shapes: keys faster than SETTLE start no layout at all (each would take the GIL from the
    next key); the cell the cursor stops on is laid out. And a layout superseded while it waits
    for the one before it (the lock held here, as a slow layout holds it) returns unlaid."""
    import asyncio

    from appdriver import screen_text
    from attnwalk.app import panes
    from attnwalk.app.walk import WalkApp
    from attnwalk.layer.axes import axes

    laid: list[tuple[int, int]] = []
    real = panes.worked_view

    def counted(walk, stage, head, cell, *rest):
        laid.append(cell)
        return real(walk, stage, head, cell, *rest)

    monkeypatch.setattr(panes, "worked_view", counted)
    from attnwalk.app import offloop

    monkeypatch.setattr(offloop, "SETTLE", 1.0)  # keys surely faster than it, however loaded the machine
    SETTLE = offloop.SETTLE

    async def settle(pilot, app):
        for _ in range(200):
            await pilot.pause(0.05)
            if not app.working:
                break
        await pilot.pause(0.05)  # the finished worker's result drawn

    async def run():
        app = WalkApp(compute(load_scenario("shapes")), ViewOptions(), start=9)  # A, head 1
        async with app.run_test(size=(120, 50)) as pilot:
            await settle(pilot, app)
            first = list(laid)
            await pilot.press("left", "left", "up")  # faster than SETTLE
            waiting = str(app.query_one("#worked").content)
            await settle(pilot, app)
            burst = (list(laid), app.cursor, screen_text(app))
            laid.clear()
            with app._laying_out:  # a layout in progress: the next ones wait for it
                await pilot.press("right")
                await pilot.pause(SETTLE * 1.5)  # its worker started, and waits
                passed = app.cursor
                await pilot.press("down")
                await pilot.pause(SETTLE * 1.5)  # a second one: the first is cancelled
            await settle(pilot, app)
            return first, burst, waiting, passed, list(laid), app.cursor, app.walk

    first, (after_burst, cursor, shown), waiting, passed, laid_last, last, walk = asyncio.run(run())
    assert len(first) == 1
    assert after_burst == [*first, cursor]  # only the cell the cursor ended on
    rows, cols = axes(walk, walk.stage("A"), 0)
    name = f"A[{rows[cursor[0]]}, {cols[cursor[1]]}]"
    assert f"Working out {name}" in waiting  # the latest cell named, not one the keys passed over
    assert f"Worked cell: {name}" in shown
    assert laid_last == [last] and passed != last  # the superseded cell was never laid out


def test_on_a_large_layer_m_shows_the_cell_s_before_and_now_while_its_arithmetic_is_worked_out(monkeypatch) -> None:
    """shapes' A: after m the pane names the cursor's old and new weight at once (two numbers),
    above "Working out …"; it used to wait for the whole worked cell, seconds on a large layer."""
    import asyncio

    from attnwalk.app import offloop
    from attnwalk.app.walk import WalkApp
    from attnwalk.layer.axes import axes

    monkeypatch.setattr(offloop, "SETTLE", 30.0)  # the cell surely not laid out yet, however loaded the machine

    async def run():
        app = WalkApp(compute(load_scenario("shapes")), ViewOptions(), start=9)  # A, head 1
        async with app.run_test(size=(120, 50)) as pilot:
            await pilot.pause()
            await app._next_walks["unscaled"].wait()
            await pilot.press("m")
            await pilot.pause()
            assert app._settling is not None  # still waiting to lay the cell out
            return app.query_one("#worked").content, app.cursor

    from rich.console import Console

    shown, cursor = asyncio.run(run())
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(shown)
    waiting = console.export_text()
    scaled, unscaled = (compute(load_scenario("shapes"), mode) for mode in ("scaled", "unscaled"))
    rows, cols = axes(scaled, scaled.stage("A"), 0)
    name = f"A[{rows[cursor[0]]}, {cols[cursor[1]]}]"
    was, now = scaled.matrix("A", 0)[cursor], unscaled.matrix("A", 0)[cursor]
    assert abs(was - now) > 1e-4  # the lesson's point: unscaled scores sharpen the weights
    assert f"scaled → unscaled: {name} was {was:.4f}, is now {now:.4f}" in waiting
    assert f"Working out {name}" in waiting


@pytest.mark.parametrize("own, expected", [(None, 120), ("30", 30)])
def test_the_apps_draw_up_to_120_frames_a_second_unless_the_learner_set_textual_fps(own, expected) -> None:
    """At Textual's default 60, a key that came while its update timer slept between frames waited
    up to 33 ms for the next tick (app_bench: n/b median 47 ms, 30 ms at 120). The environment is
    the conftest's (HOME and XDG in a temporary folder)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    if own is not None:
        env["TEXTUAL_FPS"] = own
    code = "import attnwalk.app.walk, textual.constants as c; print(c.MAX_FPS)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == expected


def test_h_s_before_and_now_stays_on_the_head_it_went_to() -> None:
    """alibi (4 heads): after h from head 1 to head 2 on A, the line and the marks compare head 2
    with head 1; walking on into head 3 they go (they named "head 1 → head 2" beside head 3's
    numbers), and coming back to head 2's A they return. m compares every head with itself."""
    from attnwalk.layer.axes import axes
    from attnwalk.render.screens import walk_steps

    walk = compute(load_scenario("alibi"))
    steps = walk_steps(walk)
    a1, a2, a3 = (steps.index((walk.stage("A"), h)) for h in range(3))
    A = [walk.matrix("A", h) for h in range(4)]
    rows, cols = axes(walk, walk.stage("A"), 1)

    def line(cursor: tuple[int, int]) -> str:
        r, c = cursor
        assert A[0][r, c] != A[1][r, c]
        return f"head 1 → head 2: A[{rows[r]}, {cols[c]}] was {A[0][r, c]:.4f}, is now {A[1][r, c]:.4f}"

    on_2 = drive("alibi", ["h"], start=a1)
    assert line(on_2.app.cursor) in on_2.screens[-1] and "cells changed" in on_2.screens[-1]
    d = drive("alibi", ["h", *["n"] * (a3 - a2), *["b"] * (a3 - a2)], start=a1)
    on_3, back = d.screens[1 + a3 - a2], d.screens[-1]
    assert "head 3 / 4" in on_3
    assert "head 1 → head 2" not in on_3 and "cells changed" not in on_3, on_3
    assert line(d.app.cursor) in back and "cells changed" in back

    # after m, head 3's A is marked against head 3's own (its cells changed), but the before → now
    # line is said only where m was pressed: back there it returns
    m = drive("alibi", ["m", *["n"] * (a3 - a1), *["b"] * (a3 - a1)], start=a1)
    on_3 = m.screens[1 + a3 - a1]
    assert "head 3 / 4" in on_3 and "cells changed" in on_3 and "scaled → unscaled" not in on_3, on_3
    u = compute(load_scenario("alibi"), "unscaled").matrix("A", 0)
    r, c = m.app.cursor
    rows, cols = axes(walk, walk.stage("A"), 0)
    assert f"scaled → unscaled: A[{rows[r]}, {cols[c]}] was {A[0][r, c]:.4f}, is now {u[r, c]:.4f}" in m.screens[-1]
