"""The stepper driven by scripts of keys, and `run`/`step` through the CLI (not a terminal).

Golden numbers are typed in from lesson 002 (女生撩刘海), ../shared/seeds/002_*.txt:
QKᵀ[撩, 刘海] = 0.3274×1.3872 + 1.2872×5.3083 = 0.4542 + 6.8326 = 7.2868,
A[女生, 刘海] = 0.8078, Z[女生] = [1.5636, 2.5716].
"""

from __future__ import annotations

import io
import os
import re

import pytest
from rich.console import Console, Group, NewLine
from rich.text import Text
from typer.testing import CliRunner

from attnwalk.terminal import keys as K
from attnwalk.cli import app
from attnwalk.terminal.keys import ScriptedKeys, key_name
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.model import load_scenario
from attnwalk.terminal.stepper import Stepper

LESSON_002 = ("7.2868", "0.8078", "1.5636", "2.5716")
GIRL_BANGS_STAGES = ("tokens", "E", "P", "X", "Q", "K", "V", "QKᵀ", "S", "A", "Z")  # no mask: 11


def probe_screen(walk, stage, head, opts, *, index, count, cell=None):
    """A stand-in for render.screens.stage_screen that shows exactly what the stepper asked for."""
    line = f"SCREEN {index}/{count} {stage.key} head={head} mode={walk.mode.name} width={opts.width}"
    if cell is not None:
        line += f" CELL={cell[0]},{cell[1]}"
    return Text(line)


def stepper(script: list[str], name: str = "girl_bangs", *, width: int = 100, height: int = 40,
            opts: ViewOptions = ViewOptions(), screen=probe_screen, **kw) -> tuple[Stepper, io.StringIO]:
    """A stepper on a fixed-size console; each screen drawn starts with a form feed (see frames)."""
    out = io.StringIO()
    console = Console(width=width, height=height, file=out, color_system=None)
    console.clear = lambda home=True: out.write("\f")  # a file is no terminal: mark where each screen starts
    keys = script if isinstance(script, ScriptedKeys) else ScriptedKeys(script)
    return Stepper(load_scenario(name), console, keys, opts, screen=screen, **kw), out


def screens(out: io.StringIO) -> list[str]:
    """The screens drawn, in order, as 'index stage [CELL=r,c]'."""
    found = re.findall(r"SCREEN (\d+)/\d+ (\S+) head=(\d) mode=(\w+) width=\d+(?: CELL=(\d+,\d+))?", out.getvalue())
    return [" ".join(x for x in m if x) for m in found]


# -- keys --------------------------------------------------------------------------------------


def test_keys_map_to_names() -> None:
    for raw in ("\r", "\n", " ", "n", "\x1b[C"):
        assert key_name(raw) == K.NEXT
    for raw in ("b", "\x1b[D"):
        assert key_name(raw) == K.BACK
    assert [key_name(c) for c in "qgc?mh"] == [K.QUIT, K.JUMP, K.CELL, K.HELP, K.MODE, K.HEAD]
    assert key_name("\x04") == K.QUIT
    assert key_name("x") == "x"
    with pytest.raises(KeyboardInterrupt):
        key_name("\x03")


def test_scripted_read_line_handles_backspace_escape_and_end() -> None:
    keys = ScriptedKeys(["1", "2", "\x7f", "3", "\n", "刘海", "\r", "x", "\x1b", "9"])
    assert keys.read_line("a: ") == "13"
    assert keys.read_line("b: ") == "刘海"
    assert keys.read_line("c: ") is None  # Esc cancels
    assert keys.read_line("d: ") is None  # the script ran out before Enter
    assert keys.prompts == ["a: ", "b: ", "c: ", "d: "]


# -- moving ------------------------------------------------------------------------------------


def test_next_and_back_move_one_stage() -> None:
    s, out = stepper(["n", " ", "\r", "\x1b[C", "b", "\x1b[D", "q"])
    assert s.run() == 0
    assert [x.split()[0] for x in screens(out)] == ["1", "2", "3", "4", "5", "4", "3"]


