"""A recorded walk as SVG: Rich's export_svg, made to draw Chinese as a terminal does.

Rich places every text run at the right cell (x counts cells), but stretches it over
`textLength = len(text) × char_width`, one cell per character, while an East-Asian wide
character such as 女 takes two cells (rich.cells.cell_len): "女生 " is squeezed into 3 cells
instead of 5 and overlaps what follows (Rich issue #2742). Its font stack, "Fira Code, monospace",
has no CJK glyphs either, so a browser without a CJK fallback draws boxes.

So the SVG is post-processed, not rebuilt: Rich's own output, with
- each text run that holds characters whose cells differ from their count cut into pieces, each
  piece starting at its own cell and stretched over exactly its cells, so a wide glyph fills its
  two cells and the Latin text after it stays on its grid (one textLength over a mixed run would
  spread the slack over every glyph and shift the Latin letters off their cells);
- a font stack that names CJK monospace fonts after Fira Code, and no font fetched from the
  network (Rich links Fira Code on a CDN; the file must work offline): fonts are named, as the
  HTML names them;
- its natural size (width and height as well as the viewBox), so a browser scrolls a long walk
  instead of shrinking 11,000 px into one window;
- a table's or panel's side "│" drawn as a line over the whole row: the glyph is as tall as the
  font, shorter than Rich's 1.22-line rows, so sides read as dashes.
Other runs whose cells equal their characters are left exactly as Rich wrote them.
"""

from __future__ import annotations

import html
import re

from rich.cells import cell_len, split_graphemes
from rich.console import Console

from attnwalk.layer.safe import escaped

# Rich draws every cell CHAR_HEIGHT px high (fixed in export_svg) and font_aspect_ratio × that
# wide; 0.61 is Rich's default (Fira Code's proportions), passed explicitly so the width used
# here is the one Rich used.
CHAR_HEIGHT = 20
FONT_ASPECT_RATIO = 0.61
CHAR_WIDTH = CHAR_HEIGHT * FONT_ASPECT_RATIO

# A browser takes each glyph from the first font in the list that has it. Latin fonts come first
# (Fira Code as Rich has it, then the usual system monospace fonts): a CJK font draws box lines,
# √, →, · and other East-Asian "ambiguous" symbols a full em wide, over the next cell, where the
# terminal gives them one (measured in chromium: with Noto Sans Mono CJK SC first, the table
# borders of girl_bangs overlap ~3,900 times). Chinese, missing from those, comes from the CJK monospace fonts Linux, macOS
# and Windows ship or commonly install (else boxes); then the generic fallback.
FONT_STACK = ('"Fira Code", "DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", '
              '"Sarasa Mono SC", "Noto Sans Mono CJK SC", "Source Han Mono SC", "Source Han Mono", '
              '"Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", monospace')
TITLE_FONTS = 'arial, "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", sans-serif'

# Rich's template asks for full-width variants ("font-variant-east-asian: full-width"): a CJK font
# that has them (Noto Sans Mono CJK does) then draws ASCII an em wide inside one-cell runs,
# squeezed over one another ("QKᵀ," unreadable in chromium). The terminal's ASCII is narrow.
_FULL_WIDTH = "font-variant-east-asian: full-width;"
_RICH_FONTS = "font-family: Fira Code, monospace;"
_RICH_TITLE_FONTS = "font-family: arial;"

_TEXT = re.compile(r"<text ([^>]*)>([^<]*)</text>")
_FONT_URL = re.compile(r',\s*url\([^)]*\)\s*format\([^)]*\)')  # the CDN copies of Fira Code
_VIEWBOX = re.compile(r'<svg class="rich-terminal" viewBox="0 0 ([\d.]+) ([\d.]+)"')
LINE_HEIGHT = CHAR_HEIGHT * 1.22  # Rich's row height in export_svg
SIDE = "│"
SIDE_WIDTH = 1.2  # px, about the stroke of the glyph at 20 px
_ATTR = re.compile(r'([\w:-]+)="([^"]*)"')
_UNIT = re.compile(r"&[#\w]+;|.", re.S)  # one escaped character: an entity or a plain character


