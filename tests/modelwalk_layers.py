"""Small random ModelLayers, BERT-like and GPT-2-like, for the model walk's tests: built here from
numpy alone (the layer a real checkpoint gives is tested in the models package's own tests), each
field made as the models package documents it (models/data.py)."""

from __future__ import annotations

import numpy as np

from attnwalk.models.data import ModelInfo, ModelLayer, Norm, Tokenization

BERT_PIECES = ("[CLS]", "i", "sat", "by", "the", "river", "bank", "##s", "[SEP]")
BERT_WORDS = ("i", "sat", "by", "the", "river", "banks")
GPT2_PIECES = ("I", "Ġsat", "Ġby", "Ġthe", "Ġriver", "Ġbank")
GPT2_WORDS = ("I", " sat", " by", " the", " river", " bank")


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> Norm:
    mean = x.mean(axis=1)
    std = np.sqrt(x.var(axis=1) + eps)
    y = (x - mean[:, None]) / std[:, None] * gamma + beta
    return Norm("layernorm", x, mean, std, gamma, beta, eps, y)


def random_layer(family: str = "bert", *, layer: int = 0, d_model: int = 16, heads: int = 4,
                 seed: int = 0, model_type: str | None = None) -> ModelLayer:
    """`family` bert or gpt2; `model_type` roberta for BERT's layout with RoBERTa's positions."""
    rng = np.random.default_rng(seed)
    bert = family == "bert"
    pieces = BERT_PIECES if bert else GPT2_PIECES
    words = BERT_WORDS if bert else GPT2_WORDS
    special = tuple(p in ("[CLS]", "[SEP]") for p in pieces)
    if bert:
        word_of = (None, 0, 1, 2, 3, 4, 5, 5, None)
    else:
        word_of = tuple(range(len(pieces)))
    n = len(pieces)
    tokens = Tokenization(text="I sat by the river banks" if bert else "I sat by the river bank",
                          words=words, pieces=pieces, ids=tuple(100 + 7 * i for i in range(n)),
                          special=special, word_of=word_of)
    E_tok = rng.normal(0, 0.5, (n, d_model))
    E_pos = rng.normal(0, 0.2, (n, d_model))
    E_seg = np.tile(rng.normal(0, 0.1, d_model), (n, 1)) if bert else None
    E_sum = E_tok + E_pos + (E_seg if E_seg is not None else 0)
    H = E_sum if layer == 0 else rng.normal(0, 1.5, (n, d_model))  # what earlier layers made
    gamma, beta = rng.normal(1, 0.1, d_model), rng.normal(0, 0.1, d_model)
    eps = 1e-12 if bert else 1e-5
    norm_in = layer_norm(H, gamma, beta, eps)
    w = lambda *shape: rng.normal(0, 0.3, shape)  # noqa: E731
    info = ModelInfo(name="tiny-bert" if bert else "tiny-gpt2", source="/tmp/tiny", family=family,
                     model_type=model_type or family, n_layers=3, n_heads=heads, n_kv_heads=heads,
                     d_model=d_model, d_head=d_model // heads, vocab_size=500, n_params=12345,
                     file_bytes=49380)
    norm_after = (rng.normal(1, 0.1, d_model), rng.normal(0, 0.1, d_model), eps) if bert else None
    return ModelLayer(info=info, layer=layer, tokens=tokens, E_tok=E_tok, E_pos=E_pos, E_seg=E_seg,
                      E_sum=E_sum, norm_in=norm_in, X=norm_in.y,
                      W_Q=w(d_model, d_model), b_Q=w(d_model), W_K=w(d_model, d_model), b_K=w(d_model),
                      W_V=w(d_model, d_model), b_V=w(d_model), W_O=w(d_model, d_model), b_O=w(d_model),
                      causal=not bert, residual=norm_in.y if bert else H, norm_after=norm_after)
