"""The one call the model command makes: a sentence, a model (a directory, a cached hub name or
None for the default) and a 0-based layer in; the ModelLayer its walk needs out. Every failure is a
one-line ModelError (exit 2) that numbers layers from 1, as --layer does."""

from __future__ import annotations

from attnwalk.models.data import ModelLayer
from attnwalk.models.model import layer_index, open_model


def model_layer(sentence: str, model: str | None, layer: int, quantize: str | None = None) -> ModelLayer:
    """Layer `layer` (0-based) of `model` on `sentence`, the layers before it run in full; with
    `quantize`, every weight matrix quantized to that type first (quantize.py)."""
    opened = open_model(model, quantize)
    index = layer_index(opened.info, layer + 1)  # checked before the sentence is computed
    opened.prepare(index)  # a GGUF's weights are dequantized while the tokenizer is built
    return opened.layer(opened.tokenize(sentence), index)


def next_token(sentence: str, model: str | None, layer: int, quantize: str | None = None):
    """`attnwalk model --next`: layer `layer` (0-based) of `model` on `sentence` with its
    feed-forward, the layers after it, the final norm and the LM head (nexttoken.NextToken). An
    encoder (BERT) is refused before any layer is run."""
    from attnwalk.models.nexttoken import check_causal, next_token as run

    opened = open_model(model, quantize)
    index = layer_index(opened.info, layer + 1)
    check_causal(opened)
    return run(opened, opened.tokenize(sentence), index)