def test_back_at_the_first_stage_stays_and_says_so() -> None:
    s, out = stepper(["b", "q"])
    assert s.run() == 0
    assert [x.split()[0] for x in screens(out)] == ["1", "1"]
    assert "Already at the first stage" in out.getvalue()


def test_walk_has_the_eleven_stages_of_lesson_002_in_order() -> None:
    s, out = stepper(["n"] * 10 + ["q"])
    assert s.run() == 0
    shown = screens(out)
    assert [x.split()[1] for x in shown] == ["tokens", "E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z"]
    assert all("/11 " in line for line in out.getvalue().splitlines() if line.startswith("SCREEN"))


def test_next_on_the_last_stage_ends_the_walk() -> None:
    s, out = stepper(["n"] * 11 + ["n", "n"])  # the extra keys are never read
    assert s.run() == 0
    assert len(screens(out)) == 11
    assert "End of the walk" in out.getvalue()


def test_quit_returns_zero_and_ends_at_once() -> None:
    s, out = stepper(["q", "n", "n"])
    assert s.run() == 0
    assert len(screens(out)) == 1


def test_end_of_input_quits_cleanly() -> None:
    s, _ = stepper(["n"])
    assert s.run() == 0
    assert s.index == 1


def test_ctrl_c_propagates_as_keyboard_interrupt() -> None:
    s, _ = stepper(["n", "\x03"])
    with pytest.raises(KeyboardInterrupt):
        s.run()


def test_unknown_keys_are_ignored() -> None:
    s, out = stepper(["x", "Z", "n", "q"])
    assert s.run() == 0
    assert [x.split()[0] for x in screens(out)] == ["1", "2"]


# -- g: jump -----------------------------------------------------------------------------------


def test_jump_by_number() -> None:
    s, out = stepper(["g", "1", "0", "\n", "q"])
    assert s.run() == 0
    assert screens(out)[-1].startswith("10 A")
    assert s.keys.prompts == ["Jump to stage (1–11): "]


def test_jump_by_stage_name() -> None:
    s, out = stepper(["g", "QKT", "\n", "g", "z", "\n", "q"])
    assert s.run() == 0
    assert [x.split()[1] for x in screens(out)] == ["tokens", "QK^T", "Z"]


@pytest.mark.parametrize("typed", ["0", "12", "99", "nonsense"])
def test_jump_out_of_range_says_so_and_stays(typed: str) -> None:
    s, out = stepper(["n", "g", typed, "\n", "q"])
    assert s.run() == 0
    assert [x.split()[0] for x in screens(out)] == ["1", "2", "2"]
    assert f"No such stage: {typed}" in out.getvalue()
    assert "1–11" in out.getvalue()


def test_jump_cancelled_with_escape_stays() -> None:
    s, out = stepper(["n", "g", "5", "\x1b", "q"])
    assert s.run() == 0
    assert s.index == 1


# -- c: a worked cell --------------------------------------------------------------------------


def test_cell_by_index_and_by_token() -> None:
    s, out = stepper(["g", "8", "\n", "c", "2", "\n", "刘海", "\n", "q"])
    assert s.run() == 0
    assert screens(out)[-1] == "8 QK^T 0 scaled 1,2"  # 撩 is row 1, 刘海 column 2, 0-based
    assert s.keys.prompts[1:] == ["Row (number from 1, or token): ", "Column (number from 1, or token): "]


def test_cell_is_dropped_when_moving_to_another_stage() -> None:
    s, out = stepper(["g", "8", "\n", "c", "女生", "\n", "3", "\n", "n", "q"])
    assert s.run() == 0
    assert screens(out)[-2:] == ["8 QK^T 0 scaled 0,2", "9 S 0 scaled"]


