"""A stage anywhere: a feature the program has never seen, defined here in one place, at each kind
of place in the layer — between X and the projections, between the scores and the softmax, after
Z — and every surface must compute it, name it and go through it with no edit elsewhere.

The synthetic stage is an invertible elementwise map, M ↦ 2·M + 1, with its own symbol, text (en
and zh), worked cell, decode step and backward. Every number is checked against a reference written
here in plain numpy (the layer of causal_mask with the map put in by hand), gradients by central
finite differences of that reference.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import attnwalk.features as features
from attnwalk import text as i18n
from attnwalk.cli import app
from attnwalk.layer import roles
from attnwalk.layer.graph import SIGNED, Backward, Stage, fixed_terms, interpose
from attnwalk.scenario.builtins import builtin_path

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1", "ATTNWALK_LANG": None, "LANG": "C.UTF-8", "LC_ALL": None}
PLACES = ("X", "S", "Z")  # after what the projections read, what the softmax reads, and Z


def _cell(c) -> list:
    """2 · M[i, j] + 1, from what the stage reads (whatever stands there)."""
    name, M = c.walk.input(c.stage, 0, c.head)
    x = float(M[c.row, c.col])
    return [f"{c.sym()}[{c.rows[c.row]}, {c.cols[c.col]}] = 2 {c.mk.times} {c.num(x)} + 1 = {c.num(c.value)}"]


def _grad_cell(c, stage, index) -> tuple[list, float]:
    from attnwalk.layer.gradcells import upstream

    g = float(upstream(c, stage)[c.row, c.col])
    return [f"{c.ref()} = 2 {c.mk.times} {c.num(g)} = {c.num(2 * g)}"], 2 * g


def synthetic(place: str) -> tuple[type, Stage]:
    """The feature that puts M ↦ 2M + 1 after `place`'s role: the projections' input, the
    softmax's input, or Z (before what reads it)."""
    key, rows, cols, per_head = {"X": ("X2", "n", "d_model", False), "S": ("S2", "n", "m", True),
                                 "Z": ("Z2", "n", "d_v", True)}[place]
    symbol = f"2{place} + 1"
    stage = Stage(key, symbol, f"{symbol} = 2 · $0 + 1", rows, cols, lambda ctx, M: 2 * M + 1, reads=(place,),
                  per_head=per_head, kind=SIGNED, worked=_cell, step=lambda scn, mode, m: f"2 · {m} + 1",
                  backward=Backward(lambda ctx, d, out, M: (2 * d,), fixed_terms("2 · {d}"), _grad_cell))

    class Toy:
        STAGES = (stage,)

        @staticmethod
        def active(scn) -> bool:
            return True

        @staticmethod
        def extend(stages: list, scn) -> None:
            if place == "X":  # what the projections read, whatever it is
                at = roles.projected_from(tuple(stages)).key
                interpose(stages, at, stage._replace(reads=(at,)), readers=("Q", "K", "V"))
            elif place == "S":  # what the softmax reads, and every other reader of it
                at = roles.logits(tuple(stages)).key
                interpose(stages, at, stage._replace(reads=(at,)))
            else:
                interpose(stages, "Z", stage, readers=[s.key for s in stages if "Z" in s.inputs])

    return Toy, stage


TEXT = {"en": {"title": "{s} toy", "what": "Every entry of {p} doubled, plus one.",
               "why": "A toy stage the program has never seen.", "mistake": "Reading {p} where {s} is shown."},
        "zh": {"title": "{s} 玩具", "what": "{p} 的每个元素乘以 2 再加 1。",
               "why": "一个程序从没见过的玩具阶段。", "mistake": "在显示 {s} 的地方读成 {p}。"}}


@pytest.fixture(params=PLACES)
def toy(request, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Stage]:
    """The synthetic feature among the features, its text in both languages (and of its
    gradient's screen)."""
    place = request.param
    feature, stage = synthetic(place)
    monkeypatch.setattr(features, "FEATURES", (*features.FEATURES, feature))
    tables = {lang: copy.deepcopy(i18n._table(lang)) for lang in i18n.LANGS}
    for lang, fields in TEXT.items():
        said = {k: v.format(s=stage.symbol, p=place) for k, v in fields.items()}
        tables[lang]["stage"][stage.key] = said
        tables[lang]["stage"][f"d{stage.key}"] = {k: f"∂L/∂({v})" for k, v in said.items()}
    monkeypatch.setattr(i18n, "_table", tables.__getitem__)
    i18n.text.cache_clear()
    yield place, stage
    i18n.text.cache_clear()


