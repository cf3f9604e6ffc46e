"""The body of `attnwalk decode`: generate the layer's output one token at a time with a KV cache.

A terminal steps through the screens (render/decodeview.py) in a Textual pager (app/pages.py);
piped, or with --no-pause, every screen prints once, as `run` prints its stages; --format json
prints every step for scripts (export/decodedata.py). The screens are plain Rich renderables made
from a Decode (layer/kvcache.py), so the pager shows them as the piped output prints them.

Model walks: a model layer that yields a Scenario (with its causal mask) decodes through
`decode_of(scenario, mode)`, the one place a Decode is made for this command.
"""

from __future__ import annotations

import sys
from pathlib import Path

from attnwalk.errors import ScenarioError
from attnwalk.layer.kvcache import Decode, decode
from attnwalk.render.decodeview import decode_screen, screen_count
from attnwalk.render.options import ViewOptions


def decode_of(scenario, mode: str) -> Decode:
    """Every step of decoding `scenario` (a ScenarioError when it has no causal mask)."""
    return decode(scenario, mode)


def decode_command(*, name: str | None, scenario_file: Path | None, mode: str, no_pause: bool,
                   precision: int, ascii: bool, lang: str | None, head: str | None = None,
                   save: str | None = None, scenario=None, format: str = "text") -> int:
    """`attnwalk decode`: step through every step in a terminal, else print them all; returns the
    exit code. `scenario`, when given, is decoded instead of one named (`attnwalk model --decode`);
    --save records every screen as run's --save records the walk; --format json prints every
    step for scripts instead."""
    if format == "json":
        from attnwalk.errors import UsageError
        from attnwalk.terminal.streams import write_out

        if save is not None:
            raise UsageError("--save records the screens; with --format json redirect the output instead "
                             "(... --format json > steps.json)")
        write_out(decode_json(name=name, scenario_file=scenario_file, mode=mode, head=head,
                              scenario=scenario), json=True)
        return 0
    from attnwalk.commands.output import check_not_input, save_format, save_reported
    from attnwalk.commands.walk import ScreenRule, chosen_scenario, head_option
    from attnwalk.terminal.console import fitted, interactive, make_console
    from attnwalk.text import detect_lang, text

    opts = ViewOptions(precision=precision, ascii=ascii, lang=detect_lang(lang))
    fmt = save_format(save) if save is not None else None  # a bad path fails before any work
    scenario = chosen_scenario(name, scenario_file, scenario)
    if save is not None:  # the scenario's files are read by now: never written over
        check_not_input(save, "--save")
    heads = _heads(scenario, head, head_option)
    stepped = not no_pause and interactive()  # one screen drawn at a time, as the learner asks
    if save is not None or not stepped:  # every screen drawn: bounded before anything is decoded
        from attnwalk.scenario.limits import check_decode_screens

        check_decode_screens(scenario, scenario.heads if heads is None else len(heads))
    dec = decode_of(scenario, mode)
    console = make_console()
    opts = fitted(opts, console)
    if save is not None:
        save_reported(save, _recorded(dec, opts, heads, fmt), opts)
    if stepped:
        from attnwalk.app.pages import PagesApp  # only in a terminal: the piped path never loads Textual
        from attnwalk.commands.decodepages import DecodePages
        from attnwalk.text import text

        app = PagesApp(DecodePages(dec, opts, heads), opts)
        app.run()
        if app.ended:
            print(text(opts.lang).t("decode.end"))
        return app.return_code or 0
    if not no_pause and sys.stdout.isatty():  # output is a terminal, but keys cannot be read
        print(text(opts.lang).t("ui.not_a_tty"), file=sys.stderr)
    for index in range(screen_count(dec)):
        if index:
            console.print(ScreenRule(opts.ascii))
        console.print(decode_screen(dec, index, opts, heads))
    return 0


def _recorded(dec: Decode, opts: ViewOptions, heads: list[int] | None, fmt: str) -> str:
    """Every screen as the piped output prints it, drawn on a recording console of opts.width
    columns and exported as SVG, HTML or plain text (the walk's --save, for decoding)."""
    import io

    from attnwalk.commands.walk import ScreenRule
    from attnwalk.terminal.console import make_console

    recorder = make_console(record=True, file=io.StringIO(), width=opts.width, color_system="truecolor")
    for index in range(screen_count(dec)):
        if index:
            recorder.print(ScreenRule(opts.ascii))
        recorder.print(decode_screen(dec, index, opts, heads))
    if fmt == "svg":
        from attnwalk.render.svg import walk_svg

        return walk_svg(recorder, title=f"attnwalk decode: {dec.scenario.name} ({dec.mode.name})")
    if fmt == "html":
        from attnwalk.render.html import walk_html

        return walk_html(recorder, f"attnwalk decode: {dec.scenario.name} ({dec.mode.name})", opts.lang)
    return recorder.export_text()


def _heads(scenario, head: str | None, head_option) -> list[int] | None:
    """--head N: only that head's cache on each screen; all (or none given): every head's."""
    if head is None or head.strip().lower() == "all":
        return None
    return [head_option(scenario, head)]


def decode_json(*, name: str | None, scenario_file: Path | None, mode: str, head: str | None = None,
                scenario=None) -> str:
    """`decode --format json`: every step as JSON text (export/decodedata.py), refused before
    anything is built when it would be larger than an export may be. --head N keeps head N's
    entries alone ("all", or none given: every head's)."""
    from attnwalk.commands.walk import chosen_scenario, head_option
    from attnwalk.export.data import to_json
    from attnwalk.export.decodedata import decode_data, decode_numbers
    from attnwalk.scenario.limits import JSON_BYTES_PER_NUMBER, MAX_EXPORT, amount

    scenario = chosen_scenario(name, scenario_file, scenario)
    heads = _heads(scenario, head, head_option)
    numbers = decode_numbers(scenario)
    if numbers > MAX_EXPORT:  # before anything is built: each step repeats the cache so far
        size = numbers * JSON_BYTES_PER_NUMBER // (1024 * 1024)
        raise ScenarioError(f"decode's JSON for {scenario.n} tokens holds about {amount(numbers)} numbers "
                            f"(about {amount(size)} MB; each step lists the whole cache so far), more than "
                            f"the {amount(MAX_EXPORT)} an export writes; decode fewer tokens",
                            file=scenario.label, field="tokens", line=scenario.lines.get("tokens"))
    return to_json(decode_data(decode_of(scenario, mode), None if heads is None else heads[0])) + "\n"
