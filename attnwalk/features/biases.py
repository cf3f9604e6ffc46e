"""The projections' biases a real layer has (GPT-2 and BERT: b_Q, b_K, b_V, b_O; Qwen2: b_Q, b_K,
b_V): Q = X · W_Q + b_Q, the same vector added to every row. Never from a scenario file:
commands/model.py puts a model's biases in the scenario's params."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnwalk.layer.graph import amend, get, has, replace

if TYPE_CHECKING:
    from attnwalk.layer.graph import Stage
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

STAGES: tuple[Stage, ...] = ()
BIASES = {"Q": "b_Q", "K": "b_K", "V": "b_V", "O": "b_O"}  # the stage each bias is added in


def active(scn: Scenario) -> bool:
    return any(bias in scn.params for bias in BIASES.values())


def _biased(scn: Scenario, mode: Mode, names: tuple[str, ...]) -> tuple[str, ...]:
    # with RoPE the bias is turned with its key, so b_K does change the weights (K's text)
    return (("biased_rope",) if has(scn.graph, "K_rot") else ()) + ("biased",) + names


def extend(stages: list[Stage], scn: Scenario) -> None:
    for key, bias in BIASES.items():
        if bias in scn.params and has(stages, key):
            stage = get(stages, key)
            step = stage.step
            replace(stages, key, params=(*stage.params, bias),
                    step=None if step is None else lambda scn, mode, x, step=step, bias=bias: f"{step(scn, mode, x)} + {bias}")
            amend(stages, key, variants=_biased if key != "O" else
                  lambda scn, mode, names: ("biased", *names))
