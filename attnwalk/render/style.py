"""Every colour, box and marker attnwalk draws with, and how a number or a UI string is written.

Colours only ever repeat what the printed numbers already say, so output stays complete under
NO_COLOR or in a pipe. With --ascii every box is rich.box.ASCII and every marker plain ASCII.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from rich import box

from attnwalk.layer.safe import escaped
from attnwalk.text import text
from attnwalk.render import symbols
from attnwalk.render.options import ViewOptions

# Text on a coloured cell is black or white, whichever its background's luminance makes readable
# (WCAG's contrast ratio, at least 4.5:1), never the terminal's own foreground, which a dark theme
# makes light grey. Both are hex so no terminal or export theme remaps them; the backgrounds are
# picked so the same choice still holds where 256- and 16-colour terminals round them to their
# palettes (tests/test_contrast.py measures what is emitted).
DARK_TEXT, LIGHT_TEXT = "#000000", "#ffffff"


def relative_luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG 2's relative luminance of an sRGB colour (0–255 a channel)."""
    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG 2's contrast ratio of two colours, 1 to 21."""
    light, dark = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def on(background: str) -> str:
    """A cell style: `background` ("#rrggbb") under black or white text, whichever contrasts more."""
    rgb = (int(background[1:3], 16), int(background[3:5], 16), int(background[5:7], 16))
    dark = contrast_ratio(rgb, (0, 0, 0)) >= contrast_ratio(rgb, (255, 255, 255))
    return f"{DARK_TEXT if dark else LIGHT_TEXT} on {background}"


# Diverging steps for signed matrices, from small to large |value| (relative to the matrix's
# largest |value|). The darkest steps are dark enough for white text even where a 256-colour
# terminal rounds them lighter.
NEGATIVE_STEPS = tuple(on(bg) for bg in ("#eef4fb", "#c6dbef", "#8fbfe0", "#356ba0"))
POSITIVE_STEPS = tuple(on(bg) for bg in ("#fdf0ec", "#fcc5b0", "#f59377", "#b33b2f"))
# Sequential steps for weights in [0, 1]: the smallest on the terminal's own colours.
WEIGHT_STEPS = ("", *(on(bg) for bg in ("#fff3c4", "#fed976", "#fd9a43", "#bf3f0d")))
# −∞ scores and the zero weights they become: grey on light grey, set apart from every heat step
MASKED_CELL = "#595959 on #e4e4e4"
GAP_CELL = "dim"  # the "…" row and column standing in for hidden ones

HEADER = "bold"  # column and row labels
SCREEN_TITLE = "bold"
POSITION = "bold cyan"  # "7 / 11"
FORMULA = "cyan"
SHAPE = "magenta"
NOTE = "dim"  # legends, captions, small print
RESULT = "bold"  # the value a worked cell arrives at
PANEL_BORDER = "blue"
WORKED_BORDER = "green"
LABEL = "bold"  # "What", "Why", "Common mistake"

BAR = "#d9480f"  # A's bars, as a foreground colour so the block characters show it
BAR_WIDTH = 20  # characters of a bar at 100 %
LONG_SUM = 8  # sums with more terms than this show the first and last LONG_SUM_SHOWN // 2
LONG_SUM_SHOWN = 6


class Markers(NamedTuple):
    """The characters a screen draws with besides letters and numbers: Unicode or ASCII."""

    row_max: str
    bar: str
    ellipsis: str
    arrow: str
    neg_inf: str
    times: str
    sqrt: str
    transpose: str
    dot: str
    minus: str  # the operator in "s − max" (numbers keep ASCII "-" so they can be copied)


UNICODE = Markers("▲", "█", "…", "→", "−∞", "×", "√", "ᵀ", "·", "−")
ASCII = Markers("*", "#", "...", "->", "-inf", "x", "sqrt ", "^T", ".", "-")

# How --ascii writes the symbols found in formulas and in attnwalk/text/*.toml.
_TO_ASCII = str.maketrans(symbols.ASCII)  # render/symbols.py: one table for ASCII and LaTeX


def markers(opts: ViewOptions) -> Markers:
    return ASCII if opts.ascii else UNICODE


def table_box(opts: ViewOptions) -> box.Box:
    """Matrix tables: a rule under the header only, so coloured cells read as a grid."""
    return box.ASCII if opts.ascii else box.SIMPLE_HEAD


def panel_box(opts: ViewOptions) -> box.Box:
    return box.ASCII if opts.ascii else box.ROUNDED


