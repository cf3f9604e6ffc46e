"""The walk's stepper over `attnwalk decode`'s screens: n, b, g (a step's number), m, scrolling, ?
and q, with the walk's keys, viewport and help; only the screens and their words differ."""

from __future__ import annotations

from rich.text import Text

from attnwalk.commands.decode import decode_of
from attnwalk.layer.kvcache import Decode
from attnwalk.layer.modes import WALK_MODES
from attnwalk.render import style
from attnwalk.render.decodeview import decode_screen, screen_count
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import plain
from attnwalk.terminal.stepper import Stepper

# The stepper's words that differ for decode's steps (the walk speaks of stages).
_WORDS = {"ui.end": "decode.end", "ui.first_stage": "decode.first_step", "ui.footer": "decode.footer",
          "ui.help": "decode.help", "ui.jump_prompt": "decode.jump_prompt"}


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
        return Text(f"{where}  {self.t(f'mode.{self.dec.mode.name}.name')}", style=style.POSITION)

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
