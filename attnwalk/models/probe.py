"""`attnwalk heads`' input and its run: the model's start token, then R random ordinary tokens
drawn with a seed, then the same R again; every layer of the model run on it, each layer's
attention weights kept (layer/headscores.py scores them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from attnwalk.models.data import ModelError, Tokenization
from attnwalk.models.model import Model

MAX_REPEAT = 200  # R: the sequence is 2R + 1 tokens, every layer computed on it
# a vocabulary's entries that are markers, not text: [unused3], <unused12>, <0x0A>, <pad>, <mask>
_MARKER = re.compile(r"^(\[[^\]]*\]|<[^<>]*>)$")


@dataclass(frozen=True)
class Probe:
    """The repeated sequence as tokens; the first random token's index (1 after a start token,
    else 0) and R, the random tokens' count."""

    tokens: Tokenization
    first: int
    repeat: int


def start_id(model: Model) -> int | None:
    """The token a sequence of this model starts with: its BOS where it names one, else the
    special token its tokenizer puts first ([CLS]), else none."""
    if model.config.bos is not None and model.config.bos < model.config.vocab_size:
        return model.config.bos
    encoding = model.tokenizer.encode("a")
    if encoding.special_tokens_mask and encoding.special_tokens_mask[0]:
        return encoding.ids[0]
    return None


def ordinary_ids(model: Model) -> np.ndarray:
    """Every id the random tokens are drawn from: in the embedding table and the tokenizer's
    vocabulary, not an added or special token, not a marker such as [unused3] or <0x0A>."""
    tokenizer = model.tokenizer
    added = set(tokenizer.get_added_tokens_decoder())
    size = min(model.config.vocab_size, tokenizer.get_vocab_size(with_added_tokens=True))
    return np.array([i for i in range(size) if i not in added
                     and (piece := tokenizer.id_to_token(i)) is not None and not _MARKER.match(piece)],
                    dtype=np.int64)


def repeated(model: Model, repeat: int, seed: int) -> Probe:
    """The start token, `repeat` distinct random ordinary tokens (numpy's default_rng(seed)), and
    the same tokens again."""
    if not 1 <= repeat <= MAX_REPEAT:
        raise ModelError(f"--length {repeat}: give 1 to {MAX_REPEAT} random tokens (the sequence is "
                         f"them twice, after the start token)")
    start = start_id(model)
    first = 0 if start is None else 1
    usable = model.config.max_positions - (0 if model.config.padding_idx is None else model.config.padding_idx + 1)
    if first + 2 * repeat > usable:
        raise ModelError(f"--length {repeat}: {first + 2 * repeat} tokens, but {model.files.name} reads "
                         f"at most {usable} positions: give at most {(usable - first) // 2}")
    pool = ordinary_ids(model)
    if pool.size < repeat:
        raise ModelError(f"--length {repeat}: {model.files.name} has only {pool.size} ordinary tokens")
    drawn = np.random.default_rng(seed).choice(pool, size=repeat, replace=False)  # (R,)
    ids = ([] if start is None else [start]) + [int(i) for i in drawn] * 2
    pieces = tuple(model.tokenizer.id_to_token(i) for i in ids)
    special = tuple(first == 1 and k == 0 for k in range(len(ids)))
    word_of = tuple(None if s else (k - first) % repeat for k, s in enumerate(special))
    tokens = Tokenization(text=model.tokenizer.decode(ids, skip_special_tokens=False),
                          words=pieces[first:first + repeat], pieces=pieces, ids=tuple(ids),
                          special=special, word_of=word_of, unknown=(False,) * len(ids))
    return Probe(tokens, first, repeat)


def attention_weights(model: Model, probe: Probe) -> Iterator[tuple[np.ndarray, bool]]:
    """Each layer's attention weights in order, (H, N, N), and whether its mask is causal; every
    layer run in full on the probe."""
    model.prepare(model.config.n_layers - 1)  # a GGUF: dequantize each next layer while one runs
    for trace in model.traces(probe.tokens):
        yield trace.attention.A, trace.layer.causal
