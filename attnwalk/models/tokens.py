"""The learner's sentence through the model's own tokenizer.json (the `tokenizers` library), on
its own tokens only: a tokenizer saved to pad (MiniLM pads to 128) or truncate does neither here."""

from __future__ import annotations

from pathlib import Path

from attnwalk.models.data import ModelError, Tokenization


def load_tokenizer(path: Path):
    """tokenizers.Tokenizer from tokenizer.json, with padding and truncation turned off."""
    from tokenizers import Tokenizer  # only when a model is read

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception for a file it cannot parse
        raise ModelError(f"{path}: not a tokenizer.json the tokenizers library reads "
                         f"({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def tokenize(tokenizer, text: str, vocab_size: int, max_positions: int, model: str) -> Tokenization:
    """The sentence's pieces, ids and words; a one-line ModelError when the model cannot read it."""
    encoding = tokenizer.encode(text)
    ids = tuple(encoding.ids)
    # GPT-2's byte-level tokenizer gives blanks tokens of their own; there is still nothing to walk
    if not text.strip() or all(encoding.special_tokens_mask):
        raise ModelError("the sentence has no tokens: give some words to walk")
    if len(ids) > max_positions:
        raise ModelError(f"the sentence is {len(ids)} tokens, but {model} reads at most "
                         f"{max_positions} positions: shorten it")
    if max(ids) >= vocab_size:
        raise ModelError(f"tokenizer.json gives id {max(ids)}, but the model has {vocab_size} token "
                         f"embeddings: the tokenizer is not this model's")
    words, word_of, index = [], [], {}
    spans = _word_spans(encoding)
    for word_id, special in zip(encoding.word_ids, encoding.special_tokens_mask):
        if special or word_id is None:
            word_of.append(None)
            continue
        if word_id not in index:
            index[word_id] = len(words)
            start, end = spans[word_id]
            words.append(text[start:end].strip() or text[start:end])
        word_of.append(index[word_id])
    unk = getattr(tokenizer.model, "unk_token", None)  # WordPiece's [UNK]; byte-level BPE has none
    shown = shown_pieces(tokenizer, tuple(encoding.tokens))
    return Tokenization(text=text, words=tuple(words), pieces=tuple(encoding.tokens), ids=ids,
                        shown=() if shown == tuple(encoding.tokens) else shown,
                        special=tuple(bool(s) for s in encoding.special_tokens_mask),
                        word_of=tuple(word_of),
                        unknown=tuple(bool(unk) and piece == unk and not special
                                      for piece, special in zip(encoding.tokens, encoding.special_tokens_mask)))


def _word_spans(encoding) -> dict[int, tuple[int, int]]:
    """Each word's characters in the learner's text: from its first piece's start to its last's end."""
    spans: dict[int, tuple[int, int]] = {}
    for word_id, (start, end) in zip(encoding.word_ids, encoding.offsets):
        if word_id is None:
            continue
        low, high = spans.get(word_id, (start, end))
        spans[word_id] = (min(low, start), max(high, end))
    return spans


def _byte_of() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character that stands for each byte (Ġ a space)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def token_text(tokenizer, token_id: int) -> str:
    """One token as a reader sees it: its text as the tokenizer decodes it (Ġcat → " cat", ▁cat →
    " cat"); where that is not whole characters (a byte-level piece of a Chinese character) the
    bytes it holds as <0xE6>, as SentencePiece's byte tokens are named."""
    text = tokenizer.decode([token_id], skip_special_tokens=False)
    if "\ufffd" not in text:
        return text
    piece = tokenizer.id_to_token(token_id) or ""
    alphabet = _byte_of()
    if piece and all(ch in alphabet for ch in piece):  # byte-level BPE: each character one byte
        return _bytes_text(bytes(alphabet[ch] for ch in piece))
    return piece  # SentencePiece's own <0xE6>


def shown_pieces(tokenizer, pieces: tuple[str, ...]) -> tuple[str, ...]:
    """The pieces as a reader sees them, as token_text shows a next token: a byte-level BPE piece
    that holds bytes past ASCII (GPT-2's alphabet spells 我's bytes æĪ ĳ) as its whole characters
    and the rest as <0xE6>; its ASCII bytes as the alphabet spells them (Ġcat stays Ġcat). Other
    tokenizers' pieces (WordPiece, SentencePiece) are text already."""
    if type(getattr(tokenizer, "decoder", None)).__name__ != "ByteLevel":
        return pieces
    alphabet = _byte_of()
    spelled = {b: ch for ch, b in alphabet.items()}
    out = []
    for piece in pieces:
        if not piece or not all(ch in alphabet for ch in piece):
            out.append(piece)  # a special token spelled otherwise
            continue
        raw = bytes(alphabet[ch] for ch in piece)
        out.append(piece if raw.isascii() else _bytes_text(raw, spelled))
    return tuple(out)


def _bytes_text(raw: bytes, ascii_as: dict[int, str] | None = None) -> str:
    """Whole UTF-8 characters as themselves (an ASCII byte as `ascii_as` spells it, if given),
    every other byte as <0xE6>."""
    out, i = [], 0
    while i < len(raw):
        if ascii_as is not None and raw[i] < 0x80:
            out.append(ascii_as[raw[i]])
            i += 1
            continue
        for size in (4, 3, 2, 1):
            try:
                out.append(raw[i:i + size].decode("utf-8"))
                i += size
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(f"<0x{raw[i]:02X}>")
            i += 1
    return "".join(out)
