"""`run --save`: the SVG draws Chinese two cells wide with CJK fonts named, a Latin walk's SVG is
Rich's own, and every save says on stderr what it wrote.

The widths here are computed in the test from Rich's documented defaults (a cell is
font_aspect_ratio 0.61 × 20 px = 12.2 px wide; rich.cells.cell_len counts 女 as two cells), not
read from attnwalk.render.svg; a run's column is checked against the plain-text save of the same
walk, where each character sits in the column a terminal gives it.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from attnwalk.cli import app

SVG = "{http://www.w3.org/2000/svg}"
CELL = 20 * 0.61  # Rich's export_svg: char_height 20 px × its default font_aspect_ratio
LINE = 20 * 1.22  # Rich's line_height: one terminal row
CJK_FONTS = ("Noto Sans Mono CJK SC", "Noto Sans CJK SC", "Source Han Mono", "Sarasa Mono SC")


def save(tmp_path: Path, name: str, suffix: str, *args: str):
    path = tmp_path / f"walk{suffix}"
    result = CliRunner().invoke(app, ["run", name, "--no-pause", "--save", str(path), *args])
    assert result.exit_code == 0, result.output
    return path, result


def runs(svg: str) -> list[tuple[float, float, float, str]]:
    """(x, y, textLength, text) of every <text> Rich places on the cell grid (the window title
    has no textLength), skipping Rich's blank line-end runs, which draw nothing."""
    root = ET.fromstring(svg)
    found = []
    for el in root.iter(f"{SVG}text"):
        if el.get("textLength") is None:
            continue
        text = (el.text or "").replace("\xa0", " ")  # Rich writes spaces as &#160;
        if text.strip():
            found.append((float(el.get("x")), float(el.get("y")), float(el.get("textLength")), text))
    return found


def columns(line: str) -> dict[int, int]:
    """Terminal column -> index into `line`, for each character's first column."""
    col, where = 0, {}
    for i, ch in enumerate(line):
        where[col] = i
        col += cell_len(ch)
    return where


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_girl_bangs_svg_stretches_each_run_over_its_cells(tmp_path, lang) -> None:
    svg_path, _ = save(tmp_path, "girl_bangs", ".svg", "--lang", lang)
    found = runs(svg_path.read_text(encoding="utf-8"))
    wide = [r for r in found if cell_len(r[3]) != len(r[3])]
    assert len(wide) > 20  # the tokens 女生, 撩, 刘海 appear on every stage
    for x, y, length, text in found:
        assert length == pytest.approx(cell_len(text) * CELL, abs=1e-3), text
        assert x / CELL == pytest.approx(round(x / CELL), abs=1e-3), text  # on a cell boundary
    # 女生 alone (a table label): 2 characters, 4 cells, 48.8 px; Rich wrote 2 × 12.2 = 24.4
    assert any(text == "女生" and length == pytest.approx(48.8) for _, _, length, text in found)


def test_girl_bangs_svg_puts_every_run_where_the_terminal_shows_it(tmp_path) -> None:
    svg_path, _ = save(tmp_path, "girl_bangs", ".svg")
    txt_path = tmp_path / "walk.txt"
    assert CliRunner().invoke(app, ["run", "girl_bangs", "--no-pause", "--save", str(txt_path)]).exit_code == 0
    lines = txt_path.read_text(encoding="utf-8").split("\n")
    by_line: dict[int, list] = {}
    for x, y, length, text in runs(svg_path.read_text(encoding="utf-8")):
        row, col = round((y - 20) / LINE), round(x / CELL)
        where = columns(lines[row])
        assert col in where, (row, col, text)
        assert lines[row][where[col]:].startswith(text), (lines[row], col, text)
        by_line.setdefault(row, []).append((x, length, text))
    for row, placed in by_line.items():  # runs on one line never reach into the next run's cells
        placed.sort()
        for (x1, len1, t1), (x2, _, t2) in zip(placed, placed[1:]):
            assert x1 + len1 <= x2 + 1e-6, (row, t1, t2)


