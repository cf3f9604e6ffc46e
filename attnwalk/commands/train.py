"""The body of `attnwalk train`: plain gradient descent on W_Q, W_K, W_V (and W_O), step by step.

In a terminal a live view (app/train.py): the loss curve and the watched head's A changing as the
steps come, paused and stepped by keys. Piped, or with --no-pause, a table of every k-th step and
A at the start and the end (render/trainview.py); --format json, every step (export/graddata.py).
`--compare` trains the scaled and the unscaled layer from the same start, side by side.
"""

from __future__ import annotations

import math
import sys

from attnwalk.errors import ScenarioError, UsageError
from attnwalk.layer.train import MAX_RUN_STEPS, check_cost, descend
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.scenario import Scenario

COMPARED = ("scaled", "unscaled")


class Plan:
    """What one `attnwalk train` runs: the scenario, the modes, steps, η and the watched head."""

    def __init__(self, name: str | Scenario, steps: int | None, lr: float | None, mode: str, compare: bool,
                 head: int | None, json: bool = False) -> None:
        from attnwalk.commands.grad import with_target
        from attnwalk.features.target import target_of
        from attnwalk.scenario.load import load_scenario

        given = name if isinstance(name, Scenario) else load_scenario(name)  # the API gives one loaded
        self.scenario: Scenario = with_target(given, "attnwalk train")
        target = target_of(self.scenario)
        self.steps = target.steps if steps is None else steps
        self.lr = target.lr if lr is None else lr
        if not (math.isfinite(self.lr) and self.lr > 0):  # first: inf would pass "> 0", then overflow
            raise UsageError(f"--lr {lr:g}: the step size η of W ← W − η · ∂L/∂W must be a finite "
                             "number above 0, e.g. --lr 0.2")
        self.modes = COMPARED if compare else (mode,)
        if self.steps * len(self.modes) > MAX_RUN_STEPS:
            each = MAX_RUN_STEPS // len(self.modes)
            both = " (--compare trains two runs)" if compare else ""
            raise UsageError(f"--steps {self.steps:,}: at most {MAX_RUN_STEPS:,} steps in one train{both}: "
                             "each is a forward and a backward walk, a millisecond or more even on the "
                             f"smallest layer; use --steps {each} or fewer")
        heads = self.scenario.heads
        if head is not None and not 1 <= head <= heads:
            raise UsageError(f"--head {head}: this scenario has {heads} head(s); choose 1–{heads}")
        self.head = head - 1 if head is not None else target.head if target.kind == "attend" else 0
        check_cost(self.scenario, (self.steps + 1) * len(self.modes) - 1, "attnwalk train")
        if json:
            self._check_json()

    def _check_json(self) -> None:
        from attnwalk.scenario.limits import MAX_EXPORT, amount

        scn = self.scenario
        numbers = (self.steps + 1) * len(self.modes) * scn.n * scn.m
        if numbers > MAX_EXPORT:
            raise ScenarioError(f"train's JSON of {self.steps} steps holds {amount(numbers)} numbers (each "
                                f"step's A, {scn.n} × {scn.m}), more than the {amount(MAX_EXPORT)} an export "
                                "writes; use fewer --steps", file=scn.label, field="tokens",
                                line=scn.lines.get("tokens"))

    def runs(self):
        """One generator of Steps per mode, each from the scenario as given."""
        from attnwalk.features.target import target_of

        optimizer = target_of(self.scenario).optimizer
        return {mode: descend(self.scenario, mode, self.steps, self.lr, optimizer) for mode in self.modes}


def train_command(*, name: str, steps: int | None, lr: float | None, mode: str, compare: bool,
                  every: int | None, head: int | None, no_pause: bool, precision: int, ascii: bool,
                  lang: str | None, format: str = "text") -> int:
    """`attnwalk train`: the live view in a terminal, else the printed table (or, with --format
    json, every step for scripts); the exit code."""
    if format == "json":
        from attnwalk.terminal.streams import write_out

        write_out(train_json(name=name, steps=steps, lr=lr, mode=mode, compare=compare, head=head), json=True)
        return 0
    from attnwalk.terminal.console import fitted, interactive, make_console
    from attnwalk.text import detect_lang, text

    opts = ViewOptions(precision=precision, ascii=ascii, lang=detect_lang(lang))
    plan = Plan(name, steps, lr, mode, compare, head)
    if every is not None and every < 1:
        raise UsageError(f"--every {every}: give a step count of at least 1")
    console = make_console()
    opts = fitted(opts, console)
    if not no_pause and interactive():
        from attnwalk.app.train import TrainApp  # only in a terminal: piped, Textual is never loaded

        from attnwalk.layer.train import draws

        app = TrainApp(plan.runs(), plan.steps, plan.lr, plan.head, opts, drawn=draws(plan.scenario))
        app.run()
        return app.return_code or 0
    if not no_pause and sys.stdout.isatty():
        print(text(opts.lang).t("ui.not_a_tty"), file=sys.stderr)
    from attnwalk.render.trainview import every_default, kept, rows_shown, train_report

    every = every or every_default(plan.steps)
    shown = rows_shown(plan.steps, every)  # only these steps are kept: memory flat in --steps
    runs = {mode: kept(run, shown) for mode, run in plan.runs().items()}
    console.print(train_report(runs, plan.lr, plan.head, every, opts))
    return 0


def train_json(*, name: str, steps: int | None, lr: float | None, mode: str, compare: bool,
               head: int | None) -> str:
    """`train --format json`: every step's loss and A; with --compare each mode's under "modes"."""
    from attnwalk.export.data import to_json
    from attnwalk.export.graddata import runs_data

    plan = Plan(name, steps, lr, mode, compare, head, json=True)
    return to_json(runs_data(plan.runs(), plan.head, plan.lr)) + "\n"
