"""Which line of a scenario file a numeric overflow comes from.

The layer finds that a stage overflows float64 (`Q overflows float64`) but knows no YAML lines;
the loader knows the lines but computes nothing. Between them: the fields each stage is made from,
and, of those, the one holding the largest number — the one to make smaller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario

def _values(scn: Scenario, field: str) -> np.ndarray | None:
    source = field.startswith("source.")
    seq = scn.source if source else scn.main
    if seq is None:
        return None
    name = field.removeprefix("source.")
    if name == "embeddings":
        return seq.E
    if name == "positional":
        return seq.P_given
    try:
        return scn.param(name)
    except KeyError:
        return None


def overflow_cause(scn: Scenario, stage: str) -> tuple[str, int | None] | None:
    """(field, line) of the input with the largest magnitude among those stage `stage` is made
    from, by the graph (the fields of the stages it is made from, in order, then the parameters;
    the first of equals), or None for a stage that checks no overflow of its own (S overflows
    only through --amplify, which is no field's doing)."""
    from attnwalk.layer.graph import WEIGHTS, ancestors

    graph = {s.key: s for s in scn.graph}
    if stage not in graph or not graph[stage].overflow:
        return None
    if graph[stage].field and graph[stage].inputs:  # a stage that names the field it answers to
        return graph[stage].field, scn.lines.get(graph[stage].field)
    # weights lie in [0, 1]: what they were made from cannot make a later stage overflow
    names = ancestors(scn.graph, stage, through=lambda s: s.kind != WEIGHTS)
    fields = [s.field for s in scn.graph if s.key in names and s.field]
    fields += [name for name in names if name not in graph]  # W_Q, b_Q, γ …
    best, biggest = None, -1.0
    for field in dict.fromkeys(fields):  # in order, once each
        values = _values(scn, field)
        if values is None or values.size == 0:
            continue
        top = float(np.max(np.abs(values)))
        if top > biggest:
            best, biggest = field, top
    if best is None:
        return None
    return best, scn.lines.get(best)


def overflow_where(scn: Scenario, stage: str) -> str:
    """`file:line: field` for an overflow at `stage`, or the file alone when no field is known."""
    cause = overflow_cause(scn, stage)
    if cause is None:
        return scn.label
    field, line = cause
    return f"{scn.label}:{line}: {field}" if line is not None else f"{scn.label}: {field}"
