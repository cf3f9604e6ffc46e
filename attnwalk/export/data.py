"""Machine-readable exports of a walk. JSON keeps every float at full float64 precision."""

from __future__ import annotations

import json
from typing import Any

from attnwalk.layer.safe import json_escaped
from attnwalk.layer.walk import Walk


def walk_data(walk: Walk) -> dict[str, Any]:
    """The export contract: name, tokens, mode, mask, every exported stage as lists of rows of
    floats, the shape, and the weights (the parameters W_Q, W_K, W_V and W_O when there is one: a
    stage is an activation of this input, a weight is what training learned).

    A one-head walk lists every stage under "stages"; with several heads the per-head stages go
    in "stages.heads", one mapping per head that also holds its blocks of the split matrices (Q,
    K, V), and the full-width matrices stay under "stages"."""
    scn = walk.scenario
    exported = [s for s in walk.stages if s.exported and s.compute is not None]
    head_keys = [s.key for s in exported if s.per_head or s.split and s.key in walk.heads[0].mats]
    stages: dict[str, Any] = {}
    for stage in exported:  # in stage order, "heads" where the per-head stages begin
        if not stage.per_head or scn.heads == 1:
            stages[stage.key] = walk.matrix(stage.key).tolist()
        elif "heads" not in stages:
            stages["heads"] = [{key: head.mats[key].tolist() for key in head_keys}
                               for head in walk.heads]
    data: dict[str, Any] = {
        "name": scn.name,
        "tokens": list(scn.tokens),
        "mode": walk.mode.name,
        "mask": scn.allowed.tolist(),
        "stages": stages,
        "shape": {"n": scn.n, "m": scn.m, "d_model": scn.d_model, "d_k": scn.d_k, "d_v": scn.d_v,
                  "heads": scn.heads},
    }
    data["weights"] = {s.weight: scn.param(s.weight).tolist() for s in walk.stages
                       if s.weight and s.weight_exported}
    if scn.main.ids is not None:
        data["ids"] = list(scn.main.ids)
    if scn.source is not None:
        data["source"] = {"tokens": list(scn.source.tokens),
                          **{key: value.tolist() for key, value in walk.source.items()}}
    if walk.amplify != 1.0:
        data["amplify"] = walk.amplify
    for feature in scn.features:  # what a feature adds: alibi_slopes, window, kv_heads, tiled
        if hasattr(feature, "export"):
            feature.export(walk, data)
    return data




def to_json(data: dict[str, Any]) -> str:
    """The JSON text of `data`: Chinese as it is, every float64 exact, nothing a terminal obeys
    (layer/safe.json_escaped: a control or format character in a token is written as \\u200b)."""
    return json_escaped(json.dumps(data, ensure_ascii=False, indent=None, allow_nan=False))
