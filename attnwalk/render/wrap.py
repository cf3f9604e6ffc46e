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

import functools
import re

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions
from rich.containers import Lines
from rich.measure import Measurement
from rich.text import Text

# Han, kana, hangul, CJK and full-width punctuation: a line may break before or after any of them.
_CJK_CLASS = ("[\u2e80-\u2fff\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
              "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
              "\U00020000-\U0003ffff]")


@functools.cache
def _cjk() -> re.Pattern:
    # Compiled when first needed: compiling a class of such wide ranges takes ~3 ms, which an
    # English walk never needs (has_cjk answers for its text without it).
    return re.compile(_CJK_CLASS)


NO_START = set("，。：；、！？）」』》〉】〕”’…,.:;!?)]}%")  # never the first character of a line
NO_END = set("（「『《〈【〔“‘([{")  # never the last character of a line


def has_cjk(s: str) -> bool:
    # Every character below U+2E80, where the CJK ranges start (as ASCII, ×, √, −, → and … are):
    # no CJK, and no need for the regex.
    return s > "" and max(s) >= "\u2e80" and _cjk().search(s) is not None


def _units(s: str) -> list[tuple[int, str]]:
    """`s` cut at every place a line may break: (start, piece), each piece with the spaces after
    it (as rich._wrap.words cuts at spaces alone)."""
    starts = [0]
    text_yet = not s[:1].isspace()  # leading spaces stay with the first word, as in Rich
    for i in range(1, len(s)):
        before, here = s[i - 1], s[i]
        if here.isspace():
            continue
        if before.isspace():
            if text_yet:
                starts.append(i)
            text_yet = True
            continue
        text_yet = True
        if ((_cjk().match(before) or _cjk().match(here))
                and here not in NO_START and before not in NO_END):
            starts.append(i)
    return [(a, s[a:b]) for a, b in zip(starts, [*starts[1:], len(s)])]


def break_offsets(s: str, width: int, fold: bool = True) -> list[int]:
    """Where the lines of `s` start when it is wrapped to `width` cells: rich._wrap.divide_line's
    greedy filling over the pieces _units finds (a piece wider than a line is folded). Without
    CJK characters the pieces are Rich's words, and the offsets divide_line's."""
    breaks: list[int] = []
    offset = 0  # cells used on the current line
    for start, piece in _units(s):
        length = cell_len(piece.rstrip())
        if width - offset >= length:
            offset += cell_len(piece)
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

    def wrap(self, console: Console, width: int, *, justify=None, overflow=None,
             tab_size: int = 8, no_wrap: bool | None = None) -> Lines:
        plain = self.plain
        if not has_cjk(plain) or no_wrap or self.no_wrap or overflow == "ignore":
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


def narrowest(s: str) -> int:
    """The width `s` needs at least: its widest unbreakable piece."""
    return max((cell_len(piece.strip()) for line in s.splitlines() for _, piece in _units(line)),
               default=0)
