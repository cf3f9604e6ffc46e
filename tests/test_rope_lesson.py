"""The rope lesson against RoPE computed here (tests/reference.py's 2 × 2 rotations), the numbers its
description and notes quote, the text a RoPE walk shows (nothing said of an added P), and its quiz."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

import reference
from attnwalk.cli import app
from attnwalk.layer.axes import token_labels
from attnwalk.features import stage_named
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import stage_screen
from attnwalk.scenario.builtins import builtin_path
from attnwalk.scenario.load import scenario_from_text
from attnwalk.text import stage_text, text
from attnwalk.tutor.questions import questions
from attnwalk.scenario.load import load_scenario


def lesson() -> dict:
    return yaml.safe_load(builtin_path("rope").read_text(encoding="utf-8"))


def oracle(doc: dict) -> dict:
    X = np.array(doc["embeddings"], dtype=float)  # RoPE: nothing added
    n = len(X)
    allowed = np.tril(np.ones((n, n), bool))
    rope = (float(doc["rope"]["base"]), doc["rope"]["pairing"])
    out = reference.attention(X, X, *(np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")),
                              allowed, rope=rope)
    return out["heads"][0]


@pytest.fixture(scope="module")
def exported() -> dict:
    result = CliRunner().invoke(app, ["export", "rope", "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_stage_matches_the_oracle(exported) -> None:
    expected = oracle(lesson())
    for key in ("Q", "K", "Q_rot", "K_rot", "QK^T", "S", "A", "Z"):
        np.testing.assert_allclose(exported["stages"][key], expected[key], atol=1e-12, err_msg=key)


def test_scores_are_constant_along_the_diagonals_and_the_quoted_numbers_hold() -> None:
    raw = oracle(lesson())["QK^T"]
    n = len(raw)
    for offset in range(-(n - 1), n):  # QKᵀ[i, j] depends only on i − j
        diagonal = np.diagonal(raw, offset=-offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)
    by_offset = {back: round(float(raw[5, 5 - back]), 2) for back in range(4)}
    assert by_offset == {0: 5.86, 1: 9.99, 2: 5.85, 3: -2.74}  # description and QKᵀ note
    assert all(raw[i, j] < 0 for i in range(n) for j in range(i - 3, -1, -1))  # 3+ steps back
    # in the fast pair q and k point almost the same way: 3 × |k_fast| ≈ 8.99
    assert round(3 * np.hypot(1.62, 2.52), 2) == 8.99


def test_the_head_reads_the_previous_token() -> None:
    A, Z = oracle(lesson())["A"], oracle(lesson())["Z"]
    assert round(float(A[1, 0]), 2) == 0.89  # cat, with two keys
    for i in range(2, 6):  # from sat on: about 80% one step back, about 10% to itself and two back
        assert int(np.argmax(A[i])) == i - 1 and round(float(A[i, i - 1]), 2) == 0.80
        assert round(float(A[i, i]), 2) == 0.10 and round(float(A[i, i - 2]), 2) == 0.10
    assert A[0, 0] == 1.0 and round(float(A[4, 3]), 2) == 0.80  # the two the's rows differ
    np.testing.assert_allclose(np.round(Z[5], 2), [0.10, 0.05, 0.90])


def test_the_two_the_s_share_q_and_k_but_not_their_rotations() -> None:
    doc, heads = lesson(), oracle(lesson())
    assert doc["tokens"][0] == doc["tokens"][4] == "the"
    np.testing.assert_array_equal(heads["Q"][0], heads["Q"][4])
    np.testing.assert_array_equal(heads["K"][0], heads["K"][4])
    np.testing.assert_allclose(heads["Q"], np.tile([3.0, 1.0, 0.0, 0.0], (6, 1)))  # quoted
    np.testing.assert_allclose(heads["K"], np.tile([1.62, 1.0, 2.52, 0.0], (6, 1)))
    np.testing.assert_allclose(heads["Q_rot"][0], [3, 1, 0, 0])
    np.testing.assert_allclose(np.round(heads["Q_rot"][4], 2), [-1.96, 1.00, -2.27, 0.04])  # Q_rot note


def test_description_and_notes_quote_those_numbers_in_both_languages() -> None:
    doc = lesson()
    for lang in ("en", "zh"):
        description = doc["description"][lang]
        for number in ("9.99", "5.86", "5.85", "80%", "[3, 1, 0, 0]", "[1.62, 1, 2.52, 0]"):
            assert number in description, (lang, number)
        assert "-2.74" in doc["notes"]["QK^T"][lang] and "8.99" in doc["notes"]["QK^T"][lang]
        assert "[-1.96, 1.00, -2.27, 0.04]" in doc["notes"]["Q_rot"][lang]
        assert "[0.10, 0.05, 0.90]" in doc["notes"]["Z"][lang]


# -- what a RoPE walk says ------------------------------------------------------------------------------


SMALL = """tokens: [a, b, a]
embeddings: [[1, 0], [0, 1], [1, 0]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0.5], [0, 1]]
W_V: [[1, 0], [0, 2]]
positional: rope
"""


def screen(scn, key: str, lang: str) -> str:
    console = Console(width=100, file=io.StringIO(), color_system=None, force_terminal=False)
    console.print(stage_screen(compute(scn), stage_named(key), 0, ViewOptions(lang=lang), index=2, count=12))
    return re.sub(r"[\s\u2500-\u257f]", "", console.file.getvalue())


# Sentences true of an added P and false under RoPE, as the P and X screens would show them.
ADDED = {"en": ("sin(", "whatthetokenmeansplus", "twodifferentvectors", "Theystartat0",
                "addedtoEexactlylike", "Padds", "permutation-equivariant"),
         "zh": ("sin(", "向量就不同", "置换等变", "P带来了")}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("mask", ["none", "causal", "[[true, false, true], [true, true, false], [false, true, true]]"])
def test_p_and_x_say_nothing_of_an_added_p(mask: str, lang: str) -> None:
    scn = scenario_from_text(SMALL + f"mask: {mask}\n", "r.yaml")
    for key in ("P", "X"):
        body = screen(scn, key, lang)
        assert "P=0" in body, key
        assert "RoPE" in body and "Q_rot" in body, key
        for words in ADDED[lang]:
            assert words not in body, (key, words)
    # and the repeated word: the same row of X, turned differently by Q_rot
    walk = compute(scn)
    np.testing.assert_array_equal(walk.matrix("X")[0], walk.matrix("X")[2])
    assert not np.allclose(walk.matrix("Q_rot")[0], walk.matrix("Q_rot")[2])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_scores_screen_names_the_rotated_vectors(lang: str) -> None:
    scn = scenario_from_text(SMALL, "r.yaml")
    raw = stage_named("QK^T")
    assert "q_rot_i" in stage_text(lang, raw, scn, field="what")
    assert raw.formula_in(scn) == "QKᵀ[i, j] = q_rot_i · k_rot_j"
    body = screen(scn, "QK^T", lang)
    assert "q_rot_a" in body and ("3" in body)
    plain = scenario_from_text(SMALL.replace("positional: rope", "positional: none"), "p.yaml")
    assert "q_rot" not in stage_text(lang, raw, plain, field="what")


def test_the_walk_shows_the_rotated_stages_in_both_languages() -> None:
    for lang, titles in (("en", ("Queries, rotated", "Keys, rotated")), ("zh", ("旋转后的查询", "旋转后的键"))):
        result = CliRunner().invoke(app, ["run", "rope", "--no-pause", "--lang", lang])
        assert result.exit_code == 0, result.output
        for title in titles:
            assert title in result.stdout
        assert result.stdout.index("Q_rot") < result.stdout.index("K_rot") < result.stdout.index("QKᵀ  ")


# -- the quiz --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_quiz_asks_whether_moving_both_tokens_changes_the_score(lang: str) -> None:
    walk = compute(load_scenario("rope"))
    qs = questions(walk, lang)
    rope_q = next(q for q in qs if q.topic == "rope")
    right = rope_q.choices[rope_q.answer]
    assert right.startswith("No" if lang == "en" else "不会")
    assert ("three" if lang == "en" else "三") in rope_q.text
    assert len(right) < max(len(c) for c in rope_q.choices)  # the right one is not the longest
    # it names two different tokens, one before the other: an offset to keep
    labels = token_labels(walk.scenario.tokens)
    asked = [(r, c) for r in labels for c in labels
             if text(lang).t("quiz.rope.question", row_token=r, col_token=c) == rope_q.text]
    assert len(asked) == 1 and asked[0][0] != asked[0][1]


def test_the_score_question_gives_the_rotated_vectors() -> None:
    walk = compute(load_scenario("rope"))
    q = next(q for q in questions(walk) if q.cell and q.cell[0] == "QK^T")
    _, head, row, col = q.cell
    assert q.given.startswith("Given the rotated vectors")
    first = float(re.search(r"q_rot_\S+ = \[([-\d.]+)", q.given).group(1))
    assert abs(first - walk.matrix("Q_rot", head)[row, 0]) < 1e-4
    assert abs(first - walk.matrix("Q", head)[row, 0]) > 1e-3  # not the unrotated query


def test_a_score_from_the_unrotated_vectors_is_named() -> None:
    from attnwalk.tutor.mistakes import diagnose
    from attnwalk.tutor.questions import cell_question

    walk = compute(load_scenario("rope"))
    heads = oracle(lesson())
    for key, scale in (("QK^T", 1.0), ("S", 2.0)):
        q = cell_question(walk, key, 5, 1)  # mat → cat, four steps back
        unrotated = float(heads["Q"][5] @ heads["K"][1]) / scale  # 3 · 1.62 + 1 · 1 = 5.86 in every cell
        assert abs(unrotated * scale - 5.86) < 1e-12 and abs(q.answer - unrotated) > 1
        assert ("unrotated", pytest.approx(unrotated)) in [(n, v) for n, v in q.mistakes]
        assert diagnose(list(q.mistakes), round(unrotated, 4), q.tolerance, q.answer)[0][0] == "unrotated"
    plain = compute(load_scenario("river_bank"))  # no RoPE: no such mistake to make
    assert all(name != "unrotated" for p in questions(plain) for name, _ in p.mistakes)
