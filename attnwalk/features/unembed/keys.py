"""Reading the unembedding's keys (vocab, W_U or tie_embeddings with vocab_embeddings, the final
norm, temperature, top_k) into its setting and parameters; the tokens' embeddings looked up in the
vocabulary's table when the file leaves them out (`fill`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.numbering import shown
from attnwalk.reading.fields import quoted, shape_text, whole
from attnwalk.reading.yamltree import Node, indexed

if TYPE_CHECKING:
    from attnwalk.reading.fields import Fields
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "unembed"
KEYS = ("vocab", "W_U", "tie_embeddings", "vocab_embeddings", "final_norm", "final_norm_gamma",
        "final_norm_beta", "final_norm_eps", "temperature", "top_k")
NORMS = ("layer", "rms")
TOP_K = 5


class Unembed(NamedTuple):
    vocab: tuple[str, ...]
    tied: bool = False  # W_U = vocab_embeddingsᵀ
    temperature: float = 1.0
    top_k: int = TOP_K
    norm: str | None = None  # "layer" | "rms" | None
    eps: float = 1e-5

    @property
    def table(self) -> str:
        """The parameter the logits are made with: W_U, or the tied embedding table."""
        return "vocab_embeddings" if self.tied else "W_U"


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def setting(scn: Scenario) -> Unembed:
    return scn.setting(NAME) or Unembed(("",))  # (the text of a layer without it: explain, checks)


def token_ids(scn: Scenario) -> list[int]:
    """Each token's id: its place in the vocabulary (the loader has checked every token is in it)."""
    vocab = setting(scn).vocab
    return [vocab.index(tok) for tok in scn.tokens]


# -- reading the keys --------------------------------------------------------------------------------


def _vocab(f: Fields, top: dict[str, Node]) -> tuple[str, ...]:
    vocab = f.strings(top["vocab"], "vocab")
    seen: dict[str, int] = {}
    for i, word in enumerate(vocab):
        if word in seen:
            raise f.error(indexed("vocab", i), top["vocab"].value[i], f"{quoted(word, 20)} is in the "
                          f"vocabulary twice (entries {shown(seen[word])} and {shown(i)}); each word has one id")
        seen[word] = i
    return vocab


def _ids(f: Fields, top: dict[str, Node], vocab: tuple[str, ...]) -> list[int]:
    """Each token's id: its place in the vocabulary. A token not in it is refused."""
    tokens = f.strings(top["tokens"], "tokens")
    ids = []
    for i, tok in enumerate(tokens):
        if tok not in vocab:
            listed = ", ".join(quoted(w, 20) for w in vocab[:12]) + (", …" if len(vocab) > 12 else "")
            raise f.error(indexed("tokens", i), top["tokens"].value[i], f"the token {quoted(tok, 20)} is "
                          f"not in vocab ({listed}); add it to vocab, or change the token")
        ids.append(vocab.index(tok))
    return ids


def fill(f: Fields, top: dict[str, Node]) -> None:
    """Before the tokens are read: with a vocabulary and its embedding table and no `embeddings`,
    the tokens' embeddings are the table's rows at their ids (E = EmbeddingTable[ids])."""
    if "embeddings" in top or "vocab_embeddings" not in top or "vocab" not in top or "tokens" not in top:
        return
    vocab = _vocab(f, top)
    table = _table_given(f, top, len(vocab))
    node = top["vocab_embeddings"]
    rows = [Node([Node(float(x), node.line) for x in table[i]], node.line) for i in _ids(f, top, vocab)]
    top["embeddings"] = Node(rows, node.line)


def _table_given(f: Fields, top: dict[str, Node], size: int) -> np.ndarray:
    table = f.matrix(top["vocab_embeddings"], "vocab_embeddings")
    if table.shape[0] != size:
        raise f.error("vocab_embeddings", top["vocab_embeddings"], f"vocab_embeddings has "
                      f"{table.shape[0]} rows, but vocab has {size} words: one row per word")
    return table


