"""One scenario under several normalizers, side by side: the numbers of `attnwalk compare`.

Pure: it runs layer.walk.compute once per mode and reads off, for every query row, how spread its
weights are (entropy), where they peak, and how much gradient the softmax still passes back
(signal). No printing, no Rich.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer.modes import BASELINE, MODES, WALK_MODES, Mode, mode_named
from attnwalk.layer.ops import entropy_bits, row_maxima
from attnwalk.layer.roles import SCALED, SOFTMAX, logits, slope
from attnwalk.layer.walk import Walk, compute

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario

DEFAULT_SCENARIO = "river_bank"


@dataclass(frozen=True)
class ModeResult:
    """One head of one scenario under one mode, with each query row's summary numbers."""

    mode: Mode
    A: np.ndarray  # (n, m) weights
    Z: np.ndarray  # (n, d_v) outputs
    entropy: np.ndarray  # (n,) bits
    peak: np.ndarray  # (n,) each row's largest weight
    peak_index: np.ndarray  # (n,) the key holding it (the first of ties)
    ties: np.ndarray  # (n,) how many keys hold exactly that weight
    signal: np.ndarray  # (n,) largest ∂A[i, j]/∂S[i, j] of the row (learning_signal); 0 for uniform and hard


@dataclass(frozen=True)
class Comparison:
    scenario: Scenario
    amplify: float
    head: int  # 0-based
    results: tuple[ModeResult, ...]  # in MODES order

    @property
    def modes(self) -> tuple[Mode, ...]:
        return tuple(r.mode for r in self.results)


def modes_to_show(requested: Iterable[str | Mode] = ()) -> tuple[Mode, ...]:
    """The modes a comparison shows: the walk's modes when none is asked for; a single mode other
    than scaled is set against scaled, the baseline; always in MODES order."""
    asked = set()
    for name in requested:
        try:
            asked.add(mode_named(name))
        except UsageError:
            choices = ", ".join(m.name for m in MODES)
            raise UsageError(f"--mode {name}: unknown mode; choose from {choices}") from None
    if not asked:
        asked = set(WALK_MODES)
    elif len(asked) == 1:
        asked.add(BASELINE)
    return tuple(m for m in MODES if m in asked)


def check_amplify(k: float) -> float:
    """--amplify must be a finite number above 0 (1 leaves the scores as they are)."""
    if not (math.isfinite(k) and k > 0):
        raise UsageError(f"--amplify {k:g}: give a finite number above 0, e.g. --amplify 8 (1 means unchanged)")
    return float(k)


def mode_result(scn: Scenario, mode: Mode | str, amplify: float = 1.0, head: int = 0) -> ModeResult:
    """Head `head` of `scn` under `mode`, with the scores multiplied by `amplify` before softmax."""
    mode = mode_named(mode)
    walk = compute(scn, mode, amplify)
    A = walk.heads[head].mats["A"]
    peak = A.max(axis=-1)
    return ModeResult(
        mode=mode, A=A, Z=walk.heads[head].mats["Z"], entropy=entropy_bits(A), peak=peak,
        peak_index=A.argmax(axis=-1), ties=row_maxima(A).sum(axis=-1),
        signal=learning_signal(walk, head))


def learning_signal(walk: Walk, head: int = 0) -> np.ndarray:
    """Each row's largest ∂A[i, j]/∂S[i, j]: how much gradient the softmax still passes back to
    the scores. The softmax's own part is a_j(1 − a_j), the largest entry of its Jacobian
    diag(a) − a aᵀ by what it reads; every stage the graph puts between S and that (ALiBi's + B, a
    feature's transform) multiplies in its own slope (roles.slope, from the stages' backward). It
    shrinks toward 0 as a row saturates; uniform and hard rows do not move with the scores at all,
    so their signal is exactly 0."""
    A = walk.heads[head].mats[SOFTMAX]
    if not walk.mode.smooth:
        return np.zeros(A.shape[0])
    through = slope(walk, head, SCALED, logits(walk.computed).key)  # (n, m): 1 when S is read as is
    return np.max(A * (1.0 - A) * through, axis=-1)


def compare(scn: Scenario, modes: Iterable[str | Mode] = (), amplify: float = 1.0, head: int = 0) -> Comparison:
    """`scn` under each of modes_to_show(modes), for one head (0-based)."""
    amplify = check_amplify(amplify)
    shown = modes_to_show(modes)
    return Comparison(scn, amplify, head, tuple(mode_result(scn, m, amplify, head) for m in shown))


def comparison_data(cmp: Comparison) -> dict[str, Any]:
    """The JSON contract: scenario, amplify and per mode A, Z, entropy, peak, peak_key, signal."""
    keys = cmp.scenario.key_tokens
    data: dict[str, Any] = {
        "scenario": cmp.scenario.name,
        "amplify": cmp.amplify,
        "tokens": list(cmp.scenario.tokens),
        "key_tokens": list(keys),
    }
    if cmp.scenario.heads > 1:
        data["head"] = cmp.head + 1
    data["modes"] = {
        r.mode.name: {
            "A": r.A.tolist(), "Z": r.Z.tolist(), "entropy": r.entropy.tolist(), "peak": r.peak.tolist(),
            "peak_key": [keys[j] for j in r.peak_index], "signal": r.signal.tolist(),
        }
        for r in cmp.results
    }
    return data
