"""The body of `attnwalk decode`: generate the layer's output one token at a time with a KV cache.

A terminal steps through the screens (render/decodeview.py) with the walk's own stepper and keys;
piped, or with --no-pause, every screen prints once, as `run` prints its stages; --format json
prints every step for scripts (export/decodedata.py). The screens are plain Rich renderables made
from a Decode (layer/kvcache.py), so another stepper can show them as they are.

Model walks: a model layer that yields a Scenario (with its causal mask) decodes through
`decode_of(scenario, mode)`, the one place a Decode is made for this command.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.text import Text

from attnwalk.errors import ScenarioError
from attnwalk.layer.kvcache import Decode, decode
from attnwalk.layer.modes import WALK_MODES
from attnwalk.render.decodeview import decode_screen, screen_count
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import plain
from attnwalk.terminal.stepper import Stepper

# The stepper's words that differ for decode's steps (the walk speaks of stages).
_WORDS = {"ui.end": "decode.end", "ui.first_stage": "decode.first_step", "ui.footer": "decode.footer",
          "ui.help": "decode.help", "ui.jump_prompt": "decode.jump_prompt"}


def decode_of(scenario, mode: str) -> Decode:
    """Every step of decoding `scenario` (a ScenarioError when it has no causal mask)."""
    return decode(scenario, mode)


def decode_command(*, name: str | None, scenario_file: Path | None, mode: str, no_pause: bool,
                   precision: int, ascii: bool, lang: str | None, head: str | None = None) -> int:
    """`attnwalk decode`: step through every step in a terminal, else print them all; returns the
    exit code."""
    from attnwalk.commands.walk import ScreenRule, head_option, scenario_arg
    from attnwalk.scenario.model import load_scenario
    from attnwalk.terminal.console import interactive, make_console, wants_ascii
    from attnwalk.text import detect_lang, text

    opts = ViewOptions(precision=precision, ascii=ascii, lang=detect_lang(lang))
    scenario = load_scenario(scenario_arg(name, scenario_file))
    heads = _heads(scenario, head, head_option)
    dec = decode_of(scenario, mode)
    console = make_console()
    opts = opts.with_(width=console.size.width, ascii=ascii or wants_ascii(console))
    if not no_pause and interactive():
        from attnwalk.terminal.keys import TerminalKeys

        with TerminalKeys() as keys:
            return DecodeStepper(dec, console, keys, opts, heads).run()
    if not no_pause and sys.stdout.isatty():  # output is a terminal, but keys cannot be read
        print(text(opts.lang).t("ui.not_a_tty"), file=sys.stderr)
    for index in range(screen_count(dec)):
        if index:
            console.print(ScreenRule(opts.ascii))
        console.print(decode_screen(dec, index, opts, heads))
    return 0


def _heads(scenario, head: str | None, head_option) -> list[int] | None:
    """--head N: only that head's cache on each screen; all (or none given): every head's."""
    if head is None or head.strip().lower() == "all":
        return None
    return [head_option(scenario, head)]


def decode_json(*, name: str | None, scenario_file: Path | None, mode: str) -> str:
    """`decode --format json`: every step as JSON text (export/decodedata.py), refused before
    anything is built when it would be larger than an export may be."""
    from attnwalk.commands.walk import scenario_arg
    from attnwalk.export.data import to_json
    from attnwalk.export.decodedata import decode_data, decode_numbers
    from attnwalk.scenario.limits import JSON_BYTES_PER_NUMBER, MAX_EXPORT, amount

    from attnwalk.scenario.model import load_scenario

    scenario = load_scenario(scenario_arg(name, scenario_file))
    numbers = decode_numbers(scenario)
    if numbers > MAX_EXPORT:  # before anything is built: each step repeats the cache so far
        size = numbers * JSON_BYTES_PER_NUMBER // (1024 * 1024)
        raise ScenarioError(f"decode's JSON for {scenario.n} tokens holds about {amount(numbers)} numbers "
                            f"(about {amount(size)} MB; each step lists the whole cache so far), more than "
                            f"the {amount(MAX_EXPORT)} an export writes; decode fewer tokens",
                            file=scenario.label, field="tokens", line=scenario.lines.get("tokens"))
    return to_json(decode_data(decode_of(scenario, mode))) + "\n"


class DecodeStepper(Stepper):
    """The walk's stepper over decode's screens: n, b, g (a step's number), m, scrolling, ?, q."""

    def __init__(self, dec: Decode, console, keys, opts: ViewOptions, heads: list[int] | None) -> None:
        super().__init__(dec.scenario, console, keys, opts, mode=dec.mode, walk=dec.walk)
        self.dec = dec
        self.heads = heads

    @property
    def steps(self) -> list[int]:  # type: ignore[override]  (screens, not (stage, head) pairs)
        return list(range(screen_count(self.dec)))

    def t(self, key: str, **values: object) -> str:
        return super().t(_WORDS.get(key, key), **values)

    def current_screen(self):
        return decode_screen(self.dec, self.index, self.view_options(), self.heads)

    def status(self) -> Text:
        where = self.t("decode.step_header", index=self.index + 1, count=len(self.steps))
        return Text(f"{where}  {self.t(f'mode.{self.dec.mode.name}.name')}", style="bold cyan")

    def _find_step(self, answer: str) -> int | None:
        if answer.isdecimal() and 1 <= int(answer) <= len(self.steps):
            return int(answer) - 1
        return None

    def jump(self) -> None:
        answer = self.keys.read_line(self.t("decode.jump_prompt", count=len(self.steps)))
        if answer is None or not answer.strip():
            return
        target = self._find_step(answer.strip())
        if target is None:
            self.message = self.t("decode.no_step", value=plain(answer.strip(), self.opts),
                                  count=len(self.steps))
        else:
            self.go(target)

    def choose_cell(self) -> None:
        self.message = self.t("decode.not_here")

    def next_head(self) -> None:
        self.message = self.t("decode.not_here")

    def next_mode(self) -> None:
        """scaled → unscaled → uniform: decode again, on the same step."""
        modes = list(WALK_MODES)
        mode = modes[(modes.index(self.dec.mode) + 1) % len(modes)] if self.dec.mode in modes else modes[0]
        self.dec = decode_of(self.scenario, mode.name)
        self.walk = self.dec.walk
        self.message = self.t("ui.mode_changed", mode=self.t(f"mode.{mode.name}.name"))
