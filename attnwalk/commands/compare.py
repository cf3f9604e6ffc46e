"""The body of `attnwalk compare`: one scenario's modes side by side (layer/compare.py), or two
scenarios of the same shape stage by stage (layer/pair.py); on screen or as JSON."""

from __future__ import annotations

from attnwalk.errors import UsageError


def compare_command(*, names: list[str], files: list[str], modes: list[str], amplify: float,
                    format: str, head: str | None, precision: int, ascii: bool, lang: str | None,
                    at: str | None, positional: str | None = None, mask: str | None = None) -> int:
    """Names come first, then files; none at all compares the default lesson's modes. With
    `positional` or `mask` every scenario is walked with those positions or that mask instead of
    its own (what word order does without positions: the word-order lesson's what-if)."""
    from attnwalk.layer.axes import pick_head
    from attnwalk.layer.compare import DEFAULT_SCENARIO, check_amplify
    from attnwalk.scenario.load import load_scenario
    from attnwalk.text import detect_lang

    check_amplify(amplify)
    lang = detect_lang(lang)
    refs = [*names, *files]
    if len(refs) > 2:
        raise UsageError(f"compare takes one scenario (its modes) or two (side by side), not {len(refs)}: "
                         + " ".join(refs))
    first = load_scenario((refs or [DEFAULT_SCENARIO])[0])
    check_bounds(first, len(refs), modes, format)  # before the second is read or anything computed
    scenarios = [first, *(load_scenario(ref) for ref in refs[1:])]
    if positional is not None or mask is not None:
        from attnwalk.scenario.variant import with_mask, with_positional

        scenarios = [with_positional(s, positional.strip().lower()) if positional is not None else s
                     for s in scenarios]
        scenarios = [with_mask(s, mask.strip().lower()) if mask is not None else s for s in scenarios]
    if len(scenarios) == 2:
        from attnwalk.layer.pair import check_shapes, compare_pair, pair_data

        if at is not None:
            raise UsageError("--at projects one scenario's cost; with two scenarios leave it out")
        if len(set(modes)) > 1:
            raise UsageError(f"with two scenarios, give one --mode to compute both in (got {', '.join(modes)})")
        check_shapes(*scenarios)
        result = compare_pair(*scenarios, modes[0] if modes else "scaled", amplify,
                              pick_head(scenarios[0], head))
        data = pair_data
    else:
        from attnwalk.layer.compare import compare, comparison_data

        result = compare(scenarios[0], modes, amplify, pick_head(scenarios[0], head))
        data = comparison_data
        if at is not None:  # checked before anything is printed
            from attnwalk.layer.cost import projected_dims

            at = projected_dims(scenarios[0], at)
    if format == "json":
        from attnwalk.export.data import to_json
        from attnwalk.terminal.streams import write_out

        write_out(to_json(data(result)) + "\n", json=True)
        return 0
    from attnwalk.render.options import ViewOptions
    from attnwalk.terminal.console import make_console

    console = make_console()
    opts = ViewOptions(precision=precision, ascii=ascii, lang=lang, width=console.size.width, at=at)
    if len(scenarios) == 2:
        from attnwalk.render.pairview import pair_view

        console.print(pair_view(result, opts))
    else:
        from attnwalk.render.compareview import compare_view

        console.print(compare_view(result, opts))
    return 0


def check_bounds(scn, count: int, modes: list[str], format: str) -> None:
    """A comparison too big to compute or to write, refused from the first scenario's shapes (a
    second must have the same): two walks side by side, or one a mode; JSON of every matrix."""
    from attnwalk.layer.compare import modes_to_show
    from attnwalk.layer.cost import export_numbers
    from attnwalk.scenario.limits import check_work, check_written

    if count == 2:
        check_work(scn, 2, "comparing two scenarios computes both walks")
        if format == "json":
            check_written(scn, 2 * export_numbers(scn), "the JSON of both walks side by side",
                          "compare fewer tokens or heads, or on screen (without --format json), which "
                          "shows each matrix's corners")
        return
    shown = len(modes_to_show(modes))
    check_work(scn, shown, f"comparing {shown} modes computes the walk once a mode")
    if format == "json":  # A, Z, entropy, peak and signal of one head, a mode
        check_written(scn, shown * (scn.n * scn.m + scn.n * scn.d_v + 3 * scn.n),
                      f"the JSON of {shown} modes' weights and outputs",
                      "compare fewer tokens, or on screen (without --format json)")
