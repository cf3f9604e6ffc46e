"""Which line of a scenario file a numeric overflow comes from.

The layer finds that a stage overflows float64 (`Q overflows float64`) but knows no YAML lines;
the loader knows the lines but computes nothing. Between them: the fields each stage is made from,
and, of those, the one holding the largest number — the one to make smaller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from attnwalk.scenario.model import Scenario

_SOURCE_X = ("source.embeddings", "source.positional")  # "source X": computed before the stages


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
    return getattr(scn, name, None)


def overflow_cause(scn: Scenario, stage: str) -> tuple[str, int | None] | None:
    """(field, line) of the input with the largest magnitude among those stage `stage` is made
    from (Stage.inputs; the first of equals), or None for a stage made from none (S overflows only
    through --amplify, which is no field's doing)."""
    from attnwalk.layer.stages import STAGES  # each stage lists the fields it is made from

    if stage in ("QK^T", "S") and getattr(scn, "qk_norm", False):
        # normalised, |q̂ · k̂| ≤ d_k whatever the embeddings and weights: only qk_scale, which
        # multiplies the scores, can take them past float64
        return "qk_scale", scn.lines.get("qk_scale")
    inputs = next((s.inputs for s in STAGES if s.key == stage), _SOURCE_X if stage == "source X" else ())
    if not inputs:
        return None
    keys = "source." if scn.source is not None else ""
    fields = [keys + f.removeprefix("keys:") if f.startswith("keys:") else f for f in inputs]
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
