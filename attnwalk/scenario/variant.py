"""A loaded scenario changed in one way, for a what-if: two tokens traded places (the word-order
question), its positions or mask set otherwise (`attnwalk compare A B --positional none`), or its
weight matrices quantized otherwise (`attnwalk compare quantized --quantize none`).

Each returns a new Scenario; the one given is frozen and stays as it was. Positions belong to
places, not to tokens: an explicit P, the mask and the focus stay where they are when two tokens
trade places, as they would if the sentence had been written in the other order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.features.quantize import kind_of, requantized
from attnwalk.features.rope import with_rope
from attnwalk.layer import masks, quants
from attnwalk.layer.masks import Mask
from attnwalk.scenario.scenario import Scenario

POSITIONALS = ("none", "sinusoidal", "rope")
MASKS = ("none", "causal")
QUANTIZES = ("none", *quants.KINDS)


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
    turned = with_rope(scn, kind == "rope")  # the rotation is RoPE's own to set (features/rope.py)
    return replace(turned, main=replace(scn.main, positional=kind, P_given=None))


def with_mask(scn: Scenario, kind: str) -> Scenario:
    """`scn` with its mask replaced: none (every key) or causal."""
    if kind not in MASKS:
        raise UsageError(f"--mask {kind}: choose one of {', '.join(MASKS)}")
    if kind == "causal" and scn.source is not None:
        raise UsageError(f"--mask causal: {scn.name} reads a source, which has no future to hide")
    allowed = masks.causal(scn.n) if kind == "causal" else np.ones((scn.n, scn.m), dtype=bool)
    allowed.flags.writeable = False
    return replace(scn.with_setting("mask", Mask("causal") if kind == "causal" else None), allowed=allowed)


def with_quantize(scn: Scenario, kind: str) -> Scenario:
    """`scn` with its weight matrices as written (none) or quantized to `kind`, from the floats the
    file wrote (a quantized scenario keeps them); named for what it multiplies by."""
    if kind not in QUANTIZES:
        raise UsageError(f"--quantize {kind}: choose one of {', '.join(QUANTIZES)}")
    if kind != "none":
        for name in quants.WEIGHTS:
            W = scn.param(name)  # its rows are the inputs, at float or not; a float one is checked
            why = None if W is None else quants.refusal(name, W, kind)
            if why is not None:
                raise UsageError(f"--quantize {kind}: {scn.name}: {why}")
    made = requantized(scn, kind)
    return replace(made, name=quantized_name(made))


def quantized_kind(scn: Scenario) -> str:
    """What `scn`'s weights are: none (float, as written), q4_1 or q8_0."""
    return kind_of(scn)


def quantized_name(scn: Scenario) -> str:
    """How a side of `compare NAME --quantize` is named: with what its weights are."""
    kind = quantized_kind(scn)
    return f"{scn.name} · {'float' if kind == 'none' else kind.upper()}"
