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
from attnwalk.layer import masks, quants
from attnwalk.layer.masks import Mask
from attnwalk.layer.rope import Rope
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


def with_quantize(scn: Scenario, kind: str) -> Scenario:
    """`scn` with its weight matrices as written (none) or quantized to `kind`, from the floats
    the file wrote (a quantized scenario keeps them); named for what it multiplies by."""
    if kind not in QUANTIZES:
        raise UsageError(f"--quantize {kind}: choose one of {', '.join(QUANTIZES)}")
    held = scn.setting("quantize")
    floats = held.floats if held is not None else {
        name: scn.param(name) for name in quants.WEIGHTS if name != "W_O" or scn.W_O is not None}
    if kind == "none":
        return replace(scn.with_setting("quantize", None), name=f"{scn.name} · float", **floats)
    for name, W in floats.items():
        if quants.block_size(W.shape[0]) is None:
            raise UsageError(f"--quantize {kind}: {name} of {scn.name} has {W.shape[0]} rows, which do not "
                             f"split into blocks of {quants.BLOCK} (give a layer whose rows are a multiple "
                             f"of {quants.BLOCK}, or under {quants.BLOCK})")
    made = {name: quants.quantized(W, kind) for name, W in floats.items()}
    if not all(np.isfinite(W).all() for W in made.values()):
        raise UsageError(f"--quantize {kind}: {scn.name} has a weight beyond float16's 65504, which a block's "
                         "scale cannot hold")
    for W in made.values():
        W.flags.writeable = False
    return replace(scn.with_setting("quantize", quants.Quantization(kind.upper(), floats)),
                   name=f"{scn.name} · {kind.upper()}", **made)


def quantized_name(scn: Scenario) -> str:
    """How a side of `compare NAME --quantize` is named: with what its weights are."""
    held = scn.setting("quantize")
    return f"{scn.name} · {held.kind if held is not None else 'float'}"
