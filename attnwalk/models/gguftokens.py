"""The tokenizer a GGUF file describes in its `tokenizer.ggml.*` metadata, built with the
`tokenizers` library, so tokens.py cuts the learner's sentence as it cuts one with tokenizer.json.

Two kinds, as `tokenizer.ggml.model` names them:
- "gpt2": byte-level BPE with the file's merges (GPT-2, SmolLM, Llama 3, Qwen2); the split before
  the merges is the one `tokenizer.ggml.pre` names (Llama 3's and Qwen2's regex, SmolLM's digits
  one by one, else GPT-2's own);
- "llama": a SentencePiece vocabulary with scores (Llama 2, Mistral): BPE over "▁"-spaced text
  with byte fallback, its merges recovered from the scores as transformers does.
Tokens the file marks as control (type 3: <|im_start|>, <s>) are kept whole and count as special;
BOS and EOS are added where `tokenizer.ggml.add_bos_token` / `add_eos_token` say so.
"""

from __future__ import annotations

from pathlib import Path

from attnwalk.models.data import ModelError

CONTROL = 3
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLITS = {"llama3": _LLAMA3, "llama-v3": _LLAMA3, "llama-bpe": _LLAMA3, "smaug-bpe": _LLAMA3,
          "qwen2": _QWEN2, "deepseek-r1-qwen": _QWEN2}
GPT2_LIKE = (None, "default", "gpt2", "gpt-2", "smollm")


def gguf_tokenizer(fields: dict, path: Path):
    """tokenizers.Tokenizer from the metadata, or a one-line ModelError naming what is missing."""
    kind = fields.get("tokenizer.ggml.model")
    tokens = fields.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ModelError(f"{path}: no tokenizer.ggml.tokens: the file carries no vocabulary to cut "
                         f"the sentence with")
    if kind not in ("gpt2", "llama"):
        raise ModelError(f"{path}: tokenizer.ggml.model {_said(kind)} is not a tokenizer attnwalk builds "
                         f"(it builds gpt2, byte-level BPE, and llama, SentencePiece BPE)")
    if not all(isinstance(token, str) for token in tokens):
        raise ModelError(f"{path}: tokenizer.ggml.tokens holds something that is not a string")
    if len(set(tokens)) != len(tokens):  # llama.cpp refuses such a vocabulary too (one id a token)
        seen: dict[str, int] = {}
        first, again = next((seen[t], i) for i, t in enumerate(tokens) if seen.setdefault(t, i) != i)
        raise ModelError(f"{path}: tokenizer.ggml.tokens holds the token {_said(tokens[first])} twice "
                         f"(ids {first} and {again}): a vocabulary names each token once")
    try:
        tokenizer = (_byte_level if kind == "gpt2" else _sentencepiece)(fields, tokens, path)
        _mark_control(tokenizer, fields, tokens)
        _add_bos_eos(tokenizer, fields, tokens, default_bos=kind == "llama")
    except ModelError:
        raise
    except Exception as err:  # tokenizers raises a bare Exception: a merge of tokens not in the vocabulary
        raise ModelError(f"{path}: its tokenizer.ggml.tokens and tokenizer.ggml.merges do not fit "
                         f"together, so no tokenizer can be built from them ({_said(err)}): the "
                         "file's vocabulary was changed or cut") from None
    return tokenizer


def _said(value: object) -> str:
    """A value from the file, or the tokenizers library's words about it, for a message line: its
    first line, cut to 120 characters, every control or bidirectional character escaped."""
    from attnwalk.layer.safe import escaped

    text = str(value).splitlines()[0] if str(value) else type(value).__name__
    text = text if isinstance(value, BaseException) else repr(value)
    return escaped(text if len(text) <= 120 else text[:120] + "…")


