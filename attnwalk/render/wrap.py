"""Line breaking for prose that mixes Chinese and Latin text.

Rich breaks lines only at spaces, so a run of Chinese (which has none) moves to the next line
whole and leaves the line before it half empty ("把 E⏎的行打乱…"). `Prose` is a rich Text that
breaks between CJK characters as well as at spaces, keeps closing punctuation (，。：；、！？）」』》)
off the start of a line and opening punctuation (（「『《) off the end, and never splits a Latin
word or number unless it is wider than the whole line. It wraps wherever Rich draws it, at the width
it is given there, so it needs no width of its own and stays one Text (FastTable's fast path).
Text without CJK characters wraps exactly as Rich wraps it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, Group
from rich.containers import Lines
from rich.measure import Measurement
from rich.text import Text

# Han, kana, hangul, CJK and full-width punctuation: a line may break before or after any of them.
# Looked up by bisect, not by a regex class: compiling a class of such wide ranges takes ~3 ms
# of a walk's start, more than all the lookups of a walk.
_CJK_RANGES = ((0x2E80, 0x2FFF), (0x3000, 0x30FF), (0x3100, 0x31FF), (0x3400, 0x4DBF),
               (0x4E00, 0x9FFF), (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xF900, 0xFAFF),
               (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x20000, 0x3FFFF))
_STARTS = [low for low, _ in _CJK_RANGES]
_CJK_CLASS = "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _CJK_RANGES) + "]"  # as a class

NO_START = set("，。：；、！？）」』》〉】〕”’…,.:;!?)]}%")  # never the first character of a line
NO_END = set("（「『《〈【〔“‘([{")  # never the last character of a line
_WIDE = "\u2e80"  # where the CJK ranges start: ASCII, ×, √, −, →, … and ▲ are all below it


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    i = bisect_right(_STARTS, code) - 1
    return i >= 0 and code <= _CJK_RANGES[i][1]


def has_cjk(s: str) -> bool:
    return s > "" and max(s) >= _WIDE and any(is_cjk(ch) for ch in s if ch >= _WIDE)


def _units(s: str) -> list[tuple[int, str]]:
    """`s` cut at every place a line may break: (start, piece), each piece with the spaces after
    it (as rich._wrap.words cuts at spaces alone; leading spaces stay with the first word). A
    line may also break before or after a CJK character, though never before a space or closing
    punctuation, nor after opening punctuation."""
    first = len(s) - len(s.lstrip())
    starts = {m.end() for m in _SPACES.finditer(s, first)}
    before = s[first:first + 1]
    before_cjk = before >= _WIDE and is_cjk(before)
    for at in range(first + 1, len(s)):
        here = s[at]
        # Han (most of Chinese prose) is told apart without the bisect
        here_cjk = here >= _WIDE and ("\u4e00" <= here <= "\u9fff" or is_cjk(here))
        if ((here_cjk or before_cjk) and here not in NO_START and before not in NO_END
                and not here.isspace() and not before.isspace()):
            starts.add(at)
        before, before_cjk = here, here_cjk
    cuts = sorted(starts)
    return [(a, s[a:b]) for a, b in zip([0, *cuts], [*cuts, len(s)])]


_SPACES = re.compile(r"\s+(?=\S)")


def break_offsets(s: str, width: int, fold: bool = True) -> list[int]:
    """Where the lines of `s` start when it is wrapped to `width` cells: rich._wrap.divide_line's
    greedy filling over the pieces _units finds (a piece wider than a line is folded). Without
    CJK characters the pieces are Rich's words, and the offsets divide_line's."""
    breaks: list[int] = []
    offset = 0  # cells used on the current line
    for start, piece in _units(s):
        word = piece.rstrip()
        length = cell_len(word)
        if width - offset >= length:
            offset += length if word is piece else cell_len(piece)
        elif length > width:  # wider than any line: fold it, as Rich folds a long word
            if fold:
                parts = chop_cells(piece, width)
                for part in parts[:-1]:
                    if start:
                        breaks.append(start)
                    start += len(part)
                if start:
                    breaks.append(start)
                offset = cell_len(parts[-1])
            else:
                if start:
                    breaks.append(start)
                offset = cell_len(piece)
        elif offset and start:
            breaks.append(start)
            offset = cell_len(piece)
    return breaks


class Prose(Text):
    """A rich Text that wraps Chinese between characters (see the module's docstring)."""

    __slots__ = ()

    def wrap(self, console: Console, width: int, *, justify=None, overflow=None,
             tab_size: int = 8, no_wrap: bool | None = None) -> Lines:
        plain = self.plain
        if (no_wrap or self.no_wrap or overflow == "ignore" or not has_cjk(plain)
                or ("\n" not in plain and "\t" not in plain and cell_len(plain) <= width)):
            # Rich's own wrap: the same lines where nothing needs breaking between characters
            return super().wrap(console, width, justify=justify, overflow=overflow,
                                tab_size=tab_size, no_wrap=no_wrap)
        wrap_justify = justify or self.justify or "default"
        wrap_overflow = overflow or self.overflow or "fold"
        lines = Lines()
        for line in self.split(allow_blank=True):
            if "\t" in line.plain:
                line.expand_tabs(tab_size)
            pieces = line.divide(break_offsets(line.plain, width, fold=wrap_overflow == "fold"))
            for piece in pieces:
                piece.rstrip_end(width)
            if wrap_justify:
                pieces.justify(console, width, justify=wrap_justify, overflow=wrap_overflow)
            for piece in pieces:
                piece.truncate(width, overflow=wrap_overflow)
            lines.extend(pieces)
        return lines

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.plain
        if not has_cjk(plain):
            return super().__rich_measure__(console, options)
        widest = max((cell_len(line) for line in plain.splitlines()), default=0)
        return Measurement(narrowest(plain), widest)


def prose_line(words: str, style: str = "") -> Group:
    """`words` as a Prose that keeps its wrapping wherever it is printed on its own: in a Group,
    because console.print joins bare Text objects into one plain Text first, and Textual wraps a
    Text given to a widget itself, at spaces only (the quiz's lines, the walk's message line)."""
    return Group(Prose(words, style=style))


@lru_cache(maxsize=256)  # a footnote or legend is measured on every screen that shows it
def narrowest(s: str) -> int:
    """The width `s` needs at least: its widest unbreakable piece (a word without CJK is one)."""
    return max((cell_len(word) if not has_cjk(word) else
                max(cell_len(piece.strip()) for _, piece in _units(word)) for word in s.split()),
               default=0)
