"""stages.formula and stages.stage_text: what each stage says it computes matches what the scenario
and the mode compute, in every language.

A new-user review found S titled "Scaled scores" in unscaled mode, the sinusoidal formula and "positions
start at 0" on a walk without positions, and English words in the formulas of a Chinese walk.
"""

from __future__ import annotations

import dataclasses
import io
import functools
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from gemmafile import gemma3_gguf  # noqa: F401  (the fixture)
from rich.console import Console

from attnwalk.scenario.builtins import builtin_names, builtin_path
from attnwalk.export.handout import handout
from attnwalk.text import LANGS
from attnwalk.export.latex import document, math_text
from attnwalk.layer.walk import compute
from attnwalk.render import style
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import explain_view, stage_screen
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.layer.modes import MODES
from attnwalk.features import catalog
from attnwalk.features import stage_named

STAGES = catalog()  # every stage any layer can have
from attnwalk.text import stage_text
from snippets import SMALL

ALL_MODES = tuple(m.name for m in MODES)
FIELDS = ("title", "what", "why", "mistake")
TEXT_DIR = Path(__file__).resolve().parents[1] / "attnwalk" / "text"

# Scenarios beyond the built-ins, each changing what one stage computes.
EXTRA = {
    "additive": SMALL + "score: additive\nw_a: [0.5, -1]\n",
    "explicit_p": SMALL + "positional: [[0, 1], [1, 0], [0.5, 0.5]]\nmask: causal\n",
    # a mask given as a matrix, without and with positions: P's and X's text say it carries order
    "given_mask": SMALL + "mask: [[true, false, false], [true, true, false], [false, true, true]]\n",
    "sin_given_mask": SMALL + "positional: sinusoidal\n"
                      "mask: [[true, false, false], [true, true, false], [false, true, true]]\n",
    "qk_norm": SMALL + "qk_norm: true\nqk_scale: 2.5\npositional: sinusoidal\n",
    "cross": SMALL + "source:\n  tokens: [x, y]\n  embeddings: [[1, 1], [0, 2]]\n",
    # RoPE without a mask and under a given one (the rope lesson has a causal mask)
    "rope_unmasked": SMALL + "positional: rope\n",
    "rms_norm": SMALL + "norm: rms\nnorm_gamma: [1, 0.5]\nmask: causal\n",  # layer_norm's norm is LayerNorm
    "rope_given_mask": SMALL + "positional: rope\nrope: {pairing: interleaved}\n"
                       "mask: [[true, false, false], [true, true, false], [false, true, true]]\n",
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


def render(renderable, width: int = 100) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False)
    console.print(renderable)
    # Panels wrap their text between borders: compare words, not lines.
    return " ".join(console.file.getvalue().replace("│", " ").split())


def screen(name: str, key: str, mode: str = "scaled", lang: str = "en") -> str:
    """The stage's screen as words; Chinese, which wraps between any two characters, with no spaces.
    Without the lesson's own notes: these tests read the stage's text."""
    walk = compute(dataclasses.replace(scenario(name), notes={}), mode)
    shown = render(stage_screen(walk, stage_named(key), 0, ViewOptions(lang=lang), index=1, count=1))
    return shown.replace(" ", "") if lang == "zh" else shown


# -- 1. S and A say what the mode does ---------------------------------------------------------------


def test_unscaled_scores_are_not_called_scaled() -> None:
    en = screen("girl_bangs", "S", "unscaled")
    assert "formula S = QKᵀ " in en and "√d_k formula" not in en
    assert "S Scores, not scaled" in en  # the header's title, beside the symbol
    assert "Scaled scores" not in en and "This is the \"scaled\"" not in en
    assert "S = QKᵀ: unscaled mode leaves out the division by √d_k" in en
    assert "softmax sharpens toward one-hot" in en
    zh = screen("girl_bangs", "S", "unscaled", "zh")
    assert "未缩放的分数" in zh and "缩放后的分数" not in zh and "「缩放」" not in zh
    # scaled mode keeps its title and text
    assert "S Scaled scores" in screen("girl_bangs", "S")
    assert "缩放后的分数" in screen("girl_bangs", "S", lang="zh")


@pytest.mark.parametrize(("mode", "title", "says"), [
    ("uniform", "Scores, not used", "uniform mode ignores it"),
    ("hard", "Scores, only their order counts", "which allowed score in each row is largest"),
])
def test_scores_in_uniform_and_hard_mode_say_how_they_are_used(mode, title, says) -> None:
    text = screen("causal_mask", "S", mode)
    assert f"S {title}" in text and says in text
    assert "Scaled scores" not in text and "This is the \"scaled\"" not in text


