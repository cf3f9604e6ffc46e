"""The body of `attnwalk export` (and `attnwalk model --format`): every stage's matrix as JSON,
or a handout in Markdown, LaTeX or CSV, printed or written whole to -o."""

from __future__ import annotations

from typing import Any, Callable

from attnwalk.layer.walk import Walk


def export_command(*, scenario: str, format: str, mode: str, lang: str | None, precision: int,
                   output: str | None, tiles: int | None) -> int:
    """`attnwalk export SCENARIO`: the scenario's walk exported as `format`; returns the exit code."""
    from attnwalk.scenario.load import load_scenario
    from attnwalk.features.tiles import with_tiles

    return export_walk(with_tiles(load_scenario(scenario), tiles), format=format, mode=mode, lang=lang,
                       precision=precision, output=output)


def export_walk(scenario, *, format: str, mode: str, lang: str | None, precision: int,
                output: str | None, data: Callable[[Walk], dict[str, Any]] | None = None) -> int:
    """`scenario` computed in `mode` and exported: JSON (`data` builds its contract, walk_data's by
    default), or a handout; on stdout, or written whole to `output` (checked before any work)."""
    from attnwalk.commands.output import check_not_input, output_path, write_output
    from attnwalk.export.data import to_json, walk_data
    from attnwalk.layer.walk import compute
    from attnwalk.scenario.limits import check_export
    from attnwalk.terminal.streams import write_out
    from attnwalk.text import detect_lang

    lang = detect_lang(lang)
    if output is not None:  # checked as typed, and shown so in messages
        output_path(output, "--output", f"walk.{format}")
        check_not_input(output, "--output")  # the scenario's files are read by now: never written over
    check_export(scenario, format)  # from the shapes, before anything is computed
    walk = compute(scenario, mode)
    if format == "json":
        content = to_json((data or walk_data)(walk)) + "\n"
    else:
        from attnwalk.export.handout import handout
        from attnwalk.render.options import ViewOptions

        content = handout(walk, format, ViewOptions(precision=precision, lang=lang))
    if output is None:
        write_out(content, json=format == "json")
    else:
        write_output(output, content, option="--output")
    return 0