def test_cell_on_a_d_model_stage_takes_dimensions_as_the_table_labels_them() -> None:
    # X's columns are dimensions labelled 1 and 2 (as `attnwalk explain` takes them); rows are tokens.
    s, out = stepper(["g", "4", "\n", "c", "1", "\n", "刘海", "\n", "c", "1", "\n", "3", "\n",
                      "c", "1", "\n", "0", "\n", "c", "撩", "\n", "2", "\n", "q"])
    assert s.run() == 0
    text = out.getvalue()
    assert "No such column: 刘海; columns are numbered from 1, so choose 1–2" in text
    assert "No such column: 3; columns are numbered from 1, so choose 1–2" in text
    assert "No such column: 0; columns are numbered from 1, so choose 1–2" in text
    assert screens(out)[-1] == "4 X 0 scaled 1,1"  # 撩's second dimension, 0-based inside
    assert s.keys.prompts[-1] == "Column (dimension 1–2): "


def test_repeated_tokens_are_chosen_by_label_or_position(tmp_path) -> None:
    path = tmp_path / "repeat.yaml"
    path.write_text("tokens: [the, dog, the]\nembeddings: [[1, 0], [0, 1], [1, 1]]\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", encoding="utf-8")
    s, out = stepper(["g", "A", "\n", "c", "the#3", "\n", "the#1", "\n", "c", "the", "\n", "q"],
                     name=str(path))
    assert s.run() == 0
    assert screens(out)[-2] == "10 A 0 scaled 2,0"
    # "the" alone could be either row: the learner is asked for its number, as `explain` asks
    assert "the appears more than once (rows 1, 3); type its row number instead" in out.getvalue()


def test_rows_of_k_are_the_source_tokens_in_cross_attention(tmp_path) -> None:
    path = tmp_path / "cross.yaml"
    path.write_text("tokens: [je, suis]\nembeddings: [[1, 0], [0, 1]]\n"
                    "source:\n  tokens: [I, am, here]\n  embeddings: [[1, 1], [0, 1], [1, 0]]\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", encoding="utf-8")
    s, out = stepper(["g", "K", "\n", "c", "here", "\n", "1", "\n", "g", "A", "\n", "c", "suis", "\n", "am", "\n",
                      "q"], name=str(path))
    assert s.run() == 0
    shown = screens(out)
    assert shown[2].endswith("K 0 scaled 2,0") and shown[-1].endswith("A 0 scaled 1,1")


def test_bad_row_names_the_valid_choices() -> None:
    s, out = stepper(["g", "10", "\n", "c", "4", "\n", "q"])
    assert s.run() == 0
    assert "No such row: 4; rows are numbered from 1, so choose 1–3 or a token: 女生, 撩, 刘海" in out.getvalue()
    assert s.cell is None


def test_no_cells_on_the_tokens_stage() -> None:
    s, out = stepper(["c", "q"])
    assert s.run() == 0
    assert "This stage has no cells to work out" in out.getvalue()
    assert s.keys.prompts == []


# -- ?: help, m: mode, h: head -----------------------------------------------------------------


def test_help_shows_the_keys_and_any_key_returns() -> None:
    s, out = stepper(["n", "?", "x", "q"])
    assert s.run() == 0
    text = out.getvalue()
    assert "Keys" in text and "jump to a stage by its number" in text and "quit" in text
    assert [x.split()[0] for x in screens(out)] == ["1", "2", "2"]


def test_help_then_end_of_input_quits() -> None:
    s, _ = stepper(["?"])
    assert s.run() == 0


def test_mode_cycles_scaled_unscaled_uniform_and_stays_on_the_stage() -> None:
    s, out = stepper(["g", "10", "\n", "m", "m", "m", "q"])
    assert s.run() == 0
    assert [(x.split()[0], x.split()[3]) for x in screens(out)][1:] == [
        ("10", "scaled"), ("10", "unscaled"), ("10", "uniform"), ("10", "scaled")]
    assert "Mode: unscaled" in out.getvalue()


def test_mode_change_recomputes_the_weights() -> None:
    s, _ = stepper(["m", "m", "q"])
    s.run()
    assert s.walk.mode.name == "uniform"
    assert abs(s.walk.matrix("A")[0, 2] - 1 / 3) < 1e-12


def test_head_key_with_one_head_says_so() -> None:
    s, out = stepper(["h", "q"])
    assert s.run() == 0
    assert "This scenario has only one head" in out.getvalue()


