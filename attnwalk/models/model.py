"""One model opened for walking: its files found, config read, weights opened lazily and its
tokenizer loaded; any layer of it computed on a sentence, the earlier layers run in full."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from attnwalk.models import bert, gemma3, gpt2, llama
from attnwalk.models.blocks import Attention, attend
from attnwalk.models.config import Config, read_config
from attnwalk.models.data import Mlp, ModelError, ModelInfo, ModelLayer, Tokenization
from attnwalk.models.find import ModelFiles, find_model
from attnwalk.models.tokens import load_tokenizer, tokenize
from attnwalk.models.weights import Weights
from attnwalk.numbering import shown as person


# family -> (a tensor every checkpoint of it has, to find the task-head prefix; its computation)
FAMILIES = {"bert": (bert.ANCHOR, bert.Bert), "gpt2": (gpt2.ANCHOR, gpt2.Gpt2),
            "llama": (llama.ANCHOR, llama.Llama), "gemma3": (gemma3.ANCHOR, gemma3.Gemma3)}


@dataclass(frozen=True)
class LayerTrace:
    """A layer computed whole: what the walk shows (layer), its attention, and its output (the
    next layer's input: BERT's after the output LayerNorm, GPT-2's and Llama's the residual stream)."""

    layer: ModelLayer
    attention: Attention
    out: np.ndarray  # (n, d_model)
    mlp: Mlp | None = None  # its feed-forward, every piece (the causal families; BERT: None)


class Model:
    """A model ready to tokenize sentences and compute its layers."""

    def __init__(self, files: ModelFiles, quantize: str | None = None) -> None:
        self.files = files
        if files.gguf is not None:  # one file: its metadata is the config and the tokenizer
            from attnwalk.models.ggufmodel import open_gguf

            self.config, self.weights, self._tokenizer = open_gguf(files.gguf)
            self._built = None
        else:
            self.config = read_config(files.config)
            self.weights = Weights(files.weights, FAMILIES[self.config.family][0])
            self._built = load_tokenizer(files.tokenizer)  # a broken tokenizer.json fails here
        if quantize is not None:  # --quantize: the weight matrices through gguf's quantizer
            from attnwalk.models.quantize import QuantizedWeights, check_kind

            self.weights = QuantizedWeights(self.weights, check_kind(quantize), self.config.family)
        self.family = FAMILIES[self.config.family][1](self.weights, self.config)
        cfg = self.config
        self.info = ModelInfo(name=files.name, source=files.source, family=cfg.family,
                              model_type=cfg.model_type, n_layers=cfg.n_layers, n_heads=cfg.n_heads,
                              n_kv_heads=cfg.n_kv_heads, d_model=cfg.d_model, d_head=cfg.d_head,
                              vocab_size=cfg.vocab_size, n_params=self.weights.n_params(),
                              file_bytes=self.weights.file_bytes,
                              file_format="gguf" if files.gguf is not None else "safetensors",
                              quantized=None if quantize is None else quantize.upper())

    @property
    def family_anchor(self) -> str:
        """The family's token embedding table (what a tied LM head reads)."""
        return FAMILIES[self.config.family][0]

    @property
    def tokenizer(self):
        """The model's tokenizer, built on first use (a GGUF's from its metadata, ~0.2 s for
        49,152 tokens, while the weights' threads already dequantize: see prepare)."""
        if self._built is None:
            self._built = self._tokenizer()
        return self._built

    def prepare(self, layer: int) -> None:
        """Layer `layer` (0-based) will be computed: a GGUF starts dequantizing its weights now."""
        if hasattr(self.weights, "plan"):
            self.weights.plan(layer)

    def tokenize(self, text: str) -> Tokenization:
        # RoBERTa's positions start at padding_idx + 1, so its table holds that many fewer tokens
        usable = self.config.max_positions - (0 if self.config.padding_idx is None else self.config.padding_idx + 1)
        return tokenize(self.tokenizer, text, self.config.vocab_size, usable, self.files.name)

    def layer(self, tokens: Tokenization, layer: int) -> ModelLayer:
        """Layer `layer` (0-based) on these tokens: what its walk needs. The layers before it run
        in full; its own feed-forward is neither read nor run."""
        self._check(layer)
        self.prepare(layer)  # a GGUF: dequantize the next layer while one is computed
        embedded, state = self._start(tokens)
        for l in range(layer):
            state = self.family.finish(l, attend(self._layer(tokens, embedded, l, state)))
        return self._layer(tokens, embedded, layer, state)

    def trace(self, tokens: Tokenization, layer: int) -> LayerTrace:
        """Layer `layer` (0-based) computed whole, the earlier ones run to reach its input."""
        self._check(layer)
        for trace in self.traces(tokens):
            if trace.layer.layer == layer:
                return trace
        raise AssertionError("unreachable: traces yields every layer")

    def traces(self, tokens: Tokenization) -> Iterator[LayerTrace]:
        """Every layer in order, each computed from the one before (lazily: stop when you like,
        and the later layers' tensors are never read)."""
        embedded, state = self._start(tokens)
        for l in range(self.config.n_layers):
            ml = self._layer(tokens, embedded, l, state)
            attention = attend(ml)
            mlp = self.family.mlp(l, attention) if hasattr(self.family, "mlp") else None
            state = self.family.finish(l, attention) if mlp is None else mlp.Y
            yield LayerTrace(ml, attention, state.y if hasattr(state, "y") else state, mlp)

    def _check(self, layer: int) -> None:
        if not 0 <= layer < self.config.n_layers:
            raise ModelError(f"layer {person(layer)}: {self.files.name} has {self.config.n_layers} "
                             f"layers (1 to {self.config.n_layers})")

    def _start(self, tokens: Tokenization) -> tuple[dict, object]:
        E_tok, E_pos, E_seg, E_sum = self.family.embed(list(tokens.ids))
        rope = self.family.rope(len(tokens.ids)) if hasattr(self.family, "rope") else None
        embedded = {"E_tok": E_tok, "E_pos": E_pos, "E_seg": E_seg, "E_sum": E_sum, "rope": rope}
        return embedded, self.family.start(E_sum)

    def _layer(self, tokens: Tokenization, embedded: dict, l: int, state) -> ModelLayer:
        fields = self.family.layer(l, state)  # reads (and --quantize quantizes) the layer's weights
        stored = self.weights.stored(l, self.config.d_model) if hasattr(self.weights, "stored") else None
        # a family may give a layer its own rotation (Gemma 3: the local base on sliding layers)
        return ModelLayer(info=self.info, layer=l, tokens=tokens, stored=stored, **{**embedded, **fields})


def open_model(spec: str | None = None, quantize: str | None = None) -> Model:
    """The model `spec` names (a directory, a GGUF file, ollama:NAME or a cached hub name), or the
    default MiniLM package; `quantize` ("q4_1", …) puts its weight matrices through gguf's quantizer."""
    return Model(find_model(spec), quantize)


def layer_index(info: ModelInfo, layer: int) -> int:
    """The CLI's 1-based --layer as a 0-based index, or a ModelError saying the range."""
    if not 1 <= layer <= info.n_layers:
        raise ModelError(f"--layer {layer}: {info.name} has {info.n_layers} layers (1 to {info.n_layers})")
    return layer - 1
