"""The numbers of one attention layer: its graph (graph.py) evaluated whole, every row at once.

    X = E + P;  Q = X W_Q,  K = X W_K,  V = X W_V;  S = Q Kᵀ / √d_k;  A = softmax(S + M);  Z = A V

The stages before the per-head ones are computed once; then each head computes the per-head
stages from its own column block of every split matrix (Q, K, V); the stages made from every
head (concat, O) come last. kvcache.py evaluates the same graph one row at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.errors import ComputeError
from attnwalk.layer import ops
from attnwalk.layer.graph import Context, Graph, Mats, Stage, blocks, get, head_block, segments
from attnwalk.layer.modes import BASELINE, Mode, mode_named

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario


@dataclass(eq=False)  # no __eq__: == on numpy fields can only raise; defines faster
class Head:
    """One head's matrices, keyed like the stages: its blocks of Q, K, V, then QK^T, S, (S+M), A, Z."""

    index: int
    mats: dict[str, np.ndarray]


@dataclass(eq=False)  # no __eq__, as Head
class Walk:
    """Every intermediate matrix of one layer for one scenario and mode, in stage order."""

    scenario: Scenario
    mode: Mode
    amplify: float
    graph: Graph  # the layer's stages in order, the hidden ones and those of other modes included
    mats: dict[str, np.ndarray]  # the stages computed once (E, P, X, Q, K, V, concat, O)
    heads: list[Head]  # the per-head stages of each head
    source: dict[str, np.ndarray] = field(default_factory=dict)  # E, P, X of a cross-attention source
    views: dict = field(default_factory=dict, repr=False)  # head -> its HeadView, taken once

    @property
    def computed(self) -> Graph:
        """The stages this mode computes (the tiled stage has no hard mode), hidden ones included."""
        return tuple(s for s in self.graph if s.in_mode(self.mode))

    @property
    def stages(self) -> Graph:
        """The stages a learner walks, explains and exports, in order (the graph's shown ones)."""
        return tuple(s for s in self.graph if s.shown and s.in_mode(self.mode))

    @property
    def scale(self) -> float:
        """What S divides QKᵀ by in this mode, for this score kind: √d_k or 1."""
        return self.mode.divisor(self.scenario.scorer, self.scenario.d_k)

    def stage(self, key: str) -> Stage:
        """The stage `key` of this walk's layer (KeyError when it has none)."""
        return get(self.computed, key)

    def has(self, key: str) -> bool:
        """Does this layer compute stage `key`?"""
        return any(s.key == key for s in self.computed)

    def scores(self, head: int = 0) -> np.ndarray:
        """The scores softmax reads before the mask and --amplify: S, or S + B under ALiBi."""
        return self.matrix(get(self.graph, "A").reads[0], head)

    def view(self, head: int = 0):  # -> headview.HeadView
        """Head `head` of this walk as one object: its matrices, labels and worked cells, each
        computed once (what every screen of that head reads)."""
        if head not in self.views:
            from attnwalk.layer.headview import HeadView

            self.views[head] = HeadView(self, head)
        return self.views[head]

    def matrix(self, key: str, head: int = 0) -> np.ndarray:
        """The matrix of stage `key` (for per-head stages, of head `head`)."""
        if key in self.heads[head].mats and self.stage(key).per_head:
            return self.heads[head].mats[key]
        if key in self.mats:
            return self.mats[key]
        return self.heads[head].mats[key]

    def input(self, stage: Stage, index: int = 0, head: int = 0) -> tuple[str, np.ndarray]:
        """(name, matrix) of what `stage` reads: its `index`-th input, a stage or a parameter (for a
        per-head stage, head `head`'s block)."""
        name = stage.inputs[index]
        if stage.per_head and name in self.heads[head].mats:
            return name, self.heads[head].mats[name]
        if name in self.mats:
            return name, self.mats[name]
        return name, self.scenario.param(name)


