"""The numbers of one attention layer: every stage of STAGES that applies, computed in order.

    X = E + P;  Q = X W_Q,  K = X W_K,  V = X W_V;  S = Q Kᵀ / √d_k;  A = softmax(S + M);  Z = A V

Stages before the first per-head stage are computed once; then each head computes the per-head
stages from its own column block of every split matrix (Q, K, V); the stages after them (concat,
O) read every head.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.errors import ComputeError
from attnwalk.layer import ops
from attnwalk.layer import stages as definitions
from attnwalk.layer.modes import BASELINE, Mode, mode_named
from attnwalk.layer.stages import Mats, Stage, stage_named

if TYPE_CHECKING:
    from attnwalk.scenario.model import Scenario, Sequence


@dataclass(eq=False)  # no __eq__: == on numpy fields can only raise; defines faster
class Head:
    """One head's matrices, keyed like the stages: its blocks of Q, K, V, then QK^T, S, (S+M), A, Z."""

    index: int
    mats: dict[str, np.ndarray]


@dataclass(eq=False)
class Layer:
    """What a stage computes from besides the earlier matrices: the scenario, the mode, --amplify,
    the source sequence of cross-attention, and (for the stages after them) every head."""

    scn: Scenario
    mode: Mode
    amplify: float
    source: dict[str, np.ndarray]  # E, P, X of the source; empty without one
    heads: list[dict[str, np.ndarray]] = field(default_factory=list)
    head: int = 0  # the head whose per-head stages are being computed (ALiBi's slope is per head)

    @property
    def scale(self) -> float:
        """What S divides QKᵀ by in this mode, for this score kind: √d_k or 1."""
        return self.mode.divisor(self.scn.scorer, self.scn.d_k)

    @staticmethod
    def positions(seq: Sequence) -> np.ndarray:
        """P of a sequence: sinusoidal, given, or zeros."""
        if seq.positional == "sinusoidal":
            return ops.sinusoidal(seq.n, seq.d_model)
        if seq.positional == "explicit":
            return np.array(seq.P_given, dtype=np.float64)
        return np.zeros_like(seq.E)

    def kv_input(self, m: Mats) -> np.ndarray:
        """What keys and values are made from: the source's X in cross-attention, else X."""
        return self.source["X"] if self.source else m["X"]

    def seen_scores(self, m: Mats) -> np.ndarray:
        """The scores the weights are made from: S, or S + B under ALiBi (× --amplify), −∞ where
        the mask forbids."""
        S = m["S+B"] if "S+B" in m else m["S"]
        if self.amplify != 1.0:
            S = ops.finite(S * self.amplify, "S", "use a smaller --amplify")
        return ops.masked(S, self.scn.allowed)  # (n, m)


@dataclass(eq=False)  # no __eq__, as Head
class Walk:
    """Every intermediate matrix of one layer for one scenario and mode, in stage order."""

    scenario: Scenario
    mode: Mode
    amplify: float
    stages: tuple[Stage, ...]  # the stages this scenario has, in order
    mats: dict[str, np.ndarray]  # the stages computed once (E, P, X, Q, K, V, concat, O)
    heads: list[Head]  # the per-head stages of each head
    source: dict[str, np.ndarray] = field(default_factory=dict)  # E, P, X of the source

    @property
    def scale(self) -> float:
        """What S divides QKᵀ by in this mode, for this score kind: √d_k or 1."""
        return self.mode.divisor(self.scenario.scorer, self.scenario.d_k)

    def stage(self, key: str) -> Stage:
        """The stage `key` of this walk, else of the definitions (S+M names the scores softmax saw
        in a walk without a mask)."""
        try:
            return stage_named(key, self.stages)
        except KeyError:
            return stage_named(key)

    def scores(self, head: int = 0) -> np.ndarray:
        """The scores softmax reads before the mask and --amplify: S, or S + B under ALiBi."""
        mats = self.heads[head].mats
        return mats["S+B"] if "S+B" in mats else mats["S"]

    def matrix(self, key: str, head: int = 0) -> np.ndarray:
        """The matrix of stage `key` (for per-head stages, of head `head`)."""
        if self.stage(key).per_head:
            return self.heads[head].mats[key]
        return self.mats[key]


