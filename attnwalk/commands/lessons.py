"""The body of `attnwalk list`: the built-in lessons, a table fitted to the terminal."""

from __future__ import annotations


def list_command(*, lang: str | None) -> int:
    from attnwalk.render.lessons import lesson_table
    from attnwalk.terminal.console import make_console
    from attnwalk.text import detect_lang

    console = make_console()
    console.print(lesson_table(detect_lang(lang), console.size.width))
    return 0
