"""The unembedding: from the block's output to the next token, as GPT-2's and Llama's heads do it.

    vocab: [the, river, bank, …]          the vocabulary, a word per id (0-based, in this order)
    W_U: MATRIX                           d_model × |vocab| (GPT-2's and Llama's lm_head, transposed)
    tie_embeddings: true                  W_U = vocab_embeddingsᵀ instead (GPT-2, Gemma: tied)
    vocab_embeddings: MATRIX              |vocab| × d_model: the embedding table; the tokens'
                                          `embeddings` are its rows when the file leaves them out
    final_norm: layer | rms               a norm before the head (GPT-2's ln_f, Llama's norm):
    final_norm_gamma, final_norm_beta,    γ, β (ones, zeros) and ε (1e-5), as `norm:`'s
    final_norm_eps
    temperature: 1                        p = softmax(ℓ / T)
    top_k: 5                              how many of the likeliest next tokens the walk lists

The stages: LN_f (with a final norm), logits ℓ = Y · W_U (one row per position, one column per
word of the vocabulary) and p = softmax(ℓ / T). Row i of p is the distribution of the token
AFTER position i. They read the block's output (the last block's, when there are several).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.features.unembed.keys import (KEYS, NAME, NORMS, TOP_K, Unembed, active, draft_vocab,  # noqa: F401
                                            fill, read, setting, token_ids)
from attnwalk.features.unembed.stages import STAGES, VOCAB, extend  # noqa: F401
from attnwalk.layer import nexttoken, roles

if TYPE_CHECKING:
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.scenario import Scenario

COURSE_AFTER = {"next_token": "backprop"}  # its lesson: after the first loss and gradient


def dimension_names(scn: Scenario, dim: str) -> tuple[str, ...] | None:
    """The logits' and probabilities' columns are the vocabulary's words."""
    return setting(scn).vocab if dim == VOCAB and active(scn) else None


def dimension_sizes(scn: Scenario) -> dict[str, int]:
    """How wide the vocabulary's columns are (an export's size is counted before it is made)."""
    return {VOCAB: len(setting(scn).vocab)}

# -- what the walk, the export and the loss read ---------------------------------------------------


def temperature(scn: Scenario) -> float:
    return setting(scn).temperature


def trained_keys(scn: Scenario) -> dict[str, Any]:
    """`train -o` of tied embeddings: the tokens' embeddings are the trained table's rows, as the
    trained walk looked them up (the loader refuses embeddings that disagree with the table)."""
    if not setting(scn).tied:
        return {}
    table = np.asarray(scn.param("vocab_embeddings"), dtype=np.float64)
    return {"embeddings": table[token_ids(scn)].tolist()}


def vocabulary(scn: Scenario) -> tuple[str, ...]:
    return setting(scn).vocab


def logits_of(walk: Walk) -> np.ndarray:
    """ℓ, (n, |vocab|): the stage the probabilities read."""
    return walk.mats[roles.next_logits(walk.computed).key]


def ranked(walk: Walk, row: int, temperatures: tuple[float, ...] = nexttoken.TEMPERATURES) -> dict[str, Any]:
    """Row `row`'s next tokens, the likeliest first (ties: the earlier id first), the top k of
    them: each one's token, id, logit and p at each temperature (and at the scenario's), and
    "p_top_k": p at the scenario's T renormalised over the top k, what top-k sampling draws from."""
    u = setting(walk.scenario)
    logits = logits_of(walk)[row]
    order = nexttoken.top_k(logits, u.top_k)
    ps = {T: nexttoken.softmax_t(logits[None, :], T)[0] for T in (*temperatures, u.temperature)}
    kept = float(sum(ps[u.temperature][j] for j in order))  # Σ of the top k's p at T
    return {"temperatures": list(temperatures), "temperature": u.temperature, "top_k": u.top_k,
            "next": [{"token": u.vocab[j], "id": int(j), "logit": float(logits[j]),
                      "p": float(ps[u.temperature][j]), "p_at": [float(ps[T][j]) for T in temperatures],
                      "p_top_k": float(ps[u.temperature][j]) / kept}
                     for j in order]}


def export(walk: Walk, data: dict[str, Any]) -> None:
    """The vocabulary, T and k, and for every position the top k next tokens ({token, id, logit,
    p}, as `model --next` writes a model's last position); "next" is the last position's."""
    from attnwalk.layer.axes import token_labels

    u = setting(walk.scenario)
    rows = []
    for i, tok in enumerate(token_labels(walk.scenario.tokens)):
        top = ranked(walk, i)["next"]
        rows.append({"position": i + 1, "token": tok,
                     "next": [{k: v for k, v in item.items() if k not in ("p_at", "p_top_k")}
                              for item in top]})
    data["unembedding"] = {"vocab": list(u.vocab), "tied": u.tied, "temperature": u.temperature,
                           "top_k": u.top_k, "final_norm": u.norm, "positions": rows}
    data["next"] = rows[-1]["next"]


def note_values(scn: Scenario) -> dict[str, Any]:
    u = setting(scn)
    return {"vocab_size": len(u.vocab), "temperature": f"{u.temperature:g}", "top_k": u.top_k}
