"""The body of `attnwalk model "SENTENCE"`: one attention layer of a real model on the learner's
sentence, walked, exported, compared or quizzed exactly as a scenario is.

A `models.data.ModelLayer` becomes a Scenario (tokens, embeddings, weights, mask) carrying the
layer itself for the stages only a real model has (features/model/); from there the walk,
the stepper, the exports, compare and the quiz are the scenario's own code paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer.masks import Mask
from attnwalk.layer.rope import Rope
from attnwalk.scenario.scenario import Scenario, Sequence
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.models.data import ModelLayer


def scenario_from_model(layer: ModelLayer) -> Scenario:
    """The Scenario a model's layer is walked as: the pieces as tokens (special ones included), the
    token embeddings as E, the learned positions as an explicit P (the Llama family: none, P = 0,
    and rotary positions with the model's own θ_i), the in × out weights and their biases, the
    grouped K/V heads, the causal mask; the focus on the last word piece (not [SEP] or [CLS])."""
    info, tokens = layer.info, layer.tokens
    if layer.scale is not None and abs(layer.scale - info.d_head ** 0.5) > 1e-12 * layer.scale:
        raise UsageError(f"{info.name}: its scores are divided by {layer.scale:g}, not √d_head = "
                         f"{info.d_head ** 0.5:g}: the walk divides by √d_k only")
    n = len(tokens.pieces)
    ids = tuple(int(i) for i in tokens.ids)
    E = np.asarray(layer.E_tok, dtype=np.float64)
    if layer.rope is not None:  # Llama, Qwen2, Mistral: nothing added to E; q and k are turned
        main = Sequence(tokens=tokens.readable, E=E, positional="rope", ids=ids)
        rope = Rope(base=float(layer.rope.theta), pairing=layer.rope.pairing,
                    freqs=tuple(float(f) for f in layer.rope.freqs), scaling=layer.rope.scaling)
    else:
        main = Sequence(tokens=tokens.readable, E=E, positional="explicit", P_given=layer.E_pos,
                        ids=ids)
        rope = None
    allowed = np.tril(np.ones((n, n), dtype=bool)) if layer.causal else np.ones((n, n), dtype=bool)
    mask = Mask("causal") if layer.causal else None
    window = layer.window if layer.window is not None and layer.window < n else None
    if window is not None:  # Mistral's sliding window, where the sentence is longer than it
        allowed &= np.triu(np.ones((n, n), dtype=bool), 1 - window)  # 0 ≤ i − j < window
        mask = Mask("window", window, True)
    # the focus: the first piece of the last word ("bank" of "river bank"), else the last token
    last_word = max((w for w in tokens.word_of if w is not None), default=None)
    focus = None if last_word is None else tokens.word_of.index(last_word)
    heads = info.n_heads
    # the columns of the norm's statistics, and of the all-heads stage (heads from 1)
    stats = {"rms": {"": ("RMS",)}} if layer.norm_in.kind == "rmsnorm" else {"stats": {"": ("μ", "σ")}}
    settings = {"model": layer, **({"mask": mask} if mask else {}), **({"rope": rope} if rope else {})}
    biases = {name: bias for name, bias in (("b_Q", layer.b_Q), ("b_K", layer.b_K), ("b_V", layer.b_V),
                                            ("b_O", layer.b_O)) if bias is not None}
    return Scenario(
        name=f"{info.name} L{person(layer.layer)}" + (f" {info.quantized}" if info.quantized else ""), main=main,
        W_Q=layer.W_Q, W_K=layer.W_K, W_V=layer.W_V, W_O=layer.W_O, allowed=allowed, heads=heads,
        kv_heads=info.n_kv_heads if info.n_kv_heads < heads else 0,
        label=f"model {info.name}", focus=focus, settings=settings, params=biases,
        dimensions={**stats, "h": {"": tuple(str(person(h)) for h in range(heads))}})


def scenario_with_next(found) -> Scenario:
    """The Scenario of `found` (models.nexttoken.NextToken): the walked layer's, with its MLP as
    the FFN feature's stages (its weights as W_1, b_1, W_2, b_2, W_gate) and the next token's
    stages after them (features/model/nexttoken.py); the rows of the last are the 10 likeliest
    tokens, each "text" and id."""
    from dataclasses import replace

    base = scenario_from_model(found.layer)
    mlp = found.mlp
    params = {name: value for name, value in (("W_1", mlp.W_1), ("b_1", mlp.b_1), ("W_2", mlp.W_2),
                                              ("b_2", mlp.b_2), ("W_gate", mlp.W_gate)) if value is not None}
    kind = "gelu" if mlp.kind == "gelu" else "swiglu"  # Gemma's GeGLU: SwiGLU's stages, its gate's φ changed
    rows = tuple(f'"{shown_token(text)}" {token_id}' for text, token_id in zip(found.texts, found.top()))
    return replace(base, settings={**base.settings, "ffn": kind, "next": found},
                   params={**base.params, **params},
                   dimensions={**base.dimensions, "top": {"": rows},
                               "ℓ, T": {"": ("ℓ", "p T=0.5", "p T=1", "p T=2")}})


def shown_token(text: str) -> str:
    """A token's text on one line: a newline, tab or other control character as its escape."""
    return "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in text)


def check_request(sentence: str, layer: int) -> None:
    """A sentence to walk and a layer counted from 1, checked before any model is read."""
    if not sentence.strip():
        raise UsageError('give a sentence to walk, e.g. attnwalk model "I sat by the river bank"')
    if layer < 1:
        raise UsageError(f"--layer {layer}: layers are numbered from 1")


def load_next(sentence: str, model: str | None, layer: int, quantize: str | None = None):
    """--next: layer `layer` (1-based) of `model` on `sentence`, walked on to the next token
    (models.nexttoken.NextToken)."""
    from attnwalk.models import load

    return load.next_token(sentence, model, layer - 1, quantize)


def load_layer(sentence: str, model: str | None, layer: int, quantize: str | None = None) -> ModelLayer:
    """The layer `layer` (1-based, as --layer counts) of `model` on `sentence` (models/); with
    `quantize`, its weight matrices quantized to that type by gguf's quantizer."""
    from attnwalk.models import load  # safetensors and tokenizers: only the model command reads them

    return load.model_layer(sentence, model, layer - 1, quantize)


def model_data(walk, head: int) -> dict:
    """`export --format json`'s contract for a model walk: the scenario export, with E, P, X, Q,
    K, V, QK^T, S, A, Z the chosen head's (Q, K, V its column blocks), `stages.heads` every head's,
    the model's own stages under their keys, the biases and LayerNorm parameters beside the
    weights, and what was walked (`model`, `tokenization`)."""
    from attnwalk.export.data import walk_data
    from attnwalk.features.model.layout import layer_of

    scn = walk.scenario
    layer = layer_of(scn)  # the ModelLayer scenario_from_model put in it
    data = walk_data(walk)
    stages = data["stages"]
    if scn.heads > 1:  # walk_data keeps the full-width Q, K, V; the contract is one head's
        chosen = stages["heads"][head]
        shown = {s.key for s in walk.stages if s.exported}  # the tiled stage's entry is its blocks' data
        for key, value in chosen.items():  # its stages at the top, as one head's; a feature's own
            (stages if key in shown else data)[key] = value  # data (--tiles' blocks) beside them
    weights = data["weights"]
    for name in ("b_Q", "b_K", "b_V", "b_O"):
        if name in scn.params:
            weights[name] = scn.params[name].tolist()
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
                     "file_bytes": info.file_bytes, "file_format": info.file_format,
                     "quantized": info.quantized}
    if layer.stored:  # a GGUF (or --quantize): how each attention weight is stored
        data["model"]["stored"] = {name: {"type": w.kind, "block": w.info.block_size, "bits": w.info.bits}
                                   for name, w in layer.stored.items()}
    tok = layer.tokens
    data["tokenization"] = {"text": tok.text, "words": list(tok.words), "pieces": list(tok.pieces),
                            "ids": list(tok.ids), "special": list(tok.special),
                            "word_of": list(tok.word_of), "unknown": list(tok.unknown)}
    return data


