"""The math symbols attnwalk writes, each with its ASCII spelling (--ascii, and outputs whose
encoding is ASCII) and its LaTeX (handouts): one table, so a symbol a new feature brings (a norm's
ε, a gradient's ∂) is spelled everywhere once it is here, and tests/test_symbols.py finds any
symbol in the text files or the formulas that is not.

Each entry: symbol -> (ASCII, LaTeX math, LaTeX text). The text form, for prose, is the math one
in $…$ unless given; None: no form in that mode (the symbol is never written there).
"""

from __future__ import annotations

import re

_SYMBOLS: dict[str, tuple[str | None, str | None, str | None]] = {
    # operators and relations
    "−": ("-", "-", r"$-$"), "·": (".", r"\cdot ", None), "×": ("x", r"\times ", None),
    "±": ("+/-", r"\pm ", None), "√": ("sqrt ", r"\surd ", None), "∞": ("inf", r"\infty ", None),
    "≈": ("~", r"\approx ", None), "≠": ("!=", r"\neq ", None), "≡": ("==", r"\equiv ", None),
    "≤": ("<=", r"\leq ", None), "≥": (">=", r"\geq ", None), "∈": ("in", r"\in ", None),
    "→": ("->", r"\to ", None), "←": ("<-", r"\leftarrow ", None),
    "↑": ("up", r"\uparrow ", None), "↓": ("down", r"\downarrow ", None), "∂": ("d", r"\partial ", None),
    "Σ": ("sum", r"\sum ", None), "∑": ("sum", r"\sum ", None), "ℝ": ("R", r"\mathbb{R}", None),
    "…": ("...", r"\dots ", r"\dots{}"), "⋮": (":", r"\vdots ", None),
    "✓": ("yes", r"\checkmark ", None), "✗": ("no", r"\times ", None),  # grade's answers grid
    # super- and subscripts, and the combining hat of QK-norm's q̂ (math_text writes \hat{q})
    "ᵀ": ("^T", r"^{\top}", r"\textsuperscript{T}"), "²": ("^2", "^{2}", r"\textsuperscript{2}"),
    "₂": ("2", "_{2}", r"\textsubscript{2}"), "ᵢ": ("_i", "_{i}", r"\textsubscript{i}"),
    "ⱼ": ("_j", "_{j}", r"\textsubscript{j}"), "\u0302": ("^", None, None),
    "Õ": ("O~", r"\tilde{O}", None), "Ô": ("O^", r"\hat{O}", None), "₁": ("1", "_{1}", r"\textsubscript{1}"),
    "⁰": ("^0", "^{0}", r"\textsuperscript{0}"),  # e⁰ = 1
    # a later block's matrices, A⁽²⁾ (features/blocks.py); BLOCK below writes the whole mark at once
    "⁽": ("^(", "^{(", r"\textsuperscript{(}"), "⁾": (")", ")}", r"\textsuperscript{)}"),
    **{d: (f"^{a}", f"^{{{a}}}", rf"\textsuperscript{{{a}}}") for d, a in zip("¹⁴⁵⁶⁷⁸⁹", "1456789")},
    "³": ("^3", "^{3}", r"\textsuperscript{3}"),  # GELU's tanh form: u + 0.044715 u³
    # Greek: angles, ALiBi's and RoPE's constants, a norm's μ, σ, ε, γ, β
    "α": ("alpha", r"\alpha ", None), "β": ("beta", r"\beta ", None), "γ": ("gamma", r"\gamma ", None),
    "ε": ("eps", r"\varepsilon ", None), "θ": ("theta", r"\theta ", None),
    "λ": ("lambda", r"\lambda ", None), "ℓ": ("l", r"\ell ", None), "μ": ("mu", r"\mu ", None), "π": ("pi", r"\pi ", None),
    "σ": ("sigma", r"\sigma ", None), "δ": ("delta", r"\delta ", None),
    # the backward walk and training: the learning rate, RoPE's angle, ⊙ (cell by cell), ½ Σ (Y − T)²
    "η": ("eta", r"\eta ", None), "φ": ("phi", r"\varphi ", None), "⊙": (".*", r"\odot ", None),
    "½": ("1/2", r"\tfrac{1}{2}", r"$\frac{1}{2}$"),
    # punctuation and marks
    "–": ("-", "-", "--"), "—": ("--", "-", "---"), "“": ('"', None, "``"), "”": ('"', None, "''"),
    "‘": ("'", None, "`"), "’": ("'", None, "'"), "▲": ("*", r"\triangle ", None),
    "█": ("#", None, r"\rule{0.5em}{0.7em}"), "°": ("deg", r"^{\circ}", r"\textdegree{}"), "§": ("S", None, r"\S{}"),
}


# A block's mark as one piece: ⁽¹²⁾ is ^(12) in ASCII and ^{(12)} in LaTeX (char by char, ² alone is
# a square's ^2)
BLOCK = re.compile("⁽([⁰¹²³⁴⁵⁶⁷⁸⁹]+)⁾")
_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")


def block_marks(s: str, ascii_form: bool) -> str:
    """Each block mark ⁽ᵇ⁾ in `s` as ASCII's ^(b) or LaTeX math's ^{(b)}."""
    if "⁽" not in s:
        return s
    return BLOCK.sub(lambda m: ("^({})" if ascii_form else "^{{({})}}").format(m.group(1).translate(_DIGITS)), s)


def _text(math: str | None, text: str | None) -> str | None:
    return text if text is not None else None if math is None else f"${math.strip()}$"


ASCII: dict[str, str] = {s: a for s, (a, _, _) in _SYMBOLS.items() if a is not None}
MATH: dict[str, str] = {s: m for s, (_, m, _) in _SYMBOLS.items() if m is not None}
TEXT: dict[str, str] = {s: text for s, (_, m, t) in _SYMBOLS.items() if (text := _text(m, t)) is not None}
KNOWN = frozenset(_SYMBOLS)