def test_head_key_moves_to_the_same_stage_in_the_next_head(tmp_path) -> None:
    path = tmp_path / "two_heads.yaml"
    path.write_text(
        "tokens: [a, b, c]\n"
        "embeddings: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]\n"
        "heads: 2\n"
        "W_Q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1]]\n"
        "W_K: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1]]\n"
        "W_V: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1]]\n",
        encoding="utf-8")
    s, out = stepper(["g", "A", "\n", "h", "h", "g", "X", "\n", "h", "q"], name=str(path))
    assert s.run() == 0
    shown = screens(out)
    assert [(x.split()[1], x.split()[2]) for x in shown[1:4]] == [("A", "0"), ("A", "1"), ("A", "0")]
    assert "Head 2 / 2" in out.getvalue()
    assert "X is shared by every head" in out.getvalue()


def test_each_screen_is_drawn_at_the_console_width() -> None:
    s, out = stepper(["n", "q"])
    s.console.size = (72, 30)  # as if the terminal were resized before the next key
    s.run()
    assert re.findall(r"width=(\d+)", out.getvalue()) == ["72", "72"]


def test_footer_lists_the_keys() -> None:
    s, out = stepper(["q"])
    s.run()
    assert "n" in out.getvalue() and "q quit" in out.getvalue() and "? help" in out.getvalue()
    assert "j/k scroll" in out.getvalue()


# -- a screen taller than the terminal: a window on it, the header pinned ----------------------


def tall_screen(walk, stage, head, opts, *, index, count, cell=None):
    """A screen shaped like stage_screen's: a two-line header, a blank line, then 40 numbered lines."""
    lines = [Text(f"line {i}") for i in range(40)]
    return Group(Text(f"SCREEN {index}/{count} {stage.key} cell={cell}"), Text("formula F = G"), NewLine(),
                 *lines)


def frames(out: io.StringIO) -> list[list[str]]:
    """Each screen drawn, as its lines."""
    return [frame.split("\n")[:-1] for frame in out.getvalue().split("\f")[1:]]


def visible(frame: list[str]) -> list[int]:
    """The numbered lines of tall_screen in view."""
    return [int(m.group(1)) for line in frame if (m := re.fullmatch(r"line (\d+)\s*", line))]


class ResizingKeys(ScriptedKeys):
    """Keys from a script in which (width, height) is the terminal being resized to that size."""

    def __init__(self, script: list, console: Console) -> None:
        super().__init__([])
        self.script, self.console = script, console

    def __iter__(self):
        for raw in self.script:
            if isinstance(raw, tuple):
                self.console.size = raw
                yield K.RESIZE
            else:
                yield key_name(raw)


def test_window_keeps_a_row_to_say_what_is_hidden_and_clamps() -> None:
    from attnwalk.terminal.viewport import window

    assert window(10, 10, 5) == (0, 10, 0, 0, 0)  # it all fits: no scrolling
    assert window(41, 13, 0) == (0, 12, 0, 29, 29)
    assert window(41, 13, 7) == (7, 12, 7, 22, 29)
    assert window(41, 13, 99) == window(41, 13, 29) == (29, 12, 29, 0, 29)
    assert window(41, 13, -3) == window(41, 13, 0)


def test_scroll_keys_map_to_names() -> None:
    assert [key_name(k) for k in ("j", "\x1b[B", "\x1bOB")] == [K.DOWN] * 3
    assert [key_name(k) for k in ("k", "\x1b[A", "\x1bOA")] == [K.UP] * 3
    assert [key_name(k) for k in ("d", "\x1b[6~", "u", "\x1b[5~")] == [K.PAGE_DOWN] * 2 + [K.PAGE_UP] * 2


