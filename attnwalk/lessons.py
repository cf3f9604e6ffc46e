"""The table of built-in lessons shown by `attnwalk list`."""

from __future__ import annotations

from rich.table import Table

from .builtins import builtin_names
from .i18n import pick
from .scenario import load_scenario


def lesson_table(lang: str = "en") -> Table:
    """Name, title, n × d_model and mask of every built-in scenario."""
    table = Table(title="Built-in scenarios", title_justify="left")
    for column in ("name", "title", "n × d_model", "mask"):
        table.add_column(column, overflow="fold")
    for name in builtin_names():
        scn = load_scenario(name)
        shape = f"{scn.n} × {scn.d_model}"
        if scn.heads > 1:
            shape += f", {scn.heads} heads"
        if scn.source is not None:
            shape += f" ← {scn.m} source"
        table.add_row(name, pick(scn.title, lang) or "", shape, scn.mask_kind)
    return table
