"""`attnwalk decode`'s steps as pages of the Textual pager (app/pages.py): n, b, g (a step's number),
m (the same step in the next mode), scrolling, ? and q."""

from __future__ import annotations

from attnwalk.commands.decode import decode_of
from attnwalk.layer.kvcache import Decode
from attnwalk.layer.modes import next_walk_mode
from attnwalk.render.decodeview import decode_screen, screen_count
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import say


class DecodePages:
    """Every screen of one decode, in one mode at a time (each mode decoded once)."""

    help_key = "decode.help"
    jump_key = "decode.jump_prompt"
    no_such_key = "decode.no_step"

    def __init__(self, dec: Decode, opts: ViewOptions, heads: list[int] | None) -> None:
        self.dec, self.opts, self.heads = dec, opts, heads
        self._decoded = {dec.mode.name: dec}

    @property
    def count(self) -> int:
        return screen_count(self.dec)

    def screen(self, index: int, opts: ViewOptions):
        return decode_screen(self.dec, index, opts, self.heads)

    def next_mode(self) -> str:
        """scaled → unscaled → uniform → scaled: the same steps decoded in the next mode."""
        mode = next_walk_mode(self.dec.mode)
        if mode.name not in self._decoded:
            self._decoded[mode.name] = decode_of(self.dec.scenario, mode.name)
        self.dec = self._decoded[mode.name]
        return say(self.opts, "ui.mode_changed", mode=say(self.opts, f"mode.{mode.name}.name"))