@pytest.mark.parametrize(("mode", "formula_shown", "title", "says"), [
    ("uniform", "A[i, :] = softmax(M[i, :]) = exp(M[i, :]) / |{k : M[i, k] = 0}|",
     "Attention weights, uniform", "1 divided by the number of such keys; a masked key gets 0"),
    ("hard", "A[i, :] = onehot(argmax_k (S + M)[i, k])",
     "Attention weights, hard (argmax)", "Each row is one-hot: weight 1 on the key with the row's"),
])
def test_weights_in_uniform_and_hard_mode(mode, formula_shown, title, says) -> None:
    text = screen("causal_mask", "A", mode)
    assert f"formula {formula_shown}" in text
    assert f"A {title}" in text and says in text
    assert "A = softmax(S + M), row by row" not in text
    zh = screen("causal_mask", "A", mode, "zh")
    assert stage_text("zh", stage_named("A"), scenario("causal_mask"), mode) in zh
    assert stage_text("zh", stage_named("A"), scenario("causal_mask"), mode) != "注意力权重"


def test_uniform_weights_without_a_mask_are_one_over_n_or_m() -> None:
    assert stage_named("A").formula_in(scenario("river_bank"), "uniform") == "A[i, j] = 1 / n"
    assert stage_named("A").formula_in(scenario("cross"), "uniform") == "A[i, j] = 1 / m"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_additive_scores_say_they_are_never_divided(mode) -> None:
    scn = scenario("additive")
    assert stage_named("S").formula_in(scn, mode) == "S = QKᵀ"
    text = screen("additive", "S", mode)
    assert "Scaled scores" not in text and "This is the \"scaled\"" not in text
    if mode in ("scaled", "unscaled"):
        assert "S Scores, additive (not divided)" in text
        assert "are never divided by √d_k" in text
    assert "Additive attention has no such correction" in text  # the why, in every mode
    zh = screen("additive", "S", mode, "zh")
    assert "缩放后的分数" not in zh and "加性注意力没有这种修正" in zh


# -- 2. P says which positions the scenario has ------------------------------------------------------


def test_positional_formula_follows_the_scenario() -> None:
    P = stage_named("P")
    assert P.formula_in(scenario("river_bank")) == "P = 0"
    assert P.formula_in(scenario("explicit_p")) == "P ∈ ℝ^(n × d_model)"
    assert P.formula_in(scenario("girl_bangs")) == P.formula
    assert "sin(" in P.formula and "cos(" in P.formula


def test_no_positions_says_permutation_equivariant_not_positions_start_at_0() -> None:
    text = screen("river_bank", "P")
    assert "formula P = 0 " in text and "sin(" not in text
    assert "P No positional encoding" in text
    assert "No positional encoding: P = 0 and X = E." in text
    assert "permutation-equivariant" in text
    assert "Positions start at 0" not in text and "from 0" not in text  # no pos to count here
    zh = screen("river_bank", "P", lang="zh")
    assert "置换等变" in zh and "从0" not in zh.replace(" ", "")


def test_given_positions_are_explained_as_given() -> None:
    text = screen("explicit_p", "P")
    assert "formula P ∈ ℝ^(n × d_model)" in text
    assert "This scenario gives P directly" in text and "It belongs to a position" in text
    assert "Positions start at 0" not in text and "sin(" not in text


def test_sinusoidal_positions_keep_their_text_once() -> None:
    text = screen("girl_bangs", "P")
    assert "sin(pos/10000^(2i/d_model))" in text and "Counting positions from 1, as the rows are numbered" in text
    assert "the 1st, 3rd, 5th, … columns are sines" in text
    assert text.count("Low dimensions turn quickly") == 1


# -- the same words in handouts and `attnwalk explain` -----------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_handouts_and_explain_read_the_variant(lang) -> None:
    walk = compute(scenario("girl_bangs"), "unscaled")
    unscaled = stage_text(lang, stage_named("S"), walk.scenario, "unscaled")
    md = handout(walk, "markdown", ViewOptions(lang=lang))
    assert unscaled in md and stage_text(lang, stage_named("S")) not in md
    assert stage_text(lang, stage_named("S"), walk.scenario, "unscaled", "what") in md
    river = handout(compute(scenario("river_bank")), "markdown", ViewOptions(lang=lang))
    assert stage_text(lang, stage_named("P"), scenario("river_bank"), field="mistake") in river
    assert stage_text(lang, stage_named("P"), field="mistake") not in river
    shown = render(explain_view(walk, "S", "1", "1", 1, ViewOptions(lang=lang)))
    assert unscaled in shown


# -- 3. formulas are math, the same in every language -------------------------------------------------

# Function names and identifiers a formula may use; anything else of two letters or more is a word.
MATH_NAMES = {"softmax", "exp", "onehot", "argmax", "tanh", "RMS", "sin", "cos", "pos", "concat",
              "QK", "EmbeddingTable", "ids", "mean", "var", "LN", "entropy", "log", "FFN", "MLP",  # (a real model's LayerNorm)
              "RMSNorm", "SwiGLU", "llama", "GELU", "ReLU", "SiLU"}  # (the FFN's activations)  # (the Llama family's norm, feed-forward and llama3 rescaled θ_i)


def every_formula() -> set[str]:
    out = {stage.equation() for stage in STAGES}
    for name in SCENARIOS:
        scn = scenario(name)
        out |= {stage.formula_in(scn, mode) for stage in STAGES for mode in ALL_MODES}
    for scn in model_scenarios():  # `attnwalk model`'s layers: BERT and GPT-2, first and later
        out |= {stage.formula_in(scn, mode) for stage in STAGES for mode in ALL_MODES}
    return out


