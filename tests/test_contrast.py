"""Every printed number on a coloured cell is readable: at least 4.5:1 (WCAG AA) against its
background, measured on the colours actually emitted: the ANSI codes of a truecolor, 256- and
16-colour terminal (read back with Text.from_ansi, palette entries as Rich's palettes define them),
the HTML's stylesheet and the SVG's fills, and the Textual grid that `attnwalk run` and `serve`
draw; for every built-in's walk, compare and decode. The ratio is computed here from WCAG 2's formula, apart from attnwalk's own.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

import pytest
from rich.color import Color, ColorSystem, ColorType
from rich.console import Console
from rich.palette import Palette
from rich.text import Text

from attnwalk.commands.walk import print_walk, recorded_walk
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario

AA = 4.5
NUMBER = re.compile(r"[0-9∞×]")
# The 16 colours Rich matches a colour to when it writes a 16-colour terminal (rich/_palettes.py)
STANDARD = Palette([(0, 0, 0), (170, 0, 0), (0, 170, 0), (170, 85, 0), (0, 0, 170), (170, 0, 170),
                    (0, 170, 170), (170, 170, 170), (85, 85, 85), (255, 85, 85), (85, 255, 85),
                    (255, 255, 85), (85, 85, 255), (255, 85, 255), (85, 255, 255), (255, 255, 255)])


def luminance(rgb) -> float:
    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(float(c)) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def ratio(a, b) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def rgb(color: Color | None):
    if color is None or color.type == ColorType.DEFAULT:
        return None
    if color.type == ColorType.TRUECOLOR:
        return tuple(color.triplet)
    if color.type == ColorType.STANDARD:
        return tuple(STANDARD[color.number])
    from rich._palettes import EIGHT_BIT_PALETTE

    return tuple(EIGHT_BIT_PALETTE[color.number])


def hexed(value: str):
    value = value.strip().lstrip("#")
    return tuple(int(value[i:i + 2], 16) for i in (0, 2, 4))


def check(cells, where: str) -> int:
    """cells: (text, foreground rgb or None, background rgb or None). Every coloured cell that
    prints a number names its text colour and reaches AA; returns how many were checked."""
    checked, bad = 0, []
    for text, fg, bg in cells:
        if bg is None or not NUMBER.search(text):
            continue
        checked += 1
        if fg is None or ratio(fg, bg) < AA:
            bad.append((text.strip(), fg, bg, None if fg is None else round(ratio(fg, bg), 2)))
    assert not bad, f"{where}: unreadable numbers {bad[:5]} ({len(bad)} of {checked})"
    return checked


@pytest.fixture(scope="module")
def walks():
    return {name: compute(load_scenario(name)) for name in builtin_names()}


SYSTEMS = {"truecolor": ColorSystem.TRUECOLOR, "256": ColorSystem.EIGHT_BIT, "standard": ColorSystem.STANDARD}


def drawn(draw) -> list:
    """The segments `draw(console)` prints (laid out once, at 100 columns)."""
    console = Console(file=io.StringIO(), width=100, color_system="truecolor", force_terminal=True,
                      record=True, legacy_windows=False)
    draw(console)
    return list(console._record_buffer)


def emitted(segments: list, system: str):
    """(text, fg, bg) of every styled run, as the escape codes a `system` terminal is sent for
    `segments` (Style.render, what Console writes) read back by Text.from_ansi."""
    ansi = "".join(seg.style.render(seg.text, color_system=SYSTEMS[system]) if seg.style else seg.text
                   for seg in segments if not seg.control)
    for line in ansi.split("\n"):
        text = Text.from_ansi(line)
        for span in text.spans:
            style = span.style
            if isinstance(style, str):
                continue
            yield text.plain[span.start:span.end], rgb(style.color), rgb(style.bgcolor)
        if text.style and not isinstance(text.style, str):
            yield text.plain, rgb(text.style.color), rgb(text.style.bgcolor)


@pytest.fixture(scope="module")
def printed(walks) -> dict[str, list]:
    """Each built-in's walk printed whole (every head), its compare and, where it decodes, its decode."""
    from attnwalk.layer.compare import compare
    from attnwalk.layer.kvcache import decode, refusal
    from attnwalk.render.compareview import compare_view
    from attnwalk.render.decodeview import decode_screen, screen_count

    opts = ViewOptions(width=100)
    out = {}
    for name, walk in walks.items():
        scn = walk.scenario
        out[f"{name} walk"] = drawn(lambda c: print_walk(c, walk, opts, head=None))
        out[f"{name} compare"] = drawn(lambda c: c.print(compare_view(compare(scn), opts)))
        if refusal(scn) is None:
            dec = decode(scn)
            out[f"{name} decode"] = drawn(lambda c: [c.print(decode_screen(dec, i, opts))
                                                     for i in range(screen_count(dec))])
    return out


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_every_builtin_table_is_readable_in_a_terminal(printed, system: str) -> None:
    """Every built-in's walk, compare and decode, in a truecolor, 256- and 16-colour terminal."""
    counts = {where: check(emitted(segments, system), f"{where} {system}") for where, segments in printed.items()}
    assert sum(counts.values()) > 1000  # the heat tables were found, not skipped
    assert all(counts[f"{name} walk"] > 10 for name in builtin_names())
    assert counts["river_bank compare"] > 10 and counts["causal_mask decode"] > 10


