"""The tiled (online) softmax (`tiles: B`, or --tiles B): a stage after Z that computes the same
output as FlashAttention does, each query reading the keys B at a time with a running maximum,
rescale factor, sum and unnormalised output (layer/tiled.py; its worked cell: layer/tiledcells.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer import tiled
from attnwalk.layer.graph import Stage, get, insert_after

if TYPE_CHECKING:
    from attnwalk.scenario.load import Draft
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.scenario import Scenario

NAME = "tiles"
KEYS = ("tiles",)


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def read(d: Draft) -> None:
    """`tiles: B`: add the tiled stage, keys B at a time."""
    if "tiles" in d.top:
        d.settings[NAME] = d.f.integer(d.top["tiles"], "tiles", minimum=1)


def with_tiles(scn: Scenario, tiles: int | None) -> Scenario:
    """`scn` with B = `tiles` keys a block (None: as the scenario says). The scenario key `tiles: B`
    does the same from a file; the option, when given, wins."""
    if tiles is None:
        return scn
    if tiles < 1:  # typer checks min=1; a caller that is not the CLI gets the same message
        raise UsageError(f"--tiles {tiles}: give a block size of at least 1 key")
    return scn.with_setting(NAME, int(tiles))


def _tiled(ctx: Context, S: np.ndarray, V: np.ndarray) -> np.ndarray:
    scores = tiled.tiled_scores(ctx.mode, ctx.seen(S), ctx.allowed)  # (n, m)
    start = tiled.start_logit(ctx.scn, ctx.mode, ctx.head)  # an attention sink's, else none
    return tiled.output(scores, V, ctx.scn.setting(NAME), start)  # (n, d_v), keys B at a time


def _formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    return base if scn.setting(NAME) is None else f"{base},  B = {scn.setting(NAME)}"


def _variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return () if mode.reads_scores else (mode.name,)  # uniform: the recurrence runs on M alone


def _notes(scn: Scenario, mode: Mode) -> list[str]:
    B = scn.setting(NAME)
    return ["tiles.one_block"] if B is not None and B >= scn.m else []


def _cell(c) -> list:
    from attnwalk.layer.tiledcells import tiled_cell  # it reads the walk, which imports the stages

    return tiled_cell(c)


STAGES = (
    Stage("tiled", "Z_tiled", "Z_tiled[i, :] = Õ_i / l_i", "n", "d_v", _tiled, reads=("S",), keys=("V",),
          per_head=True, in_mode=tiled.defined_in, formula_for=_formula, variants=_variants,
          notes=_notes, worked=_cell, exported=False, aliases=("tiles", "online", "flash"), panel="tiles"),
)


def extend(stages: list[Stage], scn: Scenario) -> None:
    # it reads what A reads (S, or S + B under ALiBi, rerouted by that feature after this one)
    insert_after(stages, "Z", STAGES[0]._replace(reads=get(stages, "A").reads))


def export(walk: Walk, data: dict[str, Any]) -> None:
    """`"tiled": {"block": B, "rows": [...]}`, each head's under `stages.heads` with several heads."""
    if not walk.has("tiled"):  # hard mode: no online form
        return
    if walk.scenario.heads == 1:
        data["tiled"] = tiled_data(walk, 0)
    else:
        for h, entry in enumerate(data["stages"]["heads"]):
            entry["tiled"] = tiled_data(walk, h)


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
    return {"block": walk.scenario.setting(NAME), "rows": rows}


def note_values(scn: Scenario) -> dict[str, Any]:
    return {"B": scn.setting(NAME)}
