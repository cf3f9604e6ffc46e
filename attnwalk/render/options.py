"""How a walk is drawn: chosen once on the command line, passed to every renderer."""

from __future__ import annotations

from typing import NamedTuple


class ViewOptions(NamedTuple):
    """How every screen of one command is drawn. (A NamedTuple, not a frozen dataclass: as
    immutable, and cheaper to define on every start.)"""

    precision: int = 4  # decimals printed in every cell
    ascii: bool = False  # plain ASCII boxes and markers instead of Unicode
    lang: str = "en"  # "en" | "zh": the language of titles, explanations, prompts
    width: int = 100  # the console's width: tables wider than this are split, never squeezed
    max_rows: int = 16  # beyond this, show head and tail rows with a visible count of the rest
    max_cols: int = 12  # beyond this, show head and tail columns the same way
    bar_rows: int = 8  # A's bar lines: all queries up to this many, else the first and last few
    at: object = None  # the cost panel's projection (layer.cost.Dims from --at), or None
    predicting: bool = False  # --predict: the opening holds back what would give predictions away

    def with_(self, **changes) -> "ViewOptions":
        return self._replace(**changes)
