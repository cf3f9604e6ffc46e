"""The built-in scenarios against the lessons they come from, and what each one says to the learner.

Every golden number below is typed in from the lesson text in ../shared/seeds/ (000, 002, 003,
004) or from issue 13 (yellow_dog's angles: 6, 4.24 and 3), or computed here apart from attnwalk
(tests/reference.py and the oracle below), never copied from attnwalk's output. The CLI is driven
in-process: `attnwalk export NAME --format json` for the numbers, `attnwalk run NAME --no-pause`
for the walk a learner reads.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.scenario.builtins import builtin_names, builtin_path
from attnwalk.cli import app
from reference import attention
from reference import normalized as reference_normalized
from reference import quantized as reference_quantized

# The lessons with their own oracles (a feature this file's oracle does not compute, or random
# numbers); every other built-in, a new one included, is recomputed by the oracle below.
OWN_ORACLE = {"shapes": "test_multihead.py", "rope": "test_rope_lesson.py", "alibi": "test_alibi.py",
              "grouped_query": "test_gqa.py", "sliding_window": "test_window.py", "kv_cache": "test_decode.py",
              "saturation": "test_grad_cli.py", "attention_sink": "test_sinks.py",
              "induction": "test_induction.py"}  # random weights at d_k = 64: its claims are checked there
LESSONS = tuple(builtin_names())
BUILTINS = tuple(name for name in LESSONS if name not in OWN_ORACLE)
STAGE_KEYS = ("E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z")

# The lesson prints 4 decimals, so a printed value is within half a unit of the last place.
PRINTED_4DP = 5e-5 + 1e-9


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
    n, m = len(data["tokens"]), len(data.get("source", data)["tokens"])  # m keys: the source's, or n
    assert stage(data, "A").shape == (n, m)
    assert np.allclose(stage(data, "A").sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("name", BUILTINS)
def test_title_and_description_in_both_languages(name: str) -> None:
    doc = source(name)
    for key in ("title", "description"):
        assert isinstance(doc[key], dict), f"{name}: {key} should be {{en: ..., zh: ...}}"
        assert doc[key].get("en", "").strip() and doc[key].get("zh", "").strip()


def _positions(doc: dict, n: int, d_model: int) -> np.ndarray:
    positional = doc.get("positional", "none")
    P = np.zeros((n, d_model))
    if positional == "sinusoidal":
        for pos in range(n):
            for i in range(d_model // 2):
                angle = pos / 10000 ** (2 * i / d_model)
                P[pos, 2 * i], P[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
            if d_model % 2:
                P[pos, -1] = math.sin(pos / 10000 ** ((d_model - 1) / d_model))
    elif isinstance(positional, list):
        P = np.array(positional, dtype=float)
    return P


def _oracle(doc: dict) -> dict[str, np.ndarray]:
    """The layer computed straight from the file, apart from attnwalk's own pipeline: the inputs
    here, the attention itself by tests/reference.py (dot or additive scores, QK-norm, a source)."""
    E = np.array(doc["embeddings"], dtype=float)
    n, d_model = E.shape
    P = _positions(doc, n, d_model)
    X = E + P
    X_kv = X
    norm = doc.get("norm")  # LayerNorm or RMSNorm of each row before the projections
    normed = (lambda rows: rows) if norm is None else (lambda rows: reference_normalized(
        rows, norm, doc.get("norm_gamma", [1.0] * d_model), doc.get("norm_beta", [0.0] * d_model),
        float(doc.get("norm_eps", 1e-5))))
    if "source" in doc:
        E_src = np.array(doc["source"]["embeddings"], dtype=float)
        X_kv = E_src + _positions(doc["source"], len(E_src), d_model)
    m = len(X_kv)
    mask = doc.get("mask", "none")
    allowed = (np.ones((n, m), bool) if mask == "none" else
               np.tril(np.ones((n, m), bool)) if mask == "causal" else np.array(mask, bool))
    w_a = doc.get("w_a")
    kind = doc.get("quantize", "none")  # the weights read back from their blocks, as llama.cpp stores them
    weights = [np.array(doc[w], dtype=float) for w in ("W_Q", "W_K", "W_V")]
    weights = weights if kind == "none" else [reference_quantized(W, kind) for W in weights]
    out = attention(normed(X), normed(X_kv), *weights, allowed,
                    kind=doc.get("score", "dot"), w_a=None if w_a is None else [float(w) for w in w_a],
                    qk_norm=bool(doc.get("qk_norm", False)), qk_scale=float(doc.get("qk_scale", 1.0)))
    head = out["heads"][0]
    return {"E": E, "P": P, "X": X, "LN": normed(X), "Q": out["Q"], "K": out["K"], "V": out["V"], "QK^T": head["QK^T"],
            "S": head["S"], "A": head["A"], "Z": head["Z"]}


@pytest.mark.parametrize("name", BUILTINS)
def test_export_agrees_with_an_independent_computation(name: str) -> None:
    data, expected = export(name), _oracle(source(name))
    for key in STAGE_KEYS + (("LN",) if "norm" in source(name) else ()):
        assert np.allclose(stage(data, key), expected[key], atol=1e-9), key


def test_list_names_every_builtin() -> None:
    result = CliRunner().invoke(app, ["list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in LESSONS:
        assert name in result.stdout
    for test in OWN_ORACLE.values():  # the lessons this file does not recompute are recomputed there
        assert (Path(__file__).parent / test).is_file(), test
    lines = {name: next(line for line in result.stdout.splitlines() if f" {name} " in line)
             for name in LESSONS}
    assert re.search(r"3\s*[×x]\s*2", lines["girl_bangs"])  # n × d_model
    assert re.search(r"4\s*[×x]\s*4", lines["river_bank"])
    assert "causal" in lines["causal_mask"]
    for name in ("yellow_dog_length", "qk_norm", "additive_score", "cross_attention"):
        assert source(name)["title"]["en"].split(":")[0] in lines[name]  # the new lessons, by title


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


def test_river_bank_keys_are_a_projection_not_a_copy_of_e() -> None:
    # Issue 13: with W_K the identity, K was E on screen. The seed's figures above still hold.
    data, doc = export("river_bank"), source("river_bank")
    assert not np.array_equal(np.array(doc["W_K"], float), np.eye(4))
    assert not np.array_equal(stage(data, "K"), stage(data, "E"))
    Q, K, V = (stage(data, key) for key in ("Q", "K", "V"))
    assert not np.array_equal(K, Q) and not np.array_equal(K, V)  # three different projections


def test_river_bank_row_the_is_exactly_uniform_because_its_query_is_zero() -> None:
    data = export("river_bank")
    assert np.array_equal(row(data, "Q", "the"), [0, 0, 0, 0])
    assert np.array_equal(row(data, "S", "the"), [0, 0, 0, 0])
    assert np.array_equal(row(data, "A", "the"), [0.25] * 4)  # exactly, not to some decimals


def test_savings_bank_scores_and_weights_are_river_banks_and_its_output_the_mirror() -> None:
    # Lesson 004: the same bank with other neighbours. savings is river's meaning moved from
    # geography to finance, so S and A agree cell for cell and Z[bank] swaps its first two columns.
    river, savings = export("river_bank"), export("savings_bank")
    for key in ("QK^T", "S", "A"):
        assert np.allclose(stage(savings, key), stage(river, key), atol=1e-12), key
    for key in ("V", "Z"):
        assert not np.allclose(stage(savings, key), stage(river, key)), key
    assert np.allclose(row(savings, "S", "bank"), [0.46, 0, 2.3, 0.69], atol=0.005)
    assert np.allclose(row(savings, "A", "bank"), [0.11, 0.07, 0.69, 0.14], atol=0.005)
    assert np.allclose(row(savings, "Z", "bank"), [0.06, 1.43, 0.14, 0], atol=0.01)


# -- lesson 003 §9: the masked cell ------------------------------------------------------------------


def test_causal_mask_focus_row_holds_an_allowed_and_a_masked_key() -> None:
    # The worked cells follow the focus row T2: T2 → T2 is allowed, T2 → T3 masked though its score
    # ties T2 → T2 (0.707 each, lesson 003 §9's S).
    doc, data = source("causal_mask"), export("causal_mask")
    assert doc["focus"] == "T2"
    S, A = stage(data, "S"), stage(data, "A")
    assert S[1, 2] == pytest.approx(S[1, 1]) == pytest.approx(1 / math.sqrt(2))
    assert A[1, 2] == 0.0 and A[1, 1] == pytest.approx(math.e ** (1 / math.sqrt(2))
                                                       / (1 + math.e ** (1 / math.sqrt(2))))


def test_the_masked_cell_the_note_names_can_be_worked_out() -> None:
    # causal_mask's S+M note sends the learner to these two commands; they must work.
    note = source("causal_mask")["notes"]["S+M"]
    runner = CliRunner()
    for args, shown in ((["S+M", "T1", "T3"], "(S + M)[T1, T3] = −∞"), (["A", "T1", "T3"], "A[T1, T3] = 0.0000")):
        command = f"attnwalk explain causal_mask {' '.join(args)}"
        assert command in note["en"] and command in note["zh"]
        result = runner.invoke(app, ["explain", "causal_mask", *args], env={"COLUMNS": "100", "NO_COLOR": "1"})
        assert result.exit_code == 0, result.output
        assert shown in result.stdout
    assert "0.7071 + (−∞) = −∞" in note["en"]  # the score T1 → T3 would have had: 1/√2


# -- lesson 000 §1.1: 它 and 黄狗, the angle -------------------------------------------------------


def cos(u: np.ndarray, v: np.ndarray) -> float:
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def test_yellow_dog_keys_have_equal_length_and_differ_in_angle() -> None:
    # Issue 13: 它's query [3, 0]; keys 黄狗 [2, 0], 街道 [1.41, 1.41], 下雨 [1, 1.73], equal in length
    # (the seed: "在模长相近的情况下，两个向量方向越一致 … 注意力得分越高").
    data = export("yellow_dog")
    assert np.allclose(row(data, "Q", "它"), [3, 0])
    keys = {tok: row(data, "K", tok) for tok in ("黄狗", "街道", "下雨", "行人")}
    assert np.allclose(keys["黄狗"], [2, 0]) and np.allclose(keys["下雨"], [1, 1.73], atol=0.005)
    assert np.allclose(keys["街道"], [1.41, 1.41], atol=0.005)
    assert np.allclose([np.linalg.norm(k) for k in keys.values()], 2.0, atol=1e-12)
    q = row(data, "Q", "它")
    assert [round(cos(q, keys[t]), 4) for t in ("黄狗", "街道", "下雨", "行人")] == [1.0, 0.7071, 0.5, 0.0]


def test_yellow_dog_scores_are_six_four_point_two_four_and_three() -> None:
    data = export("yellow_dog")
    tokens, scores = data["tokens"], row(data, "QK^T", "它")
    got = [scores[tokens.index(t)] for t in ("黄狗", "街道", "下雨")]
    assert np.allclose(got, [6, 4.24, 3], atol=0.005)  # issue 13's numbers
    assert tokens[int(np.argmax(row(data, "A", "它")))] == "黄狗"
    ranked = [tokens[j] for j in np.argsort(-row(data, "A", "它"))][:4]
    assert ranked == ["黄狗", "街道", "下雨", "行人"]  # the order of the angles 0°, 45°, 60°, 90°


# -- lesson 000 §1.2: what length does -------------------------------------------------------------


def test_yellow_dog_length_changes_only_the_length_of_one_embedding() -> None:
    short, long = source("yellow_dog"), source("yellow_dog_length")
    for key in ("tokens", "W_Q", "W_K", "W_V"):
        assert short[key] == long[key], key
    changed = [i for i, (a, b) in enumerate(zip(short["embeddings"], long["embeddings"])) if a != b]
    assert [short["tokens"][i] for i in changed] == ["行人"]
    a, b = (np.array(doc["embeddings"][changed[0]], float) for doc in (short, long))
    assert cos(a, b) == pytest.approx(1.0) and np.linalg.norm(b) == pytest.approx(2 * np.linalg.norm(a))


def test_yellow_dog_length_long_key_scores_high_with_many_queries() -> None:
    # Lesson 000 §1.2: a key with a large norm gets large dot products with many queries.
    data = export("yellow_dog_length")
    K, raw = stage(data, "K"), stage(data, "QK^T")
    longest = int(np.argmax(np.linalg.norm(K, axis=1)))
    assert data["tokens"][longest] == "行人"
    tops = np.argmax(raw, axis=1)
    assert np.sum(tops == longest) > len(data["tokens"]) / 2
    it = data["tokens"].index("它")
    assert raw[it, longest] == 0.0  # and yet 它 is not drawn: its query is at right angles


def test_yellow_dog_length_long_query_sharpens_its_softmax() -> None:
    # Lesson 000 §1.2: a query with a large norm sharpens the softmax. 它's query and 黄狗's point
    # the same way; 它's is longer, so its scores are a multiple of 黄狗's and its weights sharper.
    data = export("yellow_dog_length")
    Q, raw, A = stage(data, "Q"), stage(data, "QK^T"), stage(data, "A")
    it, dog = data["tokens"].index("它"), data["tokens"].index("黄狗")
    assert cos(Q[it], Q[dog]) == pytest.approx(1.0)
    assert np.allclose(raw[it], 3 * raw[dog])
    assert list(np.argsort(-raw[it], kind="stable")) == list(np.argsort(-raw[dog], kind="stable"))
    assert A[it].max() > A[dog].max()


# -- lesson 000: QK-norm, direction without length -----------------------------------------------


def test_qk_norm_leaves_only_the_angle() -> None:
    data, doc = export("qk_norm"), source("qk_norm")
    tokens, A, raw = data["tokens"], stage(data, "A"), stage(data, "QK^T")
    it, dog, person = tokens.index("它"), tokens.index("黄狗"), tokens.index("行人")
    Q, K = stage(data, "Q"), stage(data, "K")
    assert np.linalg.norm(Q[it]) == pytest.approx(3 * np.linalg.norm(Q[dog]))  # lengths differ ...
    assert np.linalg.norm(K[person]) == pytest.approx(2 * np.linalg.norm(K[dog]))
    assert np.allclose(A[it], A[dog], atol=1e-12)  # ... and no longer count
    # every score is qk_scale · d_k · cos θ (RMS-normalised vectors have length √d_k)
    scale, d_k = float(doc["qk_scale"]), Q.shape[1]
    for i in range(len(tokens)):
        for j in range(len(tokens)):
            want = 0.0 if not K[j].any() else scale * d_k * cos(Q[i], K[j])
            assert raw[i, j] == pytest.approx(want, abs=1e-12)


def test_qk_norm_against_the_same_vectors_without_it() -> None:
    # Without QK-norm (the same file, qk_norm off), 行人's long key draws 街道 and 黄狗's short
    # query is flatter; with it neither holds, and 它's row is unchanged (|q||k| = 3·2 = scale·d_k).
    doc = source("qk_norm")
    plain = _oracle({**doc, "qk_norm": False})["A"]
    normed = stage(export("qk_norm"), "A")
    tokens = doc["tokens"]
    street, person, dog, it = (tokens.index(t) for t in ("街道", "行人", "黄狗", "它"))
    assert plain[street, person] > 0.6 > 0.45 > normed[street, person]
    assert plain[dog, dog] < 0.5 < 0.75 < normed[dog, dog]
    assert np.allclose(plain[it], normed[it], atol=1e-12)


# -- lesson 000: additive scores ---------------------------------------------------------------------


def test_additive_score_row_it_by_hand() -> None:
    # score = tanh(q + k) · w_a with q_它 = [1, 0] and w_a = [2, −2]; not divided by √d_k.
    data, doc = export("additive_score"), source("additive_score")
    assert doc["score"] == "additive" and doc["w_a"] == [2, -2]
    tokens = data["tokens"]
    want = {"黄狗": 2 * math.tanh(2), "行人": 2 * math.tanh(1) - 2 * math.tanh(1), "它": 0.0}
    raw, S = row(data, "QK^T", "它"), row(data, "S", "它")
    for tok, value in want.items():
        assert raw[tokens.index(tok)] == pytest.approx(value, abs=1e-12)
    assert np.array_equal(S, raw)
    assert raw[tokens.index("黄狗")] == pytest.approx(1.93, abs=0.005)
    assert row(data, "A", "它")[tokens.index("黄狗")] == pytest.approx(0.77, abs=0.005)


def test_additive_score_a_zero_query_still_ranks_the_keys() -> None:
    # Unlike a dot product, where a zero query scores every key 0 (river_bank's "the").
    data = export("additive_score")
    for tok in ("黄狗", "行人"):
        assert not row(data, "Q", tok).any()
        weights = row(data, "A", tok)
        assert weights.max() > 0.9 and data["tokens"][int(np.argmax(weights))] == "黄狗"


# -- lesson 003 §10: cross-attention -----------------------------------------------------------------


def test_cross_attention_each_chinese_word_reads_its_english_word() -> None:
    data = export("cross_attention")
    tokens, src = data["tokens"], data["source"]["tokens"]
    assert (len(tokens), len(src)) == stage(data, "A").shape
    assert len(stage(data, "K")) == len(src) and len(stage(data, "Q")) == len(tokens)  # K from the source
    A = stage(data, "A")
    pairs = {tokens[i]: src[int(np.argmax(A[i]))] for i in range(len(tokens))}
    assert pairs == {"一只": "a", "猫": "cat", "睡觉": "sleeps"}
    z = row(data, "Z", "一只")
    assert np.argmax(z) == 0  # animal: a has no value to pass on, cat's "animal" comes through


# -- what each lesson says to the learner -----------------------------------------------------------

LESSON_NUMBER = re.compile(r"lesson\s*0*\d|第\s*\d+\s*课|§\s*\d", re.IGNORECASE)


def squeeze(s: str) -> str:
    """Text without whitespace or box drawing, so a sentence wrapped across lines joins up."""
    return re.sub(r"[\s\u2500-\u257f]", "", s)


def walk(name: str, lang: str, command: str = "run") -> str:
    env = {"COLUMNS": "100", "NO_COLOR": "1", "LANG": "C.UTF-8", "ATTNWALK_LANG": None, "LANGUAGE": None,
           "LC_ALL": None, "LC_MESSAGES": None}
    result = CliRunner().invoke(app, [command, name, "--no-pause", "--lang", lang], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def in_lang(value, lang: str):
    assert isinstance(value, dict) and set(value) == {"en", "zh"}, value  # both languages, always
    return value[lang]


@pytest.mark.parametrize("name", LESSONS)
def test_titles_name_the_idea_not_a_lesson_number(name: str) -> None:
    doc = source(name)
    for lang in ("en", "zh"):
        assert not LESSON_NUMBER.search(in_lang(doc["title"], lang)), (name, lang)
        assert not LESSON_NUMBER.search(in_lang(doc["description"], lang)), (name, lang)


@pytest.mark.parametrize("name", LESSONS)
def test_every_lesson_has_notes_on_a_and_z_in_both_languages(name: str) -> None:
    notes = source(name)["notes"]
    assert {"A", "Z"} <= set(notes)
    for note in notes.values():
        assert in_lang(note, "en").strip() and in_lang(note, "zh").strip()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", LESSONS)
def test_the_walk_shows_the_title_the_dimensions_and_every_note(name: str, lang: str) -> None:
    from attnwalk.layer.walk import compute
    from attnwalk.render.screens import walk_steps
    from attnwalk.scenario.load import load_scenario
    from attnwalk.text import text

    doc, out, tx = source(name), walk(name, lang), text(lang)
    header = "Stage {} / {}" if lang == "en" else "阶段 {} / {}"
    steps = walk_steps(compute(load_scenario(name)))
    # A piped multi-head walk prints head 1 in full and summarises the others: take the screens shown.
    shown = [(stage_.key, out.find(header.format(i, len(steps)))) for i, (stage_, _head) in enumerate(steps, 1)]
    shown = [(key, start) for key, start in shown if start >= 0]
    screens = {}
    for (key, start), (_next, end) in zip(shown, [*shown[1:], ("", len(out))]):
        screens.setdefault(key, out[start:end])  # a split stage's first head
    assert len(screens) == len({stage_.key for stage_, _head in steps})
    opening = screens["tokens"]
    assert squeeze(in_lang(doc["title"], lang)) in squeeze(opening)
    assert squeeze(in_lang(doc["description"], lang).split("\n")[0]) in squeeze(opening)
    dims = doc.get("dimensions", {})
    if "d_model" in dims:
        # numbered from 1, as the columns of an unnamed table are
        listed = " · ".join(f"{i} = {n}" for i, n in enumerate(in_lang(dims["d_model"], lang), 1))
        assert squeeze(tx.t("lesson.dimensions") + tx.t("ui.colon") + listed) in squeeze(opening)
    for dim, stage_key in (("d_model", "E"), ("d_k", "Q"), ("d_v", "V")):
        if dim in dims:  # the table's column labels
            assert in_lang(dims[dim], lang)[-1] in screens[stage_key], (dim, stage_key)
    backward = {}
    if "target" in doc and not set(doc["notes"]) <= set(screens):  # notes on the backward walk's screens
        from attnwalk.layer.gradwalk import grad_stages

        grad_out = walk(name, lang, "grad")
        keys = [stage_.key for stage_ in grad_stages(load_scenario(name))]
        starts = [grad_out.find(header.format(i, len(keys))) for i in range(1, len(keys) + 1)]
        assert all(start >= 0 for start in starts)
        backward = {key: grad_out[start:end] for key, start, end in zip(keys, starts, [*starts[1:], None])}
    for key, note in doc["notes"].items():
        said = tx.t("lesson.notice") + tx.t("ui.colon") + in_lang(note, lang)
        assert squeeze(said) in squeeze(screens[key] if key in screens else backward[key]), (key, lang)


def test_lessons_with_meaningful_dimensions_name_them() -> None:
    # The bank lessons' hand-set meanings (lesson 004) and yellow_dog's; girl_bangs, causal_mask and
    # shapes have dimensions that mean nothing a learner could name, and are left unnamed.
    names = {name: source(name).get("dimensions", {}).get("d_model") for name in LESSONS}
    for name in ("river_bank", "savings_bank"):
        assert names[name] == {"en": ["geography", "finance", "function word", "ambiguous"],
                               "zh": ["地理", "金融", "虚词", "多义"]}
    assert names["yellow_dog"]["en"] == ["animal", "person", "place", "weather", "pronoun"]
    for name in ("girl_bangs", "causal_mask", "shapes", "kv_cache"):  # kv_cache: one-hot, a column per token
        assert names[name] is None
    for name in ("yellow_dog_length", "qk_norm", "additive_score", "cross_attention"):
        assert names[name] is not None


def test_savings_bank_points_to_the_side_by_side_compare() -> None:
    notes = source("savings_bank")["notes"]
    assert any("attnwalk compare river_bank savings_bank" in note["en"] for note in notes.values())
    assert any("attnwalk compare river_bank savings_bank" in note["zh"] for note in notes.values())
    result = CliRunner().invoke(app, ["compare", "river_bank", "savings_bank"],
                                env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output  # the command the note names works
    for name in ("river_bank", "savings_bank"):
        assert squeeze(in_lang(source(name)["title"], "en")) in squeeze(result.stdout)


def test_list_is_in_course_order_with_the_start_marked() -> None:
    """`attnwalk list` numbers the lessons in the order they teach (README's path: girl_bangs,
    word_order, causal_mask, river_bank, savings_bank first) and marks the first as the start."""
    out = CliRunner().invoke(app, ["list"], env={"COLUMNS": "120"}).stdout
    first = ["girl_bangs", "word_order", "causal_mask", "river_bank", "savings_bank"]
    found = [re.search(rf"│\s*(\d+) │ {name} ", out) for name in first]
    assert all(found) and [int(m.group(1)) for m in found] == [1, 2, 3, 4, 5]
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "start here" in line)
    assert " girl_bangs " in lines[start - 1]
    assert out.count("start here") == 1 and "attnwalk run girl_bangs" in out
    zh = CliRunner().invoke(app, ["list", "--lang", "zh"], env={"COLUMNS": "120"}).stdout
    assert "从这里开始" in zh


def test_the_list_counts_a_lessons_blocks_where_it_has_several():
    import yaml

    from attnwalk.render.lessons import lesson_facts
    from attnwalk.scenario.builtins import builtin_path
    from attnwalk.scenario.load import load_scenario

    written = yaml.safe_load(open(builtin_path("induction"), encoding="utf-8"))
    count = len(written["blocks"])
    assert count > 1
    assert f", {count} blocks" in lesson_facts(load_scenario("induction"), "en")[0]
    assert f"，{count} 个块" in lesson_facts(load_scenario("induction"), "zh")[0]
    assert "block" not in lesson_facts(load_scenario("backprop"), "en")[0]
