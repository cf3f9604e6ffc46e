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


def scenario_heads_data(ref: str) -> tuple[dict, bool]:
    """`heads --scenario`: the same scores over the scenario's own tokens (the ones its walk reads),
    the induction score only where its tokens end in a
    run said twice (`first`, `repeat`; else null), every head of its layer; and whether its mask
    is causal. The JSON: `scenario`, `mode`, `tokens`, `first`, `repeat`, `heads`."""
    import numpy as np

    from attnwalk.layer.headscores import head_scores, repeated_layout, scores_without_layout
    from attnwalk.layer.walk import compute
    from attnwalk.numbering import shown as person
    from attnwalk.scenario.load import load_scenario

    scn = load_scenario(ref)
    if scn.key_tokens != scn.tokens or scn.m != scn.n:  # keys from another sequence
        raise UsageError(f"--scenario {ref}: its keys are another sequence's (cross-attention); the scores "
                         "are of a head's attention over its own sequence (A[i, i − 1], A[i, i], …)")
    walk = compute(scn, "scaled")
    layout = repeated_layout(scn.tokens)
    heads = []
    for layer, A in enumerate(_layers(walk)):
        scores = head_scores(A, layout) if layout is not None else scores_without_layout(A)
        for h in range(A.shape[0]):
            heads.append({"layer": person(layer), "head": person(h),
                          **{key: float(values[h]) for key, values in scores.items()},
                          **({} if layout is not None else {"induction": None})})
    causal = bool(np.array_equal(scn.allowed, np.tril(np.ones((scn.n, scn.n), dtype=bool))))
    data = {"scenario": scn.name, "mode": walk.mode.name, "tokens": list(scn.tokens), "first": layout and layout.first,
            "repeat": layout and layout.repeat, "heads": heads}
    return data, causal


def _layers(walk) -> list:
    """Each layer's weights of every head, (H, N, N), in order: one per block of the scenario."""
    import numpy as np

    from attnwalk.layer.roles import softmaxes

    return [np.stack([walk.matrix(stage.key, h) for h in range(walk.scenario.heads)])
            for stage in softmaxes(walk.graph)]


def heads_command(*, model: str | None, length: int, seed: int, format: str | None,
                  ascii: bool, lang: str | None, scenario: str | None = None) -> int:
    """Score every head; print the JSON or the screen. Returns the exit code."""
    if format not in (None, "json"):
        raise UsageError(f"--format {format}: heads are written as json only (or shown without --format)")
    if scenario is not None:
        return _scenario_command(scenario, model, length, seed, format, ascii, lang)
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


def _scenario_command(scenario: str, model: str | None, length: int, seed: int, format: str | None,
                      ascii: bool, lang: str | None) -> int:
    if model is not None:
        raise UsageError("--scenario and --model: score one or the other")
    if (length, seed) != (50, 0):
        raise UsageError("--length and --seed draw a model's random tokens; --scenario is scored on the "
                         "scenario's own tokens: drop them")
    data, causal = scenario_heads_data(scenario)
    if format == "json":
        from attnwalk.export.data import to_json
        from attnwalk.terminal.streams import write_out

        write_out(to_json(data) + "\n", json=True)
        return 0
    from attnwalk.render.headscores import scenario_heads_screen
    from attnwalk.render.options import ViewOptions
    from attnwalk.terminal.console import fitted, make_console
    from attnwalk.text import detect_lang

    console = make_console()
    opts = fitted(ViewOptions(precision=2, ascii=ascii, lang=detect_lang(lang)), console)
    console.print(scenario_heads_screen(data, scenario, causal=causal, opts=opts))
    return 0
