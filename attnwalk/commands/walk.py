"""The body of `attnwalk run` and `attnwalk step`: step through a walk in a terminal, or print it
whole when input or output is not a terminal, and record it with --save.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment

from attnwalk.errors import UsageError
from attnwalk.layer.walk import Walk
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.scenario import Scenario
from attnwalk.numbering import shown as person

def scenario_arg(name: str | None, scenario_file: Path | None) -> str:
    """The one scenario asked for: a NAME argument or --scenario FILE, not both, not neither."""
    if name is not None and scenario_file is not None:
        raise UsageError(f"give either a scenario NAME or --scenario FILE, not both (got '{name}' and {scenario_file})")
    if name is None and scenario_file is None:
        raise UsageError("which scenario? give a built-in NAME (see `attnwalk list`) or --scenario FILE")
    return str(scenario_file) if scenario_file is not None else name  # type: ignore[return-value]


def chosen_scenario(name: str | None, scenario_file: Path | None, scenario=None):
    """The scenario given ready-made (`attnwalk model` builds a real layer's), else the one named or
    in the file."""
    if scenario is not None:
        return scenario
    from attnwalk.scenario.load import load_scenario

    return load_scenario(scenario_arg(name, scenario_file))


class ScreenRule:
    """The line between two screens of a printed walk: what rich's Rule draws ("─" across the
    width, dim; "-" with --ascii), without Rule's Text wrapping (~0.15 ms a screen). Where the
    terminal's encoding cannot show "─" it draws "-" too (Rule would print "?")."""

    def __init__(self, ascii: bool) -> None:
        self.ascii = ascii

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = "-" if self.ascii or options.ascii_only else "─"
        yield Segment(line * options.max_width, console.get_style("dim"))
        yield Segment.line()


def print_walk(console: Console, walk: Walk, opts: ViewOptions, start: int = 0,
               head: int | None = 0, predictor=None) -> None:
    """The walk printed whole from step `start`, screens separated by rules: no waiting, no
    clearing. With several heads, head `head` (0-based) is printed in full and every head on one
    summary screen after it, so the output does not grow with the number of heads; head None
    prints every head in full, later heads pointing back to head 1's explanations. A predictor
    (tutor/predict.py, run --predict) asks before a stage's screen and judges below it."""
    from attnwalk.render.overview import heads_summary
    from attnwalk.render.screens import explained_at, stage_screen, walk_steps

    steps = walk_steps(walk)
    one_head = walk.scenario.heads > 1 and head is not None
    printed = 0

    def show(renderable) -> None:
        nonlocal printed
        if printed:
            console.print(ScreenRule(opts.ascii))
        console.print(renderable)
        printed += 1

    for i, (stage, h) in enumerate(steps):
        if i < start or (one_head and stage.per_head and h != head):
            continue
        first = None if one_head else explained_at(steps, i)  # later heads point back to head 1
        if predictor is not None:
            predictor.before(stage.key, h)
        screen_head = h if stage.per_head or not one_head else head  # Q, K, V: its columns worked
        show(stage_screen(walk, stage, screen_head, opts, index=person(i), count=len(steps),
                          explained_at=first if first is not None and first > start else None))
        if predictor is not None:
            predictor.after(stage.key, h)
        if one_head and stage.per_head and (i + 1 == len(steps) or steps[i + 1][1] != head
                                            or not steps[i + 1][0].per_head):
            show(heads_summary(walk, head, opts))  # after the shown head's last screen


def head_option(scenario: Scenario, value: str | None) -> int | None:
    """--head of a walk: a head counted from 1, returned 0-based, or "all" (None)."""
    from attnwalk.layer.axes import pick_head

    return pick_head(scenario, value, every=True)


def recorded_walk(walk: Walk, opts: ViewOptions, fmt: str, head: int | None = 0) -> str:
    """The whole walk as print_walk prints it, drawn on a recording console of opts.width columns
    and exported as SVG, HTML or plain text."""
    import io

    from attnwalk.terminal.console import make_console  # its guards escape what the SVG shows too

    recorder = make_console(record=True, file=io.StringIO(), width=opts.width, color_system="truecolor")
    print_walk(recorder, walk, opts, head=head)
    if fmt == "svg":  # Rich's SVG, with wide (Chinese) characters on their two cells
        from attnwalk.render.svg import walk_svg

        return walk_svg(recorder, title=f"attnwalk: {walk.scenario.name} ({walk.mode.name})")
    if fmt == "html":  # Rich's HTML, with wide (Chinese) characters on their two cells
        from attnwalk.render.html import walk_html

        return walk_html(recorder, f"attnwalk: {walk.scenario.name} ({walk.mode.name})", opts.lang)
    return recorder.export_text()


