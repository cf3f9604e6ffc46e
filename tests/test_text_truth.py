"""The sentences issue 37 found untrue, each now true, in both languages; every number they state
is recomputed here with numpy (or the gguf library's own Q8_0) from the scenario's inputs, read
from its YAML file with PyYAML, never from attnwalk's matrices.

Sources: Ba, Kiros and Hinton 2016 (LayerNorm subtracts the mean: it turns a row), Zhang and
Sennrich 2019 (RMSNorm does not), Su et al. (RoFormer: position enters only as i − j), llama.cpp's
Q8_0 (d = max|w| / 127, q in [−127, 127]).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.scenario.builtins import builtin_path

from test_teaching_text import strings  # every string of text/<lang>.toml by its dotted key


def doc(name: str) -> dict:
    return yaml.safe_load(builtin_path(name).read_text(encoding="utf-8"))


def said(name: str, lang: str) -> str:
    """A built-in's title, description and notes in `lang`, as one string."""
    d = doc(name)
    parts = [d["title"][lang], d["description"][lang]] + [n[lang] for n in (d.get("notes") or {}).values()]
    return " ".join(" ".join(parts).split())


def everything(lang: str) -> str:
    return " ".join(strings(lang).values())


# -- 1. LayerNorm turns a row ---------------------------------------------------------------------


def test_layer_norm_changes_a_rows_direction_as_the_lesson_now_says():
    X = np.array(doc("layer_norm")["embeddings"], dtype=float)  # (4, 4)
    LN = (X - X.mean(axis=1, keepdims=True)) / np.sqrt(X.var(axis=1, keepdims=True) + 1e-5)
    angle = np.degrees(np.arccos(np.sum(X * LN, axis=1) / np.linalg.norm(X, axis=1) / np.linalg.norm(LN, axis=1)))
    assert round(angle[0]) == 34  # the
    assert X[1, 3] == 0 and f"{LN[1, 3]:.4f}" == "-0.2773"  # cat's 4th number
    en, zh = said("layer_norm", "en"), said("layer_norm", "zh")
    assert "the's row turns by about 34°" in en and "from 0 to -0.2773" in en
    assert "the 那一行转了大约 34°" in zh and "从 0 变成 -0.2773" in zh
    for wrong in ("the same direction pattern", "its direction, is what the scores then compare",
                  "the scores compare directions"):
        assert wrong not in en
    for wrong in ("正负格局没变", "也就是它的方向，才是分数", "分数比较的是方向"):
        assert wrong not in zh
    # RMSNorm keeps the direction: x / rms(x) is x times a positive number
    rms = X / np.sqrt(np.mean(X * X, axis=1, keepdims=True))
    assert np.allclose(np.cross(X[:, :3], rms[:, :3]), 0)
    for lang, wrong in (("en", "A norm keeps a row's direction"), ("zh", "归一化保留一行的方向")):
        assert wrong not in everything(lang)


# -- 2, 3, 4, 5, 7, 10: the words --------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_corrected_sentences(lang):
    out = everything(lang) + " " + " ".join(said(n, lang) for n in ("rope", "yellow_dog_length"))
    wrong = {"en": ("So a long key scores high with many queries", "That is what dividing by √d_k prevents",
                    "without it the softmax saturates and", "the score depends only on how far apart",
                    "each score depends only on the offset", "as Llama and GPT-NeoX do",
                    "Llama-style code (half)", "a long vector usually means", "is often above 1",
                    "from -128 to 127", "8 bits give 256, sixteen"),
             "zh": ("所以模长大的键会和许多查询得到高分", "除以 √d_k 防止的正是这个", "不除的话 softmax 会饱和",
                    "分数只看相隔多远", "所以每个分数只取决于查询和键之间的相对距离", "和 Llama、GPT-NeoX 一样",
                    "Llama 风格的代码（half）", "通常表示这个 token", "常常大于 1", "-128 到 127 之间",
                    "8 位有 256 个，是 16 倍")}[lang]
    for sentence in wrong:
        assert sentence not in out, sentence
    right = {"en": ("low with those that lean away", "helps prevent", "tends to saturate",
                    "depends on the two positions only through the offset", "Meta's own Llama code",
                    "can mean a token", "never below 1", "from -127 to 127"),
             "zh": ("和背离它的查询分数更低", "有助于避免", "容易饱和", "位置只通过查询和键之间的相对距离进入分数",
                    "Meta 自己的 Llama 代码", "可能表示这个 token", "不会小于 1", "-127 到 127 之间")}[lang]
    for sentence in right:
        assert sentence in out, sentence


def test_a_long_keys_scores_stretch_both_ways():
    """q · k = |q| |k| cos θ: doubling k doubles the score of a query leaning away, making it lower."""
    q_toward, q_away, k = np.array([1.0, 0.2]), np.array([-1.0, 0.3]), np.array([1.0, 0.0])
    assert q_toward @ (2 * k) > q_toward @ k and q_away @ (2 * k) < q_away @ k


