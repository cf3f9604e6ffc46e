"""--save walk.html: the HTML keeps the terminal's columns in a browser, Chinese included.

Rich's HTML is a <pre> of text: a browser draws each Chinese character from a CJK font 1 em wide
while a cell of the Latin monospace font is ~0.6 em, so A's columns shifted between 撩's row and
女生's, right borders were jagged and the bars started at different x (issue 28, seen in chromium
with fonts-noto-cjk). render/html.py puts each run of wide characters on 2ch a character.

The check is a real browser's: headless chromium lays the page out with the fonts installed, and
a script measures where every token after a space and every box-drawing character starts; each
must sit at its terminal column × the width of one cell (the ch of the monospace font), to within
a pixel. Where chromium or a CJK font (Debian: fonts-noto-cjk) is not installed, those tests are
skipped, saying so; the structural tests run everywhere.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from attnwalk.cli import app

MEASURE = """<script>
(function () {
  const code = document.querySelector("pre code");
  const probe = document.createElement("pre");
  probe.textContent = "0".repeat(200);
  probe.style.display = "inline-block";
  document.body.appendChild(probe);
  const cell = probe.getBoundingClientRect().width / 200;
  const left = code.getBoundingClientRect().left;
  const range = document.createRange();
  const found = [];
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  let line = 0, index = 0, previous = " ", node;
  while ((node = walker.nextNode())) {
    const text = node.data;
    for (let i = 0; i < text.length; i++) {
      const ch = text[i];
      if (ch === "\\n") { line++; index = 0; previous = " "; continue; }
      const box = ch >= "\\u2500" && ch <= "\\u257f";
      const wide = node.parentElement.classList.contains("w");
      if ((box || (previous === " " && ch !== " ")) && !wide) {
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        found.push([line, index, range.getBoundingClientRect().left]);
      }
      previous = ch;
      index++;
    }
  }
  const out = document.createElement("div");
  out.id = "measured";
  out.textContent = JSON.stringify({cell: cell, left: left, found: found});
  document.body.appendChild(out);
})();
</script>"""

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


def cjk_font() -> bool:
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return False
    listed = subprocess.run([fc_list, ":lang=zh"], capture_output=True, text=True, timeout=60).stdout
    return bool(listed.strip())


def needs_a_browser() -> None:
    if chromium() is None:
        pytest.skip("chromium is not installed: the HTML's columns are measured in a real browser")
    if not cjk_font():
        pytest.skip("no CJK font is installed (Debian: fonts-noto-cjk): Chinese would be drawn as boxes")


def saved(tmp_path, *args: str) -> str:
    path = tmp_path / "walk.html"
    result = CliRunner().invoke(app, [*args, "--no-pause", "--save", str(path)])
    assert result.exit_code == 0, result.output
    return path.read_text(encoding="utf-8")


def lines_of(page: str) -> list[str]:
    """The text of the page's <pre>, line by line, as the terminal showed it."""
    code = page.split("<pre><code>", 1)[1].rsplit("</code></pre>", 1)[0]
    return html.unescape(re.sub(r"<[^>]*>", "", code)).split("\n")


def measured(page: str, tmp_path) -> dict:
    """Where chromium puts each measured character of `page`."""
    path = tmp_path / "measure.html"
    path.write_text(page.replace("</body>", MEASURE + "\n</body>"), encoding="utf-8")
    profile = tmp_path / "chromium-profile"
    done = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                           "--window-size=1600,1200", "--virtual-time-budget=5000", "--dump-dom",
                           path.as_uri()], capture_output=True, text=True, timeout=180)
    found = re.search(r'<div id="measured">(.*?)</div>', done.stdout, re.S)
    assert found, f"chromium printed no measurements: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def misplaced(page: str, tmp_path) -> tuple[int, list[str]]:
    """How many characters were measured, and those not at their terminal column."""
    lines = lines_of(page)
    seen = measured(page, tmp_path)
    cell, left = seen["cell"], seen["left"]
    off = []
    for line, index, x in seen["found"]:
        text = lines[line]
        column = cell_len(text[:index])
        if abs(x - left - column * cell) > 1.0:
            off.append(f"line {line + 1}, column {column} ({text[index]!r}): {(x - left) / cell:.2f} cells "
                       f"in: {text.rstrip()}")
    return len(seen["found"]), off


@pytest.mark.parametrize("args", [["run", "girl_bangs", "--lang", "zh"], ["run", "sliding_window"],
                                  ["run", "girl_bangs"], ["decode", "kv_cache", "--lang", "zh"]],
                         ids=["girl_bangs-zh", "sliding_window-en", "girl_bangs-en", "decode-kv_cache-zh"])
def test_in_chromium_every_column_lines_up_as_on_the_terminal(tmp_path, args) -> None:
    needs_a_browser()
    page = saved(tmp_path, *args)
    count, off = misplaced(page, tmp_path)
    assert count > 500  # the page was laid out and measured: tokens and borders on every screen
    assert not off, f"{len(off)} of {count} characters off their column, e.g.:\n" + "\n".join(off[:8])


def test_in_chromium_richs_own_html_does_not_line_up(tmp_path) -> None:
    """The measurement can fail: the same walk as Rich exports it, without the cells kept."""
    needs_a_browser()
    from attnwalk.commands.walk import print_walk
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions
    from attnwalk.scenario.load import load_scenario
    from attnwalk.terminal.console import make_console
    import io

    opts = ViewOptions(lang="zh", width=80)
    recorder = make_console(record=True, file=io.StringIO(), width=80, color_system="truecolor")
    print_walk(recorder, compute(load_scenario("girl_bangs")), opts)
    page = re.sub(r"<pre[^>]*><code[^>]*>", "<pre><code>", recorder.export_html())
    count, off = misplaced(page, tmp_path)
    assert count > 500 and len(off) > 100


def test_wide_characters_take_two_cells_and_other_symbols_one_in_the_markup(tmp_path) -> None:
    """Without a browser: each run of Chinese sits in a block 2ch a character wide, each run of
    box lines or arrows in a block 1ch a character wide, ASCII as it is; the text is the walk's."""
    page = saved(tmp_path, "run", "girl_bangs", "--lang", "zh")
    assert '<span class="w" style="width:4ch">女生</span>' in page
    assert '<span class="w" style="width:2ch">撩</span>' in page
    assert re.search(r'<span class="n" style="width:(\d+)ch">(─+)</span>', page)
    for width, run in re.findall(r'<span class="w" style="width:(\d+)ch">([^<]*)</span>', page):
        assert int(width) == cell_len(run) == 2 * len(run)
    for width, run in re.findall(r'<span class="n" style="width:(\d+)ch">([^<]*)</span>', page):
        assert int(width) == cell_len(html.unescape(run))
    assert '<html lang="zh-Hans">' in page and "<title>attnwalk: girl_bangs (scaled)</title>" in page
    assert '"Noto Sans Mono CJK SC"' in page and "font-variant-east-asian: normal" in page
    text = "\n".join(lines_of(page))
    assert "女生撩刘海" in text and "A[撩, 刘海] = 0.7104" in text


def test_a_latin_walk_keeps_its_ascii_as_rich_writes_it(tmp_path) -> None:
    page = saved(tmp_path, "run", "river_bank")
    assert '<span class="w"' not in page  # no Chinese: no wide blocks
    assert "A[bank, river] = 0.6854" in "\n".join(lines_of(page))
