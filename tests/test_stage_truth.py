"""What a stage says is true of the scenario on screen (issue 13, points 4, 11 and 13's Chinese).

P and X have a text for each kind of positions (none, sinusoidal, given) with and without a mask;
the claims those texts make about word order are checked here with numpy written apart from the
program (seed 003 §9's Q, K, V typed in, seed 002's sinusoidal formula), and the program's own Z is
held to the same numbers. Every common mistake is there in both languages, the ids' mistake only
where there are ids, and the seeds' points the walk used to leave out are said where they belong.
"""

from __future__ import annotations

import io
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from attnwalk.layer.modes import MODES
from attnwalk.features import catalog
from attnwalk.features import stage_named

STAGES = catalog()  # every stage any layer can have
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import stage_screen
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.text import LANGS, stage_notes, stage_text, text

TEXT_DIR = Path(__file__).resolve().parents[1] / "attnwalk" / "text"
FIELDS = ("title", "what", "why", "mistake")

# Three tokens, two of them the same word ("a" at rows 1 and 3), so a repeated word can be followed.
TOKENS = ["a", "b", "a"]
E = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
W_Q = np.array([[1.0, 0.0], [0.0, 1.0]])
W_K = np.array([[1.0, 0.5], [0.0, 1.0]])
W_V = np.array([[1.0, 0.0], [0.0, 2.0]])
P_GIVEN = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
MASK_GIVEN = np.array([[True, True, False], [False, True, False], [True, False, True]])  # no symmetry

POSITIONALS = ("none", "sinusoidal", "explicit")
MASKS = ("none", "causal", "explicit")
KINDS = [(p, m) for p in POSITIONALS for m in MASKS]


def yaml_matrix(M: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(str(x).lower() for x in row) + "]" for row in M.tolist()) + "]"


def kind_text(positional: str, mask: str, order: list[int] | None = None, ids: bool = False) -> str:
    """The scenario of one kind as YAML; `order` lists the tokens in a new order (P and the mask
    stay with the positions, as they do in a model)."""
    order = list(range(len(TOKENS))) if order is None else order
    lines = [f"tokens: [{', '.join(TOKENS[i] for i in order)}]",
             f"embeddings: {yaml_matrix(E[order])}",
             f"W_Q: {yaml_matrix(W_Q)}", f"W_K: {yaml_matrix(W_K)}", f"W_V: {yaml_matrix(W_V)}",
             "positional: " + (yaml_matrix(P_GIVEN) if positional == "explicit" else positional),
             "mask: " + (yaml_matrix(MASK_GIVEN) if mask == "explicit" else mask)]
    if ids:
        lines.append(f"ids: [{', '.join(str([1258, 875, 1258][i]) for i in order)}]")
    return "\n".join(lines) + "\n"


def kind(positional: str, mask: str, ids: bool = False):
    return scenario_from_text(kind_text(positional, mask, ids=ids), f"{positional}_{mask}.yaml")


# -- an attention layer written apart from the program -------------------------------------------


def sinusoidal(n: int, d: int) -> np.ndarray:
    """Seed 002 §2.2: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(the same)."""
    P = np.zeros((n, d))
    for pos in range(n):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            P[pos, 2 * i], P[pos, 2 * i + 1] = np.sin(angle), np.cos(angle)
    return P


