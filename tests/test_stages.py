"""stages.formula: what each stage says it computes matches what the scenario and the mode
compute, in math that reads the same in every language.

A new-user review found the sinusoidal formula on a walk without positions, and English words in
the formulas of a Chinese walk.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from attnwalk.builtins import builtin_names
from attnwalk.latex import document, math_text
from attnwalk.render import style
from attnwalk.render.options import ViewOptions
from attnwalk.scenario import load_scenario, scenario_from_text
from attnwalk.stages import BY_KEY, EXTRA_MODES, MODES, STAGES, formula

ALL_MODES = MODES + EXTRA_MODES

SMALL = """\
tokens: [a, b, c]
embeddings: [[1, 0], [0, 1], [1, 1]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0.5], [0, 1]]
W_V: [[1, 0], [0, 1]]
"""
# Scenarios beyond the built-ins, each changing what one stage computes.
EXTRA = {
    "additive": SMALL + "score: additive\nw_a: [0.5, -1]\n",
    "explicit_p": SMALL + "positional: [[0, 1], [1, 0], [0.5, 0.5]]\nmask: causal\n",
    "qk_norm": SMALL + "qk_norm: true\nqk_scale: 2.5\npositional: sinusoidal\n",
    "cross": SMALL + "source:\n  tokens: [x, y]\n  embeddings: [[1, 1], [0, 2]]\n",
    "heads": """\
tokens: [the, cat, sat]
embeddings: [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]
heads: 2
mask: causal
W_Q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]]
W_K: [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]]
W_V: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
W_O: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
""",
}


def scenario(name: str):
    return scenario_from_text(EXTRA[name], f"{name}.yaml") if name in EXTRA else load_scenario(name)


SCENARIOS = [*builtin_names(), *EXTRA]


# -- P's formula follows the scenario's positions ------------------------------------------------


def test_positional_formula_follows_the_scenario() -> None:
    P = BY_KEY["P"]
    assert formula(P, scenario("river_bank")) == "P = 0"
    assert formula(P, scenario("explicit_p")) == "P ∈ ℝ^(n × d_model)"
    assert formula(P, scenario("girl_bangs")) == P.formula
    assert "sin(" in P.formula and "cos(" in P.formula


def test_uniform_weights_without_a_mask_are_one_over_n_or_m() -> None:
    assert formula(BY_KEY["A"], scenario("river_bank"), "uniform") == "A[i, j] = 1 / n"
    assert formula(BY_KEY["A"], scenario("cross"), "uniform") == "A[i, j] = 1 / m"


# -- formulas are math, the same in every language ----------------------------------------------------

# Function names and identifiers a formula may use; anything else of two letters or more is a word.
MATH_NAMES = {"softmax", "exp", "onehot", "argmax", "tanh", "RMS", "sin", "cos", "pos", "concat",
              "QK", "EmbeddingTable", "ids"}


def every_formula() -> set[str]:
    out = {stage.formula for stage in STAGES}
    for name in SCENARIOS:
        scn = scenario(name)
        out |= {formula(stage, scn, mode) for stage in STAGES for mode in ALL_MODES}
    return out


FORMULAS = sorted(every_formula())


def test_formulas_hold_no_words() -> None:
    for shown in FORMULAS:
        names = re.sub(r"[A-Za-z]\w*_\w+", "", shown)  # W_Q, d_model, token_i, argmax_k
        words = set(re.findall(r"[A-Za-z]{2,}", names)) - MATH_NAMES
        assert not words, f"{shown!r} has {sorted(words)}"


def test_formulas_are_plain_ascii_with_ascii() -> None:
    opts = ViewOptions(ascii=True)
    for shown in FORMULAS:
        assert style.plain(shown, opts).isascii(), shown
    assert style.plain("M[i, j] ∈ {0, −∞}", opts) == "M[i, j] in {0, -inf}"


def test_formulas_become_latex_math() -> None:
    assert math_text("S + M,  M[i, j] ∈ {0, −∞}") == "S + M,\\ M[i,\\ j] \\in \\{0, -\\infty\\}"
    assert math_text("A[i, :] = onehot(argmax_k (S + M)[i, k])") == (
        "A[i, :] = \\mathrm{onehot}(\\arg\\max_k\\ (S + M)[i,\\ k])")
    assert math_text("exp(M[i, :]) / |{k : M[i, k] = 0}|") == (
        "\\exp (M[i, :]) / \\lvert \\{k : M[i,\\ k] = 0\\}\\rvert")
    assert math_text("P ∈ ℝ^(n × d_model)") == "P \\in \\mathbb{R}^{n \\times d_{\\mathrm{model}}}"
    assert math_text("token_i → id_i") == "\\mathrm{token}_i \\to \\mathrm{id}_i"
    for shown in FORMULAS:
        tex = math_text(shown)
        assert tex.isascii(), (shown, tex)
        assert tex.count("{") - tex.count("\\{") == tex.count("}") - tex.count("\\}"), tex


@pytest.mark.skipif(not shutil.which("xelatex"), reason="xelatex is not installed")
def test_every_formula_compiles(tmp_path) -> None:
    body = [f"${math_text(shown)}$\\par" for shown in FORMULAS]
    (tmp_path / "formulas.tex").write_text(document(body, 10), encoding="utf-8")
    out = subprocess.run(["xelatex", "-interaction=nonstopmode", "-halt-on-error", "formulas.tex"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    log = (tmp_path / "formulas.log").read_text(encoding="utf-8", errors="replace")
    assert out.returncode == 0, log[-3000:]
    assert "Missing character" not in log