def _byte_level(fields: dict, tokens: list[str], path: Path):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    merges = fields.get("tokenizer.ggml.merges")
    if not isinstance(merges, list):
        raise ModelError(f"{path}: a gpt2 tokenizer without tokenizer.ggml.merges")
    pre = fields.get("tokenizer.ggml.pre")
    vocab = {token: index for index, token in enumerate(tokens)}
    if not all(isinstance(merge, str) and " " in merge for merge in merges):
        raise ModelError(f"{path}: tokenizer.ggml.merges holds an entry that is not two tokens "
                         "joined by a space")
    pairs = [tuple(merge.split(" ", 1)) for merge in merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=False))
    if pre in SPLITS:  # Llama 3, Qwen2: their own split, then bytes as characters
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(SPLITS[pre]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif pre == "smollm":  # llama.cpp's smollm: every digit alone, then GPT-2's split
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False)])
    elif pre in GPT2_LIKE:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        raise ModelError(f"{path}: tokenizer.ggml.pre {pre!r} is a split attnwalk does not know, so "
                         f"it cannot cut the sentence as the model was trained to (it knows "
                         f"{', '.join(sorted({*SPLITS, 'gpt2', 'smollm'}))})")
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _sentencepiece(fields: dict, tokens: list[str], path: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    scores = fields.get("tokenizer.ggml.scores")
    if not isinstance(scores, list) or len(scores) != len(tokens):
        raise ModelError(f"{path}: a SentencePiece vocabulary needs tokenizer.ggml.scores, one per token")
    ranks = dict(zip(tokens, scores))
    if str(fields.get("general.architecture", "")).startswith("gemma"):
        # Gemma's files store a token of several spaces as spaces ("  "), which its text spells
        # "▁▁"; and its merges follow the tokens' order in the file, not their scores (as
        # transformers' gemma_tokenizer rebuilds them)
        tokens = ["▁" * len(t) if " " in t and not t.strip() else t for t in tokens]
        ranks = {token: -index for index, token in enumerate(tokens)}
    vocab = {token: index for index, token in enumerate(tokens)}
    merges = fields.get("tokenizer.ggml.merges")
    pairs = ([tuple(m.split(" ", 1)) for m in merges] if isinstance(merges, list)
             else _merges_from_scores(vocab, ranks))
    unk = fields.get("tokenizer.ggml.unknown_token_id", 0)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=True, byte_fallback=True,
                                     unk_token=tokens[unk] if isinstance(unk, int) and unk < len(tokens) else None))
    prefix = fields.get("tokenizer.ggml.add_space_prefix", True)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="first" if prefix else "never", split=False)
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                           decoders.Fuse()])
    return tokenizer


def _merges_from_scores(vocab: dict[str, int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """SentencePiece keeps scores, not merges: every way to cut a token into two tokens is a merge,
    the merged token's score its rank (higher first), as transformers' generate_merges recovers them."""
    merges = []
    for token, score in scores.items():
        local = [(token[:i], token[i:], score) for i in range(1, len(token))
                 if token[:i] in vocab and token[i:] in vocab]
        merges.extend(sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in merges]


def _mark_control(tokenizer, fields: dict, tokens: list[str]) -> None:
    from tokenizers import AddedToken

    types = fields.get("tokenizer.ggml.token_type")
    if not isinstance(types, list):
        return
    control = [AddedToken(token, normalized=False, special=True)
               for token, kind in zip(tokens, types) if kind == CONTROL]
    if control:
        tokenizer.add_special_tokens(control)


def _add_bos_eos(tokenizer, fields: dict, tokens: list[str], default_bos: bool) -> None:
    from tokenizers import processors

    single, specials = "$A", []
    for flag, key, default, place in (("add_bos_token", "bos_token_id", default_bos, "before"),
                                      ("add_eos_token", "eos_token_id", False, "after")):
        index = fields.get(f"tokenizer.ggml.{key}")
        if fields.get(f"tokenizer.ggml.{flag}", default) and isinstance(index, int) and index < len(tokens):
            single = f"{tokens[index]} {single}" if place == "before" else f"{single} {tokens[index]}"
            specials.append((tokens[index], index))
    if specials:
        tokenizer.post_processor = processors.TemplateProcessing(single=single, special_tokens=specials)
