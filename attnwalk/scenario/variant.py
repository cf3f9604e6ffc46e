"""A loaded scenario changed in one way, for a what-if: two tokens traded places (the word-order
question), or its positions or mask set otherwise (`attnwalk compare A B --positional none`).

Each returns a new Scenario; the one given is frozen and stays as it was. Positions belong to
places, not to tokens: an explicit P, the mask and the focus stay where they are when two tokens
trade places, as they would if the sentence had been written in the other order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer import masks
from attnwalk.layer.masks import Mask
from attnwalk.layer.rope import Rope
from attnwalk.scenario.scenario import Scenario

POSITIONALS = ("none", "sinusoidal", "rope")
MASKS = ("none", "causal")


def swapped(scn: Scenario, i: int, j: int) -> Scenario:
    """`scn` with tokens i and j (0-based) traded places, their embeddings and ids with them."""
    order = list(range(scn.n))
    order[i], order[j] = j, i
    main = scn.main
    ids = tuple(main.ids[k] for k in order) if main.ids is not None else None
    return replace(scn, main=replace(main, tokens=tuple(main.tokens[k] for k in order),
                                     E=np.asarray(main.E)[order], ids=ids))


def with_positional(scn: Scenario, kind: str) -> Scenario:
    """`scn` with its positions replaced: none (P = 0), sinusoidal, or rope (default base)."""
    if kind not in POSITIONALS:
        raise UsageError(f"--positional {kind}: choose one of {', '.join(POSITIONALS)}")
    if kind == "rope":
        if scn.d_k % 2:
            raise UsageError(f"--positional rope: {scn.name} has d_k {scn.d_k}; RoPE turns pairs, so d_k must be even")
        if scn.source is not None or scn.score == "additive":
            raise UsageError(f"--positional rope: {scn.name} has "
                             f"{'a source' if scn.source is not None else 'additive scores'}, which RoPE cannot turn")
    rope = (scn.setting("rope") or Rope()) if kind == "rope" else None
    return replace(scn.with_setting("rope", rope), main=replace(scn.main, positional=kind, P_given=None))


def with_mask(scn: Scenario, kind: str) -> Scenario:
    """`scn` with its mask replaced: none (every key) or causal."""
    if kind not in MASKS:
        raise UsageError(f"--mask {kind}: choose one of {', '.join(MASKS)}")
    if kind == "causal" and scn.source is not None:
        raise UsageError(f"--mask causal: {scn.name} reads a source, which has no future to hide")
    allowed = masks.causal(scn.n) if kind == "causal" else np.ones((scn.n, scn.m), dtype=bool)
    allowed.flags.writeable = False
    return replace(scn.with_setting("mask", Mask("causal") if kind == "causal" else None), allowed=allowed)
