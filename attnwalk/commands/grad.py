"""The body of `attnwalk grad`: the backward walk, stage by stage from the loss back to the weights.

In a terminal it steps as the walk steps (the same app, app/gradwalk.py: the same keys, the cursor
moving the worked cell, m the mode, h the head); piped, or with --no-pause, every screen prints
once (commands/walk.py's print_walk, which takes any Walk); --format json prints every gradient
for scripts (export/graddata.py).
"""

from __future__ import annotations

import sys

from attnwalk.errors import ScenarioError
from attnwalk.layer.gradwalk import GradWalk, grad_walk
from attnwalk.layer.train import check_cost, gradients
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.scenario import Scenario


def with_target(scenario: Scenario, command: str) -> Scenario:
    """`scenario`, or a ScenarioError saying it has no target (nothing to differentiate)."""
    from attnwalk.features.target import target_of

    if target_of(scenario) is None:
        raise ScenarioError(f"has no target, so there is no loss for {command} to work with: add "
                            "target: {attend: {QUERY: KEY}} (which key a query should attend to) or "
                            "target: {output: MATRIX} (what the output should be); see attnwalk "
                            "run backprop", file=scenario.label)
    return scenario


def backward_walk(scenario: Scenario, mode: str) -> GradWalk:
    """The backward walk of `scenario` under `mode`, refused from its shapes if too costly."""
    check_cost(scenario, 0, "attnwalk grad")
    return grad_walk(gradients(compute(scenario, mode)))


def train_name(name: str) -> str:
    """The scenario as `attnwalk train` takes it: as the learner gave it to grad, quoted for a
    shell where it has to be (a path with spaces)."""
    import shlex

    return shlex.quote(name)


def grad_command(*, name: str, mode: str, no_pause: bool, precision: int, ascii: bool,
                 lang: str | None, head: str | None = None, save: str | None = None,
                 predict: bool = False, format: str = "text") -> int:
    """`attnwalk grad`: step through the backward walk in a terminal, else print it (or, with
    --format json, every gradient for scripts); the exit code."""
    if format == "json":
        from attnwalk.errors import UsageError
        from attnwalk.terminal.streams import write_out

        if save is not None:
            raise UsageError("--save records the screens; with --format json redirect the output instead "
                             "(... --format json > grads.json)")
        write_out(grad_json(name=name, mode=mode), json=True)
        return 0
    from attnwalk.commands.output import check_not_input, save_format, save_reported
    from attnwalk.commands.walk import head_option, print_walk, recorded_walk
    from attnwalk.scenario.load import load_scenario
    from attnwalk.terminal.console import fitted, interactive, make_console
    from attnwalk.text import detect_lang, text

    opts = ViewOptions(precision=precision, ascii=ascii, lang=detect_lang(lang), predicting=predict)
    fmt = save_format(save) if save is not None else None
    scenario = with_target(load_scenario(name), "attnwalk grad")
    if save is not None:  # the scenario's files are read by now: never written over
        check_not_input(save, "--save")
    shown = head_option(scenario, head)
    walk = backward_walk(scenario, mode)
    console = make_console()
    opts = fitted(opts, console)
    if save is not None:
        save_reported(save, recorded_walk(walk, opts, fmt, shown), opts)
    if not no_pause and interactive():
        from attnwalk.app.gradwalk import GradApp  # only in a terminal: the piped walk never loads Textual
        from attnwalk.tutor.gradquiz import GradPredictions

        predictions = GradPredictions(opts.lang)
        app = GradApp(walk, opts, predictor=predictions, predict=predict)
        if shown:
            app.index = next(i for i, (stage, h) in enumerate(app.steps) if stage.per_head and h == shown)
        app.run()
        if app.ended:  # folded at words (and between Chinese characters), naming what to train
            from attnwalk.render.wrap import prose_line

            if predictions.summary():  # what the walk asked, summed up, as run's end does
                console.print(prose_line(predictions.summary(), style="bold"))
            console.print(prose_line(text(opts.lang).t("grad.end", name=train_name(name))))
        return app.return_code or 0
    if not no_pause and sys.stdout.isatty():
        print(text(opts.lang).t("ui.not_a_tty"), file=sys.stderr)
    predictor = None
    if predict:
        from attnwalk.commands.quiz import LineAnswers, TerminalAnswers
        from attnwalk.tutor.gradquiz import GradPredictor

        answers = (TerminalAnswers(console, opts.lang) if sys.stdin.isatty()
                   else LineAnswers(sys.stdin, console, opts.lang))
        predictor = GradPredictor(walk, console, answers, opts.lang)
        console.print(text(opts.lang).t("quiz.grad_predict.intro"))
    print_walk(console, walk, opts, head=shown, predictor=predictor)
    if predictor is not None and predictor.summary():
        from attnwalk.render.wrap import prose_line

        console.print(prose_line(predictor.summary(), style="bold"))
    return 0


def grad_json(*, name: str, mode: str) -> str:
    """`grad --format json`: the loss and every gradient, refused before anything is built when it
    would be larger than an export may be."""
    from attnwalk.export.data import to_json
    from attnwalk.export.graddata import grad_data, grad_numbers
    from attnwalk.scenario.limits import JSON_BYTES_PER_NUMBER, MAX_EXPORT, amount
    from attnwalk.scenario.load import load_scenario

    scenario = with_target(load_scenario(name), "attnwalk grad")
    check_cost(scenario, 0, "attnwalk grad")
    walk = compute(scenario, mode)
    numbers = grad_numbers(walk)  # before the backward pass, as export counts before it writes
    if numbers > MAX_EXPORT:
        size = numbers * JSON_BYTES_PER_NUMBER // (1024 * 1024)
        raise ScenarioError(f"grad's JSON for this layer holds {amount(numbers)} numbers (about {amount(size)} "
                            f"MB), more than the {amount(MAX_EXPORT)} an export writes; use fewer tokens or "
                            "heads, or the printed walk (attnwalk grad NAME --no-pause)",
                            file=scenario.label, field="tokens", line=scenario.lines.get("tokens"))
    return to_json(grad_data(gradients(walk))) + "\n"