def attention(X, Wq, Wk, Wv, allowed) -> np.ndarray:
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    S = np.where(allowed, Q @ K.T / np.sqrt(K.shape[1]), -np.inf)
    e = np.exp(S - S.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ V


def positions(positional: str, n: int) -> np.ndarray:
    return {"none": np.zeros((n, 2)), "sinusoidal": sinusoidal(n, 2), "explicit": P_GIVEN}[positional]


def allowed_by(mask: str, n: int) -> np.ndarray:
    return {"none": np.ones((n, n), bool), "causal": np.tril(np.ones((n, n), bool)),
            "explicit": MASK_GIVEN}[mask]


def layer_z(positional: str, mask: str, order: list[int]) -> np.ndarray:
    """Z for the tokens in `order`; positions and mask belong to the slots, not to the tokens."""
    n = len(order)
    return attention(E[order] + positions(positional, n), W_Q, W_K, W_V, allowed_by(mask, n))


REVERSED = [2, 1, 0]
SHUFFLED = [1, 2, 0]


@pytest.mark.parametrize(("positional", "mask"), KINDS)
def test_order_matters_exactly_when_there_are_positions_or_a_mask(positional, mask) -> None:
    z = layer_z(positional, mask, [0, 1, 2])
    for order in (REVERSED, SHUFFLED):
        moved = layer_z(positional, mask, order)  # row r is the token that was at order[r]
        equivariant = np.allclose(moved, z[order])
        assert equivariant == (positional == "none" and mask == "none"), (order, moved, z[order])
        # the program agrees with the independent layer, reordered scenario and all
        scn = scenario_from_text(kind_text(positional, mask, order), "moved.yaml")
        np.testing.assert_allclose(compute(scn).matrix("Z"), moved, rtol=0, atol=1e-12)
    np.testing.assert_allclose(compute(kind(positional, mask)).matrix("Z"), z, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("positional", "mask"), KINDS)
def test_the_same_word_at_two_positions(positional, mask) -> None:
    """X's why: with P = 0 the repeated word enters twice as the same vector; with no mask it then
    gets the same output, while positions give it two vectors and a mask can tell the two apart."""
    X = E + positions(positional, 3)
    assert np.array_equal(X[0], X[2]) == (positional == "none")
    z = layer_z(positional, mask, [0, 1, 2])
    assert np.allclose(z[0], z[2]) == (positional == "none" and mask == "none")


def test_reversing_causal_mask_changes_z_of_t3() -> None:
    """Seed 003 §9: q = k = [1, 0], [0, 1], [1, 1] and v = [1, 0], [0, 2], [3, 1] for T1, T2, T3;
    the causal_mask lesson's one-hot embeddings make X · W pick those rows."""
    Q = np.array([[1.0, 0], [0, 1], [1, 1]])
    V = np.array([[1.0, 0], [0, 2], [3, 1]])
    causal = np.tril(np.ones((3, 3), bool))
    z = attention(np.eye(3), Q, Q, V, causal)
    np.testing.assert_allclose(z[2], [1.759, 1.0], atol=5e-4)  # seed: ≈ [1.75, 1.00] from rounded weights
    reversed_z = attention(np.eye(3)[::-1], Q, Q, V, causal)  # T3 now comes first and reads only itself
    np.testing.assert_allclose(reversed_z[0], [3.0, 1.0], atol=1e-12)
    # the lesson computes the same, forwards and reversed
    scn = load_scenario("causal_mask")
    np.testing.assert_allclose(compute(scn).matrix("Z")[2], z[2], atol=1e-12)
    reversed_yaml = f"""\
tokens: [T3, T2, T1]
embeddings: {yaml_matrix(np.asarray(scn.main.E)[::-1])}
W_Q: {yaml_matrix(scn.W_Q)}
W_K: {yaml_matrix(scn.W_K)}
W_V: {yaml_matrix(scn.W_V)}
mask: causal
"""
    np.testing.assert_allclose(compute(scenario_from_text(reversed_yaml, "reversed.yaml")).matrix("Z")[0],
                               [3.0, 1.0], atol=1e-12)


def test_without_mask_and_positions_a_lesson_is_permutation_equivariant() -> None:
    scn = load_scenario("river_bank")
    assert scn.main.positional == "none" and not scn.masked
    X = np.asarray(scn.main.E)
    everything = np.ones((len(X), len(X)), bool)
    z = attention(X, scn.W_Q, scn.W_K, scn.W_V, everything)
    np.testing.assert_allclose(compute(scn).matrix("Z"), z, atol=1e-12)
    order = [3, 0, 2, 1]
    np.testing.assert_allclose(attention(X[order], scn.W_Q, scn.W_K, scn.W_V, everything), z[order],
                               atol=1e-12)


# -- P and X: the text of the scenario's kind ------------------------------------------------------

# The text tables each field may come from, most specific first, worked out from the kind: a mask
# (causal or given) carries order of its own; the sinusoidal text is the stage's own.
TABLES = {
    ("none", "none"): ["none"], ("none", "causal"): ["none_causal", "none"],
    ("none", "explicit"): ["none_masked", "none"],
    ("sinusoidal", "none"): [], ("sinusoidal", "causal"): ["causal"],
    ("sinusoidal", "explicit"): ["masked"],
    ("explicit", "none"): ["explicit"], ("explicit", "causal"): ["causal", "explicit"],
    ("explicit", "explicit"): ["masked", "explicit"],
}

# Sentences false for a kind: (does it apply to the kind?, the words in each language).
NO_ORDER = ("does not change the outputs", "only reorders the outputs", "permutation-equivariant",
            "the same output wherever it stands", "ignores order")
NO_ORDER_ZH = ("词序不会改变输出", "输出只会跟着换行", "置换等变", "得到的输出也相同", "不考虑顺序")
FALSE = [
    # with a mask, order matters even with P = 0
    (lambda p, m: m != "none", NO_ORDER, NO_ORDER_ZH),
    # with P = 0 the same word is the same vector, and there is no sine to count from 0
    (lambda p, m: p == "none", ("two different vectors", "Positions start at 0", "Counting positions",
                                "sin("), ("向量就不同", "位置从0开始", "以为位置从1开始", "sin(")),
    # with positions P is not 0
    (lambda p, m: p != "none", ("P = 0", "the same vector", "No positional encoding"),
     ("P=0", "向量完全相同", "没有位置编码")),
    # with no mask there is no causal mask to speak of
    (lambda p, m: m == "none", ("causal", "the mask itself"), ("因果", "掩码本身")),
]


def squeeze(s: str) -> str:
    return re.sub(r"[\s\u2500-\u257f]", "", s)


def screen(scn, key: str, lang: str) -> str:
    """The stage's whole screen (table, explanation, notes, worked cell), whitespace removed."""
    console = Console(width=100, file=io.StringIO(), color_system=None, force_terminal=False)
    console.print(stage_screen(compute(scn), stage_named(key), 0, ViewOptions(lang=lang), index=2,
                               count=12))
    return squeeze(console.file.getvalue())


def load(lang: str) -> dict:
    return tomllib.loads((TEXT_DIR / f"{lang}.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(("positional", "mask"), KINDS)
def test_p_and_x_show_the_variant_of_the_kind(positional, mask, lang) -> None:
    scn = kind(positional, mask)
    stages = load(lang)["stage"]
    for key in ("P", "X"):
        for field in FIELDS:
            table = next((t for t in TABLES[positional, mask] if field in stages[key].get(t, {})), None)
            expected = stages[key][field] if table is None else stages[key][table][field]
            assert stage_text(lang, stage_named(key), scn, field=field) == expected, (key, field, table)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(("positional", "mask"), KINDS)
def test_p_and_x_screens_say_nothing_false_for_the_kind(positional, mask, lang) -> None:
    scn = kind(positional, mask)
    shown = {key: screen(scn, key, lang) for key in ("P", "X")}
    for applies, en, zh in FALSE:
        if applies(positional, mask):
            for words in en if lang == "en" else zh:
                for key, body in shown.items():
                    assert squeeze(words) not in body, (key, words)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("mask", MASKS)
def test_without_positions_p_says_whether_order_matters(mask, lang) -> None:
    """P's screen says what the numpy tests above find: order matters without positions only where
    a mask is laid over them."""
    body = screen(kind("none", mask), "P", lang)
    if mask == "none":
        assert ("permutation-equivariant" if lang == "en" else "置换等变") in body
    else:
        says = ("Ordercanstillmatter", "Orderstillmatters") if lang == "en" else ("词序在这里仍", "词序仍")
        assert any(words in body for words in says), body
        assert ("mask" if lang == "en" else "掩码") in body


@pytest.mark.parametrize("lang", LANGS)
def test_causal_mask_lesson_p_no_longer_says_order_does_not_matter(lang) -> None:
    body = screen(load_scenario("causal_mask"), "P", lang)
    for words in (NO_ORDER if lang == "en" else NO_ORDER_ZH):
        assert squeeze(words) not in body
    assert ("Orderstillmatters" if lang == "en" else "词序仍然起作用") in body  # the worked cell
    assert ("Acausalmaskitselfcarriesorder" if lang == "en" else "因果掩码本身就带着顺序") in body


# -- every common mistake, the ids' one only with ids ------------------------------------------------


def every_mistake(lang: str) -> dict[str, str]:
    """Every mistake field in the text file, by its table: stage.P.none.mistake and the rest."""
    out = {}
    for key, table in load(lang)["stage"].items():
        out[key] = table["mistake"]
        out.update({f"{key}.{name}": sub["mistake"] for name, sub in table.items()
                    if isinstance(sub, dict) and "mistake" in sub})
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_every_mistake_is_there_and_says_something_of_its_own(lang) -> None:
    mistakes = every_mistake(lang)
    assert set(mistakes) == set(every_mistake("en"))  # the same tables in both languages
    assert {"P.none", "P.none_causal", "P.none_masked", "tokens.no_ids"} <= set(mistakes)
    for where, mistake in mistakes.items():
        assert len(mistake.strip()) > 20, where
    assert len(set(mistakes.values())) == len(mistakes)  # no two tables share one mistake
    scenarios = [kind(p, m) for p, m in KINDS] + [load_scenario(name) for name in builtin_names()]
    for scn in scenarios:
        for mode in MODES:
            for stage in STAGES:
                mistake = stage_text(lang, stage, scn, mode, "mistake")
                assert mistake.strip(), (scn.name, mode.name, stage.key)
                assert mistake not in (stage_text(lang, stage, scn, mode, "what"),
                                       stage_text(lang, stage, scn, mode, "why"))


def test_mistakes_state_a_mistake_not_a_fact() -> None:
    """The two the review found read as true statements; they now name the belief and correct it."""
    for lang in LANGS:
        text_file = (TEXT_DIR / f"{lang}.toml").read_text(encoding="utf-8")
        assert "Word order is not noticed anyway" not in text_file
        assert "词序并不会被「自动」察觉" not in text_file
        assert "changes no ranking" not in text_file
    P = stage_named("P")
    assert stage_text("en", P, kind("none", "none"), field="mistake").startswith("Thinking the layer notices")
    assert stage_text("zh", P, kind("none", "none"), field="mistake").startswith("以为注意力层自己能察觉词序")


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("ids", [True, False])
def test_the_ids_mistake_only_where_there_are_ids(ids, lang) -> None:
    scn = kind("none", "none", ids=ids)
    tokens = stage_named("tokens")
    mistake = stage_text(lang, tokens, scn, field="mistake")
    assert ("9527" in mistake) == ids
    # E says a row is looked up by its id only where there are ids
    looked_up = "Each id selects" if lang == "en" else "每个 ID 从词嵌入表里取出一行"
    assert (looked_up in stage_text(lang, stage_named("E"), scn, field="what")) == ids
    body = screen(scn, "tokens", lang)
    assert ("9527" in body) == ids and mistake.replace(" ", "")[:30] in body
    assert ("9527" in stage_text(lang, tokens, load_scenario("girl_bangs"), field="mistake"))
    assert "9527" not in stage_text(lang, tokens, load_scenario("river_bank"), field="mistake")


# -- rows counted from 1, the strictly upper triangle -------------------------------------------------


def test_causal_note_counts_rows_from_1_and_says_strictly_upper() -> None:
    S_M = stage_named("S+M")
    scn = load_scenario("causal_mask")
    en = " ".join(stage_notes("en", S_M, scn, MODES[0]))
    zh = " ".join(stage_notes("zh", S_M, scn, MODES[0]))
    assert "keys 1 … i" in en and "0 … i" not in en
    assert "strictly above the diagonal" in en and "strictly upper triangle" in en
    assert "键 1 … i" in zh and "0 … i" not in zh and "严格上三角" in zh and "对角线以上" in zh
    for lang in LANGS:
        for name in builtin_names():
            walked = load_scenario(name)
            for stage in STAGES:
                for field in FIELDS:
                    assert "row 0" not in stage_text(lang, stage, walked, field=field)
                    assert "第 0 行" not in stage_text(lang, stage, walked, field=field)


# -- what the seeds teach, said where it belongs ------------------------------------------------------


def notes(key: str, scn, lang: str = "en", mode=MODES[0]) -> str:
    return " ".join(stage_notes(lang, stage_named(key), scn, mode))


def test_the_cost_of_the_score_matrix_is_said_with_the_scenarios_n() -> None:
    river = load_scenario("river_bank")
    assert "4 tokens give 4 × 4 scores" in notes("QK^T", river)
    assert "O(n²·d_k) time" in notes("QK^T", river) and "O(n²) memory" in notes("QK^T", river)
    assert "O(n²·d_k)" in notes("QK^T", river, "zh") and "O(n²)" in notes("QK^T", river, "zh")
    cross = scenario_from_text(kind_text("none", "none") + "source:\n  tokens: [x, y]\n"
                               "  embeddings: [[1, 1], [0, 2]]\n", "cross.yaml")
    assert "3 queries and 2 source tokens give 3 × 2 scores" in notes("QK^T", cross)
    assert "O(n·m·d_k)" in notes("QK^T", cross) and "n²" not in notes("QK^T", cross)
    assert "3 × 3" in screen(kind("none", "none"), "QK^T", "en") or "3×3" in screen(
        kind("none", "none"), "QK^T", "en")


def test_attention_itself_has_no_parameters_said_only_where_true() -> None:
    for lang in LANGS:
        assert notes("Z", kind("none", "none"), lang)  # dot-product scores: nothing learned
    assert "no parameters to learn" in notes("Z", kind("none", "none"))
    assert "W_Q, W_K and W_V" in notes("Z", kind("none", "none"))
    assert "W_O" not in notes("Z", kind("none", "none"))  # no W_O in this layer: not named
    assert "W_O after the heads" in notes("Z", load_scenario("shapes"))  # shapes has one
    assert "W_O" in notes("Z", load_scenario("shapes"), "zh")
    additive = scenario_from_text(kind_text("none", "none") + "score: additive\nw_a: [0.5, -1]\n",
                                  "additive.yaml")
    assert "no parameters" not in notes("Z", additive)  # w_a is learned
    qk = scenario_from_text(kind_text("none", "none") + "qk_norm: true\n", "qk.yaml")
    assert "no parameters" not in notes("Z", qk)  # so is QK-norm's scale, in a real model


def test_hand_set_embeddings_are_said_to_be_for_teaching() -> None:
    for name in ("girl_bangs", "causal_mask", "river_bank", "yellow_dog"):
        assert "set by hand" in notes("E", load_scenario(name)), name
        assert "手工" in notes("E", load_scenario(name), "zh"), name
    assert notes("E", load_scenario("shapes")) == ""  # seeded random numbers: nobody set them


@pytest.mark.parametrize(("key", "field", "en", "zh"), [
    ("A", "why", "ReLU", "ReLU"),  # seed 000: normalisers other than softmax
    ("S", "why", "mean 0 and variance 1", "均值为 0、方差为 1"),  # seed 003 §6
    ("S", "why", "need not follow that assumption", "不一定满足这个假设"),
    ("Z", "why", "soft lookup", "软查找"),  # seed 004
    ("QK^T", "mistake", "taking a high score for a correct meaning", "把高分当成语义上的正确"),  # 004
    ("QK^T", "why", "|q| |k| cos θ", "|q| |k| cos θ"),
])
def test_the_seeds_points_are_said(key, field, en, zh) -> None:
    scn = load_scenario("girl_bangs")
    assert en in stage_text("en", stage_named(key), scn, field=field)
    assert zh in stage_text("zh", stage_named(key), scn, field=field)


def test_a_causal_mask_carries_position_is_said_at_p_and_at_the_mask() -> None:
    assert "carries some order" in stage_text("en", stage_named("P"), kind("sinusoidal", "causal"), field="why")
    assert "carries order" in notes("S+M", load_scenario("causal_mask"))
    assert "带着顺序" in notes("S+M", load_scenario("causal_mask"), "zh")


@pytest.mark.parametrize("lang", LANGS)
def test_z_in_uniform_and_hard_mode_is_not_called_a_blend(lang) -> None:
    scn = kind("none", "causal")
    Z = stage_named("Z")
    scaled = stage_text(lang, Z, scn, "scaled", "what")
    for mode in ("uniform", "hard"):
        assert stage_text(lang, Z, scn, mode, "what") != scaled
        assert stage_text(lang, Z, scn, mode, "why") != stage_text(lang, Z, scn, "scaled", "why")
    assert ("hard lookup" if lang == "en" else "硬查找") in stage_text(lang, Z, scn, "hard", "why")


# -- Chinese that reads as written in Chinese ---------------------------------------------------------


def test_chinese_fixes() -> None:
    zh = text("zh")
    assert "值不值得" not in zh.t("stage.K.why") and "这个位置该不该关注" in zh.t("stage.K.why")
    assert "相互独立" not in zh.t("stage.V.why")
    assert "分数的波动随 d_k 增大" in zh.t("stage.S.mistake")  # what grows is now said
    assert "被路由" not in zh.t("stage.Z.why")
    labels = [zh.t(f"ui.{field}") for field in ("what", "why", "mistake")]
    assert labels == ["是什么", "为什么", "常见误区"]
    assert all(f"「{label}」" in zh.t("heads.same_text", index=5) for label in labels)
    assert "scaled" not in zh.t("compare.additive_same") and "缩放与不缩放" in zh.t("compare.additive_same")
    legend = zh.t("ui.rows_legend", row="#", pos="位置")
    assert "就这样数" not in legend and "从 1 数起" in legend and "从 0 数起" in legend
    # the English labels the same text names
    en = text("en")
    assert en.t("heads.same_text", index=5).startswith("What, why and the common mistake")


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", builtin_names())
def test_q_says_how_many_columns_it_has_for_the_heads_at_hand(name: str, lang: str) -> None:
    """"One row per token, d_k columns" was false wherever Q holds several heads (grouped_query's
    Q is 4 × 8 = n × h·d_k; a new user's review): there Q's text names the heads' blocks."""
    scn = load_scenario(name)
    what = squeeze(stage_text(lang, stage_named("Q"), scn, field="what"))
    several = ("h·d_k", "d_kcolumnsforeachhead") if lang == "en" else ("h·d_k", "每个头占d_k列")
    if scn.heads > 1:
        assert all(word in what for word in several), what
    else:
        assert "h·d_k" not in what and "d_k" in what, what
