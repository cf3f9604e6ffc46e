"""Machine-readable exports of a walk. JSON keeps every float at full float64 precision."""

from __future__ import annotations

import json
from typing import Any

from attnwalk.layer.walk import Walk

SINGLE_HEAD_KEYS = ("E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z")
HEAD_KEYS = ("Q", "K", "V", "QK^T", "S", "A", "Z")


def walk_data(walk: Walk) -> dict[str, Any]:
    """The export contract: name, tokens, mode, mask, every stage as lists of rows of floats, the
    shape, and the weights (the parameters W_Q, W_K, W_V and W_O when there is one: a stage is an
    activation of this input, a weight is what training learned)."""
    scn = walk.scenario
    stages: dict[str, Any] = {key: walk.mats[key].tolist() for key in ("E", "P", "X", "Q", "K", "V")}
    if scn.heads == 1:
        stages.update({key: walk.mats[key].tolist() for key in ("QK^T", "S", "A", "Z")})
    else:
        stages["heads"] = [{key: head.mats[key].tolist() for key in HEAD_KEYS} for head in walk.heads]
        stages["concat"] = walk.mats["concat"].tolist()
    if "O" in walk.mats:
        stages["O"] = walk.mats["O"].tolist()
    data: dict[str, Any] = {
        "name": scn.name,
        "tokens": list(scn.tokens),
        "mode": walk.mode,
        "mask": scn.allowed.tolist(),
        "stages": stages,
        "shape": {"n": scn.n, "m": scn.m, "d_model": scn.d_model, "d_k": scn.d_k, "d_v": scn.d_v,
                  "heads": scn.heads},
    }
    weights = {"W_Q": scn.W_Q, "W_K": scn.W_K, "W_V": scn.W_V, "W_O": scn.W_O}
    data["weights"] = {key: W.tolist() for key, W in weights.items() if W is not None}
    if scn.main.ids is not None:
        data["ids"] = list(scn.main.ids)
    if scn.source is not None:
        data["source"] = {"tokens": list(scn.source.tokens),
                          **{key: value.tolist() for key, value in walk.source.items()}}
    if walk.amplify != 1.0:
        data["amplify"] = walk.amplify
    return data


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=None, allow_nan=False)