def plain(s: str, opts: ViewOptions) -> str:
    """`s` as written under opts: control and bidirectional-override characters escaped (a
    scenario's title or note is shown, never obeyed; line breaks stay), and with --ascii, math
    symbols spelled in ASCII."""
    s = escaped(s, keep_newlines=True)
    return symbols.block_marks(s, True).translate(_TO_ASCII) if opts.ascii else s


def bracketed(symbol: str, opts: ViewOptions) -> str:
    """A stage's symbol as a cell's name starts: a sum bracketed, "(S + M)"."""
    from attnwalk.layer.graph import bracketed_whole

    symbol = plain(symbol, opts)
    return f"({symbol})" if " " in symbol and not bracketed_whole(symbol) else symbol


def cell_ref(symbol: str, row: str, col: str, opts: ViewOptions) -> str:
    """A cell as the worked cells name it: "QKᵀ[撩, 刘海]", a sum bracketed, "(S + M)[T1, T3]"."""
    return f"{bracketed(symbol, opts)}[{row}, {col}]"


def ascii_spelling(s: str) -> str:
    """`s` with the symbols --ascii spells differently written that way: what an output whose
    encoding holds only ASCII falls back to."""
    return symbols.block_marks(s, True).translate(_TO_ASCII)


def say(opts: ViewOptions, key: str, **values: object) -> str:
    """The UI string `key` in opts.lang.

    Under --ascii the template is transliterated before the values go in, so token text is
    shown exactly as the scenario spells it, except that control and bidirectional-override
    characters in the values are escaped (layer/safe.py).
    """
    tx = text(opts.lang)
    holes = {name: f"\x00{i}\x00" for i, name in enumerate(values)}
    template = tx.t(key, **holes)
    out = symbols.block_marks(template, True).translate(_TO_ASCII) if opts.ascii else template  # the holes are \x00: not escaped
    for name, hole in holes.items():
        out = out.replace(hole, escaped(str(values[name]), keep_newlines=True))
    return out


# Beyond these magnitudes fixed decimals stop saying what the number is: 1e300 would print 301
# digits (no table holds them, and a cut one reads as 1e96), 3e-7 would print 0.0000. There a
# number is written in scientific notation with opts.precision decimals: 1.0000e+300, 3.0000e-07.
SCIENTIFIC_FROM = 1e6
SCIENTIFIC_BELOW = 1e-4


def number(x: float, opts: ViewOptions) -> str:
    """A matrix value at opts.precision decimals; −∞ for masked scores; never "-0.0000"; in
    scientific notation when |x| ≥ 1e6 or 0 < |x| < 1e-4. The one formatter of a value: tables,
    worked cells, explain and the handouts all write numbers with it."""
    if math.isinf(x):
        return markers(opts).neg_inf if x < 0 else "inf"
    if math.isnan(x):
        return "nan"
    if scientific(x):
        return f"{x:.{opts.precision}e}"
    out = f"{x:.{opts.precision}f}"
    if out.startswith("-") and not out.strip("-0."):
        out = out[1:]
    return out


def scientific(x: float) -> bool:
    """Does number() write the finite x in scientific notation?"""
    return abs(x) >= SCIENTIFIC_FROM or 0 < abs(x) < SCIENTIFIC_BELOW


def short(x: float, opts: ViewOptions) -> str:
    """A given number without trailing zeros: 2, 0.02, -0.6 (positions, angles, counts); 2e+06
    in scientific notation (the zeros go from the mantissa, never from the exponent)."""
    out = number(x, opts)
    mantissa, e, exponent = out.partition("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return (mantissa or "0") + e + exponent


def exp_value(x: float) -> str:
    """e^x to 4 significant digits, as the lessons write them: 33.12, 485.4, 30.90, 1.000."""
    out = f"{x:#.4g}"
    return out[:-1] if out.endswith(".") else out


def signed_style(value: float, top: float) -> str:
    """Background for a signed value, by |value| relative to `top`, the largest |value| shown."""
    if top <= 0 or not math.isfinite(value) or value == 0:
        return ""
    steps = POSITIVE_STEPS if value > 0 else NEGATIVE_STEPS
    level = min(int(abs(value) / top * len(steps)), len(steps) - 1)
    return steps[level]


def weight_style(value: float) -> str:
    """Background for a weight in [0, 1]: darker is more attention."""
    if not math.isfinite(value) or value <= 0:
        return ""
    return WEIGHT_STEPS[min(int(value * len(WEIGHT_STEPS)), len(WEIGHT_STEPS) - 1)]
