"""The body of `attnwalk heads`: every head of every layer of a real model scored on a start token
and R random tokens repeated twice (layer/headscores.py), shown as heat tables with the strongest
heads named (render/headscores.py) or written as JSON."""

from __future__ import annotations

from attnwalk.errors import UsageError


def heads_data(model: str | None, repeat: int, seed: int) -> tuple[dict, bool, tuple[str, ...]]:
    """The JSON contract (`model`, `ids`, `repeat`, `first`, `heads`: one entry per head, layers and
    heads from 1), whether the model's attention is causal, and the sequence's pieces."""
    if seed < 0:
        raise UsageError(f"--seed {seed}: give a whole number ≥ 0")
    import numpy as np

    from attnwalk.layer.headscores import SCORES, Repeated, head_scores
    from attnwalk.models.model import open_model
    from attnwalk.models.probe import attention_weights, repeated
    from attnwalk.numbering import shown as person

    opened = open_model(model)
    probe = repeated(opened, repeat, seed)
    layout = Repeated(probe.first, probe.repeat)
    heads, causal = [], True
    for layer, (A, is_causal) in enumerate(attention_weights(opened, probe)):
        causal = causal and is_causal
        scores = head_scores(np.asarray(A, dtype=np.float64), layout)  # {key: (H,)}
        for h in range(A.shape[0]):
            heads.append({"layer": person(layer), "head": person(h),
                          **{score.key: float(scores[score.key][h]) for score in SCORES}})
    data = {"model": opened.info.name, "ids": list(probe.tokens.ids), "repeat": probe.repeat,
            "first": probe.first, "heads": heads}
    return data, causal, probe.tokens.pieces


def heads_command(*, model: str | None, length: int, seed: int, format: str | None,
                  ascii: bool, lang: str | None) -> int:
    """Score every head; print the JSON or the screen. Returns the exit code."""
    if format not in (None, "json"):
        raise UsageError(f"--format {format}: heads are written as json only (or shown without --format)")
    data, causal, pieces = heads_data(model, length, seed)
    if format == "json":
        from attnwalk.export.data import to_json
        from attnwalk.terminal.streams import write_out

        write_out(to_json(data) + "\n", json=True)
        return 0
    from attnwalk.render.headscores import heads_screen
    from attnwalk.render.options import ViewOptions
    from attnwalk.terminal.console import fitted, make_console
    from attnwalk.text import detect_lang

    console = make_console()
    opts = fitted(ViewOptions(precision=2, ascii=ascii, lang=detect_lang(lang)), console)
    console.print(heads_screen(data, pieces, causal=causal, spec=model, seed=seed, opts=opts))
    return 0