def walk_command(*, name: str | None, scenario_file: Path | None, mode: str, no_pause: bool,
                 precision: int, ascii: bool, save: Path | None, lang: str | None,
                 resume: bool = False, head: str | None = None, predict: bool = False,
                 tiles: int | None = None, at: str | None = None,
                 scenario: Scenario | None = None) -> int:
    """Run or step through one scenario; returns the exit code. `head` is --head as typed: the
    head a printed walk shows in full (or "all"), where the interactive walk starts. `scenario`,
    when given, is walked instead of one named (`attnwalk model` builds its own)."""
    from attnwalk.layer.walk import compute
    from attnwalk.render.screens import walk_steps
    from attnwalk.terminal.console import fitted, interactive, make_console
    from attnwalk.text import detect_lang, text

    from attnwalk.commands.output import check_not_input, save_format, save_reported

    opts = ViewOptions(precision=precision, ascii=ascii, lang=detect_lang(lang), predicting=predict)
    fmt = save_format(save) if save is not None else None
    from attnwalk.features.tiles import with_tiles

    scenario = with_tiles(chosen_scenario(name, scenario_file, scenario), tiles)
    if save is not None:  # the scenario's files are read by now: never written over
        check_not_input(save, "--save")
    if at is not None:  # the cost panel's projection, checked before any work
        from attnwalk.layer.cost import projected_dims

        opts = opts.with_(at=projected_dims(scenario, at))
    shown = head_option(scenario, head)
    walk = compute(scenario, mode)
    console = make_console()
    opts = fitted(opts, console)
    if save is not None:
        save_reported(save, recorded_walk(walk, opts, fmt, shown), opts)
    start, note = 0, ""
    steps = walk_steps(walk)
    if resume:
        from attnwalk.tutor.progress import resume_start

        start, note = resume_start(scenario, steps, opts.lang)
        stage, step_head = steps[start]
        if head is None and stage.per_head:  # resumed inside a later head: print that one
            shown = step_head
    if not no_pause and interactive():
        if shown and not resume:  # --head N: step from that head's first screen
            start = next(i for i, (stage, h) in enumerate(steps) if stage.per_head and h == shown)
        return interactive_walk(walk, opts, start=start, note=note, predict=predict)
    if not no_pause and sys.stdout.isatty():  # output is a terminal, but keys cannot be read
        print(text(opts.lang).t("ui.not_a_tty"), file=sys.stderr)
    if note:
        from attnwalk.layer.safe import escaped  # it names the scenario: shown, never obeyed

        print(escaped(note), file=sys.stderr)
    predictor = None
    if predict:  # answers typed at the terminal, or piped on stdin one per stage
        from attnwalk.commands.quiz import LineAnswers, TerminalAnswers
        from attnwalk.tutor.predict import Predictor

        answers = TerminalAnswers(console, opts.lang) if sys.stdin.isatty() else LineAnswers(sys.stdin, console, opts.lang)
        predictor = Predictor(walk, console, answers, opts.lang)
        console.print(text(opts.lang).t("quiz.predict.intro"))
    print_walk(console, walk, opts, start=start, head=shown, predictor=predictor)
    if predictor is not None and predictor.summary():
        from attnwalk.render.wrap import prose_line

        console.print(prose_line(predictor.summary(), style="bold"))
    return 0


def interactive_walk(walk: Walk, opts: ViewOptions, *, start: int, note: str, predict: bool) -> int:
    """The walk as a Textual app on the alternate screen (app/walk.py); the place reached is kept
    for --resume however it ends (q, the end, Ctrl-C). Textual is imported only here."""
    from attnwalk.app.walk import WalkApp
    from attnwalk.tutor.predict import StepPredictions

    from functools import cache

    predictions = StepPredictions(opts.lang)
    # asked at the end only (not the first screen's time): the predictions summed up, then what next
    ending = cache(lambda: [line for line in [predictions.summary()] if line] + walk_ending(walk, opts))
    app = WalkApp(walk, opts, start=start, message=note, predictor=predictions,
                  predict=predict, ending=ending)
    try:
        app.run()
    finally:
        from attnwalk.tutor.progress import remember_stage  # json and the state file: after the walk

        remember_stage(walk.scenario, app.steps, app.index, reached=app.reached)
    if app.ended:  # what to try next stays on the terminal, with the commands to copy, folded
        from attnwalk.render.wrap import prose_line  # at spaces and between Chinese characters
        from attnwalk.terminal.console import make_console

        console = make_console()
        for line in ending():
            console.print(prose_line(line))
    return app.return_code or 0


def walk_ending(walk: Walk, opts: ViewOptions) -> list[str]:
    """What the end of the walk suggests (render/lesson.walk_end), with the next lesson's title."""
    from attnwalk.render.lesson import walk_end
    from attnwalk.scenario.builtins import next_lesson
    from attnwalk.scenario.load import load_scenario
    from attnwalk.text import pick

    following = next_lesson(walk.scenario.name) if walk.scenario.builtin else None
    title = pick(load_scenario(following).title, opts.lang) if following else ""
    return walk_end(walk, opts, (following, title or following) if following else None)
