"""The table of built-in lessons shown by `attnwalk list`."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from attnwalk.scenario.builtins import course_order
from attnwalk.text import pick, text
from attnwalk.scenario.load import load_scenario


def lesson_table(lang: str = "en", width: int = 80) -> Table:
    """Number, name, title, n × d_model and mask of every built-in scenario, in course order, the
    first marked as where to start."""
    tx = text(lang)
    table = Table(title=tx.t("list.title"), title_justify="left", expand=True,  # for the ratio
                  caption=tx.t("list.caption", name=course_order()[0]), caption_justify="left")
    # the name whole (it is what the learner types), the title given the room; on a narrow
    # terminal the size and the mask wrap between words at 12 cells rather than squeeze the title
    narrow = 12 if width < 120 else None
    table.add_column(tx.t("list.order"), justify="right", no_wrap=True)
    table.add_column(tx.t("list.name"), no_wrap=True)
    table.add_column(tx.t("list.scenario_title"), overflow="fold", ratio=1)
    table.add_column(tx.t("list.shape"), overflow="fold", max_width=narrow)
    table.add_column(tx.t("list.mask"), overflow="fold", max_width=narrow)
    for number, name in enumerate(course_order(), 1):
        scn = load_scenario(name)
        shown = Text(name)
        if number == 1:
            shown.append("\n" + tx.t("list.start"), style="bold green")
        table.add_row(str(number), shown, pick(scn.title, lang) or "", *lesson_facts(scn, lang))
    return table


def lesson_facts(scn, lang: str) -> tuple[str, str]:
    """A lesson's size (n × d_model, blocks, heads, K/V heads, source) and mask, as the list shows
    them (and `attnwalk serve`'s lesson picker)."""
    from attnwalk.layer.graph import blocks

    tx = text(lang)
    shape = f"{scn.n} × {scn.d_model}"
    stacked = len(blocks(scn.graph))  # the graph's blocks (features/blocks.py makes more than one)
    if stacked > 1:
        shape += tx.t("list.blocks", blocks=stacked)
    if scn.heads > 1:
        shape += tx.t("list.heads", heads=scn.heads)
    if scn.groups < scn.heads:
        shape += tx.t("gqa.list", kv_heads=scn.groups)
    if scn.source is not None:
        shape += tx.t("list.source", m=scn.m)
    # what each feature says there (a mask's kind, ALiBi's bias), in the features' order
    said = [] if scn.masked else [("list.mask_none", {})]
    for feature in scn.features:
        if hasattr(feature, "list_mask"):
            said += feature.list_mask(scn)
    return shape, "".join(tx.t(key, **values) for key, values in said)