def compute(scn: Scenario, mode: Mode | str = BASELINE, amplify: float = 1.0,
            stages: tuple[Stage, ...] | None = None) -> Walk:
    """Run the layer: every stage's matrix for `scn` under `mode` (a Mode or its name; an unknown
    name is a UsageError). `stages` defaults to the definitions in layer/stages.py."""
    mode = mode_named(mode)
    stages = definitions.STAGES if stages is None else stages
    try:
        return _compute(scn, mode, amplify, tuple(s for s in stages if s.applies(scn) and s.in_mode(mode)))
    except ComputeError as exc:  # name the file, and the line of the input to make smaller
        where = scn.overflow_where(exc.stage) if exc.stage else scn.label
        raise ComputeError(f"{where}: {exc}", stage=exc.stage) from None


def with_mode(walk: Walk, mode: Mode | str) -> Walk:
    """`walk` under another mode, recomputing only what a mode can change: the stages before the
    first per-head one (E, P, X, Q, K, V) never read the mode, so they are shared, and the per-head
    stages and those after them are computed again (on a 512-token, 12-head layer the projections
    are most of the cost; the interactive walk's m pays only the rest)."""
    mode = mode_named(mode)
    if mode == walk.mode:
        return walk
    before, _, _ = segments(walk.stages)
    kept = {s.key: walk.mats[s.key] for s in before if s.key in walk.mats}
    try:
        return _compute(walk.scenario, mode, walk.amplify, walk.stages, kept)
    except ComputeError as exc:
        where = walk.scenario.overflow_where(exc.stage) if exc.stage else walk.scenario.label
        raise ComputeError(f"{where}: {exc}", stage=exc.stage) from None


def segments(stages: tuple[Stage, ...]) -> tuple[list[Stage], list[Stage], list[Stage]]:
    """The stages before the per-head ones, the per-head ones, and the stages after them."""
    first = next((i for i, s in enumerate(stages) if s.per_head), len(stages))
    per_head = [s for s in stages if s.per_head]
    before = [s for s in stages[:first] if not s.per_head]
    after = [s for s in stages[first:] if not s.per_head]
    return before, per_head, after


def _compute(scn: Scenario, mode: Mode, amplify: float, stages: tuple[Stage, ...],
             kept: dict[str, np.ndarray] | None = None) -> Walk:
    with np.errstate(over="ignore", invalid="ignore"):
        source: dict[str, np.ndarray] = {}
        if scn.source is not None:
            P_src = Layer.positions(scn.source)
            X_src = ops.finite(scn.source.E + P_src, "source X", "use smaller source embeddings")
            source = {"E": np.array(scn.source.E), "P": P_src, "X": X_src}  # (m, d_model) each
        layer = Layer(scn, mode, amplify, source)
        before, per_head, after = segments(stages)
        mats: dict[str, np.ndarray] = {}
        for stage in before:
            if kept is not None and stage.key in kept:  # with_mode: the same for every mode
                mats[stage.key] = kept[stage.key]
            else:
                _run(stage, mats, mats, layer)
        for h in range(scn.heads):
            layer.head = h
            # a query head reads its own block of Q, and the K and V blocks of its group's K/V head
            own = {s.key: _block(mats[s.key], scn.kv_head(h), scn.groups) if s.shared
                   else _block(mats[s.key], h, scn.heads) for s in before if s.split}
            for stage in per_head:
                _run(stage, ChainMap(own, mats), own, layer)
            layer.heads.append(own)
        for stage in after:
            _run(stage, mats, mats, layer)
    return Walk(scenario=scn, mode=mode, amplify=amplify, stages=stages, mats=mats,
                heads=[Head(h, own) for h, own in enumerate(layer.heads)], source=source)


def _run(stage: Stage, inputs: Mats, into: dict[str, np.ndarray], layer: Layer) -> None:
    if stage.compute is None:  # the tokens: no matrix
        return
    M = np.asarray(stage.compute(inputs, layer), dtype=np.float64)
    into[stage.key] = ops.finite(M, stage.key, stage.overflow) if stage.overflow else M


def _block(M: np.ndarray, h: int, heads: int) -> np.ndarray:
    """Head h's contiguous column block of a split matrix: (rows, h·d) -> (rows, d)."""
    width = M.shape[1] // heads
    return M[:, h * width:(h + 1) * width]
