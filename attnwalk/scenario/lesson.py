"""What a scenario says to the learner beside its numbers: the names of its dimensions and a note
on what to notice at a stage, each in one language or several.

    dimensions:                                  # every key optional
      d_model: [geography, finance, function word, ambiguous]    # or {en: [...], zh: [...]}
      d_k: [...]                                 # names of one head's query and key columns
      d_v: [...]                                 # names of one head's value (and Z) columns
    notes:                                       # what to notice, by stage (key or symbol)
      A: "bank gives 69% of its attention to river"             # or {en: ..., zh: ...}
"""

from __future__ import annotations

from collections.abc import Callable

from attnwalk.reading.fields import Fields, quoted
from attnwalk.reading.yamltree import Node, shown

DIMENSIONS = ("d_model", "d_k", "d_v")

Names = dict[str, tuple[str, ...]]  # language ("" for any) -> one name per column
Localized = str | dict[str, str]


def dimension_names(f: Fields, node: Node, widths: dict[str, int]) -> dict[str, Names]:
    """The `dimensions` mapping, each list checked against the width it names."""
    top = f.mapping(node, "dimensions", DIMENSIONS, ())
    out: dict[str, Names] = {}
    for dim, sub in top.items():
        field = f"dimensions.{dim}"
        nodes = (f.languages(sub, field, "a list of names") if isinstance(sub.value, dict)
                 else {"": sub})  # language ("": any) -> list
        out[dim] = {}
        for lang, value in nodes.items():
            where = f"{field}.{lang}" if lang else field
            names = f.strings(value, where)
            if len(names) != widths[dim]:
                raise f.error(where, value, f"{where} has {len(names)} names, but {dim} is "
                              f"{widths[dim]}; give one name per column")
            out[dim][str(lang)] = names
    return out


def stage_notes(f: Fields, node: Node, resolve: Callable[[str], str | None],
                choices: str) -> dict[str, Localized]:
    """The `notes` mapping: a stage, as `resolve` reads its name (key or symbol, any case), to a
    note in one language or several; `choices` lists the stages for the error message."""
    if not isinstance(node.value, dict):
        raise f.error("notes", node, "expected a mapping of stage to note, e.g. A: \"bank looks at "
                      "river\"")
    out: dict[str, Localized] = {}
    for name, value in node.value.items():
        key = resolve(str(name))
        if key is None:  # the path shows the name as the other field paths do: a tab as \t
            raise f.error(f"notes.{shown(str(name))}", value, f"{quoted(str(name))} is not a stage; "
                          f"choose one of: {choices}")
        out[key] = f.localized(value, f"notes.{shown(str(name))}")
    return out


def in_language(names: Names, lang: str) -> tuple[str, ...] | None:
    """The names in `lang`, else in any language given, else None."""
    for choice in (lang, "", "en", *names):
        if choice in names:
            return names[choice]
    return None
