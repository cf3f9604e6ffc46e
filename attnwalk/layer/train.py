"""Watching attention learn: plain gradient descent on the layer's weights, W ← W − η · ∂L/∂W, for
W_Q, W_K, W_V (and W_O), one step at a time (`attnwalk train`).

Each step is the layer's forward walk (walk.py), the scenario's loss (its target feature's) and the
backward walk (backward.py); nothing else. What a run may cost is worked out from the shapes
before any of it is computed (`check_cost`): a forward and a backward pass per step, and the
matrices one step holds at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.errors import ComputeError, ScenarioError
from attnwalk.layer.backward import Grads, backward, objective
from attnwalk.layer.cost import dims_of, work
from attnwalk.layer.graph import trained
from attnwalk.layer.modes import Mode, mode_named
from attnwalk.layer.walk import Walk, compute

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario

MAX_WORK = 15_000_000_000  # multiply-adds of a whole run: a few seconds of numpy on two CPUs (bench_grad.py)
MAX_BYTES = 300 * 1024 * 1024  # the matrices one step holds at once
# Steps of one `train` (--compare: of both runs): a step is a forward and a backward walk, ~1 ms of
# Python even on a 4-token layer (1.2 ms measured on backprop, shared machine), whatever its work.
MAX_RUN_STEPS = 1_000


class Step(NamedTuple):
    """The layer after `step` updates (step 0: as the scenario gives it), its loss and gradients."""

    step: int
    loss: float
    walk: Walk
    grads: Grads

    @property
    def grad_norm(self) -> float:
        """|∂L/∂W|: the size of the update's direction, over every weight that is trained."""
        moved = trained(self.walk.graph)
        return float(np.sqrt(sum(np.sum(g * g) for name, g in self.grads.params.items() if name in moved)))


def gradients(walk: Walk) -> Grads:
    """The loss of `walk`'s scenario (its target) and ∂L/∂ of every matrix: the backward walk."""
    scn = walk.scenario
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is checked below, said in one line
        try:
            result = objective(scn).loss(walk)
        except ComputeError as exc:  # −log 0: said of this scenario's file
            raise ComputeError(f"{scn.label}: {exc}", stage=exc.stage) from None
        grads = backward(walk, result.seeds, result.value)
    if not (np.isfinite(grads.loss) and all(np.all(np.isfinite(g)) for g in _every(grads))):
        # e.g. target.output [[1e200, …]]: ½(Y − T)² is beyond float64, and no digit of it can be shown
        line = scn.lines.get("target")
        where = f"{scn.label}:{line}: target" if line is not None else scn.label
        raise ComputeError(f"{where}: the loss L or a gradient overflows float64 (beyond ±1.8e308) "
                           f"under {walk.mode.name} weights: make the target's numbers or the "
                           "weights smaller", stage="L")
    return grads


def _every(grads: Grads) -> Iterator[np.ndarray]:
    """Every gradient `grads` holds: the shared ones, each head's, the parameters'."""
    yield from grads.mats.values()
    for head in grads.heads:
        yield from head.values()
    yield from grads.params.values()


def descend(scn: Scenario, mode: Mode | str, steps: int, lr: float) -> Iterator[Step]:
    """Step 0, then each of `steps` updates W ← W − lr · ∂L/∂W, one at a time."""
    mode = mode_named(mode)
    for k in range(steps + 1):
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                walk = compute(scn, mode)
                grads = gradients(walk)
        except ComputeError as exc:
            if k == 0:
                raise
            raise diverged(scn, k, lr, mode) from exc
        if not (np.isfinite(grads.loss) and all(np.all(np.isfinite(g)) for g in grads.params.values())):
            raise diverged(scn, k, lr, mode)
        yield Step(k, grads.loss, walk, grads)
        if k < steps:
            with np.errstate(over="ignore", invalid="ignore"):  # W past float64: the next step says so
                scn = updated(scn, grads, lr)


