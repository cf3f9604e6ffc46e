"""`attnwalk train` in a terminal: the loss curve and the watched head's A changing step by step,
for one mode or, with --compare, the scaled and the unscaled layer side by side.

The steps are computed in a Textual worker thread (a step of a large layer takes a moment, and the
keys must not wait for it), paced so a lesson's run takes a few seconds to watch; space pauses and
resumes, n takes one step while paused, q quits. The curve, the numbers and A are the printed run's
renderables (render/trainview.py): the curve on one scale for both runs. A run on drawn sequences
(the induction lesson) adds L_rep's curve on the same scale and shows every head's map and scores
(render/sequences.py) in place of one head's A."""

from __future__ import annotations

import threading
from dataclasses import replace
from collections.abc import Iterator

from rich.console import Group, NewLine
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from attnwalk.app import collect_again
from attnwalk.app.footer import KeysFooter
from attnwalk.app.help import MessageAndExits, translated
from attnwalk.app.scrolling import PaneScroll
from attnwalk.layer.train import Step
from attnwalk.render import sequences, style
from attnwalk.render.options import ViewOptions
from attnwalk.render.trainview import loss_curve, run_header, weights_view
from attnwalk.render.wrap import Prose

RUN_SECONDS = 8.0  # a whole run takes about this long to watch (each step at least MIN_PAUSE apart)
MIN_PAUSE, MAX_PAUSE = 0.02, 0.4


