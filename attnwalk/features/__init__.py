"""What a scenario can add to the base layer (layer/stages.py), one module per feature.

A feature module holds everything about its feature: the scenario keys it reads and their checks
(`read`), whether a scenario uses it (`active`), the stages it adds to the graph and what it
changes in the others' reads and text (`extend`), the names of its text, its stages' worked cells,
and what it adds to an export (`export`). Code outside a feature's module does not test the
feature's flag: it asks the graph (which stages there are, what each reads), or the scenario's
features for what a feature offers (a target's `loss`, the start of the backward pass).

Adding a feature is a module here and its line in FEATURES, its text in attnwalk/text/*.toml,
and a lesson in scenarios/ (README, "Architecture").

May import numpy, attnwalk.errors, the layer (its graph, stages and math) and the reading
primitives (attnwalk.reading: fields, yamltree); the scenario package above only for types (a
Draft hands a feature what it reads with, such as `Draft.sequence`); never text, rendering or the
terminal.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from attnwalk.features import (alibi, biases, blocks, cross, ffn, gqa, heads, masks, model, norm, output, quantize,
                               residual, rope, scores, sequences, sinks, target, tiles, unembed)
from attnwalk.features.model import nexttoken

if TYPE_CHECKING:
    from attnwalk.layer.graph import Graph, Stage
    from attnwalk.scenario.scenario import Scenario

# The order features are applied in: each sees the graph the ones before it made (tiles puts its
# stage after Z before the others reroute what it reads and add their notes to it; a real model's
# stages come before the grouped heads' text, which names them; quantize reads every weight
# matrix the features before it read, W_O included; a target is read last, against the output's
# width and the mask; the residual and the FFN after the norm, which tells them where its second
# norm stands; several blocks copy the block so far; the unembedding reads the block's output, the
# last block's, before quantize; a real model's --next after its FFN, which it completes).
FEATURES: tuple[ModuleType, ...] = (cross, heads, output, tiles, masks, scores, rope, alibi, sinks, model, biases,
                                    gqa, norm, residual, ffn, nexttoken, blocks, unembed, quantize, target, sequences)


def graph_of(scn: Scenario) -> Graph:
    """The stages of `scn`'s layer: the base layer's, extended by each feature it uses."""
    from attnwalk.layer.stages import BASE

    stages = list(BASE)
    for feature in FEATURES:
        if feature.active(scn):
            feature.extend(stages, scn)
    return _in_blocks(stages)


def _in_blocks(stages: list[Stage]) -> Graph:
    """Each stage in the block of the latest block it reads from: a stage a feature adds after the
    last block (the unembedding's) belongs to that block, evaluated and walked with it."""
    block: dict[str, int] = {}
    out = []
    for stage in stages:
        b = max([stage.block, *(block[name] for name in stage.inputs if name in block)])
        block[stage.key] = b
        out.append(stage if b == stage.block else stage._replace(block=b))
    return tuple(out)


def catalog() -> Graph:
    """Every stage a layer can show, the base layer's first, each as the feature that shows it
    defines it (concat: as several heads show it): for a stage named but not in this layer
    (explain's messages, completion, the text files' checks). Hidden stages (a source's X) are
    computed, never shown, and have no text: they are not listed."""
    from attnwalk.layer.stages import BASE

    seen: dict[str, Stage] = {s.key: s for s in BASE}
    for feature in FEATURES:
        for stage in feature.STAGES:
            seen[stage.key] = stage
    return tuple(s for s in seen.values() if s.shown)


def stage_named(key: str) -> Stage:
    """The stage `key` of any layer (KeyError when no feature has it)."""
    from attnwalk.layer.graph import get

    return get(catalog(), key)


def file_stages() -> Graph:
    """The stages a scenario file can show (its notes may name them): all but a real model's own."""
    return tuple(s for s in catalog() if s.key not in {s.key for s in model.STAGES})


def token_ids(scn: Scenario) -> tuple[int, ...] | None:
    """Each token's id: the file's ids, else those a feature knows (a vocabulary's places), else None."""
    if scn.main.ids is not None:
        return tuple(scn.main.ids)
    for feature in FEATURES:
        if feature.active(scn) and hasattr(feature, "token_ids"):
            return tuple(feature.token_ids(scn))
    return None


def note_values(scn: Scenario, note: str) -> dict[str, object]:
    """The numbers a note's placeholders take: the layer's shape ({heads}, {d_head}, {width}, {n},
    {m}, {kv_heads}, {group}) and what each feature the scenario uses adds ({slopes}, {window},
    {B}, RoPE's {pairs} …)."""
    d_head = scn.d_k if note == "heads.split" else scn.d_v
    values: dict[str, object] = {"heads": scn.heads, "d_head": d_head, "width": scn.heads * scn.d_v,
                                 "n": scn.n, "m": scn.m, "kv_heads": scn.groups,
                                 "group": scn.heads // scn.groups}
    for feature in FEATURES:
        if feature.active(scn) and hasattr(feature, "note_values"):
            values.update(feature.note_values(scn))
    return values
