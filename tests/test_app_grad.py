"""The backward walk and the training view in a terminal, driven by Textual's pilot: the walk's keys
step through the gradients, m recomputes them in the next mode, p asks before ∂L/∂S; the training
view runs to its end, pauses on space and takes one step on n."""

from __future__ import annotations

import asyncio

from appdriver import drive, screen_text, typed

from attnwalk.app.gradwalk import GradApp
from attnwalk.app.train import TrainApp
from attnwalk.commands.grad import backward_walk
from attnwalk.commands.train import Plan
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.load import load_scenario
from attnwalk.tutor.gradquiz import GradPredictions


def grad_app(name: str, **options) -> GradApp:
    return GradApp(backward_walk(load_scenario(name), "scaled"), ViewOptions(), **options)


def test_the_walks_keys_step_through_the_gradients_and_jump_by_name():
    run = drive("backprop", ["n", "n", "n", "n"], app=grad_app("backprop"))
    assert "Stage 5 / 12" in run.screen and "∂L/∂S  Gradient of the scores S" in run.screen
    assert "0.1089" in run.screen and "-0.3146" in run.screen
    run = drive("backprop", ["g", *typed("dW_Q")], app=grad_app("backprop"))
    assert "∂L/∂W_Q  Gradient of W_Q" in run.screen
    assert "Worked cell: ∂L/∂W_Q[ambiguous, geography]" in run.screen  # the weight that moves most


def test_m_computes_the_gradients_again_in_the_next_mode():
    run = drive("saturation", ["n", "n", "n", "n", "m"], app=grad_app("saturation"))
    assert "mode     unscaled" in run.screen
    assert "9.6209e-07" in run.screen  # ∂L/∂S[east, <s>]: the saturated softmax passes almost nothing
    run = drive("saturation", ["n", "n", "n", "n", "m", "m"], app=grad_app("saturation"))
    assert "Gradient of the scores: none" in run.screen


def test_p_asks_how_many_cells_of_the_scores_gradient_are_zero():
    app = grad_app("saturation", predictor=GradPredictions("en"), predict=True)
    run = drive("saturation", ["n", "n", "n", "n", *typed("11")], app=app)
    assert "Your prediction: 11 · the walk: 11 · right" in run.screen


def test_p_says_which_gradient_screens_will_ask():
    run = drive("backprop", ["p"], app=grad_app("backprop", predictor=GradPredictions("en")))
    assert "before ∂L/∂S and ∂L/∂W_Q" in run.screen and "before P, QKᵀ" not in run.screen


def test_the_end_of_the_backward_walk_exits_0():
    run = drive("backprop", ["n"] * 12, app=grad_app("backprop"))
    assert run.code == 0 and run.app.ended


def run_training(keys, *, name="backprop", compare=False, wait=0.0, steps=None):
    plan = Plan(name, steps, None, "scaled", compare, None)
    app = TrainApp(plan.runs(), plan.steps, plan.lr, plan.head, ViewOptions())

    async def go():
        async with app.run_test(size=(100, 40)) as pilot:
            for key in keys:
                await pilot.press(key)
                await pilot.pause(0.3)
            for _ in range(int(wait * 10)):
                await pilot.pause(0.1)
                if app.done:
                    break
            return screen_text(app)

    return app, asyncio.run(go())


def test_training_runs_to_its_last_step_and_shows_the_loss_and_a():
    app, screen = run_training([], wait=30, steps=5)
    assert app.done and len(app.losses["scaled"]) == 6
    assert "step 5 / 5 · done: q quits" in screen
    assert "A after step 5 (scaled)" in screen and "bank" in screen
    assert "scaled: L 0.3777 →" in screen


def test_space_pauses_and_n_takes_one_step():
    app, screen = run_training(["space"], wait=0, steps=20)
    shown = len(app.losses["scaled"])
    assert not app.done and "paused" in screen and shown < 21

    async def go():
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause(0.3)
            await pilot.press("space")
            await pilot.pause(0.5)
            before = len(app.losses["scaled"])
            await pilot.press("n")
            await pilot.pause(1.0)
            return before, len(app.losses["scaled"])

    paused = Plan("backprop", 20, None, "scaled", False, None)
    app = TrainApp(paused.runs(), 20, paused.lr, paused.head, ViewOptions())
    before, after = asyncio.run(go())
    assert after == before + 1


def test_compare_draws_both_runs_on_one_scale():
    app, screen = run_training([], name="saturation", compare=True, wait=30, steps=6)
    assert app.done
    assert "scaled: L 0.4439 →" in screen and "unscaled: L 0.5000 → 0.5000" in screen
