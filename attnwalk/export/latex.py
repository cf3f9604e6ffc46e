"""LaTeX for handouts: text escaped for text mode, formulas turned into math, and a document that
compiles on its own.

Everything written is ASCII apart from letters of other scripts (Chinese tokens, Chinese text):
the symbols attnwalk's text uses (→ · × √ −∞ ᵀ …) become LaTeX commands. So an English handout
compiles with pdflatex or xelatex, and one with Chinese with xelatex (ctex picks the fonts).
"""

from __future__ import annotations

import re
import unicodedata

from attnwalk.layer.safe import escaped
from attnwalk.render import symbols

# Text mode: LaTeX's own special characters, then every math symbol as render/symbols.py writes it.
_TEXT = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
    "%": r"\%", "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}",
    "<": r"$<$", ">": r"$>$", "|": r"$|$", "\u00a0": "~",
    **symbols.TEXT,
}

# Math mode: the same symbols as commands.
_MATH = {
    "|": r"\mid ", "#": r"\#", "%": r"\%", "&": r"\&", "$": r"\$", "~": r"\sim ",
    **symbols.MATH,
    # A formula's own braces (a set, {0, −∞}) and |{…}| (its size), held apart by math_text from
    # the braces LaTeX needs for groups.
    "\x01": r"\{", "\x02": r"\}", "\x03": r"\lvert ", "\x04": r"\rvert ",
}

# Pieces of prose that read better as math: √d_k, e^−∞, e^800, 10000^(2i/d), W_Q, d_model, QKᵀ, −∞,
# q̂. A symbol before the underscore is one letter or capitals (W_Q, d_model, QK_norm); a lower-case
# word joined by underscores (river_bank, yellow_dog_length) is a name, kept as text.
_FRAGMENT = re.compile(r"√\w+|e\^[−-]?(?:∞|\d+)|(?<![A-Za-z0-9_])\d+\^\([^()]*\)"
                       r"|(?<![A-Za-z0-9_])(?:[A-Za-z]|[A-Z]+)_[A-Za-z0-9]+ᵀ?(?![A-Za-z0-9_])"
                       r"|(?<![A-Za-z0-9_])[A-Z]+ᵀ|[−-]∞|(?<![A-Za-z0-9_])[A-Za-z]\u0302(?:_[A-Za-z0-9]+)?")
WIDE = 9  # matrices with this many columns or more are scaled to the width of the page
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_SPACE = re.compile(r"\s+")
_QUOTED = re.compile(r'"([^"]*)"')


def _wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _escape(s: str) -> str:
    """Text mode; a control or bidirectional-override character first becomes its escape (\\x1b),
    whose backslash is then LaTeX's \\textbackslash{}: printed, never obeyed."""
    return "".join(_TEXT.get(ch, ch) for ch in escaped(s, keep_newlines=True))


def _curly_quotes(s: str) -> str:
    """"…" as “…”, which _TEXT writes as ``…'': LaTeX prints a straight " as a closing quote.
    A quote left without a partner stays as it is; 「」 and other quotes are untouched."""
    return _QUOTED.sub(r"“\1”", s)


def latex_text(s: str, math: bool = True) -> str:
    """`s` for LaTeX's text mode. With `math`, formula-like pieces of attnwalk's own text (d_k,
    √d_k, QKᵀ) are set as math; user text (names, tokens, titles) is only escaped."""
    s = _curly_quotes(s)
    if not math:
        return _escape(s)
    out, end = [], 0
    for m in _FRAGMENT.finditer(s):
        out += [_escape(s[end:m.start()]), f"${math_text(m.group())}$"]
        end = m.end()
    return "".join(out + [_escape(s[end:])])


def math_text(formula: str) -> str:
    """A formula as written in attnwalk/stages.py ("S = QKᵀ / √d_k") as LaTeX math."""
    s = _SPACE.sub(_space, formula.strip())
    s = s.replace("{", "\x01").replace("}", "\x02")  # a set's braces, not a group: \{ \}
    s = re.sub("\\|(\x01[^|]*\x02)\\|", "\x03\\1\x04", s)  # |{k : …}|: \lvert … \rvert
    s = re.sub(r"√(\w+)", r"\\sqrt{\1}", s)
    s = re.sub("(\\w)\u0302", r"\\hat{\1}", s)  # QK-norm's q̂ (a combining circumflex)
    s = s.replace("Õ", "\x05")  # the tiled form's unnormalised output: a symbol, not a word
    s = _WORD.sub(_word, s).replace("\x05", "\\tilde{O}")
    s = re.sub(r"_(\\mathrm\{[^}]*\}|\d{2,})", r"_{\1}", s)
    s = _superscripts(s)
    s = re.sub(r"\^([−-]?(?:∞|\d+(?:\.\d+)?))", r"^{\1}", s)  # e^−∞, e^800: one group
    s = "".join(_MATH.get(ch, ch) for ch in symbols.block_marks(s, False))
    s = re.sub(r" +(?=[})\]]|\\\}|\\rvert)", "", re.sub(" {2,}", " ", s))  # "\infty }" -> "\infty}"
    return s.replace("\x00", "\\ ").strip()