def test_a_tall_screen_shows_a_window_under_its_pinned_header() -> None:
    s, out = stepper(["j", "\x1b[B", "k", "d", "\x1b[6~", "u", "\x1b[5~", "\x1b[A", "q"], height=20,
                     screen=tall_screen)
    assert s.run() == 0
    shown = frames(out)
    assert len(shown) == 9
    for frame in shown:
        assert len(frame) == 19  # the 20th row keeps the cursor, so the top never scrolls away
        assert frame[:2] == ["SCREEN 1/11 tokens cell=None", "formula F = G"]  # pinned
        assert frame[-2].startswith("Stage 1 / 11") and "j/k scroll" in frame[-1]
    # 19 rows: the header's 2, the window's 13 (12 lines and the row saying what is hidden), a
    # blank line, the status and the footer
    assert shown[0][2] == "" and visible(shown[0]) == list(range(12))
    assert shown[0][15] == "↓ 28 more lines (j/↓)"
    # the window starts with the blank line under the header, so j first scrolls that away
    assert [visible(frame)[0] for frame in shown] == [0, 0, 1, 0, 12, 24, 12, 0, 0]  # a page keeps a line
    assert all(len(visible(frame)) == 13 for frame in shown[1:-1])
    assert shown[1][15] == "↑ 1 line above (k/↑)   ↓ 27 more lines (j/↓)"
    assert shown[5][15] == "↑ 25 lines above (k/↑)   ↓ 3 more lines (j/↓)"


def test_scrolling_stops_at_either_end_without_drawing_again() -> None:
    s, out = stepper(["k", "u"] + ["d"] * 5 + ["j", "q"], height=20, screen=tall_screen)
    assert s.run() == 0
    shown = frames(out)
    assert [visible(frame)[0] for frame in shown] == [0, 11, 23, 27]  # k, u and the last d, j did nothing
    assert visible(shown[-1])[-1] == 39 and shown[-1][15] == "↑ 28 lines above (k/↑)"


def test_a_screen_that_fits_draws_as_before_and_does_not_scroll() -> None:
    s, out = stepper(["j", "d", "q"])
    assert s.run() == 0
    assert len(frames(out)) == 1
    assert frames(out)[0] == ["SCREEN 1/11 tokens head=0 mode=scaled width=100", "", "Stage 1 / 11  scaled",
                              s.t("ui.footer")]


def test_another_stage_starts_at_the_top_and_a_resize_clamps() -> None:
    out = io.StringIO()
    console = Console(width=100, height=20, file=out, color_system=None)
    console.clear = lambda home=True: out.write("\f")
    keys = ResizingKeys(["d", "n", "d", "d", "d", (100, 30), (60, 12), "b", "q"], console)
    s = Stepper(load_scenario("girl_bangs"), console, keys, ViewOptions(), screen=tall_screen)
    assert s.run() == 0
    shown = frames(out)
    assert shown[2][0].startswith("SCREEN 2/11") and visible(shown[2])[0] == 0  # n: at the top
    assert visible(shown[5])[-1] == 39 and len(shown[5]) == 19  # at the end of stage 2
    assert visible(shown[6])[-1] == 39 and len(shown[6]) == 29  # taller: more in view, still the end
    assert visible(shown[7])[-1] == 39 and len(shown[7]) == 11  # smaller: the end stays in view
    assert shown[8][0].startswith("SCREEN 1/11") and visible(shown[8])[0] == 0  # b: the top of stage 1


def test_a_chosen_cell_scrolls_to_the_worked_cell_at_the_end() -> None:
    s, out = stepper(["g", "10", "\n", "c", "1", "\n", "2", "\n", "m", "k", "\x1b[C", "q"], height=20,
                     screen=tall_screen)
    assert s.run() == 0
    shown = frames(out)
    assert shown[2][0].endswith("cell=(0, 1)") and visible(shown[2])[-1] == 39
    # the message under the footer takes a row: the window keeps the end in view
    assert visible(shown[3])[-1] == 39 and shown[3][-1] == "Mode: unscaled"
    assert visible(shown[4])[0] == visible(shown[3])[0] - 1  # k
    assert shown[5][0].startswith("SCREEN 11/11") and visible(shown[5])[0] == 0  # → is still next


