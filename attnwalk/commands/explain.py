"""The body of `attnwalk explain SCENARIO STAGE ROW COL`: one cell's worked arithmetic, without
the walk."""

from __future__ import annotations


def explain_command(*, scenario: str, stage: str, row: str, col: str, mode: str, head: str | None,
                    precision: int, ascii: bool, lang: str | None, tiles: int | None) -> int:
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions
    from attnwalk.render.screens import explain_view
    from attnwalk.scenario.load import load_scenario
    from attnwalk.features.tiles import with_tiles
    from attnwalk.terminal.console import fitted, make_console
    from attnwalk.text import detect_lang

    lang = detect_lang(lang)
    walk = compute(with_tiles(load_scenario(scenario), tiles), mode)
    console = make_console()
    opts = fitted(ViewOptions(precision=precision, ascii=ascii, lang=lang), console)
    console.print(explain_view(walk, stage, row, col, head, opts))
    return 0
