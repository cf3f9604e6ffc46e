"""Machine-readable exports of a walk. JSON keeps every float at full float64 precision."""

from __future__ import annotations

import json
import math
from typing import Any

from attnwalk.layer import alibi
from attnwalk.layer.gqa import kv_head_of
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
    head_keys = [s.key for s in exported if s.per_head or s.key in walk.heads[0].mats]
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
    if scn.groups < scn.heads:  # grouped-query: per query head, the K/V head it reads (0-based)
        data["shape"]["kv_heads"] = scn.groups
        data["kv_heads"] = kv_head_of(scn.heads, scn.groups)
    if scn.bias == "alibi":
        data["alibi_slopes"] = alibi.slopes(scn.heads)
    if scn.mask_kind == "window":
        data["window"] = {"width": scn.window, "causal": scn.window_causal}
    data["weights"] = {s.weight: getattr(scn, s.weight).tolist() for s in walk.stages if s.weight}
    if scn.main.ids is not None:
        data["ids"] = list(scn.main.ids)
    if scn.source is not None:
        data["source"] = {"tokens": list(scn.source.tokens),
                          **{key: value.tolist() for key, value in walk.source.items()}}
    if walk.amplify != 1.0:
        data["amplify"] = walk.amplify
    if "tiled" in walk.heads[0].mats:  # --tiles B: the online softmax's running state per block
        if scn.heads == 1:
            data["tiled"] = tiled_data(walk, 0)
        else:
            for h, entry in enumerate(stages["heads"]):
                entry["tiled"] = tiled_data(walk, h)
    return data


def tiled_data(walk: Walk, head: int) -> dict[str, Any]:
    """{"block": B, "rows": [...]}: per query row, per block of keys, the state after it: m (null
    while it is −∞, before the row's first visible key: JSON has no −∞), alpha (null where a
    fully masked block was skipped), l, and O, the running unnormalised output Õ."""
    from attnwalk.layer.tiledcells import head_steps

    steps = head_steps(walk, head)
    rows = []
    for i in range(walk.scenario.n):
        rows.append([{"start": s.start, "stop": s.stop, "skipped": not bool(s.visible[i]),
                      "m": float(s.m[i]) if math.isfinite(s.m[i]) else None,
                      "alpha": float(s.alpha[i]) if math.isfinite(s.alpha[i]) else None,
                      "l": float(s.l[i]), "O": s.O[i].tolist()} for s in steps])
    return {"block": walk.scenario.tiles, "rows": rows}


def to_json(data: dict[str, Any]) -> str:
    """The JSON text of `data`: Chinese as it is, every float64 exact, nothing a terminal obeys
    (layer/safe.json_escaped: a control or format character in a token is written as \\u200b)."""
    return json_escaped(json.dumps(data, ensure_ascii=False, indent=None, allow_nan=False))
