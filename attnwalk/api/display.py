"""How a result shows itself in a notebook: Rich renderables drawn on a recording console and
turned into a block of HTML (render/html.walk_fragment: the terminal's heat tables and worked
cells, in a light terminal's colours whatever the notebook's theme), or into plain text."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable

from rich.console import Console, RenderableType

from attnwalk.render.options import ViewOptions

WIDTH = 100  # columns: a notebook's output is about as wide as a wide terminal
HEIGHT = "32em"  # a long walk scrolls inside its block instead of filling the notebook


def options(lang: str | None = None, precision: int = 4) -> ViewOptions:
    """The view of a notebook's output: the language asked for (else ATTNWALK_LANG or the locale,
    as the CLI decides), WIDTH columns."""
    from attnwalk.text import detect_lang

    return ViewOptions(precision=precision, lang=detect_lang(lang), width=WIDTH)


def recorder(width: int = WIDTH) -> Console:
    """A console that draws into nothing and keeps what it drew (with the CLI's console guards,
    which escape what a token could make a terminal or a page obey)."""
    from attnwalk.terminal.console import make_console

    return make_console(record=True, file=io.StringIO(), width=width, color_system="truecolor")


def html_of(drawn: Iterable[RenderableType] | Callable[[Console], None], opts: ViewOptions,
            height: str = HEIGHT) -> str:
    """Renderables, one under the other (or what a function draws on the console it is given), as
    a block of HTML at most `height` tall."""
    from attnwalk.render.html import walk_fragment

    console = recorder(opts.width)
    if callable(drawn):
        drawn(console)
    else:
        for renderable in drawn:
            console.print(renderable)
    return walk_fragment(console, opts.lang, height)


def text_of(renderables: Iterable[RenderableType], width: int = WIDTH) -> str:
    """`renderables` as plain text, without colours: what a terminal would show."""
    from attnwalk.terminal.console import make_console

    console = make_console(record=True, file=io.StringIO(), width=width, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return console.export_text()
