"""Several heads (`heads: h`): W_Q's columns are h blocks, one per head; each head computes QKᵀ, S,
A and Z from its own block of Q (and of K and V), and concat lays the heads' Z side by side.

The split itself is the layer's (graph.py computes the per-head stages per head); this module
shows concat and says what several heads mean in Q's text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnwalk.layer.graph import amend, replace
from attnwalk.layer.stages import BASE, blocks, get

if TYPE_CHECKING:
    from attnwalk.layer.graph import Stage
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario


def active(scn: Scenario) -> bool:
    return scn.heads > 1


def _concat_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    return f"concat = {blocks('Z', scn.heads)}" if scn.heads > 1 else base


# concat is the base layer's, hidden with one head (it is that head's Z); shown with several.
# heads.why opens each head's screens, and concat's mistake says it too (heads.w_o would repeat
# O's own what)
STAGES = (get(BASE, "concat")._replace(shown=True, formula_for=_concat_formula,
                                       notes=lambda scn, mode: ["heads.concat"]),)


def extend(stages: list[Stage], scn: Scenario) -> None:
    replace(stages, "concat", **{f: getattr(STAGES[0], f) for f in ("shown", "formula_for", "notes")})
    # Q is n × h·d_k, not "d_k columns"; where its blocks are
    amend(stages, "Q", variants=lambda scn, mode, names: (*names, "heads"),
          notes=lambda scn, mode, notes: ["heads.split", *notes])


def decode_notes(scn: Scenario, n: int) -> list[tuple[str, dict]]:
    """What a decode step's explanation says of this feature: (text key, placeholders)."""
    return [] if scn.groups < scn.heads else [("decode.note_heads", {"heads": scn.heads})]  # GQA's own note


def concepts(scn: Scenario) -> tuple[str, ...]:
    """The quiz's concept questions this feature asks (tutor/questions.py): each head attends
    differently. With shared K/V heads "each head has its own W_K, W_V" would be false: gqa asks."""
    return () if scn.groups < scn.heads else ("heads",)
