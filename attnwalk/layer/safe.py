"""Text from a scenario file, made safe to show: read as text, never obeyed as a command.

Tokens, titles, descriptions, dimension names and notes come from a file anyone may have written.
A control character would act on the reader's terminal instead of being read (ESC [2J clears the
screen, ESC [31m turns everything after it red), a bidirectional override would reorder what
follows it (U+202E makes "gnp.exe" read as "exe.png"), and a zero-width character would hide in a
token that then looks like another ("ba\\u200bnk" for "bank"). `escaped` writes each such
character as its Python escape (\\x1b, \\u202e, \\u200b), as error messages do; every printable
character, Chinese included, stays as it is. (A token that really is the six characters \\u202e looks the same:
the price of showing every such character as plain ASCII.)

It lives in the core, beside the labels (axes.py), because every output reads the labels from
there and every package may import the core.
"""

from __future__ import annotations

import re

# The format characters (Unicode category Cf): invisible, yet each changes what is shown or
# matched. The zero-width space, joiners and word joiner make "ba\u200bnk" look like "bank"; the
# bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F, U+202A-U+202E,
# U+2066-U+2069) reorder what follows them (U+202E makes "gnp.exe" read as "exe.png"); the soft
# hyphen, the byte-order mark, the Arabic number signs, the tags. Listed as of Unicode 15.1.
FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
          "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
          "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
          "\U000e0020-\U000e007f")
# and C0 controls and DEL and C1 controls (U+0080-U+009F: U+009B is a one-character ESC [ on
# some terminals), the line and paragraph separators.
UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{FORMAT}]")
_UNSAFE_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029{FORMAT}]")


def _escape(match: re.Match) -> str:
    return repr(match.group())[1:-1]  # "\x1b", "\u202e", "\t": how Python and the errors write them


def escaped(text: str, keep_newlines: bool = False) -> str:
    """`text` with every control and format character (bidirectional, zero-width) written as its escape;
    with keep_newlines, "\\n" stays a line break (descriptions, whole documents)."""
    pattern = _UNSAFE_BUT_NEWLINE if keep_newlines else UNSAFE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def is_safe(text: str, keep_newlines: bool = False) -> bool:
    """True when `text` holds nothing `escaped` would change."""
    return (_UNSAFE_BUT_NEWLINE if keep_newlines else UNSAFE).search(text) is None


# What json.dumps(ensure_ascii=False) leaves raw of the above (it writes U+0000-U+001F as \u
# escapes itself): DEL, the C1 controls, the line and paragraph separators, the format characters.
_RAW_IN_JSON = re.compile(f"[\x7f-\x9f\u2028\u2029{FORMAT}]")


def json_escaped(text: str) -> str:
    """JSON text (json.dumps with ensure_ascii=False) with every character a terminal or an editor
    would obey or hide written as its \\u escape: the same JSON, safe to `cat` (a script still
    reads back each string exactly)."""
    if not _RAW_IN_JSON.search(text):
        return text
    import json

    return _RAW_IN_JSON.sub(lambda match: json.dumps(match.group())[1:-1], text)  # a surrogate pair beyond U+FFFF


# OWASP's rule against CSV injection: a spreadsheet reads a cell that begins with = + - @ (or a tab
# or carriage return before one) as a formula, and runs it (=cmd|' /C calc'!A0, =HYPERLINK(...)).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A plain number, as Python's repr or a person writes one (-0.25, +3, 1e-05, -inf, nan): a
# spreadsheet reads it as that number, never as a formula, so it is written as it is.
_NUMBER = r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|nan)"  # compiled (and cached) by re on use


def spreadsheet_cell(text: str) -> str:
    """A text cell of a CSV file, safe to open in a spreadsheet: one that begins with = + - @, a
    tab or a carriage return gets a leading apostrophe (OWASP), so it is shown, not computed. The
    rule is on text cells only, and a cell that is a plain number (-0.25, -inf) stays as it is:
    a negative number in an export must stay a number a spreadsheet can add up."""
    if text.startswith(_FORMULA_START) and not re.fullmatch(_NUMBER, text, re.IGNORECASE):
        return "'" + text
    return text