@pytest.fixture
def lesson(tmp_path) -> str:
    """causal_mask with a target: T3 should attend to T1 (grad, train)."""
    path = tmp_path / "toy.yaml"
    path.write_text(builtin_path("causal_mask").read_text(encoding="utf-8") + "target: {attend: {T3: T1}}\n",
                    encoding="utf-8")
    return str(path)


def doc_of(path: str) -> dict:
    return yaml.safe_load(open(path, encoding="utf-8"))


def reference(doc: dict, place: str, W: dict | None = None) -> dict[str, np.ndarray]:
    """The layer with 2M + 1 after `place`, by hand: X = E (no positions), causal softmax."""
    W = W or {}
    E = np.array(doc["embeddings"], float)
    W_Q, W_K, W_V = (np.array(W.get(k, doc[k]), float) for k in ("W_Q", "W_K", "W_V"))
    X = E
    out = {"X": X}
    if place == "X":
        X = out["X2"] = 2 * X + 1
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    S = Q @ K.T / math.sqrt(W_Q.shape[1])
    out.update(Q=Q, K=K, V=V, S=S)
    if place == "S":
        S = out["S2"] = 2 * S + 1
    n = len(E)
    A = np.zeros((n, n))
    for i in range(n):
        e = [math.exp(S[i, j]) for j in range(i + 1)]
        for j in range(i + 1):
            A[i, j] = e[j] / sum(e)
    out["A"] = A
    out["Z"] = A @ V
    if place == "Z":
        out["Z2"] = 2 * out["Z"] + 1
    return out


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_walk_run_explain_and_every_export(toy, lesson) -> None:
    place, stage = toy
    want = reference(doc_of(lesson), place)
    data = json.loads(invoke("export", lesson, "--format", "json"))
    for key in (stage.key, "A", "Z"):
        np.testing.assert_allclose(data["stages"][key], want[key], atol=1e-12)
    walked = invoke("run", lesson, "--no-pause")
    assert f"{stage.symbol}  {stage.symbol} toy" in walked
    assert f"{stage.symbol} = 2 · {place} + 1" in walked
    if place == "X":  # the projections name what they read
        assert "Q = (2X + 1) · W_Q" in walked
    if place == "S":  # the softmax and the mask name it
        assert "A[i, :] = softmax(((2S + 1) + M)[i, :])" in walked
        assert "(2S + 1) + M,  M[i, j] ∈ {0, −∞}" in walked
    assert "2S + 1 toy" not in walked or place == "S"
    zh = runner.invoke(app, ["run", lesson, "--no-pause", "--lang", "zh"], env=ENV).stdout
    assert f"{stage.symbol} 玩具" in zh
    M = want[stage.key]
    explained = invoke("explain", lesson, stage.key, "3", "1" if place != "S" else "T1")
    assert f"= {M[2, 0]:.4f}" in explained
    assert f"{stage.symbol} toy" in invoke("export", lesson, "--format", "markdown")
    assert f"{stage.symbol} toy" in invoke("export", lesson, "--format", "latex")
    rows = [r for r in csv.DictReader(io.StringIO(invoke("export", lesson, "--format", "csv")))
            if r["stage"] == stage.key]
    np.testing.assert_allclose([float(r["value"]) for r in rows], M.ravel(), atol=1e-12)


def test_the_app_walks_through_it(toy, lesson) -> None:
    from appdriver import drive

    place, stage = toy
    from attnwalk.layer.walk import compute
    from attnwalk.render.screens import walk_steps
    from attnwalk.scenario.load import load_scenario

    steps = [s.key for s, _ in walk_steps(compute(load_scenario(lesson)))]
    at = steps.index(stage.key)
    d = drive(lesson, ["n"] * at)
    assert f"{stage.symbol} toy" in d.screen