def model_command(*, sentence: str, model: str | None, layer: int, head: str | None, mode: str,
                  no_pause: bool, precision: int, ascii: bool, save: str | None, lang: str | None,
                  resume: bool, predict: bool, format: str | None, output: str | None,
                  compare: bool, quiz: bool, count: int | None, tiles: int | None = None,
                  at: str | None = None, decode: bool = False, quantize: str | None = None,
                  next_token: bool = False) -> int:
    """Walk (or export, compare, quiz, decode) one layer of a real model; returns the exit code.
    --tiles adds
    the tiled stage to the walk, the export and the compare as a scenario's --tiles does; --at
    projects the cost panel of the walk and the comparison."""
    # --compare, --quiz and --decode are three different things to do with the layer; --format says
    # how the chosen one is written (an export when none is chosen), -o where
    if sum((compare, quiz, decode)) > 1:
        raise UsageError("give at most one of --compare, --quiz and --decode (--format then says how "
                         "the one you chose is written)")
    written = {"--compare": ("json",), "--quiz": ("json", "markdown"), "--decode": ("json",)}
    for option, chosen in (("--compare", compare), ("--quiz", quiz), ("--decode", decode)):
        if chosen and format not in (None, *written[option]):
            raise UsageError(f"{option} --format {format}: {option[2:]} is written as "
                             f"{' or '.join(written[option])} only (or shown on screen without --format)")
    if decode and (tiles is not None or predict or resume):
        option = "--tiles" if tiles is not None else "--predict" if predict else "--resume"
        raise UsageError(f"{option} works on the walk of the layer, not with --decode (which steps the "
                         f"KV cache token by token): leave out one of them")
    if at is not None and (format is not None or quiz or decode):
        raise UsageError("--at projects the cost panel of the walk and of --compare; it has no place "
                         "in an export, the quiz or --decode")
    if next_token and (compare or quiz or decode or predict or tiles is not None):
        option = next(o for o, on in (("--compare", compare), ("--quiz", quiz), ("--decode", decode),
                                      ("--predict", predict), ("--tiles", tiles is not None)) if on)
        raise UsageError(f"--next walks the layer on to the next token; {option} works on the layer "
                         f"alone: leave out one of them")
    if output is not None and format is None:
        raise UsageError("--output writes what --format prints: add --format json (or markdown, latex, "
                         "csv for an export)")
    if count is not None and not quiz:
        raise UsageError("--count sets how many questions --quiz asks: add --quiz")
    check_request(sentence, layer)
    from attnwalk.features.tiles import with_tiles
    from attnwalk.layer.axes import pick_head

    if output is not None:  # checked before the model is read
        from attnwalk.commands.output import output_path

        output_path(output, "--output", f"layer.{'md' if format == 'markdown' else format}")
    emit = _emitter(output)
    if quantize is not None and compare:  # the same layer at float and quantized, side by side
        return _quantized_pair(sentence, model, layer, quantize, head, mode, format,
                               precision, ascii, lang, emit)
    if next_token:
        scenario = scenario_with_next(load_next(sentence, model, layer, quantize))
    else:
        loaded = load_layer(sentence, model, layer) if quantize is None else \
            load_layer(sentence, model, layer, quantize=quantize)
        scenario = with_tiles(scenario_from_model(loaded), tiles)
    if decode:
        return _decode(scenario, mode, head, format, no_pause, precision, ascii, lang, save, emit)
    if compare and format is not None:
        return _compare_json(scenario, pick_head(scenario, head), emit)
    if quiz:
        from attnwalk.commands.quiz import quiz_command

        return quiz_command(name=None, scenario_file=None, count=count, seed=None, lang=lang,
                            scenario=scenario, format=format,
                            write=None if format is None else (lambda sheet: emit(sheet, format == "json")))
    if format is not None:
        from attnwalk.commands.export import export_walk

        chosen = pick_head(scenario, head)
        return export_walk(scenario, format=format, mode=mode, lang=lang, precision=precision, output=output,
                           data=lambda walk: model_data(walk, chosen))
    if compare:
        return _compare(scenario, pick_head(scenario, head), precision, ascii, lang, at)
    from attnwalk.commands.walk import walk_command

    return walk_command(name=None, scenario_file=None, mode=mode, no_pause=no_pause,
                        precision=precision, ascii=ascii, save=save, lang=lang, resume=resume,
                        head=head, predict=predict, scenario=scenario, at=at)