def test_the_issues_light_cells_now_carry_dark_text(printed) -> None:
    # river_bank's Z: finance column 0.1218, 0.0592, 0.0629 were light grey on near-white
    cells = [c for c in emitted(printed["river_bank walk"], "256") if c[0].strip() in ("0.1218", "0.0592", "0.0629")]
    assert cells
    for text, fg, bg in cells:
        assert bg is not None and fg is not None and ratio(fg, bg) >= AA, (text, fg, bg)


def test_html_save_is_readable(walks) -> None:
    page = recorded_walk(walks["river_bank"], ViewOptions(width=100), "html", head=None)
    rules = {name: dict(re.findall(r"(color|background-color):\s*(#[0-9a-f]{6})", body))
             for name, body in re.findall(r"\.(r\d+)\s*\{([^}]*)\}", page)}
    cells = []
    for name, body in re.findall(r'<span class="(r\d+)">(.*?)</span>', page, re.S):
        rule = rules.get(name, {})
        bg = rule.get("background-color")
        fg = rule.get("color")
        cells.append((re.sub(r"<[^>]*>", "", body), fg and hexed(fg), bg and hexed(bg)))
    assert check(cells, "html") > 50


def test_svg_save_is_readable(walks) -> None:
    svg = recorded_walk(walks["river_bank"], ViewOptions(width=100), "svg", head=None)
    fills = {name: hexed(value) for name, value in re.findall(r"\.(terminal-[\w-]+)\s*\{[^}]*?fill:\s*(#[0-9a-f]{6})", svg)}
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    rects = {(round(float(r.get("x")), 1), round(float(r.get("y")), 1)): hexed(r.get("fill"))
             for r in root.iter(f"{ns}rect") if r.get("fill", "").startswith("#")
             and r.get("shape-rendering") == "crispEdges"}
    cells = []
    for t in root.iter(f"{ns}text"):
        if t.get("textLength") is None:
            continue
        x, y = round(float(t.get("x")), 1), float(t.get("y"))
        line_top = round(y - 20 + 1.5, 1)  # Rich: text at y·line + char_height, its rect at y·line + 1.5
        cells.append(("".join(t.itertext()), fills.get(t.get("class")), rects.get((x, line_top))))
    assert check(cells, "svg") > 50


def test_textual_grid_styles_are_readable(walks) -> None:
    """The app's grid (the walk in a terminal and in `serve`) colours each cell with the same
    styles: every cell of every stage of every built-in, in the colours Textual emits."""
    import numpy as np
    from rich.style import Style

    from attnwalk.app.grid import MatrixGrid
    from attnwalk.app.panes import matrix_view
    from attnwalk.layer.stages import TOKENS
    from attnwalk.render.screens import walk_steps

    checked = 0
    for name, walk in walks.items():
        for stage, head in walk_steps(walk):
            if stage.kind == TOKENS:  # the token table: no numbers on colours
                continue
            view = matrix_view(walk, stage, head, ViewOptions(width=80))
            finite = view.M[np.isfinite(view.M)]
            top = float(np.max(np.abs(finite))) if finite.size else 0.0
            cells = []
            for (i, j), value in np.ndenumerate(view.M[:40, :40]):
                style = Style.parse(MatrixGrid._cell_style(view, i, j, float(value), top))
                cells.append(("0", rgb(style.color), rgb(style.bgcolor)))
            checked += check(cells, f"{name} {stage.key} grid")
    assert checked > 1000
