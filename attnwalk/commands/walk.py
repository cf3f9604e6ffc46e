"""The body of `attnwalk run` and `attnwalk step`: step through a walk in a terminal, or print it
whole when input or output is not a terminal, and record it with --save.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment

from attnwalk.errors import UsageError
from attnwalk.atomic import write_whole
from attnwalk.layer.walk import Walk
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.model import Scenario

SAVE_FORMATS = {".svg": "svg", ".html": "html", ".htm": "html", ".txt": "text"}


def output_path(raw: str | Path, option: str, example: str) -> Path:
    """The file `option` (--save, --output) names, as typed: refused at once when it is empty,
    names a folder (an existing one, or any path ending in '/'), or lies in a folder that does not
    exist or cannot be written. Checked before any work, and on the string as typed: Path("x/")
    and Path("") lose what the user wrote ("x" and ".")."""
    text = os.fspath(raw)
    if not text.strip():
        raise UsageError(f"{option} needs a file name, e.g. {option} {example}")
    if text.endswith(("/", os.sep)) or os.path.basename(text) in (".", ".."):
        raise UsageError(f"{option} {text}: that names a folder; give a file name, e.g. "
                         f"{option} {text.rstrip('/' + os.sep) or '.'}/{example}")
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"{option} {text}: that is a folder; give a file name, e.g. "
                         f"{option} {Path(text) / example}")
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"{option} {text}: cannot write it: the folder {folder} does not exist; "
                         "create it first")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {text}: cannot write in {folder} (permission denied)")
    return path


def save_format(path: str | Path) -> str:
    """The format --save writes for `path` (by its extension), checked before any walking, so a
    bad path fails at once rather than after the learner has stepped through every stage."""
    text = os.fspath(path)
    fmt = SAVE_FORMATS.get(Path(text).suffix.lower()) if text.strip() else "svg"
    if fmt is None:
        allowed = ", ".join(SAVE_FORMATS)
        suffix = Path(text).suffix
        got = f"'{suffix}'" if suffix else "no extension"
        raise UsageError(f"--save {text}: {got} is not a format attnwalk writes; use one of {allowed}")
    output_path(text, "--save", "walk.svg")
    return fmt


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
    from attnwalk.scenario.model import load_scenario

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
        show(stage_screen(walk, stage, screen_head, opts, index=i + 1, count=len(steps),
                          explained_at=first if first is not None and first > start else None))
        if predictor is not None:
            predictor.after(stage.key, h)
        if one_head and stage.per_head and (i + 1 == len(steps) or steps[i + 1][1] != head
                                            or not steps[i + 1][0].per_head):
            show(heads_summary(walk, head, opts))  # after the shown head's last screen


def head_option(scenario: Scenario, value: str | None) -> int | None:
    """--head: a head counted from 1, returned 0-based, or "all" (None); head 1 when not given."""
    if value is None:
        return 0
    if value.strip().lower() == "all":
        return None
    if not value.strip().isdecimal():
        raise UsageError(f"--head {value}: give a head number from 1 to {scenario.heads}, or all")
    from attnwalk.layer.compare import check_head

    return check_head(scenario, int(value))


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


def write_atomically(path: str | Path, content: str, option: str = "--save") -> None:
    """Write `content` to `path` whole (atomic.write_whole), so a failure leaves neither a partial
    file nor a damaged old one."""
    path = Path(path)  # --save and --output arrive as typed (str)
    try:
        write_whole(path, content)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write it ({exc.strerror or exc})") from None


def saved_size(size: int, opts: ViewOptions) -> str:
    """A file's size as a person reads it: bytes below 1 KB, else whole KB, else MB to one
    decimal (1 KB = 1024 bytes, as ls -h counts; halves round up, not to even)."""
    from attnwalk.render.style import say

    if size < 1024:
        return say(opts, "save.bytes", n=size)
    if size < 1024 * 1024 - 512:  # what would round to 1024 KB is written 1.0 MB
        return say(opts, "save.kb", n=int(size / 1024 + 0.5))
    return say(opts, "save.mb", n=f"{int(size / (1024 * 1024) * 10 + 0.5) / 10:.1f}")


def save_reported(path: str | Path, content: str, opts: ViewOptions) -> None:
    """--save: the recording written whole (write_atomically), then one line on stderr naming it
    and its size, so a saved walk is not silent (stdout keeps the walk itself). The path is shown
    as typed; a failure to say it is no error."""
    from attnwalk.render.style import say

    write_atomically(path, content)
    size = saved_size(Path(path).stat().st_size, opts)
    try:
        print(say(opts, "save.saved", path=os.fspath(path), size=size), file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed or full (2>/dev/full): the file is written
        pass


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

    opts = ViewOptions(precision=precision, ascii=ascii, lang=detect_lang(lang))
    fmt = save_format(save) if save is not None else None
    from attnwalk.scenario.tiles import with_tiles

    scenario = with_tiles(chosen_scenario(name, scenario_file, scenario), tiles)
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
        print(note, file=sys.stderr)
    predictor = None
    if predict:  # answers typed at the terminal, or piped on stdin one per stage
        from attnwalk.commands.quiz import LineAnswers, TerminalAnswers
        from attnwalk.tutor.predict import Predictor

        answers = TerminalAnswers(console) if sys.stdin.isatty() else LineAnswers(sys.stdin, console)
        predictor = Predictor(walk, console, answers, opts.lang)
        console.print(text(opts.lang).t("quiz.predict.intro"))
    print_walk(console, walk, opts, start=start, head=shown, predictor=predictor)
    return 0


def interactive_walk(walk: Walk, opts: ViewOptions, *, start: int, note: str, predict: bool) -> int:
    """The walk as a Textual app on the alternate screen (app/walk.py); the place reached is kept
    for --resume however it ends (q, the end, Ctrl-C). Textual is imported only here."""
    from attnwalk.app.walk import WalkApp
    from attnwalk.tutor.predict import StepPredictions

    from functools import cache

    ending = cache(lambda: walk_ending(walk, opts))  # asked at the end only: not the first screen's time
    app = WalkApp(walk, opts, start=start, message=note, predictor=StepPredictions(opts.lang),
                  predict=predict, ending=ending)
    try:
        app.run()
    finally:
        from attnwalk.tutor.progress import remember_stage  # json and the state file: after the walk

        remember_stage(walk.scenario, app.steps, app.index, reached=app.reached)
    if app.ended:  # what to try next stays on the terminal, with the commands to copy
        print("\n".join(ending()))
    return app.return_code or 0


def walk_ending(walk: Walk, opts: ViewOptions) -> list[str]:
    """What the end of the walk suggests (render/lesson.walk_end), with the next lesson's title."""
    from attnwalk.render.lesson import walk_end
    from attnwalk.scenario.builtins import next_lesson
    from attnwalk.scenario.model import load_scenario
    from attnwalk.text import pick

    following = next_lesson(walk.scenario.name) if walk.scenario.builtin else None
    title = pick(load_scenario(following).title, opts.lang) if following else ""
    return walk_end(walk, opts, (following, title or following) if following else None)