def compute(scn: Scenario, mode: Mode | str = BASELINE, amplify: float = 1.0,
            stages: Graph | None = None) -> Walk:
    """Run the layer: every stage's matrix for `scn` under `mode` (a Mode or its name; an unknown
    name is a UsageError). `stages` defaults to the scenario's graph (its features' stages)."""
    mode = mode_named(mode)
    graph = scn.graph if stages is None else stages
    try:
        return _evaluate(scn, mode, amplify, graph)
    except ComputeError as exc:  # name the file, and the line of the input to make smaller
        raise _located(scn, exc) from None


def with_mode(walk: Walk, mode: Mode | str) -> Walk:
    """`walk` under another mode, recomputing only what a mode can change: the stages before the
    heads (E, P, X, Q, K, V) never read the mode, so they are shared, and the per-head stages and
    those after them are computed again (on a 512-token, 12-head layer the projections are most
    of the cost; the interactive walk's m pays only the rest)."""
    mode = mode_named(mode)
    if mode == walk.mode:
        return walk
    before, _, _ = segments(walk.computed)
    kept = {s.key: walk.mats[s.key] for s in before if s.key in walk.mats}
    try:
        return _evaluate(walk.scenario, mode, walk.amplify, walk.graph, kept)
    except ComputeError as exc:
        raise _located(walk.scenario, exc) from None


def _located(scn: Scenario, exc: ComputeError) -> ComputeError:
    where = scn.overflow_where(exc.stage) if exc.stage else scn.label
    return ComputeError(f"{where}: {exc}", stage=exc.stage)


def whole(scn: Scenario, mode: Mode, amplify: float) -> Context:
    """The context of the whole walk: every query row, every key."""
    return Context(scn, mode, amplify, rows=np.arange(scn.n), key_rows=np.arange(scn.m),
                   keys=np.arange(scn.m))


def run(stage: Stage, ctx: Context, value: Callable[[str], object],
        whole_keys: Callable[[str], object] | None = None) -> np.ndarray:
    """Stage `stage`'s matrix at ctx's rows, from its inputs: each found by `value(name)`, and what it
    reads along the key axis by `whole_keys(name)` where that differs (decoding's cache)."""
    ctx.here = ctx.rows if stage.rows == "n" else ctx.key_rows
    keys = value if whole_keys is None else whole_keys
    inputs = ([value(name) for name in stage.reads] + [keys(name) for name in stage.keys]
              + [value(name) for name in stage.params])
    M = np.asarray(stage.compute(ctx, *inputs), dtype=np.float64)
    return ops.finite(M, stage.key, stage.overflow) if stage.overflow else M


def _evaluate(scn: Scenario, mode: Mode, amplify: float, graph: Graph,
              kept: dict[str, np.ndarray] | None = None) -> Walk:
    with np.errstate(over="ignore", invalid="ignore"):
        ctx = whole(scn, mode, amplify)
        mats: dict[str, np.ndarray] = {}
        heads: list[dict[str, np.ndarray]] = [{} for _ in range(scn.heads)]

        def shared(name: str) -> object:
            return mats[name] if name in mats else scn.param(name)

        for stages in blocks(tuple(s for s in graph if s.in_mode(mode))):  # one, or several in order
            before, per_head, after = segments(stages)
            for stage in before:
                if stage.compute is None:  # the tokens: no matrix
                    continue
                mats[stage.key] = kept[stage.key] if kept and stage.key in kept else run(stage, ctx, shared)
            for h, own in enumerate(heads):
                ctx.head = h
                # a query head reads its own block of Q, and the K and V blocks of its group's K/V head
                own.update({s.key: head_block(s, mats[s.key], h, scn) for s in before if s.split})
                for stage in per_head:
                    own[stage.key] = run(stage, ctx, lambda name: own[name] if name in own else shared(name))
            per_head_keys = {s.key for s in per_head}
            for stage in after:
                mats[stage.key] = run(stage, ctx, lambda name: [own[name] for own in heads]
                                      if name in per_head_keys else shared(name))
    source = {key: mats[f"{key}_src"] for key in ("E", "P", "X") if f"{key}_src" in mats}
    return Walk(scenario=scn, mode=mode, amplify=amplify, graph=graph, mats=mats,
                heads=[Head(h, own) for h, own in enumerate(heads)], source=source)


Mats = Mats  # the matrices computed so far, by stage key (re-exported for the feature modules)
