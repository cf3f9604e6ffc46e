"""One table of math symbols (attnwalk/render/symbols.py) spells them in ASCII and LaTeX: every
symbol attnwalk's text, its lessons and its formulas use is in it, with both spellings, so a
feature that brings a new symbol (a norm's ε) cannot be printed raw in a handout or under --ascii.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from attnwalk.export.latex import latex_text, math_text
from attnwalk.features import catalog
from attnwalk.layer.modes import MODES
from attnwalk.render import symbols
from attnwalk.render.style import ascii_spelling
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def _symbols_in(text: str) -> set[str]:
    """Characters beyond ASCII that are not CJK (two cells wide: a Chinese teacher's text)."""
    return {ch for ch in text if ord(ch) > 127 and unicodedata.east_asian_width(ch) not in ("W", "F")}


def _everything_written() -> str:
    files = [*(ROOT / "attnwalk" / "text").glob("*.toml"), *(ROOT / "scenarios").glob("*.yaml")]
    texts = [f.read_text(encoding="utf-8") for f in files]
    for name in builtin_names():
        scn = load_scenario(name)
        texts += [stage.formula_in(scn, mode) for stage in scn.graph for mode in MODES]
    texts += [stage.equation() for stage in catalog()]
    return "\n".join(texts)


def test_every_symbol_written_is_in_the_one_table() -> None:
    missing = _symbols_in(_everything_written()) - symbols.KNOWN
    assert not missing, f"add to render/symbols.py: {sorted(missing)}"


def test_every_symbol_has_an_ascii_spelling_and_ascii_output_is_ascii() -> None:
    written = _everything_written()
    assert set(symbols.ASCII) == symbols.KNOWN
    assert all(ch.isascii() for ch in ascii_spelling("".join(_symbols_in(written))))


def test_latex_writes_every_symbol_as_latex() -> None:
    for ch in symbols.KNOWN - {"\u0302"}:  # the hat combines with the letter before it
        assert ch not in latex_text(f"a {ch} b"), ch
        if ch in symbols.MATH:
            assert ch not in math_text(f"x {ch} y"), ch
    assert latex_text("σ = √(var + ε)") == r"$\sigma$ = $\surd$(var + $\varepsilon$)"
    assert math_text("q̂ · k̂") == r"\hat{q} \cdot \hat{k}"
