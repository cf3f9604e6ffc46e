"""From a walked layer to the next token (`attnwalk model --next`): that layer's feed-forward with
every piece kept, the remaining layers run in full, the final norm and the LM head on the last
position, in float64 as transformers' causal LMs compute them (GPT2LMHeadModel, LlamaForCausalLM,
Gemma3ForCausalLM): logits = final_norm(h_n) · W_Uᵀ, W_U the lm_head weight or, tied, the token
embedding table. Only the last row is projected, in slices of the vocabulary, so a 49,152-token
head costs one (d_model × vocab) product and a few MB at a time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnwalk.layer.ops import softmax
from attnwalk.models.blocks import Attention, layer_norm, rms_norm
from attnwalk.models.data import Mlp, ModelError, ModelLayer, Norm, Tokenization
from attnwalk.models.tokens import token_text
from attnwalk.numbering import shown

# family -> its final norm's tensor (GPT-2's ln_f is a LayerNorm with β; the others RMSNorms)
FINAL = {"gpt2": "ln_f", "llama": "norm", "gemma3": "norm"}
TEMPERATURES = (0.5, 1.0, 2.0)
TOP = 10
SLICE = 8192  # vocabulary rows of the LM head read at a time


@dataclass(frozen=True)
class NextToken:
    """The walked layer, its feed-forward, and the model's prediction after the last layer."""

    layer: ModelLayer                 # the walked layer (its attention's walk)
    attention: Attention
    mlp: Mlp                          # the walked layer's feed-forward, every piece
    remaining: int                    # how many layers ran in full after it
    final: Norm                       # the final norm of the last layer's output, (n, d_model)
    head: str                         # "lm_head" | "tied" (the token embedding table)
    logits: np.ndarray                # (vocab,) the last position's
    texts: tuple[str, ...] = ()       # the top tokens as a reader sees them (tokens.token_text)
    rows: np.ndarray | None = None    # (TOP, d_model) the top tokens' rows of the LM head

    def top(self, k: int = TOP) -> np.ndarray:
        """The k token ids of highest logit, highest first (ties: the lower id first)."""
        return top_ids(self.logits, k)


def check_causal(model) -> None:
    """A ModelError unless the model predicts a next token (a family with a final norm and an LM
    head attnwalk reads): BERT and its kin are encoders."""
    if model.config.family not in FINAL:
        raise ModelError(f"--next: {model.info.name} is an encoder ({model.config.model_type}: it reads "
                         f"both ways and has no LM head); give a causal LM such as GPT-2, SmolLM2 or Gemma 3")


def next_token(model, tokens: Tokenization, layer: int) -> NextToken:
    """`model` (models.model.Model) on `tokens`: layer `layer` (0-based) and every layer after it
    in full, the final norm and the LM head on the last token."""
    check_causal(model)
    model.prepare(model.config.n_layers)  # a GGUF: every layer's tensors, feed-forward included
    walked = None
    for trace in model.traces(tokens):
        if trace.layer.layer == layer:
            walked = trace
        stream = trace.out
    if walked is None:
        raise ModelError(f"layer {shown(layer)}: {model.info.name} has {model.config.n_layers} layers")
    final = final_norm(model, stream)
    tied, logits = head_logits(model, final.y[-1])
    ids = top_ids(logits, TOP)
    texts = tuple(token_text(model.tokenizer, int(i)) for i in ids)
    name = model.family_anchor if tied else "lm_head.weight"
    rows = np.concatenate([model.weights.row_span(name, (model.config.vocab_size, model.config.d_model),
                                               "vocab_size × hidden_size", int(i), int(i) + 1) for i in ids])
    return NextToken(walked.layer, walked.attention, walked.mlp, model.config.n_layers - 1 - layer,
                     final, "tied" if tied else "lm_head", logits, texts, rows)


def final_norm(model, h: np.ndarray) -> Norm:
    """The family's norm after the last layer, on rows h (n, d_model)."""
    cfg, w, name = model.config, model.weights, FINAL[model.config.family]
    gamma = w.get(name + ".weight", (cfg.d_model,), "hidden size")
    if cfg.family == "gpt2":
        return layer_norm(h, gamma, w.get(name + ".bias", (cfg.d_model,), "n_embd"), cfg.eps)
    return rms_norm(h, gamma, cfg.eps)


def head_logits(model, x: np.ndarray) -> tuple[bool, np.ndarray]:
    """(tied, logits): x (d_model,) against every row of the LM head, a slice of rows at a time."""
    cfg, w = model.config, model.weights
    tied = cfg.tied if cfg.tied is not None else not w.has("lm_head.weight")
    name = model.family_anchor if tied else "lm_head.weight"
    if not tied and not w.has(name):
        raise ModelError(f"{model.info.name}: its config says tie_word_embeddings false, but the file "
                         f"holds no lm_head.weight: the LM head is missing")
    shape, why = (cfg.vocab_size, cfg.d_model), "vocab_size × hidden_size"
    parts = [w.row_span(name, shape, why, start, min(start + SLICE, cfg.vocab_size)) @ x  # (rows, d) @ (d,)
             for start in range(0, cfg.vocab_size, SLICE)]
    return tied, np.concatenate(parts)


def top_ids(logits: np.ndarray, k: int) -> np.ndarray:
    """The k ids of highest logit, highest first; equal logits in id order (a stable sort)."""
    return np.argsort(-logits, kind="stable")[:k]


def probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(ℓ / T) over the whole vocabulary, float64."""
    return softmax(logits / temperature)
