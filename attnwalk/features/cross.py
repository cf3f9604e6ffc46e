"""Cross-attention (`source:`): the queries come from the sequence, the keys and values from another
one, the source (a translation's decoder reading its encoder). A is n × m.

The source's embeddings, positions and X are stages of the graph, hidden (the walk shows the
sequence's own): K and V read X_src instead of X.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer import ops
from attnwalk.layer.graph import Stage, amend, insert_before, reroute
from attnwalk.layer.stages import SUM_BACK

if TYPE_CHECKING:
    from attnwalk.scenario.load import Draft
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario


KEYS = ("source",)
SOURCE_KEYS = ("tokens", "ids", "embeddings", "positional")


def active(scn: Scenario) -> bool:
    return scn.source is not None


def read_shape(d: Draft) -> None:
    """`source: {tokens, embeddings, ids, positional}`: the sequence the keys and values come from,
    with the main sequence's d_model."""
    if "source" not in d.top:
        return
    f = d.f
    src = f.mapping(d.top["source"], "source", SOURCE_KEYS, ("tokens", "embeddings"))
    d.source = d.sequence(src, "source.")
    if d.source.d_model != d.main.d_model:
        raise f.error("source.embeddings", src["embeddings"],
                      f"source.embeddings has {d.source.d_model} columns, but the main "
                      f"sequence's d_model is {d.main.d_model}; both must share d_model")


def _embeddings(ctx: Context) -> np.ndarray:
    return np.array(ctx.scn.source.E[ctx.here], dtype=np.float64)  # (m, d_model)


def _positions(ctx: Context) -> np.ndarray:
    seq = ctx.scn.source
    if seq.positional == "sinusoidal":
        return ops.sinusoidal(ctx.here, seq.d_model)
    if seq.positional == "explicit":
        return np.array(seq.P_given[ctx.here], dtype=np.float64)
    return np.zeros((len(ctx.here), seq.d_model))


STAGES = (
    Stage("E_src", "E_src", "E_src = EmbeddingTable[source ids]", "m", "d_model", _embeddings,
          field="source.embeddings", shown=False),
    Stage("P_src", "P_src", "P_src", "m", "d_model", _positions, field="source.positional", shown=False),
    Stage("X_src", "X_src", "X_src = E_src + P_src", "m", "d_model", lambda ctx, E, P: E + P,
          reads=("E_src", "P_src"), shown=False, overflow="use smaller source embeddings",
          backward=SUM_BACK),
)


def _cost_note(scn: Scenario, mode: Mode, notes: list[str]) -> list[str]:
    # what a score is here first; the cost of n × m scores instead of n × n
    return ["cross.what", *("truth.cost_cross" if n == "truth.cost" else n for n in notes)]


def extend(stages: list[Stage], scn: Scenario) -> None:
    insert_before(stages, "Q", *STAGES)
    reroute(stages, "X", "X_src", readers=("K", "V"))
    amend(stages, "Q", notes=lambda scn, mode, notes: [*notes, "cross.q"])
    for key in ("K", "V"):
        amend(stages, key, notes=lambda scn, mode, notes: ["cross.kv", *notes])
    amend(stages, "QK^T", notes=_cost_note)
    # uniform weights spread over the m source keys
    amend(stages, "A", formula=lambda text, scn, mode: text.replace("1 / n", "1 / m"))


DECODE_FIELD = "source"  # what a refusal to decode points at


def refuse_decode(scn: Scenario) -> str | None:
    return ("decode needs self-attention: with a source, the keys and values are the source's, "
            "computed once before decoding starts, not a cache that grows with each token")


def concepts(scn: Scenario) -> tuple[str, ...]:
    return ("cross",)