def walk_svg(console: Console, title: str) -> str:
    """The recording on `console` as SVG, Chinese at double width and with CJK fonts named; the
    title (which names the scenario) escaped as every label is."""
    svg = console.export_svg(title=escaped(title), font_aspect_ratio=FONT_ASPECT_RATIO)
    return wide_runs_fixed(svg)


def wide_runs_fixed(svg: str) -> str:
    """Rich's SVG with wide-character runs split onto their cells and the CJK font stack."""
    svg = svg.replace(_RICH_FONTS, f"font-family: {FONT_STACK};", 1)
    svg = svg.replace(_RICH_TITLE_FONTS, f"font-family: {TITLE_FONTS};", 1)
    svg = svg.replace(_FULL_WIDTH, "font-variant-east-asian: normal;", 1)
    svg = _FONT_URL.sub("", svg)
    svg = _VIEWBOX.sub(r'<svg class="rich-terminal" width="\1" height="\2" viewBox="0 0 \1 \2"', svg, 1)
    return _TEXT.sub(_fixed_run, svg)


def _sides(attrs: dict[str, str], count: int) -> str:
    """`count` sides "│" from the run's cell as lines the full height of the row, in the run's colour."""
    x, top = float(attrs["x"]), float(attrs["y"]) - CHAR_HEIGHT + 1.5  # Rich: text y = row top + char height
    return "".join(
        f'<rect class="{attrs.get("class", "")}" x="{format(x + k * CHAR_WIDTH + (CHAR_WIDTH - SIDE_WIDTH) / 2, "g")}" '
        f'y="{format(top, "g")}" width="{SIDE_WIDTH}" height="{format(LINE_HEIGHT + 0.25, "g")}" '
        f'shape-rendering="crispEdges"/>' for k in range(count))


def _fixed_run(match: re.Match) -> str:
    attrs = dict(_ATTR.findall(match.group(1)))
    content = match.group(2)
    if "textLength" not in attrs:  # the window title: centred, not on the cell grid
        return match.group(0)
    units = _UNIT.findall(content)  # Rich escaped the text (html.escape, spaces as &#160;)
    chars = "".join(html.unescape(u) for u in units)
    if chars and chars == SIDE * len(chars):
        return _sides(attrs, len(chars))
    if len(chars) != len(units) or cell_len(chars) in (len(chars), 0):
        return match.group(0)  # as Rich counts it (or nothing to place, or unparsed): unchanged
    cell = round(float(attrs["x"]) / CHAR_WIDTH)  # x = cell × char_width, as Rich computed it
    pieces = []
    for piece_units, cells in _pieces(units, chars):
        # Rich draws no all-space run; a zero-cell piece (a stray joiner) has nothing to show
        if cells and any(u != "&#160;" for u in piece_units):
            pieces.append(_tag(attrs, cell, cells, "".join(piece_units)))
        cell += cells
    return "".join(pieces)


def _pieces(units: list[str], chars: str) -> list[tuple[list[str], int]]:
    """`units` cut where graphemes change between "as many cells as characters" (Latin, box
    lines) and not (wide Chinese, combining marks): (the piece's units, its cells)."""
    spans, _ = split_graphemes(chars)
    pieces: list[tuple[list[str], int]] = []
    last_kind = None
    for start, end, cells in spans:
        kind = cells == end - start
        if kind != last_kind:
            pieces.append(([], 0))
            last_kind = kind
        piece_units, piece_cells = pieces[-1]
        pieces[-1] = (piece_units + units[start:end], piece_cells + cells)
    return pieces


def _tag(attrs: dict[str, str], cell: int, cells: int, content: str) -> str:
    """A <text> as Rich writes it (same attributes, same number format), from column `cell`
    over `cells` columns."""
    values = {**attrs, "x": format(cell * CHAR_WIDTH, "g"), "textLength": format(cells * CHAR_WIDTH, "g")}
    spelled = " ".join(f'{name}="{value}"' for name, value in values.items())
    return f"<text {spelled}>{content}</text>"