def test_a_latin_walk_svg_keeps_richs_text_runs(tmp_path) -> None:
    """river_bank has no wide character, so every text run is exactly as Rich exported it, but
    the sides "│", drawn as lines."""
    from attnwalk.commands.walk import print_walk
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions
    from attnwalk.scenario.load import load_scenario
    from attnwalk.terminal.console import make_console

    svg_path, _ = save(tmp_path, "river_bank", ".svg", "--lang", "en")
    ours = svg_path.read_text(encoding="utf-8")
    walk = compute(load_scenario("river_bank"), "scaled")
    recorder = make_console(record=True, file=io.StringIO(), width=80, color_system="truecolor")
    print_walk(recorder, walk, ViewOptions(lang="en", width=80))
    rich = recorder.export_svg(title="attnwalk: river_bank (scaled)")
    tags = re.compile(r"<text [^>]*>[^<]*</text>")
    assert tags.findall(ours) == [t for t in tags.findall(rich) if not re.search(r">│+</text>$", t)]
    found = runs(ours)
    assert found and all(cell_len(text) == len(text) for *_, text in found)
    for *_, length, text in found:
        assert length == pytest.approx(len(text) * CELL, abs=1e-3)


def test_the_svg_font_stack_names_cjk_fonts(tmp_path) -> None:
    svg = save(tmp_path, "girl_bangs", ".svg")[0].read_text(encoding="utf-8")
    style = ET.fromstring(svg).find(f"{SVG}style").text
    matrix = re.search(r"-matrix \{([^}]*)\}", style).group(1)
    stack = [f.strip().strip('"') for f in re.search(r"font-family:([^;]*);", matrix).group(1).split(",")]
    assert [f for f in stack if f in CJK_FONTS], stack
    assert stack[-1] == "monospace"
    # ASCII stays one cell: no full-width variants asked of a CJK font
    assert "full-width" not in matrix


def expected_size(path: Path) -> str:
    """The size as ls -h would say it at one unit: whole KB (halves up) for these walks."""
    size = path.stat().st_size
    assert 1024 <= size < 1000 * 1024  # every saved walk is some KB
    return f"{(size * 2 + 1024) // 2048} KiB"


@pytest.mark.parametrize("suffix", [".svg", ".html", ".htm", ".txt"])
def test_save_says_on_stderr_what_it_wrote(tmp_path, suffix) -> None:
    path, result = save(tmp_path, "girl_bangs", suffix, "--lang", "en")
    assert result.stderr == f"attnwalk: saved {path} ({expected_size(path)})\n"
    assert "saved" not in result.stdout  # stdout is the walk itself


def test_save_says_it_in_chinese_for_a_chinese_walk(tmp_path) -> None:
    path, result = save(tmp_path, "girl_bangs", ".svg", "--lang", "zh")
    assert result.stderr == f"attnwalk：已保存 {path}（{expected_size(path)}）\n"


@pytest.mark.parametrize("size, words", [
    (0, "0 bytes"), (1023, "1023 bytes"), (1024, "1 KiB"), (1535, "1 KiB"), (1536, "2 KiB"),
    (1024 * 1024 - 513, "1023 KiB"), (1024 * 1024 - 512, "1.0 MiB"), (5 * 1024 * 1024 + 52429, "5.1 MiB"),
])
def test_saved_sizes_read_as_ls_h_would(size, words) -> None:
    from attnwalk.commands.output import saved_size
    from attnwalk.render.options import ViewOptions

    assert saved_size(size, ViewOptions(lang="en")) == words


def test_svg_has_its_natural_size_no_network_font_and_solid_sides(tmp_path: Path) -> None:
    """Opened in a browser the walk scrolls at its own size (width/height as in the viewBox),
    needs no network (no url() for a font), and a panel's side is one line per row, the height of
    Rich's row (20 px × 1.22), so the rows' sides touch."""
    path, _ = save(tmp_path, "river_bank", ".svg")
    svg = path.read_text(encoding="utf-8")
    root = ET.fromstring(svg)
    _, _, width, height = root.get("viewBox").split()
    assert (root.get("width"), root.get("height")) == (width, height)
    assert float(height) > 5000
    assert "url(" not in svg.split("<defs>")[0]  # the stylesheet fetches nothing
    assert 'local("FiraCode-Regular")' in svg
    sides = [r for r in root.iter(f"{SVG}rect") if r.get("class", "").endswith(("-r6", "-r7"))
             or (r.get("width") == "1.2")]
    assert len(sides) > 100
    tops = sorted({float(r.get("y")) for r in sides if r.get("x") == sides[0].get("x")})
    gaps = [b - a for a, b in zip(tops, tops[1:])]
    assert min(gaps) == pytest.approx(LINE)  # one line per row, touching the next
    assert all(float(r.get("height")) >= LINE for r in sides)
    assert not any(t.text == "│" for t in root.iter(f"{SVG}text"))
