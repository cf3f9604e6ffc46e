"""Watching attention learn: plain gradient descent on the layer's weights, W ← W − η · ∂L/∂W, for
W_Q, W_K, W_V (and W_O), one step at a time (`attnwalk train`); or Adam (`train: {optimizer:
adam}`), which scales each weight's step by a running size of its own gradients.

Each step is the layer's forward walk (walk.py), the scenario's loss (its target feature's) and the
backward walk (backward.py); nothing else. A scenario whose feature draws fresh sequences for every
step (a `samples` hook: the induction lesson's repeated random tokens) takes one walk of each and
descends their mean loss; the scenario's own tokens are then walked forward alone, for the view. What a run may cost is worked out from the shapes
before any of it is computed (`check_cost`): a forward and a backward pass per step, and the
matrices one step holds at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
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
    """The layer after `step` updates (step 0: as the scenario gives it), its loss and gradients;
    with sampled sequences, the batch's mean loss and gradients, the walk of the scenario's own
    tokens, and what the sampling feature measures of the batch (`numbers`, e.g. loss_repeat)."""

    step: int
    loss: float
    walk: Walk
    grads: Grads
    numbers: Mapping[str, object] = MappingProxyType({})

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


OPTIMIZERS = ("gd", "adam")


class Adam:
    """Adam (Kingma & Ba 2015) with torch.optim.Adam's defaults, per weight W and its gradient g at
    update t = 1, 2, …:

        m ← β₁ m + (1 − β₁) g,   v ← β₂ v + (1 − β₂) g²
        W ← W − η · m̂ / (√v̂ + ε),   m̂ = m / (1 − β₁ᵗ),   v̂ = v / (1 − β₂ᵗ)

    Each weight's step is about η whatever the size of its gradient: a weight whose gradient is
    tiny (a head that has not started to matter yet) moves as fast as one whose gradient is large."""

    def __init__(self, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.t = 0
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}

    def tick(self) -> None:
        """One update begins: t ← t + 1 (every weight of it shares t)."""
        self.t += 1

    def moved(self, name: str, W: np.ndarray, g: np.ndarray) -> np.ndarray:
        m = self.beta1 * self.m.get(name, 0.0) + (1 - self.beta1) * g
        v = self.beta2 * self.v.get(name, 0.0) + (1 - self.beta2) * g * g
        self.m[name], self.v[name] = m, v
        m_hat = m / (1 - self.beta1 ** self.t)
        v_hat = v / (1 - self.beta2 ** self.t)
        return W - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


class Plain:
    """Plain gradient descent: W ← W − η · ∂L/∂W."""

    def __init__(self, lr: float) -> None:
        self.lr = lr

    def tick(self) -> None:
        pass

    def moved(self, name: str, W: np.ndarray, g: np.ndarray) -> np.ndarray:
        return W - self.lr * g


def optimizer_named(name: str, lr: float) -> Adam | Plain:
    return Adam(lr) if name == "adam" else Plain(lr)


def descend(scn: Scenario, mode: Mode | str, steps: int, lr: float, optimizer: str = "gd") -> Iterator[Step]:
    """Step 0, then each of `steps` updates W ← W − lr · ∂L/∂W (or Adam's), one at a time."""
    mode = mode_named(mode)
    rule = optimizer_named(optimizer, lr)
    for k in range(steps + 1):
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                walk = compute(scn, mode)
                batch = samples(scn, k)
                grads, numbers = (gradients(walk), {}) if batch is None else batch_gradients(walk, batch)
        except ComputeError as exc:
            if k == 0:
                raise
            raise diverged(scn, k, lr, mode) from exc
        if not (np.isfinite(grads.loss) and all(np.all(np.isfinite(g)) for g in grads.params.values())):
            raise diverged(scn, k, lr, mode)
        yield Step(k, grads.loss, walk, grads, MappingProxyType(numbers))
        if k < steps:
            with np.errstate(over="ignore", invalid="ignore"):  # W past float64: the next step says so
                scn = updated(scn, grads, lr, rule)


def _sampler(scn: Scenario):
    """The feature that draws each step's sequences (a `samples` hook), or None."""
    return next((f for f in scn.features if hasattr(f, "samples")), None)


def draws(scn: Scenario) -> bool:
    """Does `scn` train on sequences a feature draws at each step (not on its own tokens)?"""
    return _sampler(scn) is not None


def samples(scn: Scenario, k: int) -> list[Scenario] | None:
    """The sequences step `k` trains on (`scn` with other tokens), drawn by the scenario's feature
    that samples them; None when the scenario trains on its own tokens."""
    feature = _sampler(scn)
    return None if feature is None else feature.samples(scn, k)


def batch_size(scn: Scenario) -> int:
    """How many walks one step takes: the sampled sequences and the scenario's own, or 1."""
    feature = _sampler(scn)
    return 1 if feature is None else feature.batch_size(scn) + 1


def batch_gradients(walk: Walk, batch: list[Scenario]) -> tuple[Grads, dict[str, float]]:
    """The mean loss of `batch` and the mean of its parameters' gradients, as a Grads of `walk` (the
    scenario's own tokens: its stages' gradients are not worked out, only the weights'); and what the
    sampling feature measures of the batch's walks and of `walk` (Step.numbers)."""
    walks, losses, params = [], [], {}
    for sample in batch:
        w = compute(sample, walk.mode, stages=walk.graph)
        g = gradients(w)
        walks.append(w)
        losses.append(g.loss)
        for name, G in g.params.items():
            params[name] = params[name] + G if name in params else np.array(G, dtype=np.float64)
    params = {name: G / len(batch) for name, G in params.items()}
    loss = float(np.mean(losses))
    grads = Grads(walk, loss, g.path, {}, [{} for _ in walk.heads], params)
    return grads, _sampler(walk.scenario).measured(walk, walks)


def diverged(scn: Scenario, k: int, lr: float, mode: Mode) -> ComputeError:
    """Gradient descent that overshot until float64 overflowed: say so, and what to change."""
    return ComputeError(f"{scn.label}: at step {k} of {mode.name} training the loss or its gradient "
                        f"overflows float64: each step overshot the one before, so η = {lr:g} is too "
                        f"large for this layer; try --lr {lr / 10:g}")


def updated(scn: Scenario, grads: Grads, lr: float, rule: Adam | Plain | None = None) -> Scenario:
    """`scn` with each trained parameter (graph.trained) moved against its gradient: W − lr · ∂L/∂W,
    or by `rule` (Adam's step)."""
    rule = rule or Plain(lr)
    rule.tick()
    changes: dict = {}
    params = dict(scn.params)
    for name in trained(scn.graph):
        if name in grads.params:
            W = rule.moved(name, np.asarray(scn.param(name)), grads.params[name])
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
    total = step_work(scn) * batch_size(scn) * (steps + 1)
    size = step_bytes(scn)
    if total <= MAX_WORK and size <= MAX_BYTES:
        return
    shape = f"{scn.n} tokens, d_model {scn.d_model}, {scn.heads} head{'s' if scn.heads > 1 else ''}"
    if size > MAX_BYTES:
        problem = (f"{what} on this layer ({shape}) would hold about {size // (1024 * 1024):,} MB of "
                   f"matrices at once, more than {MAX_BYTES // (1024 * 1024)} MB; use fewer tokens or heads")
    else:
        each = step_work(scn) * batch_size(scn)
        most = min(max(MAX_WORK // each - 1, 0), MAX_RUN_STEPS)
        fix = (f"use --steps {most} or fewer" if most >= 1 and steps > most
               else "use fewer tokens or a narrower layer")
        problem = (f"{what} on this layer ({shape}) would do about {total / 1e9:,.1f} billion "
                   f"multiply-adds ({each / 1e9:,.1f} billion a step, forward and backward), more than "
                   f"the {MAX_WORK / 1e9:,.0f} billion attnwalk computes in one run; {fix}")
    raise ScenarioError(problem, file=scn.label, field="tokens", line=scn.lines.get("tokens"))
