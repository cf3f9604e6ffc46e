"""How scores become weights: the modes a walk is computed in, each rule stated once.

    scaled    S = QKᵀ / √d_k,  A = softmax(S + M)      (the Transformer)
    unscaled  S = QKᵀ,         A = softmax(S + M)      (what √d_k prevents)
    uniform   A[i, j] = 1 / (keys row i may attend to) (the scores are computed, then ignored)
    hard      A[i, :] = onehot(argmax (S + M)[i, :])   (a lookup; compare only)

Everything that varies by mode (the scale of S, how a row of weights is made, whether it depends on
the scores, which modes the walk cycles through) asks the Mode object, never its name.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from attnwalk.errors import UsageError

if TYPE_CHECKING:  # the CLI reads the modes' names for its options without loading numpy
    import numpy as np  # noqa: F401

    from attnwalk.layer.scores import Score


class Mode(NamedTuple):  # a NamedTuple: a frozen dataclass costs every start ~0.5 ms more to define
    name: str  # "scaled": the key in the CLI, the JSON export and the text files (mode.scaled.name)
    divides: bool  # does S = QKᵀ / √d_k (for scores that are scaled at all)?
    reads_scores: bool  # do the weights depend on the scores? (uniform: no; hard: only their order)
    smooth: bool  # is A a differentiable function of S (softmax), so scores get a learning signal?
    in_walk: bool  # offered by --mode and the walk's m key (hard is for compare)

    def scales(self, score: Score) -> bool:
        """Does S divide QKᵀ by √d_k? Only when both this mode and the score kind say so."""
        return self.divides and score.divides

    def divisor(self, score: Score, d_k: int) -> float:
        """What S divides QKᵀ by: √d_k, or 1 (S = QKᵀ)."""
        return math.sqrt(d_k) if self.scales(score) else 1.0

    def weights(self, SM: np.ndarray, allowed: np.ndarray, extra: float | None = None) -> np.ndarray:
        """A from the masked scores SM (n, m), −∞ where `allowed` is False: each row sums to 1,
        or to 1 minus the share of `extra`, a logit the softmax also normalises over (an attention
        sink). Uniform and hard weights do not read the scores' sizes, nor that logit."""
        from attnwalk.layer import ops

        if not self.reads_scores:
            return ops.uniform_weights(allowed)
        if not self.smooth:
            return ops.hard_weights(SM)
        return ops.softmax(SM, extra)


SCALED = Mode("scaled", divides=True, reads_scores=True, smooth=True, in_walk=True)
UNSCALED = Mode("unscaled", divides=False, reads_scores=True, smooth=True, in_walk=True)
UNIFORM = Mode("uniform", divides=True, reads_scores=False, smooth=False, in_walk=True)
HARD = Mode("hard", divides=True, reads_scores=True, smooth=False, in_walk=False)

MODES: tuple[Mode, ...] = (SCALED, UNSCALED, UNIFORM, HARD)  # the order modes are always shown in
WALK_MODES: tuple[Mode, ...] = tuple(m for m in MODES if m.in_walk)  # the walk's m cycles these
BASELINE = SCALED
_BY_NAME = {m.name: m for m in MODES}


def next_walk_mode(mode: Mode) -> Mode:
    """The mode the m key goes to from `mode`: scaled → unscaled → uniform → scaled (from a mode
    outside the cycle, such as hard, its first)."""
    return (WALK_MODES[(WALK_MODES.index(mode) + 1) % len(WALK_MODES)] if mode in WALK_MODES
            else WALK_MODES[0])


def mode_named(name: str | Mode) -> Mode:
    """The mode called `name` ("scaled", …); an unknown name is a UsageError naming the choices."""
    if isinstance(name, Mode):
        return name
    mode = _BY_NAME.get(str(name).strip().lower())
    if mode is None:
        raise UsageError(f"unknown mode '{name}'; choose one of: {', '.join(_BY_NAME)}")
    return mode
