"""The body of `attnwalk model "SENTENCE"`: one attention layer of a real model on the learner's
sentence, walked, exported, compared or quizzed exactly as a scenario is.

A `models.data.ModelLayer` becomes a Scenario (tokens, embeddings, weights, mask) carrying the
layer itself for the stages only a real model has (layer/realmodel.py); from there the walk,
the stepper, the exports, compare and the quiz are the scenario's own code paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer.rope import Rope
from attnwalk.scenario.model import Scenario, Sequence

if TYPE_CHECKING:
    from attnwalk.models.data import ModelLayer


def scenario_from_model(layer: ModelLayer) -> Scenario:
    """The Scenario a model's layer is walked as: the pieces as tokens (special ones included), the
    token embeddings as E, the learned positions as an explicit P (the Llama family: none, P = 0,
    and rotary positions with the model's own θ_i), the in × out weights and their biases, the
    grouped K/V heads, the causal mask; the focus on the last word piece (not [SEP] or [CLS])."""
    info, tokens = layer.info, layer.tokens
    n = len(tokens.pieces)
    ids = tuple(int(i) for i in tokens.ids)
    E = np.asarray(layer.E_tok, dtype=np.float64)
    if layer.rope is not None:  # Llama, Qwen2, Mistral: nothing added to E; q and k are turned
        main = Sequence(tokens=tuple(tokens.pieces), E=E, positional="rope", ids=ids)
        rope = Rope(base=float(layer.rope.theta), pairing=layer.rope.pairing,
                    freqs=tuple(float(f) for f in layer.rope.freqs), scaling=layer.rope.scaling)
    else:
        main = Sequence(tokens=tuple(tokens.pieces), E=E, positional="explicit", P_given=layer.E_pos,
                        ids=ids)
        rope = None
    allowed = np.tril(np.ones((n, n), dtype=bool)) if layer.causal else np.ones((n, n), dtype=bool)
    mask_kind = "causal" if layer.causal else "none"
    window = layer.window if layer.window is not None and layer.window < n else None
    if window is not None:  # Mistral's sliding window, where the sentence is longer than it
        allowed &= np.triu(np.ones((n, n), dtype=bool), 1 - window)  # 0 ≤ i − j < window
        mask_kind = "window"
    # the focus: the first piece of the last word ("bank" of "river bank"), else the last token
    last_word = max((w for w in tokens.word_of if w is not None), default=None)
    focus = None if last_word is None else tokens.word_of.index(last_word)
    heads = info.n_heads
    # the columns of the norm's statistics, and of the all-heads stage (heads from 1)
    stats = {"rms": {"": ("RMS",)}} if layer.norm_in.kind == "rmsnorm" else {"stats": {"": ("μ", "σ")}}
    return Scenario(
        name=f"{info.name} L{layer.layer + 1}", main=main, W_Q=layer.W_Q, W_K=layer.W_K,
        W_V=layer.W_V, W_O=layer.W_O, b_Q=layer.b_Q, b_K=layer.b_K, b_V=layer.b_V, b_O=layer.b_O,
        mask_kind=mask_kind, allowed=allowed, window=window, window_causal=window is not None, heads=heads,
        kv_heads=info.n_kv_heads if info.n_kv_heads < heads else 0, rope=rope,
        label=f"model {info.name}", focus=focus, model=layer,
        dimensions={**stats, "h": {"": tuple(str(h + 1) for h in range(heads))}})


def load_layer(sentence: str, model: str | None, layer: int) -> ModelLayer:
    """The layer `layer` (1-based, as --layer counts) of `model` on `sentence` (models/)."""
    from attnwalk.models import load  # safetensors and tokenizers: only the model command reads them

    return load.model_layer(sentence, model, layer - 1)


def model_data(walk, head: int) -> dict:
    """`export --format json`'s contract for a model walk: the scenario export, with E, P, X, Q,
    K, V, QK^T, S, A, Z the chosen head's (Q, K, V its column blocks), `stages.heads` every head's,
    the model's own stages under their keys, the biases and LayerNorm parameters beside the
    weights, and what was walked (`model`, `tokenization`)."""
    from attnwalk.export.data import walk_data

    scn = walk.scenario
    layer = scn.model
    data = walk_data(walk)
    stages = data["stages"]
    if scn.heads > 1:  # walk_data keeps the full-width Q, K, V; the contract is one head's
        chosen = stages["heads"][head]
        for key in ("Q", "K", "V", "Q_rot", "K_rot", "QK^T", "S", "A", "Z"):
            if key in chosen:  # Q_rot, K_rot: the Llama family's rotary positions
                stages[key] = chosen[key]
        if "tiled" in chosen:  # --tiles: the chosen head's online softmax at the top, as one head's
            data["tiled"] = chosen["tiled"]
    weights = data["weights"]
    for name in ("b_Q", "b_K", "b_V", "b_O"):
        if getattr(scn, name) is not None:
            weights[name] = getattr(scn, name).tolist()
    if layer.norm_in is not None and layer.norm_in.kind == "rmsnorm":  # no β: its own key, "RMS_in"
        weights["RMS_in"] = {"gamma": layer.norm_in.gamma.tolist(), "eps": layer.norm_in.eps}
    elif layer.norm_in is not None:
        weights["LN_in"] = {"gamma": layer.norm_in.gamma.tolist(), "beta": None if layer.norm_in.beta is None
                            else layer.norm_in.beta.tolist(), "eps": layer.norm_in.eps}
    if layer.rope is not None:  # θ_i as the walk turned q and k (after any rope_scaling)
        data["rope"] = {"theta": layer.rope.theta, "pairing": layer.rope.pairing,
                        "scaling": layer.rope.scaling, "freqs": layer.rope.freqs.tolist()}
    if layer.norm_after is not None:
        gamma, beta, eps = layer.norm_after
        weights["LN_after"] = {"gamma": gamma.tolist(), "beta": beta.tolist(), "eps": eps}
    info = layer.info
    data["model"] = {"name": info.name, "source": info.source, "family": info.family,
                     "model_type": info.model_type, "layer": layer.layer + 1, "head": head + 1,
                     "n_layers": info.n_layers, "n_heads": info.n_heads, "n_kv_heads": info.n_kv_heads,
                     "d_model": info.d_model,
                     "d_head": info.d_head, "vocab_size": info.vocab_size, "n_params": info.n_params,
                     "file_bytes": info.file_bytes}
    tok = layer.tokens
    data["tokenization"] = {"text": tok.text, "words": list(tok.words), "pieces": list(tok.pieces),
                            "ids": list(tok.ids), "special": list(tok.special),
                            "word_of": list(tok.word_of)}
    return data


def model_command(*, sentence: str, model: str | None, layer: int, head: str | None, mode: str,
                  no_pause: bool, precision: int, ascii: bool, save: str | None, lang: str | None,
                  resume: bool, predict: bool, format: str | None, output: str | None,
                  compare: bool, quiz: bool, count: int | None, tiles: int | None = None,
                  at: str | None = None, decode: bool = False) -> int:
    """Walk (or export, compare, quiz, decode) one layer of a real model; returns the exit code.
    --tiles adds
    the tiled stage to the walk, the export and the compare as a scenario's --tiles does; --at
    projects the cost panel of the walk and the comparison."""
    if sum((format is not None and not decode, compare, quiz, decode)) > 1:
        raise UsageError("give at most one of --format, --compare, --quiz and --decode")
    if decode and format not in (None, "json"):
        raise UsageError(f"--decode --format {format}: decoding is written as json only "
                         "(or walked on screen without --format)")
    if decode and (tiles is not None or predict or resume):
        option = "--tiles" if tiles is not None else "--predict" if predict else "--resume"
        raise UsageError(f"{option} works on the walk of the layer, not with --decode (which steps the "
                         f"KV cache token by token): leave out one of them")
    if at is not None and (format is not None or quiz or decode):
        raise UsageError("--at projects the cost panel of the walk and of --compare; it has no place "
                         "in an export, the quiz or --decode")
    if output is not None and format is None:
        raise UsageError("--output writes an export: add --format json, markdown, latex or csv")
    if count is not None and not quiz:
        raise UsageError("--count sets how many questions --quiz asks: add --quiz")
    if not sentence.strip():
        raise UsageError('give a sentence to walk, e.g. attnwalk model "I sat by the river bank"')
    if layer < 1:
        raise UsageError(f"--layer {layer}: layers are numbered from 1")
    from attnwalk.layer.axes import pick_head
    from attnwalk.scenario.tiles import with_tiles

    scenario = with_tiles(scenario_from_model(load_layer(sentence, model, layer)), tiles)
    if decode:
        from attnwalk.commands.decode import decode_command

        return decode_command(name=None, scenario_file=None, mode=mode, no_pause=no_pause, precision=precision,
                              ascii=ascii, lang=lang, head=head, save=save, scenario=scenario,
                              format=format or "text")
    if format is not None:
        from attnwalk.commands.export import export_walk

        chosen = pick_head(scenario, head)
        return export_walk(scenario, format=format, mode=mode, lang=lang, precision=precision, output=output,
                           data=lambda walk: model_data(walk, chosen))
    if compare:
        return _compare(scenario, pick_head(scenario, head), precision, ascii, lang, at)
    if quiz:
        from attnwalk.commands.quiz import quiz_command

        return quiz_command(name=None, scenario_file=None, count=count, seed=None, lang=lang,
                            scenario=scenario)
    from attnwalk.commands.walk import walk_command

    return walk_command(name=None, scenario_file=None, mode=mode, no_pause=no_pause,
                        precision=precision, ascii=ascii, save=save, lang=lang, resume=resume,
                        head=head, predict=predict, scenario=scenario, at=at)


def _compare(scenario: Scenario, head: int, precision: int, ascii: bool, lang: str | None,
             at: str | None = None) -> int:
    """scaled, unscaled and uniform for one real head, as `attnwalk compare` shows a scenario."""
    from attnwalk.layer.compare import compare
    from attnwalk.render.compareview import compare_view
    from attnwalk.render.options import ViewOptions
    from attnwalk.terminal.console import fitted, make_console
    from attnwalk.text import detect_lang

    from attnwalk.commands.compare import check_bounds

    check_bounds(scenario, 1, [], "text")
    console = make_console()
    opts = fitted(ViewOptions(precision=precision, ascii=ascii, lang=detect_lang(lang)), console)
    if at is not None:
        from attnwalk.layer.cost import projected_dims

        opts = opts.with_(at=projected_dims(scenario, at))
    console.print(compare_view(compare(scenario, (), 1.0, head), opts))
    return 0
