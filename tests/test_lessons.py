"""The built-in scenarios against the lessons they come from.

Every golden number below is typed in from the lesson text in ../shared/seeds/ (000, 002, 003,
004), never copied from attnwalk's output. The CLI is driven in-process through the export
contract: `attnwalk export NAME --format json`.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.scenario.builtins import builtin_path
from attnwalk.cli import app

BUILTINS = ("girl_bangs", "causal_mask", "river_bank", "savings_bank", "yellow_dog")
STAGE_KEYS = ("E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z")

# The lesson prints 4 decimals, so a printed value is within half a unit of the last place.
PRINTED_4DP = 5e-5 + 1e-9


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)


def export(name: str) -> dict:
    result = CliRunner().invoke(app, ["export", name, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def stage(data: dict, key: str) -> np.ndarray:
    return np.array(data["stages"][key], dtype=float)


def row(data: dict, key: str, token: str) -> np.ndarray:
    return stage(data, key)[data["tokens"].index(token)]


def source(name: str) -> dict:
    path = builtin_path(name)
    assert path is not None, f"no built-in scenario file for {name}"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# -- every built-in --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILTINS)
def test_export_has_every_stage(name: str) -> None:
    data = export(name)
    assert data["name"] == name
    assert set(STAGE_KEYS) <= set(data["stages"])
    n = len(data["tokens"])
    assert stage(data, "A").shape == (n, n)
    assert np.allclose(stage(data, "A").sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("name", BUILTINS)
def test_title_and_description_in_both_languages(name: str) -> None:
    doc = source(name)
    for key in ("title", "description"):
        assert isinstance(doc[key], dict), f"{name}: {key} should be {{en: ..., zh: ...}}"
        assert doc[key].get("en", "").strip() and doc[key].get("zh", "").strip()


def _oracle(doc: dict) -> dict[str, np.ndarray]:
    """The layer computed straight from the file, apart from attnwalk's own pipeline."""
    E = np.array(doc["embeddings"], dtype=float)
    n, d_model = E.shape
    P = np.zeros_like(E)
    positional = doc.get("positional", "none")
    if positional == "sinusoidal":
        for pos in range(n):
            for i in range(d_model // 2):
                angle = pos / 10000 ** (2 * i / d_model)
                P[pos, 2 * i], P[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
            if d_model % 2:
                P[pos, -1] = math.sin(pos / 10000 ** ((d_model - 1) / d_model))
    elif isinstance(positional, list):
        P = np.array(positional, dtype=float)
    X = E + P
    Q, K, V = (X @ np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V"))
    raw = Q @ K.T  # (n, d_k) @ (d_k, n) -> (n, n)
    S = raw / math.sqrt(K.shape[1])
    mask = doc.get("mask", "none")
    allowed = (np.ones((n, n), bool) if mask == "none" else
               np.tril(np.ones((n, n), bool)) if mask == "causal" else np.array(mask, bool))
    e = np.where(allowed, np.exp(S - S.max(axis=1, keepdims=True)), 0.0)
    A = e / e.sum(axis=1, keepdims=True)
    return {"E": E, "P": P, "X": X, "Q": Q, "K": K, "V": V, "QK^T": raw, "S": S, "A": A, "Z": A @ V}


@pytest.mark.parametrize("name", BUILTINS)
def test_export_agrees_with_an_independent_computation(name: str) -> None:
    data, expected = export(name), _oracle(source(name))
    for key in STAGE_KEYS:
        assert np.allclose(stage(data, key), expected[key], atol=1e-9), key


def test_list_names_every_builtin() -> None:
    result = CliRunner().invoke(app, ["list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in BUILTINS:
        assert name in result.stdout
    lines = {name: next(line for line in result.stdout.splitlines() if name in line)
             for name in BUILTINS}
    assert re.search(r"3\s*[×x]\s*2", lines["girl_bangs"])  # n × d_model
    assert re.search(r"4\s*[×x]\s*4", lines["river_bank"])
    assert "causal" in lines["causal_mask"]


# -- lesson 002: 女生撩刘海 -------------------------------------------------------------------------

GIRL_BANGS = {
    "E": [[3, 1], [2, 2], [2, 4]],
    "P": [[0.0000, 1.0000], [0.8415, 0.5403], [0.9093, -0.4161]],
    "X": [[3.0000, 2.0000], [2.8415, 2.5403], [2.9093, 3.5839]],
    "Q": [[-0.2000, 1.7000], [0.3274, 1.2872], [1.1215, 0.8264]],
    "K": [[1.6000, 3.1000], [1.4509, 3.8406], [1.3872, 5.3083]],
    "V": [[2.2000, 0.9000], [1.8254, 1.6276], [1.4758, 2.8460]],
    "QK^T": [[4.9500, 6.2388, 8.7467], [4.5140, 5.4184, 7.2868], [4.3564, 4.8011, 5.9428]],
    "S": [[3.5002, 4.4115, 6.1849], [3.1919, 3.8314, 5.1526], [3.0804, 3.3949, 4.2022]],
    "A": [[0.0551, 0.1371, 0.8078], [0.1000, 0.1896, 0.7104], [0.1838, 0.2518, 0.5644]],
    "Z": [[1.5636, 2.5716], [1.6145, 2.4204], [1.6969, 2.1815]],
}


def test_girl_bangs_tokens_and_ids() -> None:
    data = export("girl_bangs")
    assert data["tokens"] == ["女生", "撩", "刘海"]
    assert source("girl_bangs")["ids"] == [1258, 875, 9527]
    assert data["mask"] == [[True] * 3] * 3


@pytest.mark.parametrize("key", list(GIRL_BANGS))
def test_girl_bangs_matches_the_lesson_to_4_decimals(key: str) -> None:
    got = stage(export("girl_bangs"), key)
    want = np.array(GIRL_BANGS[key], dtype=float)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= PRINTED_4DP, f"{key}:\n{got}\nlesson:\n{want}"


def test_girl_bangs_softmax_arithmetic_of_row_one() -> None:
    # Lesson 002 §5: e^3.5002 = 33.12, e^4.4115 = 82.42, e^6.1849 = 485.6, sum 601.1. The lesson's
    # own exponentials are good to about 0.05%, so compare relatively at 0.1%.
    S0 = row(export("girl_bangs"), "S", "女生")
    assert np.allclose(np.exp(S0), [33.12, 82.42, 485.6], rtol=1e-3)
    assert np.exp(S0).sum() == pytest.approx(601.1, rel=1e-3)


def test_girl_bangs_unscaled_row_is_sharper() -> None:
    # Lesson 002 §4.2: softmax of row 女生 without the scaling is [0.020, 0.074, 0.906].
    raw = row(export("girl_bangs"), "QK^T", "女生")
    e = np.exp(raw - raw.max())
    assert np.allclose(e / e.sum(), [0.020, 0.074, 0.906], atol=5e-4)


# -- lesson 003 §9: causal mask ----------------------------------------------------------------------


def test_causal_mask_q_k_v_and_scores_are_exact() -> None:
    data = export("causal_mask")
    assert np.array_equal(stage(data, "Q"), [[1, 0], [0, 1], [1, 1]])
    assert np.array_equal(stage(data, "K"), [[1, 0], [0, 1], [1, 1]])
    assert np.array_equal(stage(data, "V"), [[1, 0], [0, 2], [3, 1]])
    assert np.array_equal(stage(data, "QK^T"), [[1, 0, 1], [0, 1, 1], [1, 1, 2]])
    assert np.allclose(stage(data, "S"), [[0.707, 0, 0.707], [0, 0.707, 0.707],
                                          [0.707, 0.707, 1.414]], atol=5e-4)


def test_causal_mask_weights_and_output() -> None:
    data = export("causal_mask")
    A, Z = stage(data, "A"), stage(data, "Z")
    assert np.allclose(A, [[1, 0, 0], [0.33, 0.67, 0], [0.25, 0.25, 0.50]], atol=0.01)
    assert np.allclose(Z, [[1, 0], [0.33, 1.34], [1.75, 1.00]], atol=0.01)
    assert np.all(A[np.triu_indices(3, k=1)] == 0.0)  # e^−∞ = 0 exactly, not just small


def test_causal_mask_export_is_lower_triangular_booleans() -> None:
    mask = export("causal_mask")["mask"]
    assert all(isinstance(cell, bool) for line in mask for cell in line)
    assert mask == [[True, False, False], [True, True, False], [True, True, True]]


# -- lesson 004: by the river bank / at the savings bank -------------------------------------------

GEOGRAPHY, FINANCE = 0, 1


def test_river_bank_row_bank_matches_the_lesson() -> None:
    data = export("river_bank")
    assert data["tokens"] == ["by", "the", "river", "bank"]
    assert len(stage(data, "Q")[0]) == 4  # d_k = 4, so √d_k = 2
    assert np.allclose(row(data, "Q", "bank"), [2.3, 2.3, 0, 0], atol=1e-9)
    assert np.allclose(row(data, "QK^T", "bank"), [0.92, 0, 4.6, 1.38], atol=1e-9)
    assert np.allclose(row(data, "S", "bank"), [0.46, 0, 2.3, 0.69], atol=0.005)
    assert np.allclose(row(data, "A", "bank"), [0.11, 0.07, 0.69, 0.14], atol=0.005)
    assert np.allclose(row(data, "Z", "bank"), [1.43, 0.06, 0.14, 0], atol=0.01)
    assert np.argmax(row(data, "Z", "bank")) == GEOGRAPHY


def test_river_bank_has_no_positions() -> None:
    assert not np.any(stage(export("river_bank"), "P"))


def test_savings_bank_shares_bank_and_weights_with_river_bank() -> None:
    river, savings = export("river_bank"), export("savings_bank")
    assert savings["tokens"] == ["at", "the", "savings", "bank"]
    assert np.array_equal(row(savings, "E", "bank"), row(river, "E", "bank"))
    assert np.array_equal(row(savings, "Q", "bank"), row(river, "Q", "bank"))
    river_doc, savings_doc = source("river_bank"), source("savings_bank")
    for key in ("W_Q", "W_K", "W_V"):
        assert np.array_equal(np.array(savings_doc[key], float), np.array(river_doc[key], float)), key


def test_savings_bank_reads_bank_as_finance() -> None:
    data = export("savings_bank")
    assert data["tokens"][int(np.argmax(row(data, "A", "bank")))] == "savings"
    assert np.argmax(row(data, "Z", "bank")) == FINANCE


# -- lesson 000: 它 and 黄狗 -------------------------------------------------------------------------


def test_yellow_dog_it_attends_to_the_dog() -> None:
    data = export("yellow_dog")
    assert {"行人", "街道", "黄狗", "下雨", "它"} <= set(data["tokens"])
    weights = row(data, "A", "它")
    assert data["tokens"][int(np.argmax(weights))] == "黄狗"
    assert weights[data["tokens"].index("黄狗")] > 0.5
    # q_它 · k_黄狗 ≫ q_它 · k_j for every other token j
    scores = row(data, "QK^T", "它")
    dog = data["tokens"].index("黄狗")
    assert all(scores[dog] >= 2 * s for j, s in enumerate(scores) if j != dog)


def test_yellow_dog_long_key_scores_high_with_many_queries() -> None:
    # Lesson 000 §1.2: a key with a large norm gets large dot products with many queries.
    data = export("yellow_dog")
    K, raw = stage(data, "K"), stage(data, "QK^T")
    longest = int(np.argmax(np.linalg.norm(K, axis=1)))
    tops = np.argmax(raw, axis=1)
    assert np.sum(tops == longest) > len(data["tokens"]) / 2
    assert data["tokens"][longest] != "黄狗"  # and yet 它 is not fooled by it


def test_yellow_dog_long_query_sharpens_its_softmax() -> None:
    # Lesson 000 §1.2: a query with a large norm sharpens the softmax. 它's query and 黄狗's point
    # the same way; 它's is longer, so its distribution is more concentrated.
    data = export("yellow_dog")
    Q, A = stage(data, "Q"), stage(data, "A")
    it, dog = data["tokens"].index("它"), data["tokens"].index("黄狗")
    cos = Q[it] @ Q[dog] / (np.linalg.norm(Q[it]) * np.linalg.norm(Q[dog]))
    assert cos == pytest.approx(1.0)
    assert np.linalg.norm(Q[it]) > np.linalg.norm(Q[dog])
    assert A[it].max() > A[dog].max()
