"""The body of `attnwalk train`: plain gradient descent on W_Q, W_K, W_V (and W_O), step by step.

In a terminal a live view (app/train.py): the loss curve and the watched head's A changing as the
steps come, paused and stepped by keys. Piped, or with --no-pause, a table of every k-th step and
A at the start and the end (render/trainview.py); --format json, every step (export/graddata.py).
`--compare` trains the scaled and the unscaled layer from the same start, side by side. A lesson
may ask for Adam's steps (`train: {optimizer: adam}`) and draw fresh sequences at every step
(`sequences:`, the induction lesson): then the views add L_rep and every head's map and scores.
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
                 head: int | None, json: bool = False, output: str | None = None) -> None:
        from attnwalk.commands.grad import with_target
        from attnwalk.features.target import target_of
        from attnwalk.scenario.load import load_with_text

        if output is not None:  # as typed, before anything is read or computed
            _check_output(output, compare)
        # the API gives one loaded; -o rewrites the file's own text
        given, self.text = (name, None) if isinstance(name, Scenario) else load_with_text(name)
        self.output = output
        self.reached: list = []  # with -o: the first and the last step the run reaches
        if output is not None:
            from attnwalk.commands.output import check_not_input

            check_not_input(output, "--output")  # the scenario's files are read by now
        self.source = given.label if isinstance(name, Scenario) or name == "-" else name
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

        from attnwalk.layer.train import draws

        scn = self.scenario
        if draws(scn):  # each step's heads' scores, not an A (export/graddata.py)
            return
        numbers = (self.steps + 1) * len(self.modes) * scn.n * scn.m
        if numbers > MAX_EXPORT:
            raise ScenarioError(f"train's JSON of {self.steps} steps holds {amount(numbers)} numbers (each "
                                f"step's A, {scn.n} × {scn.m}), more than the {amount(MAX_EXPORT)} an export "
                                "writes; use fewer --steps", file=scn.label, field="tokens",
                                line=scn.lines.get("tokens"))

    def runs(self):
        """One generator of Steps per mode, each from the scenario as given (with -o, the first
        and the last step it reaches are kept, for the file)."""
        from attnwalk.features.target import target_of

        optimizer = target_of(self.scenario).optimizer
        return {mode: self._kept_ends(descend(self.scenario, mode, self.steps, self.lr, optimizer))
                for mode in self.modes}

    def _kept_ends(self, run):
        for step in run:
            if self.output is not None:
                self.reached[len(self.reached) > 0:] = [step]  # the first stays; the last is replaced
            yield step

    def write(self, lang: str | None = None, json: bool = False) -> None:
        """-o: the layer after the last step reached, as a scenario file (scenario/trained.py),
        then one line on stderr saying so (none with --format json: stderr is for people)."""
        if self.output is None:
            return
        from attnwalk.commands.output import write_output
        from attnwalk.text import detect_lang, text

        say = text(detect_lang(lang)).t
        if not self.reached:  # quit before step 0 was computed
            print(say("train.file.none", path=self.output), file=sys.stderr)
            return
        from attnwalk.scenario.trained import Trained, check_trained, trained_file

        first, last = self.reached[0], self.reached[-1]
        from attnwalk.features.target import target_of
        from attnwalk.layer.train import draws

        how = Trained(self.source, last.step, self.lr, self.modes[0], first.loss, last.loss,
                      target_of(self.scenario).optimizer, draws(self.scenario))
        if self.text is None:
            raise UsageError("--output writes the trained layer over its scenario file's text; this "
                             "scenario was given already loaded: save it to a file and train that")
        layer = last.walk.scenario
        made = trained_file(self.text, self.scenario, layer, how, self.output)
        _write_beside(made.beside, self.output)
        check_trained(made, layer, self.output)
        write_output(self.output, made.text, option="--output")
        if not json:
            from attnwalk.scenario.trained import loss_text

            print(say("train.file.saved", path=self.output, steps=last.step, first=loss_text(first.loss),
                      last=loss_text(last.loss)), file=sys.stderr)


def _write_beside(files: dict, output: str) -> None:
    """The trained matrices too large for the YAML, as .npy files in -o's folder (never onto an
    input); a device or a FIFO has no folder to put them in."""
    if not files:
        return
    import io
    from pathlib import Path

    import numpy as np

    from attnwalk.commands.output import output_path, write_output

    if not Path(output).is_file() and Path(output).exists():
        raise UsageError(f"--output {output}: the trained layer has matrices too large to write inline "
                         f"({', '.join(files)}), which go in .npy files beside it: give a file in a folder")
    folder = Path(output).parent
    for name, value in files.items():
        path = folder / name
        output_path(path, "--output", name)
        data = io.BytesIO()
        np.save(data, value, allow_pickle=False)
        write_output(path, data.getvalue(), option="--output")


def _check_output(output: str, compare: bool) -> None:
    from attnwalk.commands.output import output_path

    if compare:
        raise UsageError("--output writes one trained layer, and --compare trains two (scaled and "
                         "unscaled): drop --compare, or train one --mode at a time")
    output_path(output, "--output", "trained.yaml")


def train_command(*, name: str, steps: int | None, lr: float | None, mode: str, compare: bool,
                  every: int | None, head: int | None, no_pause: bool, precision: int, ascii: bool,
                  lang: str | None, format: str = "text", output: str | None = None) -> int:
    """`attnwalk train`: the live view in a terminal, else the printed table (or, with --format
    json, every step for scripts); with -o FILE, the trained layer written as a scenario; the
    exit code."""
    if format == "json":
        from attnwalk.terminal.streams import write_out

        write_out(train_json(name=name, steps=steps, lr=lr, mode=mode, compare=compare, head=head,
                             output=output), json=True)
        return 0
    from attnwalk.terminal.console import fitted, interactive, make_console
    from attnwalk.text import detect_lang, text

    opts = ViewOptions(precision=precision, ascii=ascii, lang=detect_lang(lang))
    plan = Plan(name, steps, lr, mode, compare, head, output=output)
    if every is not None and every < 1:
        raise UsageError(f"--every {every}: give a step count of at least 1")
    console = make_console()
    opts = fitted(opts, console)
    if not no_pause and interactive():
        from attnwalk.app.train import TrainApp  # only in a terminal: piped, Textual is never loaded

        from attnwalk.layer.train import draws

        app = TrainApp(plan.runs(), plan.steps, plan.lr, plan.head, opts, drawn=draws(plan.scenario))
        app.run()
        plan.write(lang)  # the layer as far as the learner let it train
        return app.return_code or 0
    if not no_pause and sys.stdout.isatty():
        print(text(opts.lang).t("ui.not_a_tty"), file=sys.stderr)
    from attnwalk.render.trainview import every_default, kept, rows_shown, train_report

    every = every or every_default(plan.steps)
    shown = rows_shown(plan.steps, every)  # only these steps are kept: memory flat in --steps
    runs = {mode: kept(run, shown) for mode, run in plan.runs().items()}
    console.print(train_report(runs, plan.lr, plan.head, every, opts))
    plan.write(lang)
    return 0


def train_json(*, name: str, steps: int | None, lr: float | None, mode: str, compare: bool,
               head: int | None, output: str | None = None) -> str:
    """`train --format json`: every step's loss and A; with --compare each mode's under "modes";
    with -o the trained layer is written too (before the JSON is printed)."""
    from attnwalk.export.data import to_json
    from attnwalk.export.graddata import runs_data

    plan = Plan(name, steps, lr, mode, compare, head, json=True, output=output)
    data = to_json(runs_data(plan.runs(), plan.head, plan.lr)) + "\n"
    plan.write(json=True)
    return data