def read(d: Draft) -> None:
    f, top = d.f, d.top
    if "vocab" not in top:
        for key in KEYS[1:]:
            if key in top:
                raise f.error(key, top[key], f"{key} belongs to the unembedding, which needs the "
                              "vocabulary: add vocab: [WORD, …] (and W_U, or tie_embeddings with "
                              "vocab_embeddings), or remove it")
        return
    vocab = _vocab(f, top)
    ids = _ids(f, top, vocab)
    if d.main.ids is not None and list(d.main.ids) != ids:
        raise f.error("ids", top["ids"], f"ids are {list(d.main.ids)}, but the tokens' places in vocab "
                      f"are {ids} (counted from 0): with a vocabulary a token's id is its place in it; "
                      "remove ids, or make them agree")
    d_model = d.main.d_model
    width = d_model if d.W_O is not None or d.heads * d.d_v == d_model else d.heads * d.d_v
    tied = f.boolean(top["tie_embeddings"], "tie_embeddings") if "tie_embeddings" in top else False
    table = _table_given(f, top, len(vocab)) if "vocab_embeddings" in top else None
    if table is not None:
        if table.shape[1] != d_model:
            raise f.error("vocab_embeddings", top["vocab_embeddings"], f"vocab_embeddings has "
                          f"{table.shape[1]} columns, but d_model is {d_model} (embeddings have "
                          f"{d_model} columns)")
        _agree(f, top, d.main.E, table, ids, d.main.tokens)
        d.params["vocab_embeddings"] = table
    if tied:
        if "W_U" in top:
            raise f.error("W_U", top["W_U"], "tie_embeddings: true makes W_U the embedding table "
                          "transposed (vocab_embeddingsᵀ); remove W_U, or tie_embeddings")
        if table is None:
            raise f.error("tie_embeddings", top["tie_embeddings"], "tie_embeddings: true reads W_U as "
                          f"vocab_embeddingsᵀ: give vocab_embeddings, |vocab| × d_model = {len(vocab)} × {d_model}")
        if width != d_model:
            raise f.error("tie_embeddings", top["tie_embeddings"], f"the block's output is {width} wide "
                          f"(h·d_v, with no W_O), but the embedding table's rows are d_model = {d_model}: "
                          "tied, the output must be d_model wide; add W_O")
    else:
        if "W_U" not in top:
            raise f.error("vocab", top["vocab"], "the vocabulary needs its unembedding: give W_U "
                          f"(d_model × |vocab| = {width} × {len(vocab)}), or tie_embeddings: true "
                          "with vocab_embeddings")
        W_U = f.matrix(top["W_U"], "W_U")
        if W_U.shape != (width, len(vocab)):
            rows = "d_model" if width == d_model else "h·d_v (the output is concat, no W_O)"
            raise f.error("W_U", top["W_U"], f"W_U is {shape_text(W_U)}, but it must be "
                          f"{rows} × |vocab| = {width} × {len(vocab)}")
        d.params["W_U"] = W_U
    temperature = 1.0
    if "temperature" in top:
        temperature = f.number(top["temperature"], "temperature")
        if not temperature > 0:
            raise f.error("temperature", top["temperature"], f"temperature must be above 0, got "
                          f"{temperature:g}: p = softmax(ℓ / T) divides by it (1 leaves the logits as they are)")
    top_k = min(TOP_K, len(vocab))
    if "top_k" in top:
        top_k = f.integer(top["top_k"], "top_k", minimum=1)
        if top_k > len(vocab):
            raise f.error("top_k", top["top_k"], f"top_k is {whole(top_k)}, but vocab has only "
                          f"{len(vocab)} words")
    norm, eps = _final_norm(d, width)
    d.settings[NAME] = Unembed(vocab, tied, temperature, top_k, norm, eps)


def _agree(f: Fields, top: dict[str, Node], E: np.ndarray, table: np.ndarray, ids: list[int],
           tokens: tuple[str, ...]) -> None:
    """The tokens' embeddings, where the file gives both, are the table's rows at their ids."""
    for i, j in enumerate(ids):
        if not np.array_equal(E[i], table[j]):
            node = top["embeddings"]
            at = node.value[i] if isinstance(node.value, list) and i < len(node.value) else node
            raise f.error(indexed("embeddings", i), at, f"{quoted(tokens[i], 20)}'s embedding is not "
                          f"row {shown(j)} of vocab_embeddings ({quoted(tokens[i], 20)}'s row): a token's "
                          "embedding is the table's row; remove embeddings to look them up, or make them agree")


def _final_norm(d: Draft, width: int) -> tuple[str | None, float]:
    f, top = d.f, d.top
    if "final_norm" not in top:
        for key in ("final_norm_gamma", "final_norm_beta", "final_norm_eps"):
            if key in top:
                raise f.error(key, top[key], f"{key} is only used with final_norm: layer or rms; "
                              "remove it, or add final_norm")
        return None, 1e-5
    kind = f.choice(top["final_norm"], "final_norm", NORMS)
    eps = 1e-5
    if "final_norm_eps" in top:
        eps = f.number(top["final_norm_eps"], "final_norm_eps")
        if not eps > 0:
            raise f.error("final_norm_eps", top["final_norm_eps"], f"final_norm_eps must be above 0, "
                          f"got {eps:g} (1e-5 is usual)")
    from attnwalk.features.norm import gamma_beta

    d.params.update(gamma_beta(f, top, ("final_norm_gamma", "final_norm_beta"), kind, width,
                               "the block's output has {width} columns: one for each", "final_norm: layer"))
    return kind, eps



def draft_vocab(d: Draft) -> tuple[str, ...] | None:
    """The vocabulary a file being read gives (a next-token target reads its ids), else None."""
    u = d.settings.get(NAME)
    return None if u is None else u.vocab