def test_decode_shows_it_and_equals_the_walk(toy, lesson) -> None:
    place, stage = toy
    want = reference(doc_of(lesson), place)
    data = json.loads(invoke("decode", lesson, "--format", "json"))
    assert data["difference"] <= 1e-12
    for t, step in enumerate(data["steps"]):
        if place == "S":  # every stage between the scores and a_t, in each step
            np.testing.assert_allclose(step["s2"], want["S2"][t, :t + 1], atol=1e-12)
            np.testing.assert_allclose(step["s"], want["S"][t, :t + 1], atol=1e-12)
        np.testing.assert_allclose(step["a"], want["A"][t, :t + 1], atol=1e-12)
        np.testing.assert_allclose(step["z"], want["Z"][t], atol=1e-12)
        if place == "Z":  # a stage after z_t, in each step
            np.testing.assert_allclose(step["z2"], want["Z2"][t], atol=1e-12)
    shown = invoke("decode", lesson, "--no-pause")
    if place == "S":
        assert "2s_t + 1" in shown  # its row, named as a decoder names rows
    if place == "X":
        assert "q_t = (2 · x_t + 1) · W_Q" in " ".join(shown.split()) or "2 · x_t + 1" in shown


def test_tiles_still_equal_z(toy, lesson) -> None:
    from attnwalk.features.tiles import with_tiles
    from attnwalk.layer.walk import compute
    from attnwalk.scenario.load import load_scenario

    place, _ = toy
    walk = compute(with_tiles(load_scenario(lesson), 2))
    np.testing.assert_allclose(walk.matrix("tiled"), reference(doc_of(lesson), place)["Z"], atol=1e-12)


def _loss(doc: dict, place: str, W: dict) -> float:
    return -math.log(reference(doc, place, W)["A"][2, 0])  # L = −log A[T3, T1]


def _finite(doc: dict, place: str, name: str) -> np.ndarray:
    W0 = np.array(doc[name], float)
    out = np.zeros_like(W0)
    h = 1e-6
    for i, j in np.ndindex(W0.shape):
        up, down = W0.copy(), W0.copy()
        up[i, j] += h
        down[i, j] -= h
        out[i, j] = (_loss(doc, place, {name: up}) - _loss(doc, place, {name: down})) / (2 * h)
    return out


def test_grad_and_train_go_through_it(toy, lesson) -> None:
    place, stage = toy
    doc = doc_of(lesson)
    data = json.loads(invoke("grad", lesson, "--format", "json"))
    for name in ("W_Q", "W_K"):
        np.testing.assert_allclose(data["grads"][name], _finite(doc, place, name), atol=1e-7)
    walked = invoke("grad", lesson, "--no-pause")
    if place != "Z":  # the loss reads A: a stage after Z gets no gradient screen on the path
        assert f"∂L/∂({stage.symbol})" in walked
    trained = json.loads(invoke("train", lesson, "--steps", "1", "--lr", "0.5", "--format", "json"))
    moved = {k: np.array(doc[k], float) - 0.5 * np.array(data["grads"][k]) for k in ("W_Q", "W_K", "W_V")}
    np.testing.assert_allclose(trained["steps"][1]["A"], reference(doc, place, moved)["A"], atol=1e-12)


def test_compare_signal_goes_through_it(toy, lesson) -> None:
    place, _ = toy
    data = json.loads(invoke("compare", lesson, "--format", "json"))
    A = reference(doc_of(lesson), place)["A"]
    slope = 2.0 if place == "S" else 1.0  # ∂A[i, j]/∂S[i, j] = a(1 − a) · ∂S2/∂S
    np.testing.assert_allclose(data["modes"]["scaled"]["signal"], np.max(A * (1 - A) * slope, axis=1), atol=1e-12)


def test_the_quiz_and_the_predictions_name_what_they_show(toy, lesson) -> None:
    from attnwalk.layer.walk import compute
    from attnwalk.scenario.load import load_scenario
    from attnwalk.tutor.cellquiz import givens
    from attnwalk.tutor.predict import prediction
    from attnwalk.text import text

    place, stage = toy
    walk = compute(load_scenario(lesson))
    want = reference(doc_of(lesson), place)
    for lang in ("en", "zh"):
        given = givens(walk, text(lang), "A", 0, 2, 0)
        read = "(2S + 1)" if place == "S" else "S"
        assert given.split("=")[0].strip().endswith(f"{read} + M"), given
        shown = want["S2"] if place == "S" else want["S"]
        assert f"{shown[2, 0]:.4f}" in given and f"{shown[1, 0]:.4f}" in given
        if place == "S":
            assert "S + M =" not in given  # never S's name over 2S + 1's numbers
        q = prediction(walk, "A", 0, lang)
        if q is not None:
            assert f"{read} + M" in q.text
        z = prediction(walk, "Z", 0, lang)
        if z is not None:
            assert np.isclose(z.answer, want["Z"][tuple(int(x) for x in z.cell[2:])], atol=1e-12)