@pytest.mark.parametrize("width,height", [(110, 40), (50, 20)])
def test_the_real_stage_a_keeps_stage_formula_and_shape_in_view(width: int, height: int) -> None:
    s, out = stepper(["g", "10", "\n"] + ["j"] * 3 + ["d", "q"], width=width, height=height, screen=None)
    assert s.run() == 0
    shown = frames(out)[1:]
    for frame in shown:
        text = "\n".join(frame)
        assert len(frame) == height - 1
        assert frame[0].startswith("Stage 10 / 11   A  Attention weights")
        assert "A[i, :] = softmax" in text and "3 × 3 = n × n" in text
    assert re.search(r"↓ \d+ more lines \(j/↓\)", "\n".join(shown[0]))
    assert "↑ 3 lines above (k/↑)" in "\n".join(shown[3])
    assert len({tuple(frame) for frame in shown}) == 5  # every key moved the window


def test_a_tall_help_scrolls_and_any_other_key_closes_it() -> None:
    s, out = stepper(["?", "j", "x", "?", "q"], width=40, height=14)
    assert s.run() == 0
    shown = frames(out)
    assert "Keys" in shown[1][0] and "more line" in "\n".join(shown[1])
    assert "line above" in "\n".join(shown[2])  # j scrolled the help
    assert shown[3][0].startswith("SCREEN 1/11")  # x closed it
    assert "Keys" in shown[4][0]  # ?, then q quits from the help
    s, out = stepper(["?", "j", "q"])  # a help that fits: j closes it like any other key
    assert s.run() == 0
    assert frames(out)[-1][0].startswith("SCREEN 1/11")


def test_scrolling_in_ascii_and_in_chinese() -> None:
    s, out = stepper(["j", "q"], height=20, screen=tall_screen, opts=ViewOptions(ascii=True))
    assert s.run() == 0
    assert out.getvalue().isascii()
    assert frames(out)[-1][15] == "^ 1 line above (k/^)   v 27 more lines (j/v)"
    s, out = stepper(["j", "q"], height=20, screen=tall_screen, opts=ViewOptions(lang="zh"))
    assert s.run() == 0
    assert frames(out)[-1][15] == "↑ 上面还有 1 行（k/↑）   ↓ 下面还有 27 行（j/↓）"
    assert "j/k 滚动" in frames(out)[-1][-1]


def test_chinese_messages_use_chinese_punctuation() -> None:
    s, out = stepper(["g", "99", "\n", "g", "10", "\n", "c", "4", "\n", "c", "1", "\n", "x", "\n",
                      "g", "4", "\n", "c", "1", "\n", "5", "\n", "h", "q"], opts=ViewOptions(lang="zh"))
    assert s.run() == 0
    text = out.getvalue()
    assert "没有这个阶段：99；请输入 1–11 或阶段名，例如 Z" in text
    assert "没有这一行：4；行号从 1 数起，请输入 1–3 或一个 token：女生、撩、刘海" in text
    assert "没有这一列：x；列号从 1 数起，请输入 1–3 或一个 token：女生、撩、刘海" in text
    assert "没有这一列：5；列号从 1 数起，请输入 1–2" in text
    assert ";" not in text and ", " not in text.replace("Enter/n/→", "")


# -- the real screens: run and step through the CLI (a CliRunner is not a terminal) ------------


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_run_prints_every_stage_without_escape_codes() -> None:
    result = invoke("run", "girl_bangs")
    assert result.exit_code == 0, result.output
    assert "\x1b[" not in result.stdout
    for number in LESSON_002:
        assert number in result.stdout
    for i in range(1, 12):
        assert re.search(rf"\b{i} / 11\b", result.stdout), f"stage {i} / 11 missing"


def test_step_takes_a_scenario_file_and_a_name(tmp_path) -> None:
    from attnwalk.scenario.builtins import builtin_path

    path = tmp_path / "mine.yaml"
    path.write_text(builtin_path("girl_bangs").read_text(encoding="utf-8"), encoding="utf-8")
    by_file = invoke("step", "--scenario", str(path))
    assert by_file.exit_code == 0, by_file.output
    assert "0.8078" in by_file.stdout
    by_name = invoke("step", "girl_bangs", "--no-pause")
    assert by_name.exit_code == 0 and "0.8078" in by_name.stdout
    by_option = invoke("run", "-s", str(path))
    assert by_option.exit_code == 0 and "0.8078" in by_option.stdout