def _quantized_pair(sentence: str, model: str | None, layer: int, quantize: str, head: str | None,
                    mode: str, format: str | None, precision: int, ascii: bool, lang: str | None,
                    emit) -> int:
    """--quantize KIND --compare: the layer as stored (left) and with every weight matrix through
    gguf's quantizer (right), every stage side by side, as `attnwalk compare A B` sets two
    scenarios: what 4 bits do to W_Q, Q, the scores and A."""
    from attnwalk.layer.axes import pick_head
    from attnwalk.layer.pair import compare_pair, pair_data

    left = scenario_from_model(load_layer(sentence, model, layer))
    right = scenario_from_model(load_layer(sentence, model, layer, quantize=quantize))
    result = compare_pair(left, right, mode, 1.0, pick_head(left, head))
    if format is not None:
        from attnwalk.export.data import to_json

        emit(to_json(pair_data(result)) + "\n", True)
        return 0
    from attnwalk.render.options import ViewOptions
    from attnwalk.render.pairview import pair_view
    from attnwalk.terminal.console import fitted, make_console
    from attnwalk.text import detect_lang

    console = make_console()
    console.print(pair_view(result, fitted(ViewOptions(precision=precision, ascii=ascii,
                                                       lang=detect_lang(lang)), console)))
    return 0


