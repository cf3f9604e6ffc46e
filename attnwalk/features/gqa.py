"""Grouped-query attention (`kv_heads: g`, Ainslie et al., 2023): g K/V heads, each shared by
heads/g consecutive query heads (g = 1: multi-query). W_K and W_V have g blocks, not h; query head
h reads the K and V blocks of K/V head ⌊h / (heads/g)⌋ (layer/gqa.py), so a KV cache holds g heads.

The sharing itself is the layer's (K and V are split into `groups` blocks); this module says it in
the text and the export.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnwalk.layer.gqa import kv_head_of
from attnwalk.layer.graph import amend, has
from attnwalk.reading.fields import whole

if TYPE_CHECKING:
    from attnwalk.scenario.load import Draft
    from attnwalk.layer.graph import Stage
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.scenario import Scenario

STAGES: tuple[Stage, ...] = ()
KEYS = ("kv_heads",)


def active(scn: Scenario) -> bool:
    return scn.groups < scn.heads


def read_shape(d: Draft) -> None:
    """`kv_heads: g` (grouped-query attention; 1 is multi-query): g must divide heads."""
    if "kv_heads" not in d.top:
        return
    f, node = d.f, d.top["kv_heads"]
    g = f.integer(node, "kv_heads", minimum=1)
    if g > d.heads or d.heads % g:
        divisors = ", ".join(str(x) for x in range(1, d.heads + 1) if d.heads % x == 0)
        raise f.error("kv_heads", node, f"kv_heads is {whole(g)}, but it must divide heads ({d.heads}) "
                      f"so that each K/V head serves the same number of query heads; choose one of {divisors}")
    d.kv_heads = g


def _shared(scn: Scenario) -> str:
    return "gqa.shared_mqa" if scn.groups == 1 else "gqa.shared"


def extend(stages: list[Stage], scn: Scenario) -> None:
    amend(stages, "Q", notes=lambda scn, mode, notes: [
        "gqa.split_note" if n == "heads.split" else n for n in notes])  # K, V: g blocks, not h
    for key in ("K", "V"):
        amend(stages, key, notes=lambda scn, mode, notes: [*notes, _shared(scn)])
    for key in ("concat", "glance"):  # query heads that share K and V
        if has(stages, key):
            amend(stages, key, variants=lambda scn, mode, names: ("gqa", *names))
    if has(stages, "tiled"):  # each head's blocks read its group's shared V
        amend(stages, "tiled", notes=lambda scn, mode, notes: [*notes, "tiles.variant.gqa"])


def export(walk: Walk, data: dict[str, Any]) -> None:
    """`shape.kv_heads` is g, and per query head the 0-based index of the K/V head it reads."""
    scn = walk.scenario
    data["shape"]["kv_heads"] = scn.groups
    data["kv_heads"] = kv_head_of(scn.heads, scn.groups)


def decode_notes(scn: Scenario, n: int) -> list[tuple[str, dict]]:
    """One cache per K/V head: how many numbers it keeps, against one per query head."""
    from attnwalk.layer.kvcache import cache_numbers, ungrouped_numbers

    return [("decode.variant.note_gqa", {"heads": scn.heads, "kv_heads": scn.groups, "n": n,
                                         "numbers": cache_numbers(scn, n), "full": ungrouped_numbers(scn, n)})]


def concepts(scn: Scenario) -> tuple[str, ...]:
    return ("gqa",)  # shared K/V heads: a group still attends differently