def test_run_needs_exactly_one_scenario(tmp_path) -> None:
    neither = invoke("run")
    assert neither.exit_code == 2 and "--scenario" in neither.stderr
    both = invoke("run", "girl_bangs", "--scenario", str(tmp_path / "x.yaml"))
    assert both.exit_code == 2 and "not both" in both.stderr


def test_precision_changes_the_decimals_and_is_checked() -> None:
    result = invoke("run", "girl_bangs", "--precision", "2")
    # the stages, not the lesson that opens the walk: its description is the author's prose and
    # quotes the source lesson's 4 decimals (A[女生, 刘海] = 0.8078) whatever the precision
    stages = result.stdout[result.stdout.index("Stage 2 / 11"):]
    assert result.exit_code == 0 and "0.81" in stages and "0.8078" not in stages
    assert invoke("run", "girl_bangs", "--precision", "13").exit_code == 2
    assert invoke("run", "girl_bangs", "--precision", "-1").exit_code == 2


def test_mode_option_changes_the_weights() -> None:
    result = invoke("run", "girl_bangs", "--mode", "uniform")
    assert result.exit_code == 0 and "0.3333" in result.stdout


def test_unknown_language_exits_2() -> None:
    result = invoke("run", "girl_bangs", "--lang", "fr")
    assert result.exit_code == 2 and "en or zh" in result.stderr


@pytest.mark.parametrize("suffix", [".svg", ".html", ".htm", ".txt"])
def test_save_writes_the_whole_walk(tmp_path, suffix: str) -> None:
    path = tmp_path / f"walk{suffix}"
    result = invoke("run", "girl_bangs", "--save", str(path))
    assert result.exit_code == 0, result.output
    saved = path.read_text(encoding="utf-8")
    for number in LESSON_002:
        assert number in saved
    if suffix == ".svg":
        assert saved.lstrip().startswith("<svg")
        assert "attnwalk:&#160;girl_bangs&#160;(scaled)" in saved  # the window title names the mode
    elif suffix in (".html", ".htm"):
        assert "<html" in saved.lower()
    else:
        assert "\x1b[" not in saved and not saved.lstrip().startswith("<")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # an ordinary file, not a private temp file


def test_save_with_an_unknown_extension_exits_2_before_walking(tmp_path) -> None:
    path = tmp_path / "walk.pdf"
    result = invoke("run", "girl_bangs", "--save", str(path))
    assert result.exit_code == 2
    assert ".svg, .html, .htm, .txt" in result.stderr
    assert result.stdout == "" and not path.exists()


def test_save_to_a_missing_folder_exits_2_and_writes_nothing(tmp_path) -> None:
    path = tmp_path / "nonexistent-dir" / "x.svg"
    result = invoke("run", "girl_bangs", "--save", str(path))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr and "Traceback" not in result.output
    assert not path.parent.exists()
    assert invoke("run", "girl_bangs", "--save", "/nonexistent-dir/x.svg").exit_code == 2
    assert not os.path.exists("/nonexistent-dir")


def test_save_that_fails_while_writing_leaves_no_partial_file(tmp_path, monkeypatch) -> None:
    import attnwalk.commands.walk as walkcmd

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(walkcmd.os, "replace", broken_replace)
    path = tmp_path / "walk.txt"
    result = invoke("run", "girl_bangs", "--save", str(path))
    assert result.exit_code == 2 and "No space left on device" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_ascii_footer_status_prompts_and_help_are_plain_ascii() -> None:
    out = io.StringIO()
    keys = ScriptedKeys(["g", "8", "\n", "?", "x", "g", "99", "\n", "q"])
    s = Stepper(load_scenario("girl_bangs"), Console(width=100, file=out, color_system=None), keys,
                ViewOptions(ascii=True), screen=probe_screen)
    assert s.run() == 0
    assert out.getvalue().isascii(), sorted({ch for ch in out.getvalue() if not ch.isascii()})
    assert all(p.isascii() for p in keys.prompts)
    assert "Stage 8 / 11  QK^T  scaled" in out.getvalue()