def model_scenarios() -> list:
    from test_stage_definitions import gemma_like

    from attnwalk.commands.model import scenario_from_model
    from modelwalk_layers import random_layer

    from attnwalk.commands.model import load_layer

    fixtures = Path(__file__).resolve().parent / "fixtures" / "models"
    return [scenario_from_model(random_layer(family, layer=layer))
            for family in ("bert", "gpt2") for layer in (0, 2)] + [
        scenario_from_model(random_layer("bert", model_type="roberta"))] + [  # positions from pad + 1
        # the Llama family: Llama 3.1's rescaled θ_i and 2 K/V heads; Qwen2's biases, a later layer
        scenario_from_model(load_layer("I sat by the river bank", str(fixtures / name), layer))
        for name, layer in (("tiny-llama", 1), ("tiny-qwen2", 2))] + [
        # Gemma 3's QK-norm and norm after attention, on the tiny Llama layer
        scenario_from_model(gemma_like(load_layer("I sat by the river bank", str(fixtures / "tiny-llama"), 1)))]


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


# -- the text files' variants ----------------------------------------------------------------------


def variant_tables(lang: str) -> dict[tuple[str, str], dict]:
    stages = tomllib.loads((TEXT_DIR / f"{lang}.toml").read_text(encoding="utf-8"))["stage"]
    return {(key, name): value for key, table in stages.items()
            for name, value in table.items() if isinstance(value, dict)}


@functools.cache
def gemma_next(path: str):
    """Gemma 3's walked layer with --next: its GeGLU is the G stage's geglu variant."""
    from attnwalk.commands.model import scenario_with_next
    from attnwalk.models.load import open_model
    from attnwalk.models.nexttoken import next_token

    model = open_model(path)
    return scenario_with_next(next_token(model, model.tokenize("I sat by the river bank"), 5))


@pytest.mark.parametrize("lang", LANGS)
def test_variants_hold_only_stage_fields_and_each_one_is_shown_somewhere(lang, request) -> None:
    from attnwalk.layer.gradwalk import grad_stages

    tables = variant_tables(lang)
    every = [scenario(name) for name in SCENARIOS] + model_scenarios()
    try:  # the Gemma 3 file (the test command installs it): its GeGLU's words
        every.append(gemma_next(str(request.getfixturevalue("gemma3_gguf"))))
    except pytest.skip.Exception:
        tables = {(key, name): fields for (key, name), fields in tables.items() if name != "geglu"}
    rms = builtin_path("layer_norm").read_text(encoding="utf-8").replace("\nnorm: layer\n", "\nnorm: rms\n")
    every.append(scenario_from_text(rms, "rms.yaml"))  # the backward walk through RMSNorm
    alibi = builtin_path("alibi").read_text(encoding="utf-8") + "\ntarget: {attend: {它: 小猫}}\n"
    every.append(scenario_from_text(alibi, "alibi.yaml"))  # the backward walk through S + B
    block = builtin_path("block").read_text(encoding="utf-8") + "\ntarget: next\n"  # the backward walk through a block
    every.append(scenario_from_text(block, "block.yaml"))
    every.append(scenario_from_text(block.replace("\nnorm: rms\n", "\nnorm: rms\nnorm_placement: post\n"), "post.yaml"))
    every.append(scenario_from_text(block.replace("\nffn: relu\n", "\nffn: silu\n"), "silu.yaml"))
    gate = scenario_from_text(block, "block.yaml").param("W_1").tolist()  # SwiGLU: a gate as wide as W_1
    every.append(scenario_from_text(block.replace("\nffn: relu\n", f"\nffn: swiglu\nW_gate: {gate}\n"), "swiglu.yaml"))
    gradients = {stage.key for scn in every if "target" in scn.settings for stage in grad_stages(scn)}
    assert {key for key, _ in tables} <= {stage.key for stage in STAGES} | gradients  # a variant of a stage there is
    shown = {stage_text(lang, stage, scn, mode, field)
             for scn in every for mode in ALL_MODES for stage in STAGES for field in FIELDS}
    shown |= {stage_text(lang, stage, scn, mode, field) for scn in every if "target" in scn.settings
              for mode in ("scaled", "unscaled", "uniform") for stage in grad_stages(scn, mode) for field in FIELDS}
    for (key, name), fields in tables.items():
        assert set(fields) <= set(FIELDS), f"stage.{key}.{name}"
        for field, value in fields.items():
            assert value in shown, f"{lang}: stage.{key}.{name}.{field} is never shown"


def test_stage_text_without_a_scenario_is_the_stage_text() -> None:
    assert stage_text("en", stage_named("S")) == "Scaled scores"
    assert stage_text("zh", stage_named("P"), field="mistake").startswith("照着行号，以为位置也从 1 开始数。公式里的位置从 0 开始")
    assert stage_text("en", stage_named("Q"), scenario("additive"), "hard", "why").startswith("Raw embeddings")
