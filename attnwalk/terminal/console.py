"""The terminal attnwalk writes to: one Console factory, so every command treats it the same way.

Rich already honours NO_COLOR (no colours), FORCE_COLOR (colours even when piped) and TERM=dumb
(no escape codes); piped output gets plain text because Rich sees no terminal. On TERM=dumb the
walk does not step either (interactive() is False): it prints every stage once, as piped.

Two guards sit where the text leaves, after every renderer, so no renderer can forget them:
- a control or bidirectional-override character that reached a segment of text (a token, a
  title, a file name) is written escaped (layer/safe.py): only Rich's own control segments carry
  escape codes. The renderers escape labels before laying them out; this catches the rest.
- on an output whose encoding cannot hold the text (PYTHONIOENCODING=ascii, latin-1), symbols
  are spelled as --ascii spells them (→ ->, √ sqrt, box lines - | +) and what still does not fit
  (Chinese) is written as \\uXXXX escapes instead of ending in a UnicodeEncodeError.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from typing import Optional, TextIO

from rich.console import Console
from rich.segment import Segment

from attnwalk.layer.safe import escaped, is_safe

# Unicode characters every screen may draw (rules, boxes, arrows, −∞): when the output's encoding
# cannot write them, the commands draw with --ascii from the start (see wants_ascii).
_PROBE = "─│╭→−∞…√ᵀ×·▲█"

# Set when some character had to be written as an escape for the encoding's sake: the CLI then
# says so once on stderr, so "\u5973" on screen is not taken for the scenario's own text.
escaped_for_encoding = False


def _encodes(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
        return True
    except (UnicodeEncodeError, LookupError):
        return False


def _ascii_char(ch: str) -> str:
    """A box-drawing or block character as ASCII (Rich's own ASCII box uses - | +)."""
    name = unicodedata.name(ch, "")
    if name.startswith("BOX DRAWINGS"):
        return "-" if "HORIZONTAL" in name else "|" if "VERTICAL" in name else "+"
    return "#" if "BLOCK" in name else ch


def fit_encoding(text: str, encoding: str) -> str:
    """`text` as an output in `encoding` can hold it: unchanged when it can; else each character
    it cannot hold spelled as --ascii spells it, and failing that escaped (\\u5973)."""
    if encoding.startswith("utf") or _encodes(text, encoding):
        return text
    from attnwalk.render.style import ascii_spelling  # only on the rare non-UTF output

    global escaped_for_encoding
    out = []
    for ch in text:
        if not _encodes(ch, encoding):
            ch = ascii_spelling(ch)
            if len(ch) == 1:
                ch = _ascii_char(ch)
            if not _encodes(ch, encoding):
                ch = ch.encode(encoding, "backslashreplace").decode(encoding)
                escaped_for_encoding = True
        out.append(ch)
    return "".join(out)


_NON_ASCII = re.compile("[^\x00-\x7f]")


def ascii_json(text: str) -> str:
    """JSON text (export/data.py's to_json) with every character beyond ASCII as a \\u escape:
    the same JSON, for an output whose encoding holds only ASCII (or latin-1). Outside strings
    JSON is ASCII already, so the characters replaced are all inside strings."""
    import json

    return _NON_ASCII.sub(lambda match: json.dumps(match.group())[1:-1], text)  # a surrogate pair beyond U+FFFF


def wants_ascii(console: Console) -> bool:
    """True when the console's output cannot write the Unicode symbols the screens draw with:
    the commands then draw as --ascii does, laid out for it rather than patched afterwards."""
    return not _encodes(_PROBE, console.encoding)


def fitted(opts, console: Console):
    """`opts` (render.options.ViewOptions) for printing on `console`: its width, and the --ascii
    spelling where its output cannot encode the Unicode symbols (wants_ascii)."""
    return opts.with_(width=console.size.width, ascii=opts.ascii or wants_ascii(console))


def _safe(segments: list[Segment], encoding: str) -> list[Segment] | None:
    """`segments` with their text escaped and fitted to `encoding`, or None when nothing needs it
    (checked once over the whole text: the common case costs one join and one search)."""
    text = "".join(seg.text for seg in segments if not seg.control)
    unsafe = not is_safe(text, keep_newlines=True)
    unfit = not encoding.startswith("utf") and not _encodes(text, encoding)
    if not (unsafe or unfit):
        return None
    out = []
    for seg in segments:
        if not seg.control:
            body = escaped(seg.text, keep_newlines=True) if unsafe else seg.text
            body = fit_encoding(body, encoding) if unfit else body
            if body is not seg.text:
                seg = Segment(body, seg.style, seg.control)
        out.append(seg)
    return out


class _Console(Console):
    def _write_buffer(self) -> None:
        """Rich's write (and recording, for --save), after the two guards of the module docstring."""
        buffer = self._buffer
        if buffer and not self._buffer_index:
            safe = _safe(buffer, self.encoding)
            if safe is not None:
                buffer[:] = safe
        super()._write_buffer()

    def on_broken_pipe(self) -> None:
        """The reader left (`attnwalk run x | head`): stop writing and leave it to the CLI, which
        exits 0 for every command (rich's own handler exits 1)."""
        self.quiet = True
        raise BrokenPipeError


def make_console(*, record: bool = False, width: int | None = None, stderr: bool = False,
                 file: Optional[TextIO] = None, color_system: Optional[str] = "auto") -> Console:
    """A Console for stdout (or stderr, or `file`). Wide tables are never squeezed: renderers
    split them. One given a `file` writes there even inside Jupyter (where Rich would display
    what it prints as the cell's output: the library records walks so, and prints nothing)."""
    return _Console(record=record, width=width, stderr=stderr, file=file, color_system=color_system,
                    highlight=False, soft_wrap=False, emoji=False,
                    force_jupyter=False if file is not None else None)


def dumb_terminal() -> bool:
    """TERM=dumb: a terminal that cannot clear the screen or move the cursor (Emacs' shell, some
    CI consoles). A stepped walk there would pile every redrawn screen below the last."""
    return os.environ.get("TERM", "").lower() == "dumb"


def interactive() -> bool:
    """True only when both stdin and stdout are terminals that can redraw a screen: the only time
    attnwalk waits for keys. On TERM=dumb the walk prints every stage once, as it does when piped."""
    if dumb_terminal():
        return False
    try:
        return os.isatty(sys.stdin.fileno()) and os.isatty(sys.stdout.fileno())
    except (AttributeError, ValueError, OSError):
        return False