def diverged(scn: Scenario, k: int, lr: float, mode: Mode) -> ComputeError:
    """Gradient descent that overshot until float64 overflowed: say so, and what to change."""
    return ComputeError(f"{scn.label}: at step {k} of {mode.name} training the loss or its gradient "
                        f"overflows float64: each step overshot the one before, so η = {lr:g} is too "
                        f"large for this layer; try --lr {lr / 10:g}")


def updated(scn: Scenario, grads: Grads, lr: float) -> Scenario:
    """`scn` with each trained parameter (graph.trained) moved against its gradient: W − lr · ∂L/∂W."""
    changes: dict = {}
    params = dict(scn.params)
    for name in trained(scn.graph):
        if name in grads.params:
            W = np.asarray(scn.param(name)) - lr * grads.params[name]
            W.flags.writeable = False
            if name in params:  # a feature's parameter (attention sinks), kept with the others it adds
                params[name] = W
            else:
                changes[name] = W
    return dataclasses.replace(scn, **changes, params=MappingProxyType(params))


# -- what a run costs -------------------------------------------------------------------------------


def step_work(scn: Scenario) -> int:
    """Multiply-adds of one step: the forward pass, and a backward pass that does two products
    for each one of the forward (∂L/∂ of both factors)."""
    forward = sum(w.count for w in work(dims_of(scn)))
    for feature in scn.features:  # what a feature's stages add (additive scores: d_k terms a score)
        forward += getattr(feature, "extra_work", lambda scn: 0)(scn)
    return 3 * forward


def step_bytes(scn: Scenario) -> int:
    """The float64 matrices one step holds at once: every head's query × key matrices forward (QKᵀ,
    S, S + M or S + B, A) and backward (∂L/∂ of A, S, QKᵀ) and two in flight; the n-row ones (X,
    Q, K, V, Z, concat, O) and their gradients; the weights and theirs. Additive scores add one
    head's n × m × d_k tanh and its gradient."""
    h, n, m, d_model = scn.heads, scn.n, scn.m, scn.d_model
    numbers = (7 * h + 2) * n * m
    numbers += 2 * (n + m) * (2 * d_model + 2 * h * (scn.d_k + scn.d_v))
    numbers += 2 * d_model * h * (2 * scn.d_k + 2 * scn.d_v)
    for feature in scn.features:  # what a feature's stages hold besides (additive: n × m × d_k tanh)
        numbers += getattr(feature, "extra_numbers", lambda scn: 0)(scn)
    return 8 * numbers


def check_cost(scn: Scenario, steps: int, what: str) -> None:
    """Refuse, before anything is computed, a run of `steps` steps (grad: 0) that would take more
    than a few seconds or MAX_BYTES: one line naming the scenario's tokens, as the loader does."""
    total = step_work(scn) * (steps + 1)
    size = step_bytes(scn)
    if total <= MAX_WORK and size <= MAX_BYTES:
        return
    shape = f"{scn.n} tokens, d_model {scn.d_model}, {scn.heads} head{'s' if scn.heads > 1 else ''}"
    if size > MAX_BYTES:
        problem = (f"{what} on this layer ({shape}) would hold about {size // (1024 * 1024):,} MB of "
                   f"matrices at once, more than {MAX_BYTES // (1024 * 1024)} MB; use fewer tokens or heads")
    else:
        each = step_work(scn)
        most = min(max(MAX_WORK // each - 1, 0), MAX_RUN_STEPS)
        fix = (f"use --steps {most} or fewer" if most >= 1 and steps > most
               else "use fewer tokens or a narrower layer")
        problem = (f"{what} on this layer ({shape}) would do about {total / 1e9:,.1f} billion "
                   f"multiply-adds ({each / 1e9:,.1f} billion a step, forward and backward), more than "
                   f"the {MAX_WORK / 1e9:,.0f} billion attnwalk computes in one run; {fix}")
    raise ScenarioError(problem, file=scn.label, field="tokens", line=scn.lines.get("tokens"))
