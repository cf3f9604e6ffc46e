"""render/wrap.py: Chinese prose breaks between characters, never inside a Latin word or number, and
text without Chinese wraps exactly as Rich wraps it."""

from __future__ import annotations

import io
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from rich._wrap import divide_line
from rich.cells import cell_len
from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from attnwalk.render.wrap import (_CJK_CLASS, NO_END, NO_START, Prose, break_offsets, has_cjk,
                                  narrowest)

# The review's examples: stage texts from zh.toml that Rich broke before a run of Chinese.
P_WHY = ("注意力本身不考虑顺序：把 E 的行打乱，输出也只是按同样的方式打乱。Transformer "
         "为了并行计算舍弃了循环结构，所以必须显式加入位置信息。")
X_WHAT = "X = E + P，逐元素相加：词义加上位置。这才是真正送进注意力层的东西。"
S_WHAT = "S = QKᵀ / √d_k：每个原始分数除以键向量维度的平方根。这就是「缩放点积注意力」里的「缩放」。"


def lines_of(renderable, width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False)
    console.print(renderable)
    return [line.rstrip() for line in console.file.getvalue().splitlines()]


def test_chinese_fills_each_line_instead_of_jumping_to_the_next() -> None:
    assert lines_of(Group(Prose(P_WHY)), 40) == [
        "注意力本身不考虑顺序：把 E 的行打乱，输", "出也只是按同样的方式打乱。Transformer 为",
        "了并行计算舍弃了循环结构，所以必须显式加", "入位置信息。"]
    assert lines_of(Group(Prose(X_WHAT)), 30) == [
        "X = E + P，逐元素相加：词义加", "上位置。这才是真正送进注意力层", "的东西。"]
    assert lines_of(Group(Prose(S_WHAT)), 36) == [
        "S = QKᵀ / √d_k：每个原始分数除以键向", "量维度的平方根。这就是「缩放点积注意",
        "力」里的「缩放」。"]


def test_rich_alone_left_those_lines_half_empty() -> None:
    """What the review saw, the reason for Prose (if Rich learns to break Chinese, this can go):
    "X = E +⏎P，…", "把 E⏎的行…", and "Transformer" split across two lines."""
    assert lines_of(Group(Text(X_WHAT)), 30)[0] == "X = E +"
    assert lines_of(Group(Text(P_WHY)), 40)[:3] == [
        "注意力本身不考虑顺序：把 E", "的行打乱，输出也只是按同样的方式打乱。Tr", "ansformer"]


def test_punctuation_stays_with_its_neighbour_and_latin_words_stay_whole() -> None:
    text = "编号本身不带语义：9527 并不比 875「大」，它只是查表用的行号（ID）。Transformer 和 softmax 都是词。"
    for width in range(12, 60):
        lines = lines_of(Group(Prose(text)), width)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        for line in lines:
            assert line[:1] not in NO_START and line[-1:] not in NO_END, (width, lines)
        words = " ".join(lines).split()
        for word in ("9527", "875", "Transformer", "softmax", "ID"):
            assert any(word in w for w in words), (width, word, lines)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab c  d1.2,-x(yz)\t", max_size=60), st.integers(1, 30), st.booleans())
def test_without_chinese_the_breaks_are_richs(text: str, width: int, fold: bool) -> None:
    assert break_offsets(text, width, fold) == divide_line(text, width, fold)


def test_english_prose_renders_exactly_as_text() -> None:
    english = ("Attention by itself ignores order: shuffle the rows of E and the outputs are only "
               "shuffled the same way. A-very-long-word-that-does-not-fit-anywhere-at-all here.")
    for width in (10, 23, 40, 80):
        assert lines_of(Panel(Prose(english)), width) == lines_of(Panel(Text(english)), width)


def test_a_piece_wider_than_the_line_is_folded_not_lost() -> None:
    text = "中文" + "x" * 30 + "中文"
    lines = lines_of(Group(Prose(text)), 10)
    assert "".join(lines) == text and all(cell_len(line) <= 10 for line in lines)


def test_measure_lets_a_panel_shrink_to_a_chinese_phrase() -> None:
    lines = lines_of(Panel(Prose(X_WHAT), expand=False), 24)
    assert "".join(line.strip("│ ╭╮╰╯─") for line in lines).replace(" ", "") == X_WHAT.replace(" ", "")


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x3ffff), max_size=12))
def test_has_cjk_agrees_with_the_cjk_class_without_compiling_it_for_lower_text(text: str) -> None:
    # has_cjk skips the (slow to compile) regex when every character is below U+2E80
    assert has_cjk(text) == (re.search(_CJK_CLASS, text) is not None)


def test_the_cjk_ranges_start_at_u2e80() -> None:
    assert not any(re.match(_CJK_CLASS, chr(c)) for c in range(0x2e80))
    assert not has_cjk("S = QKᵀ / √d_k × − → … ▲ █") and has_cjk("注意") and has_cjk("x中")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["女生", "撩", "刘海", "，", "。", "（", "）", "「", "」", "E",
                                 "softmax", "0.7104", "x"]), max_size=25), st.integers(8, 40))
def test_mixed_text_breaks_only_where_it_may(parts: list[str], width: int) -> None:
    """Without spaces every break is between characters: never before closing punctuation or
    after opening punctuation, never inside a Latin word or number (unless it is folded)."""
    text = "".join(parts)
    lines = lines_of(Group(Prose(text)), width)
    assert "".join(lines) == text and all(cell_len(line) <= width for line in lines)
    if narrowest(text) > width:  # a piece wider than the line had to be folded
        return
    for line, after in zip(lines, lines[1:]):
        assert line[-1:] not in NO_END and after[:1] not in NO_START, (text, width, lines)
        assert not (line[-1:].isascii() and line[-1:].isalnum() and after[:1].isascii()
                    and after[:1].isalnum()), (text, width, lines)
