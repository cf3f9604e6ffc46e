"""The screen a real model's walk opens with: which model, how big, which layer and head, and how
its tokenizer cut the learner's sentence (words, pieces, the special tokens it added)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.features.model.layout import layer_of
from attnwalk.layer.safe import escaped
from attnwalk.layer.walk import Walk
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose
from attnwalk.numbering import shown as person


def count_text(count: int) -> str:
    """22,713,216 parameters as a person reads them: 22.7 M; below a million, as is."""
    for unit, size in (("G", 10 ** 9), ("M", 10 ** 6)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:,}"


def bytes_text(size: int) -> str:
    """A file's size: MiB to one decimal (1 MiB = 1024 × 1024 bytes, as ls -h counts), else KiB."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    return f"{max(size, 0) / 1024:.1f} KiB"


def model_title(walk: Walk, opts: ViewOptions) -> str | None:
    """"all-MiniLM-L6-v2 · layer 1 of 6 · 12 heads": the opening's title, and the interactive
    walk's first message; None for a scenario not taken from a real model."""
    layer = layer_of(walk.scenario)
    if layer is None:
        return None
    info = layer.info
    return style.say(opts, "model.opening.title", name=escaped(info.name), layer=person(layer.layer),
                     layers=info.n_layers, heads=info.n_heads)


