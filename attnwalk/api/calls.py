"""The library's calls, each the CLI command's own steps without the printing: a scenario in (a
built-in name, a path, YAML text or a dict), a result out that a notebook shows as the terminal
would. Errors are the CLI's, raised: AttnwalkError and its subclasses, with its messages."""

from __future__ import annotations

from typing import Any

from attnwalk.api.result import WalkResult, head_index
from attnwalk.api.runs import GradResult, TrainRun
from attnwalk.api.source import ScenarioLike, scenario_of


def walk(scenario: ScenarioLike, mode: str = "scaled", head: int | str | None = None, *,
         tiles: int | None = None, lang: str | None = None) -> WalkResult:
    """Every stage of one attention layer (`attnwalk run SCENARIO --mode MODE --head HEAD`):
    `w["A"]`, `w.head(2)["A"]`, `w.explain("A", "bank", "river")`, `w.export()`."""
    from attnwalk.features.tiles import with_tiles
    from attnwalk.layer.walk import compute

    scn = with_tiles(scenario_of(scenario), tiles)
    chosen = head_index(scn, head)
    return WalkResult(compute(scn, mode), chosen, lang=lang)


def model(sentence: str, layer: int = 1, model: str | None = None, *, head: int | str | None = None,
          mode: str = "scaled", quantize: str | None = None, lang: str | None = None) -> WalkResult:
    """One layer of a real model on `sentence` (`attnwalk model SENTENCE --layer L --model M`):
    the model a directory, a cached hub name, a .gguf file or ollama:NAME, None for the default.
    `export()` is `attnwalk model … --format json`'s contract, for `head`."""
    from attnwalk.commands.model import check_request, load_layer, model_data, scenario_from_model
    from attnwalk.layer.walk import compute

    check_request(sentence, layer)
    scn = scenario_from_model(load_layer(sentence, model, layer, quantize))
    chosen = head_index(scn, head)
    return WalkResult(compute(scn, mode), chosen, lang=lang, exporter=model_data)


def grad(scenario: ScenarioLike, mode: str = "scaled", head: int | str | None = None, *,
         lang: str | None = None) -> GradResult:
    """The backward walk from the scenario's loss to its weights (`attnwalk grad SCENARIO`):
    `g.loss`, `g["dA"]`, `g["dW_Q"]`; the scenario needs a target."""
    from attnwalk.commands.grad import backward_walk, with_target

    scn = with_target(scenario_of(scenario), "attnwalk grad")
    chosen = head_index(scn, head)
    return GradResult(backward_walk(scn, mode), chosen, lang=lang)


def train(scenario: ScenarioLike, steps: int | None = None, lr: float | None = None, *,
          mode: str = "scaled", compare: bool = False, head: int | None = None,
          lang: str | None = None) -> TrainRun:
    """Plain gradient descent on the weights (`attnwalk train SCENARIO --steps N --lr η`), the
    scenario's own steps and η when not given; `compare` trains scaled and unscaled from the same
    start. `t.losses()`, `t.A()`, `t.export()`."""
    from attnwalk.commands.train import Plan

    plan = Plan(scenario_of(scenario), steps, lr, mode, compare, head)
    runs = {name: list(run) for name, run in plan.runs().items()}
    return TrainRun(runs, plan.lr, plan.head, lang)


def quiz(scenario: ScenarioLike, count: int | None = None, seed: int | None = None, *,
         lang: str | None = None) -> list[dict[str, Any]]:
    """The quiz's questions with their answers, as `attnwalk quiz SCENARIO --format json` writes
    the worksheet: each a dict with its prompt, kind, answer, tolerance and the known mistakes."""
    import json

    from attnwalk.commands.quiz import quiz_walk
    from attnwalk.text import detect_lang
    from attnwalk.tutor.questions import questions
    from attnwalk.tutor.worksheet import as_json

    lang = detect_lang(lang)
    scn = scenario_of(scenario)
    asked = questions(quiz_walk(scn), lang, seed=seed)
    return json.loads(as_json(asked[:count] if count is not None else asked, lang, scn.name, seed))["questions"]


def heads(model: str | None = None, length: int = 50, seed: int = 0) -> dict[str, Any]:
    """Every head of every layer of a real model scored on its start token and `length` random
    tokens repeated twice (`attnwalk heads --model M --length R --seed N --format json`): the same
    dict, `{"model", "ids", "repeat", "first", "heads": [{"layer", "head", "previous_token",
    "induction", "first_token", "self"}]}`, layers and heads from 1."""
    from attnwalk.commands.heads import heads_data

    return heads_data(model, length, seed)[0]
