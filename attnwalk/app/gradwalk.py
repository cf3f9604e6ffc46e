"""The backward walk in a terminal: the walk's own app (walk.py), stepping through the gradient
screens with the same keys, cursor, worked cells, heads and predictions; m recomputes the backward
pass in the next mode (uniform: no gradient reaches the scores), and ? explains these screens."""

from __future__ import annotations

from attnwalk.app.walk import WalkApp
from attnwalk.layer.gradwalk import in_mode
from attnwalk.layer.walk import Walk
from attnwalk.render.options import ViewOptions
from attnwalk.render.style import plain, say
from attnwalk.text import pick


class GradApp(WalkApp):
    help_key = "grad.help"
    predict_on_key = "grad.predict_on"  # the backward walk asks before ∂L/∂S and ∂L/∂W_Q

    def __init__(self, walk: Walk, opts: ViewOptions, **options) -> None:
        title = pick(walk.scenario.title, opts.lang)  # where the lesson's introduction is: after the loss
        options.setdefault("message", say(opts, "grad.below", title=plain(title, opts)) if title else "")
        super().__init__(walk, opts, **options)

    def walk_in(self, mode) -> Walk:
        return in_mode(self.walk, mode)
