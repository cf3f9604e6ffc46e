"""Text from a scenario file, made safe to show: read as text, never obeyed as a command.

Tokens, titles, descriptions, dimension names and notes come from a file anyone may have written.
A control character would act on the reader's terminal instead of being read (ESC [2J clears the
screen, ESC [31m turns everything after it red), and a bidirectional override would reorder what
follows it (U+202E makes "gnp.exe" read as "exe.png"). `escaped` writes each such character as
its Python escape (\\x1b, \\u202e), as error messages do; every printable character, Chinese
included, stays as it is. (A token that really is the six characters \\u202e looks the same:
the price of showing every such character as plain ASCII.)

It lives in the core, beside the labels (axes.py), because every output reads the labels from
there and every package may import the core.
"""

from __future__ import annotations

import re

# C0 controls and DEL and C1 controls (U+0080-U+009F: U+009B is a one-character ESC [ on some
# terminals), the line and paragraph separators, and the bidirectional formatting characters:
# the Arabic letter mark, LRM and RLM, the embeddings and overrides U+202A-U+202E and the
# isolates U+2066-U+2069.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                                 "\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    return repr(match.group())[1:-1]  # "\x1b", "\u202e", "\t": how Python and the errors write them


def escaped(text: str, keep_newlines: bool = False) -> str:
    """`text` with every control and bidirectional-formatting character written as its escape;
    with keep_newlines, "\\n" stays a line break (descriptions, whole documents)."""
    pattern = _UNSAFE_BUT_NEWLINE if keep_newlines else UNSAFE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def is_safe(text: str, keep_newlines: bool = False) -> bool:
    """True when `text` holds nothing `escaped` would change."""
    return (_UNSAFE_BUT_NEWLINE if keep_newlines else UNSAFE).search(text) is None
