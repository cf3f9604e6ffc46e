"""A recorded walk as HTML: Rich's export_html, made to keep a terminal's columns in a browser.

Rich writes the recording as text in a <pre>, so each glyph is as wide as the font that draws it
makes it. A terminal puts a Chinese character on two cells; a browser draws it from whichever CJK
font it falls back to, 1 em wide, while a cell of the Latin monospace font is ~0.6 em: in A,
撩's row and 女生's row put their numbers at different x, right borders are jagged and the bars
start at different places (measured in chromium with fonts-noto-cjk). A symbol the Latin font
lacks (▸, ᵀ, …) comes from another font, of another width, too.

So the HTML is post-processed, as the SVG is (svg.py): the text of each line is cut where it
changes between ASCII, which the monospace font draws one cell (1ch) wide, wide characters
(rich.cells.cell_len 2) and other characters; a run of wide characters is an inline block exactly
2ch a character wide (each 1 em glyph spaced out to 2ch, centred on its cells), a run of other
one-cell characters (box lines, arrows) an inline block of as many ch as it has cells. Whatever
font draws them, the next character starts on its cell. The font stack names CJK monospace fonts
after the Latin ones (svg.FONT_STACK, and why that order).
"""

from __future__ import annotations

import html
import re

from rich.cells import split_graphemes
from rich.console import Console

from attnwalk.render.svg import FONT_STACK

# Rich's export_html fills {stylesheet}, {foreground}, {background} and {code}; the braces of the
# CSS are doubled for str.format. Lines are 1.25 em apart whatever font a line falls back to, and
# an inline block sits on the line as the text does.
TEMPLATE = """<!DOCTYPE html>
<html lang="@LANG@">
<head>
<meta charset="UTF-8">
<title>@TITLE@</title>
<style>
{stylesheet}
body {{
    color: {foreground};
    background-color: {background};
}}
pre, code {{
    font-family: @FONTS@;
    font-variant-east-asian: normal;
    line-height: 1.25;
}}
.w, .n {{
    display: inline-block;
    white-space: pre;
    vertical-align: bottom;
}}
.w {{
    letter-spacing: calc(2ch - 1em);
    padding-left: calc(1ch - 0.5em);
    box-sizing: border-box;
}}
</style>
</head>
<body>
<pre><code>{code}</code></pre>
</body>
</html>
"""

_TAG = re.compile(r"(<[^>]*>)")


# A notebook's output cell is part of the notebook's own page: no <html> or <body> to style, and
# Rich's class names (.r1, …) would clash between two outputs. So every span carries its style, the
# block sets its own colours (a dark notebook theme keeps the terminal's readable ones), and the
# stylesheet reaches no further than the block. The colours are on the block itself too, for a
# notebook that drops <style> from an output it does not trust.
FRAGMENT = """<div class="attnwalk-output" lang="@LANG@" style="color: {foreground}; background-color: {background}">
<style>
.attnwalk-output pre {{
    font-family: @FONTS@;
    font-variant-east-asian: normal;
    line-height: 1.25;
    color: {foreground};
    background-color: {background};
    padding: 0.5em 1ch;
    margin: 0;
    max-height: @HEIGHT@;
    overflow: auto;
}}
.attnwalk-output .w, .attnwalk-output .n {{
    display: inline-block;
    white-space: pre;
    vertical-align: bottom;
}}
.attnwalk-output .w {{
    letter-spacing: calc(2ch - 1em);
    padding-left: calc(1ch - 0.5em);
    box-sizing: border-box;
}}
</style>
<pre><code>{code}</code></pre>
</div>
"""


def walk_html(console: Console, title: str, lang: str = "en") -> str:
    """The recording on `console` as HTML whose columns line up as on the terminal."""
    page = TEMPLATE.replace("@LANG@", "zh-Hans" if lang == "zh" else lang)
    page = page.replace("@TITLE@", html.escape(title)).replace("@FONTS@", FONT_STACK)
    return _lined_up(console.export_html(code_format=page))


def walk_fragment(console: Console, lang: str = "en", height: str = "none") -> str:
    """The recording on `console` as a block of HTML to put inside another page (a notebook's
    output), its colours those of a light terminal, its columns lined up as walk_html's, at most
    `height` tall (CSS; scrolled beyond it)."""
    from rich.terminal_theme import DEFAULT_TERMINAL_THEME

    block = FRAGMENT.replace("@LANG@", "zh-Hans" if lang == "zh" else lang)
    block = block.replace("@FONTS@", FONT_STACK).replace("@HEIGHT@", height)
    return _lined_up(console.export_html(theme=DEFAULT_TERMINAL_THEME, code_format=block,
                                         inline_styles=True))


def _lined_up(exported: str) -> str:
    head, code = exported.split("<pre><code>", 1)
    code, tail = code.rsplit("</code></pre>", 1)
    cells = "".join(part if part.startswith("<") else _on_cells(part) for part in _TAG.split(code))
    return f"{head}<pre><code>{cells}</code></pre>{tail}"


def _on_cells(escaped: str) -> str:
    """Escaped text with each run of wide characters in a block of 2ch a character and each run
    of other non-ASCII characters in a block of 1ch a character; ASCII as it is."""
    if escaped.isascii():
        return escaped
    # line by line: split_graphemes counts a line break as part of the grapheme before it
    return "\n".join(_line_on_cells(line) for line in html.unescape(escaped).split("\n"))


def _line_on_cells(text: str) -> str:
    spans, _ = split_graphemes(text)
    out: list[str] = []
    run: list[str] = []  # the graphemes of the block being gathered
    run_kind = ""  # "w" (two cells each) or "n" (one cell each)
    cells = 0

    def flush() -> None:
        nonlocal cells
        if run:
            body = html.escape("".join(run), quote=False)
            out.append(f'<span class="{run_kind}" style="width:{cells}ch">{body}</span>')
            run.clear()
            cells = 0

    for start, end, width in spans:
        grapheme = text[start:end]
        kind = "" if grapheme.isascii() or width not in (1, 2) else "w" if width == 2 else "n"
        if kind != run_kind:
            flush()
            run_kind = kind
        if kind:
            run.append(grapheme)
            cells += width
        else:  # ASCII, or a grapheme of no cells (a stray joiner): as it is
            out.append(html.escape(grapheme, quote=False))
    flush()
    return "".join(out)