def model_opening(walk: Walk, opts: ViewOptions) -> RenderableType | None:
    """The model, its size, the layer walked and its heads, and the tokenization; None for a
    scenario not taken from a real model."""
    layer = layer_of(walk.scenario)
    if layer is None:
        return None
    info, tok = layer.info, layer.tokens
    say = lambda key, **values: style.say(opts, f"model.opening.{key}", **values)  # noqa: E731
    dot = f" {style.markers(opts).dot} "
    facts = [
        *[Prose(line) for line in _family(layer, say, opts)],
        Prose(say("size", params=count_text(info.n_params), size=bytes_text(info.file_bytes),
                  d_model=info.d_model, heads=info.n_heads, d_head=info.d_head,
                  vocab=f"{info.vocab_size:,}"), style=style.NOTE),
        *[Prose(line, style=style.NOTE) for line in stored_lines(layer, opts)],
        Prose(say("source", source=escaped(info.source)), style=style.NOTE),
        Text(""),
    ]
    grid = FastTable.grid(padding=(0, 2))
    grid.add_column(style=style.LABEL, no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(Text(say("sentence")), Text(escaped(tok.text)))
    grid.add_row(Text(say("words")), Text(dot.join(escaped(w.strip() or w) for w in tok.words)))
    grid.add_row(Text(say("pieces")), Text(dot.join(escaped(p) for p in tok.readable)))
    added = [escaped(p) for p, special in zip(tok.pieces, tok.special) if special]
    grid.add_row(Text(say("added")), Text(", ".join(added) if added else say("none_added")))
    cuts = _cuts(tok)
    grid.add_row(Text(say("cut")), Prose(style.plain("; ".join(cuts), opts) if cuts else say("no_split")))
    unknown = [i for i, u in enumerate(tok.unknown) if u]
    if unknown:  # the vocabulary has no piece for them: one embedding for all, whatever they were
        words = [tok.words[tok.word_of[i]] for i in unknown if tok.word_of[i] is not None]
        grid.add_row(Text(say("unknown_label")), Prose(say(
            "unknown", count=len(unknown), total=sum(1 for s in tok.special if not s), piece=escaped(tok.pieces[unknown[0]]),
            words=style.say(opts, "ui.list_sep").join(dict.fromkeys(escaped(w) for w in words)))))
    title = model_title(walk, opts)
    return Panel(Group(*facts, grid), title=Text(style.plain(title, opts), style=style.SCREEN_TITLE),
                 title_align="left", box=style.panel_box(opts), border_style=style.PANEL_BORDER)


def stored_lines(layer, opts: ViewOptions) -> list[str]:
    """A GGUF's storage: the file against float32, and each attention weight's type ("W_Q, W_K,
    W_V: Q4_1, 32 weights a block, 5 bits a weight on disk"), weights of one type on one line."""
    if not layer.stored:
        return []
    info = layer.info
    if info.quantized:  # --quantize: put through gguf's quantizer here, not stored so
        lines = [style.say(opts, "quant.opening.quantized", kind=info.quantized)]
    else:
        lines = [style.say(opts, "quant.opening.stored", size=bytes_text(info.file_bytes),
                           float32=bytes_text(4 * info.n_params), params=count_text(info.n_params))]
    kinds: dict[str, list[str]] = {}
    for name, weight in layer.stored.items():
        kinds.setdefault(weight.kind, []).append(name)
    for kind, names in kinds.items():
        weight = layer.stored[names[0]].info
        key = "float_weights" if weight.block_size == 1 else "weights"
        lines.append(style.say(opts, f"quant.opening.{key}", names=", ".join(names), kind=kind,
                               block=weight.block_size, bits=f"{weight.bits:g}"))
    return lines


def _family(layer, say, opts: ViewOptions) -> list[str]:
    """The family in a sentence; for the Llama family its RoPE θ, K/V heads and RMSNorm ε, and
    what this model adds (Q/K/V biases, rescaled frequencies)."""
    info = layer.info
    if info.family == "gemma3":
        return _gemma3(layer, opts)
    if info.family != "llama":
        return [say(f"family_{info.family}", model_type=escaped(info.model_type))]
    lines = [style.say(opts, "model.opening.llama.family", model_type=escaped(info.model_type),
                       theta=f"{layer.rope.theta:g}", kv_heads=info.n_kv_heads, heads=info.n_heads,
                       eps=f"{layer.norm_in.eps:g}")]
    if layer.b_Q is not None:  # Qwen2
        lines.append(style.say(opts, "model.opening.llama.qkv_bias"))
    if layer.window is not None:  # Mistral: the mask stage shows the band where the sentence is longer
        within = len(layer.tokens.ids) <= layer.window
        lines.append(style.say(opts, "model.opening.llama.window_within" if within
                               else "model.opening.llama.window", window=layer.window,
                               before=layer.window - 1, n=len(layer.tokens.ids)))
    if layer.rope.scaling is not None:  # Llama 3.1
        lines.append(style.say(opts, "model.opening.llama.rope_scaled", scaling=layer.rope.scaling))
    return lines


def _gemma3(layer, opts: ViewOptions) -> list[str]:
    """Gemma 3: the family, then this layer's kind (sliding or global), its window and RoPE base,
    read from the layer; and what the file did not say, if anything (the model's own notes)."""
    info, say = layer.info, (lambda key, **v: style.say(opts, f"model.opening.gemma3.{key}", **v))
    lines = [say("family", model_type=escaped(info.model_type), eps=f"{layer.norm_in.eps:g}",
                 kv_heads=info.n_kv_heads, heads=info.n_heads, scalar=f"{layer.scale ** 2:g}")]
    every, local, assumed = layer.gemma if layer.gemma is not None else (None, None, ())
    if layer.kind == "sliding":
        lines.append(say("sliding", layer=person(layer.layer), before=layer.window - 1, window=layer.window,
                         theta=f"{layer.rope.theta:g}", n=len(layer.tokens.ids)))
    else:
        lines.append(say("global", layer=person(layer.layer), every=every, theta=f"{layer.rope.theta:g}"))
    if assumed:
        lines.append(say("assumed", every=every, local=f"{local:g}"))
    return lines


def _cuts(tok) -> list[str]:
    """"banks → bank + ##s" for each word the tokenizer cut into several pieces."""
    pieces: dict[int, list[str]] = {}
    for piece, word in zip(tok.readable, tok.word_of):
        if word is not None:
            pieces.setdefault(word, []).append(piece)
    return [f"{escaped(tok.words[w].strip() or tok.words[w])} → {' + '.join(escaped(p) for p in ps)}"
            for w, ps in sorted(pieces.items()) if len(ps) > 1]