def test_online_softmax_l_is_never_below_1_once_a_key_is_seen():
    rng = np.random.default_rng(0)
    for _ in range(200):
        s = rng.normal(0, 5, size=rng.integers(1, 12))
        m = l = None
        for block in np.array_split(s, max(1, len(s) // 3)):
            if not len(block):
                continue
            m_new = block.max() if m is None else max(m, block.max())
            l = (0 if l is None else l * np.exp(m - m_new)) + np.exp(block - m_new).sum()
            m = m_new
            assert l >= 1 - 1e-12


# -- 6. Q8_0 ----------------------------------------------------------------------------------------


def test_q8_0_codes_run_from_minus_127_to_127():
    gguf = pytest.importorskip("gguf")
    w = np.random.default_rng(1).normal(0, 1, size=(4, 32)).astype(np.float32)
    w[0, 0], w[1, 5] = -7.0, 7.0  # the block's max|w| on either sign
    raw = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)  # 34 bytes a block: d (f16), 32 × int8
    q = raw.reshape(4, 34)[:, 2:].view(np.int8)
    assert q.min() == -127 and q.max() == 127


# -- 8. saturation: per entry, not every gradient ------------------------------------------------


def _saturation(scale: float) -> dict[str, np.ndarray]:
    d = doc("saturation")
    X = np.array(d["embeddings"], dtype=float)  # (5, 4)
    W_Q = np.random.default_rng(d["W_Q"]["random"]["seed"]).normal(0.0, 1.0, (4, 64))
    W_K = np.random.default_rng(d["W_K"]["random"]["seed"]).normal(0.0, 1.0, (4, 64))
    W_V, T = np.array(d["W_V"], dtype=float), np.array(d["target"]["output"], dtype=float)
    allowed = np.tril(np.ones((5, 5), dtype=bool))
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    S = np.where(allowed, Q @ K.T / scale, -np.inf)
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    dZ = A @ V - T  # L = ½ Σ (Z − T)²
    dA = dZ @ V.T
    dS = A * (dA - np.sum(dA * A, axis=1, keepdims=True)) / scale
    dQ, dK, dV = dS @ K, dS.T @ Q, A.T @ dZ
    return {"A": A, "allowed": allowed, "W_Q": X.T @ dQ, "W_K": X.T @ dK, "W_V": X.T @ dV,
            "X": dQ @ W_Q.T + dK @ W_K.T + dV @ W_V.T}


def test_saturations_bound_is_per_entry_of_the_weight_gradients():
    g, scaled = _saturation(1.0), _saturation(8.0)
    A = g["A"]
    assert A[g["allowed"] & (A < 0.5)].max() < 4e-6 and (A * (1 - A))[g["allowed"]].max() < 4e-6
    for name in ("W_Q", "W_K", "W_V"):
        assert np.abs(g[name]).max() < 4e-6, name
    assert np.abs(g["X"]).max() > 4e-6  # so "every gradient that passes the softmax" was not true
    norm = lambda g: np.sqrt(sum(np.sum(g[n] ** 2) for n in ("W_Q", "W_K", "W_V")))  # noqa: E731
    assert f"{norm(g):.6f}" == "0.000018" and f"{norm(scaled):.2f}" == "0.17"
    en, zh = said("saturation", "en"), said("saturation", "zh")
    assert "so is each entry of ∂L/∂W_Q, ∂L/∂W_K and ∂L/∂W_V" in en and "every gradient that passes" not in en
    assert "0.17 scaled and 0.000018 unscaled" in en
    assert "∂L/∂W_Q、∂L/∂W_K、∂L/∂W_V 的每个元素也都不到 4e-6" in zh and "所有经过 softmax 的梯度也都这么小" not in zh


# -- 9. train names W_O only where there is one -------------------------------------------------


@pytest.mark.parametrize("name", ["backprop", "saturation"])
def test_train_names_only_the_weights_the_layer_has(name):
    assert "W_O" not in doc(name)
    for lang, rule in (("en", "for W_Q, W_K, W_V;"), ("zh", "对 W_Q、W_K、W_V 做")):
        out = CliRunner().invoke(app, ["train", name, "--steps", "1", "--lang", lang], env={"COLUMNS": "200"})
        assert out.exit_code == 0, out.output
        assert rule in out.stdout and "(and W_O)" not in out.stdout and "以及 W_O" not in out.stdout


# -- 11. one Chinese term each --------------------------------------------------------------------


def test_the_chinese_holds_one_term_for_each():
    from attnwalk.scenario.builtins import builtin_names

    zh = everything("zh") + " ".join(said(n, "zh") for n in builtin_names())
    assert "QK-Norm" not in zh and "QK-norm" in zh
    texts = strings("zh")
    scores = [k for k, v in texts.items() if "得分" in v]
    assert sorted(scores) == ["grade.score", "quiz.score"], scores  # the quiz's points, not a q · k
    assert not re.search(r"向量.{0,6}长度|长度 7\.48", zh)
    assert "分数、注意力权重和输出" in zh and "权重不是参数" not in zh.replace("注意力权重不是参数", "")