def _emitter(output: str | None):
    """What prints a result: stdout (as its encoding can hold it), or with -o the file, written
    whole or not at all, never onto a file this command read."""
    from attnwalk.terminal.streams import write_out

    if output is None:
        return lambda content, is_json: write_out(content, json=is_json)

    def to_file(content: str, is_json: bool) -> None:
        from attnwalk.commands.output import check_not_input, write_output

        check_not_input(output, "--output")  # the model's files are read by now
        write_output(output, content, option="--output")
    return to_file


def _decode(scenario: Scenario, mode: str, head: str | None, format: str | None, no_pause: bool,
            precision: int, ascii: bool, lang: str | None, save: str | None, emit) -> int:
    """--decode: the layer's KV cache stepped (or written as JSON) by `attnwalk decode`'s own code;
    a bidirectional model (BERT) is refused there, as a scenario without a causal mask is."""
    from attnwalk.commands.decode import decode_command, decode_json

    if format == "json":
        if save is not None:
            raise UsageError("--save records the screens; with --format json redirect the output instead")
        emit(decode_json(name=None, scenario_file=None, mode=mode, head=head, scenario=scenario), True)
        return 0
    return decode_command(name=None, scenario_file=None, mode=mode, no_pause=no_pause, precision=precision,
                          ascii=ascii, lang=lang, head=head, save=save, scenario=scenario)


def _compare_json(scenario: Scenario, head: int, emit) -> int:
    """--compare --format json: `attnwalk compare --format json`'s contract for the layer's head."""
    from attnwalk.export.data import to_json
    from attnwalk.layer.compare import compare, comparison_data

    emit(to_json(comparison_data(compare(scenario, (), 1.0, head))) + "\n", True)
    return 0


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