def _space(m: re.Match) -> str:
    """A visible space between two words or after a comma ("0 or −∞", "i, j"); elsewhere a plain
    space, which math mode ignores but keeps the source readable."""
    before = m.string[m.start() - 1] if m.start() else ""
    after = m.string[m.end()] if m.end() < len(m.string) else ""
    wordy = lambda ch: ch.isalnum() or ch in "()[]"  # noqa: E731
    return "\x00" if (before == "," or wordy(before)) and wordy(after) else " "


def _word(m: re.Match) -> str:
    word = m.group()
    if word in ("sin", "cos", "exp", "log", "max"):
        return "\\" + word + " "
    if word == "argmax":
        return r"\arg\max"
    if word.isupper():  # QK, QKᵀ: a product of matrices, each letter a symbol
        return word
    return f"\\mathrm{{{word}}}"


def _superscripts(s: str) -> str:
    """x^(…) with its parentheses as the group: 10000^(2i/d) -> 10000^{2i/d}."""
    out, i = [], 0
    while i < len(s):
        if s.startswith("^(", i):
            depth, j = 0, i + 1
            while j < len(s):
                depth += {"(": 1, ")": -1}.get(s[j], 0)
                if depth == 0:
                    break
                j += 1
            out.append("^{" + s[i + 2:j] + "}")
            i = j + 1
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def tabular(header: list[str], rows: list[list[str]], spec: str | None = None) -> list[str]:
    """A centred table: by default the first (label) column left and ruled off, numbers
    right-aligned. Tables too wide for the page are scaled to fit."""
    count = len(header)
    spec = spec or "l|" + "r" * (count - 1)
    cells = [" & ".join(row) + r" \\" for row in rows]
    table = [f"\\begin{{tabular}}{{{spec}}}", " & ".join(header) + r" \\", r"\hline", *cells,
             r"\end{tabular}"]
    if count - spec.startswith("l|") >= WIDE:
        table = [r"\resizebox{\linewidth}{!}{%", *table, "}"]
    return [r"\begin{center}", *table, r"\end{center}"]


def matrix_env(symbol: str, cells: list[list[str]]) -> list[str]:
    """`symbol = [[…]]` as a displayed bmatrix, ready to paste into a slide (scaled to the page
    when wide)."""
    rows = [" & ".join(row) + r" \\" for row in cells]
    rows[-1] = rows[-1][:-3]
    equation = [f"{symbol} = \\begin{{bmatrix}}", *rows, r"\end{bmatrix}"]
    if len(cells[0]) >= WIDE:
        return [r"\begin{center}", r"\resizebox{\linewidth}{!}{$\displaystyle", *equation, "$}",
                r"\end{center}"]
    return [r"\[", *equation, r"\]"]


def document(body: list[str], max_cols: int) -> str:
    """A complete article around `body`: engine advice, packages, and room for wide matrices."""
    text = "\n".join(body)
    wide = any(_wide(ch) for ch in text)
    other = any(ord(ch) > 127 for ch in text)
    if wide:
        head = ["% Chinese text: compile with xelatex (ctex chooses the CJK fonts):",
                "%   xelatex handout.tex"]
    elif other:
        head = ["% Letters beyond ASCII: compile with xelatex:  xelatex handout.tex"]
    else:
        head = ["% Plain ASCII: compiles with pdflatex or xelatex:  pdflatex handout.tex"]
    preamble = [
        "% Written by attnwalk (attnwalk export NAME --format latex).",
        *head,
        r"\documentclass[11pt]{article}",
        r"\usepackage[a4paper,margin=2cm]{geometry}",
        r"\usepackage{amsmath}",
        r"\usepackage{amssymb}",  # \mathbb{R}
        r"\usepackage{graphicx}",
        *([r"\usepackage[UTF8,scheme=plain]{ctex}"] if wide else []),
        f"\\setcounter{{MaxMatrixCols}}{{{max(max_cols, 10)}}}",
        r"\setlength{\parindent}{0pt}",
        r"\begin{document}",
    ]
    return "\n".join(preamble + body + [r"\end{document}", ""])