class TrainApp(PaneScroll, MessageAndExits, App[int]):
    """Train `runs` (one generator of Steps per mode) in step, showing each as it comes."""

    CSS = """
    Screen { layout: vertical; }
    #header { height: auto; padding: 0 1; }
    #status { height: auto; padding: 0 1; color: $text-muted; }
    #runs { height: 1fr; }
    .run { width: 1fr; height: 100%; padding: 0 1; }
    .curve { height: 4; margin: 1 0 0 0; }
    .repeat { height: 5; }
    .drawn .repeat { height: auto; }
    .numbers { height: auto; }
    .weights { height: 1fr; scrollbar-size-vertical: 1; }
    .drawn { height: 1fr; }
    .drawn .side { width: 33; height: 100%; margin: 0 1 0 0; }
    .drawn .weights { width: 1fr; }
    #message { height: auto; padding: 0 1; color: $text-warning; display: none; }
    #message.-shown { display: block; }
    """
    ENABLE_COMMAND_PALETTE = False
    scrolled = ".weights"
    help_key = "train.help"
    BINDINGS = [
        Binding("space", "pause", "train.key.pause", key_display="space"),
        Binding("n", "step", "train.key.step"),
        Binding("question_mark", "help", "app.key.help", key_display="?"),
        Binding("q", "leave", "app.key.quit"),
        Binding("ctrl+d", "leave", show=False),
        Binding("j,down", "scroll_lines(1)", "app.key.scroll", key_display="j k"),
        Binding("k,up", "scroll_lines(-1)", show=False),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
    ]

    def __init__(self, runs: dict[str, Iterator[Step]], steps: int, lr: float, head: int,
                 opts: ViewOptions, drawn: bool = False) -> None:
        super().__init__()
        translated(self, opts)
        keys = self._bindings.key_to_bindings  # this app's own keys' descriptions: train.key.*
        for key, found in keys.items():
            keys[key] = [replace(b, description=style.say(opts, b.description))
                         if b.description.startswith("train.") else b for b in found]
        self.runs, self.steps, self.lr, self.head, self.opts = runs, steps, lr, head, opts
        # of each run only its first step, its latest and every loss so far: memory flat in the steps
        self.seen: dict[str, list[Step]] = {mode: [] for mode in runs}  # [first] or [first, latest]
        self.losses: dict[str, list[float]] = {mode: [] for mode in runs}
        self.repeats: dict[str, list[float]] = {mode: [] for mode in runs}  # L_rep, on drawn sequences
        self.drawn = drawn  # trained on drawn sequences: L_rep, and every head's map and scores
        # a step on drawn sequences is a batch of walks, slow enough to watch without a pause
        self.pause = 0.0 if drawn else max(MIN_PAUSE, min(MAX_PAUSE, RUN_SECONDS / max(steps, 1)))
        self.running = threading.Event()
        self.running.set()
        self.one_step = threading.Event()
        self.leaving = threading.Event()  # the app is closing: the worker stops at its next check
        self.done = False
        self.message = ""

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static(id="status")
        with Horizontal(id="runs"):
            for mode in self.runs:
                with Vertical(classes="run", id=f"run-{mode}"):
                    if self.drawn:  # the losses in a narrow column, the heads' maps beside them
                        with Horizontal(classes="drawn"):
                            with Vertical(classes="side"):
                                yield from self._losses(mode)
                            yield from self._weights(mode)
                    else:
                        yield from self._losses(mode)
                        yield from self._weights(mode)
        yield Static(id="message")
        yield KeysFooter()

    def _losses(self, mode: str) -> ComposeResult:
        yield Static(classes="curve", id=f"curve-{mode}")
        yield Static(classes="numbers", id=f"numbers-{mode}")
        if self.drawn:  # the loss on the second copies, under the loss's numbers
            yield Static(classes="repeat", id=f"repeat-{mode}")

    def _weights(self, mode: str) -> ComposeResult:
        with VerticalScroll(classes="weights", id=f"pane-{mode}", can_focus=False):
            yield Static(id=f"weights-{mode}")

    def on_mount(self) -> None:
        collect_again()
        self.train()

    # -- the steps, in a worker thread ------------------------------------------------------------

    @work(thread=True, exclusive=True)
    def train(self) -> None:
        try:
            for k in range(self.steps + 1):
                steps = {mode: next(run) for mode, run in self.runs.items()}
                if self.leaving.is_set():
                    return
                self._post(self.show_step, steps)
                if k == self.steps:
                    break
                if self.leaving.wait(self.pause):
                    return
                while not self.running.is_set():  # paused: n takes one step
                    if self.leaving.is_set():
                        return
                    if self.one_step.wait(0.05):
                        self.one_step.clear()
                        break
        except Exception as exc:  # a run that overflows float64 says why (layer/train.diverged)
            if not self.leaving.is_set():
                self._post(self.say_now, str(exc))
        if not self.leaving.is_set():
            self._post(self.finished)

    def _post(self, callback, *args) -> None:
        try:
            self.call_from_thread(callback, *args)
        except RuntimeError:  # the app closed between the check and the call
            self.leaving.set()

    def on_unmount(self) -> None:
        self.leaving.set()

    def show_step(self, steps: dict[str, Step]) -> None:
        for mode, step in steps.items():
            seen = self.seen[mode]
            seen[1 if seen else 0:] = [step]  # the first stays; the latest replaces the one before
            self.losses[mode].append(step.loss)
            if "loss_repeat" in step.numbers:
                self.repeats[mode].append(float(step.numbers["loss_repeat"]))
        if len(self.losses[next(iter(self.losses))]) == 1:  # on drawn sequences its title only: the maps need the rows
            self.query_one("#header", Static).update(run_header(self.seen, self.lr, self.head, self.opts,
                                                                steps=self.steps, title_only=self.drawn))
        width = max(self.size.width // len(self.runs) - 2, 20)
        opts = self.opts.with_(width=width)
        top = max(s.loss for run in self.seen.values() for s in run[:1])  # one scale for every run
        for mode, run in self.seen.items():
            side = self.query_one(f"#curve-{mode}", Static).size.width or width
            narrow = opts.with_(width=side)
            curve = loss_curve(self.losses[mode], top, self.steps, side, 4, narrow)
            self.query_one(f"#curve-{mode}", Static).update(curve)
            if self.drawn:
                repeat = loss_curve(self.repeats[mode], top, self.steps, side, 4, narrow)
                self.query_one(f"#repeat-{mode}", Static).update(
                    Group(Prose(style.say(opts, "train.sequences.repeat_curve"), style=style.NOTE), repeat))
            self.query_one(f"#numbers-{mode}", Static).update(self._numbers(mode, run, narrow))
            label = style.say(opts, "train.a_end", mode=self._mode_name(mode), step=run[-1].step)
            self.query_one(f"#weights-{mode}", Static).update(
                self._maps(run, label) if self.drawn else weights_view(run[-1], self.head, opts, label))
        self._status()

    def _maps(self, run: list[Step], label: str) -> Group:
        """Every head's map, the circuit's two heads first (one row of maps is what 24 lines hold),
        then what the maps show and what each step trains on, below them: j scrolls to it."""
        pane = self.query_one(".weights")
        opts = self.opts.with_(width=max((pane.size.width or self.size.width) - 1, 20))  # the scrollbar's column
        rule = run_header(self.seen, self.lr, self.head, opts, steps=self.steps, title_only=False)
        return Group(Text(label, style=style.LABEL), sequences.heads_maps(run[-1], opts, legend=False, circuit=True),
                     NewLine(), sequences.maps_legend(run[-1], opts), NewLine(), rule)

    def _mode_name(self, mode: str) -> str:
        return style.say(self.opts, f"mode.{mode}.name")

    def _numbers(self, mode: str, run: list[Step], opts: ViewOptions) -> Group:
        first, last = run[0], run[-1]
        drop = first.loss - last.loss
        line = style.say(opts, "train.live", mode=self._mode_name(mode), first=style.number(first.loss, opts),
                         last=style.number(last.loss, opts), drop=style.number(drop, opts),
                         grad=style.number(last.grad_norm, opts))
        if self.drawn:
            line += " · " + style.say(opts, "train.sequences.live", first=style.number(self.repeats[mode][0], opts),
                                      last=style.number(self.repeats[mode][-1], opts),
                                      previous=sequences.strongest_text(last, "previous_token", opts),
                                      induction=sequences.strongest_text(last, "induction", opts))
        curve = "train.curve" if len(self.runs) > 1 else "train.curve_one"
        return Group(Prose(style.say(opts, curve), style=style.NOTE), Prose(style.plain(line, opts)))

    def _status(self) -> None:
        k = len(self.losses[next(iter(self.losses))]) - 1
        state = "train.done" if self.done else "train.running" if self.running.is_set() else "train.paused"
        self.query_one("#status", Static).update(style.say(self.opts, "train.status", step=k, steps=self.steps,
                                                           state=style.say(self.opts, state)))

    def finished(self) -> None:
        self.done = True
        self._status()
        self.refresh_bindings()  # space and n leave the footer: nothing is left to pause or step

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.done and action in ("pause", "step"):
            return False
        return super().check_action(action, parameters)

    # -- keys -------------------------------------------------------------------------------------

    def action_pause(self) -> None:
        if self.done:
            return
        if self.running.is_set():
            self.running.clear()
        else:
            self.running.set()
        self._status()

    def action_step(self) -> None:
        if self.done:
            self.say_now(style.say(self.opts, "train.no_more"))
        elif self.running.is_set():
            self.say_now(style.say(self.opts, "train.pause_first"))
        else:
            self.one_step.set()
