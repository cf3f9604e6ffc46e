"""Judging, round three (issue 37): each rule over every built-in × quiz seeds 1–20, in English and
Chinese, with the predictions of `run --predict` (every head) and of `grad --predict`.

- an answer is right to the significant digits asked: relative below 0.1, so a tiny truth never
  takes a small wrong number, nor its own negative;
- asked exactly means exactly: 1e-300 is the small-but-not-zero misconception, not 0;
- no misconception in the catalogue for a question's kind lands within its tolerance of the truth
  (each recomputed here from the reference layer, tests/reference.py, written apart from attnwalk);
- no value is listed under two mistake names, nor two values the tolerance cannot tell apart;
- no question gives its answer: not a zero cell with nothing to work out, not a what-if whose
  answer is the weight it states, not a prediction whose number an earlier screen shows.

Everything is computed in-process; the quizzes are built once per module.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

import reference
from attnwalk.layer.walk import compute
from attnwalk.scenario.builtins import builtin_names, builtin_path
from attnwalk.scenario.load import load_scenario
from attnwalk.tutor.predict import STAGES, prediction
from attnwalk.tutor.questions import questions
from attnwalk.tutor.quiz import NUMBER, check, diagnosis, number_text

SEEDS = range(1, 21)
LANGS = ("en", "zh")
NAMES = builtin_names()


def _refs(scn, walk) -> dict[str, list[dict]]:
    def ref(mode="scaled", allowed=scn.allowed, of=scn):
        return reference.attention_of(of, mode, allowed)["heads"]

    return {"scaled": ref(), "unscaled": ref("unscaled"), "unmasked": ref(allowed=np.ones_like(scn.allowed)),
            "unscaled_unmasked": ref("unscaled", np.ones_like(scn.allowed)),
            "sinkless": ref(of=scn.with_setting("sinks", None)),  # the sink left out (as without one)
            "unscaled_sinkless": ref("unscaled", of=scn.with_setting("sinks", None))}


@pytest.fixture(scope="module")
def asked():
    """name -> (walk, refs, [(lang, seed, question)]) for every built-in."""
    out = {}
    for name in NAMES:
        scn = load_scenario(name)
        walk = compute(scn)
        qs = []
        for lang in LANGS:
            for seed in SEEDS:
                qs += [(lang, seed, q) for q in questions(walk, lang, seed) if q.kind == NUMBER]
            for key in STAGES:
                for head in range(scn.heads):
                    q = prediction(walk, key, head, lang)
                    if q is not None and q.kind == NUMBER:
                        qs.append((lang, f"predict {key} head {head + 1}", q))
        out[name] = (walk, _refs(scn, walk) if name != "shapes" else None, qs)
    return out


# -- the tolerance ------------------------------------------------------------------------------------


def asked_digits(a: float) -> float:
    """The widest tolerance the issue allows for a truth a: two significant digits below 0.1, two
    decimals to 10, three significant digits from there."""
    a = abs(a)
    if a < 0.1:
        return 0.5 * 10.0 ** (math.floor(math.log10(a)) - 1)
    return 0.005 if a < 10 else 0.5 * 10.0 ** (math.floor(math.log10(a)) - 2)


@pytest.mark.parametrize("name", NAMES)
def test_right_only_to_the_significant_digits_asked(name, asked):
    for lang, seed, q in asked[name][2]:
        a = float(q.answer)
        assert check(q, q.shown), (name, lang, seed, q.text, q.shown)  # the answer as shown is right
        if q.tolerance == 0 or a == 0:
            continue
        assert q.tolerance <= asked_digits(a) * (1 + 1e-9), (name, seed, q.text, q.tolerance)
        for wrong in (-a, a * 0.9, a * 1.1):  # its own negative, or 10% off, is never right
            assert check(q, repr(wrong)) is False, (name, lang, seed, q.text, wrong)


def test_the_issues_tiny_gradients_are_wrong():
    """saturation, unscaled: ∂L/∂W_Q's cell is about −3.66e-6; 3.66e-6 and 0.004 were accepted."""
    from attnwalk.commands.grad import backward_walk
    from attnwalk.tutor.gradquiz import grad_prediction

    q = grad_prediction(backward_walk(load_scenario("saturation"), "unscaled"), "dW_Q")
    assert abs(q.answer) < 1e-5 and q.tolerance < 1e-6
    assert check(q, repr(-q.answer)) is False and check(q, "0.004") is False and check(q, "0") is False
    assert check(q, q.shown)
    assert [n for n, _ in diagnosis(q, repr(-q.answer))] == ["sign_flipped"]


# -- exactly 0 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_asked_exactly_means_exactly(name, asked):
    for lang, seed, q in asked[name][2]:
        if not q.masked:
            continue
        assert q.tolerance == 0 and q.answer == 0
        assert check(q, "0") and check(q, "0.0000") and check(q, "-0")
        for tiny in ("1e-300", "5e-324", "-1e-300", "1e-9"):
            assert check(q, tiny) is False, (name, seed, tiny)
            assert "masked_small" in [n for n, _ in diagnosis(q, tiny)], (name, seed, tiny)


# -- the coincidence rule ------------------------------------------------------------------------------


def catalogue(walk, refs, q) -> dict[str, float]:
    """What each misconception for the question's kind gives, from the reference layer."""
    scn = walk.scenario
    key, head, r, c = q.cell
    mode = "unscaled" if q.mode else "scaled"
    h, other = refs[mode][head], refs["scaled" if q.mode else "unscaled"][head]
    unmasked = refs["unscaled_unmasked" if q.mode else "unmasked"][head]
    n, m = scn.n, scn.m
    out: dict[str, float] = {}
    if key in ("QK^T", "S", "A") and r != c and r < m and c < n:
        out["transposed"] = h[key][c, r]
    if key == "S" and scn.score == "dot" and not q.mode:
        out["divided_by_d_k"] = h["QK^T"][r, c] / scn.d_k
        out["times_sqrt_d_k"] = h["QK^T"][r, c] * math.sqrt(scn.d_k)
    if key in ("S", "A", "Z") and scn.score == "dot":
        out["no_scale" if not q.mode else "kept_scale"] = other[key][r, c]
    if key in ("A", "Z"):
        mix = (lambda W: W[r, c]) if key == "A" else (lambda W: (W @ h["V"])[r, c])  # noqa: E731
        L = np.where(scn.allowed, h["S+B"], -np.inf)
        with np.errstate(invalid="ignore"):
            column = np.exp(L - L.max(axis=0)) / np.exp(L - L.max(axis=0)).sum(axis=0)
        if np.all(np.isfinite(column[:, c] if key == "A" else column)):
            out["column_softmax"] = mix(column)
        out["uniform"] = mix(scn.allowed / scn.allowed.sum(axis=1, keepdims=True))
        if not scn.allowed.all():
            out["uniform_unmasked"] = mix(np.full((n, m), 1.0 / m))
            out["mask_forgotten"] = unmasked[key][r, c]
        if "sinks" in scn.settings:  # the softmax worked out without its sink
            out["sink_forgotten"] = refs["unscaled_sinkless" if q.mode else "sinkless"][head][key][r, c]
    if key == "Z":
        if h["K"].shape == h["V"].shape:
            out["k_for_v"] = (h["A"] @ h["K"])[r, c]
        if n == m:
            out["a_column"] = (h["A"].T @ h["V"])[r, c]
    out["sign_flipped"] = -float(q.answer)
    return out


@pytest.mark.parametrize("name", [n for n in NAMES if n != "shapes"])
def test_no_misconception_lands_within_the_tolerance(name, asked):
    walk, refs, qs = asked[name]
    checked = 0
    for lang, seed, q in qs:
        if q.cell is None or q.masked or q.cell[0] not in ("QK^T", "S", "A", "Z") or walk.scenario.heads > 8:
            continue
        key, head, r, c = q.cell
        truth = refs["unscaled" if q.mode else "scaled"][head][key][r, c]
        assert q.answer == pytest.approx(truth, abs=1e-9)
        for mistake, value in catalogue(walk, refs, q).items():
            assert abs(value - truth) > q.tolerance, (name, lang, seed, q.text, mistake, value)
            checked += 1
    assert checked


def test_the_issues_coincidences_are_not_asked(asked):
    """cross_attention's column softmax (a permuted column), yellow_dog --seed 2's ÷ d_k, causal_mask's
    uniform over every key, river_bank's K for V: no question asks a cell where they give the truth."""
    for name in ("cross_attention", "yellow_dog", "causal_mask", "river_bank", "savings_bank", "backprop",
                 "kv_cache", "alibi", "sliding_window", "grouped_query"):
        walk, refs, qs = asked[name]
        for lang, seed, q in qs:
            if q.cell is None or q.masked or q.cell[0] not in ("S", "A", "Z"):
                continue
            for mistake, value in catalogue(walk, refs, q).items():
                assert abs(value - q.answer) > 5e-4 or q.tolerance < abs(value - q.answer), (name, seed, mistake)


# -- one name a value ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_no_value_under_two_names(name, asked):
    for lang, seed, q in asked[name][2]:
        values = [v for _, v in q.mistakes]
        shown = [number_text(v) for v in values]
        assert len(shown) == len(set(shown)), (name, lang, seed, q.text, q.mistakes)
        for i, a in enumerate(values):
            for b in values[i + 1:]:
                assert abs(a - b) > q.tolerance, (name, lang, seed, q.text, q.mistakes)


# -- no answer in the question --------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_no_zero_cell_and_no_what_if_stating_its_answer(name, asked):
    walk, refs, qs = asked[name]
    for lang, seed, q in qs:
        if q.cell is None or q.masked or q.topic == "tiled":
            continue
        assert q.answer != 0, (name, lang, seed, q.text)  # a zero key or a zero column of V
        if q.cell[0] == "Z":  # a one-hot column of V picks a weight the question gives
            assert number_text(q.answer) not in q.given, (name, lang, seed, q.text)
        if q.mode:  # "A[r, c] is 0.3333. Without √d_k …?": the answer is not the number stated
            key, head, r, c = q.cell
            before = float(walk.matrix("A", head)[r, c])
            assert abs(q.answer - before) > q.tolerance and number_text(before) not in q.shown, (name, seed, q.text)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", NAMES)
def test_no_prediction_is_on_the_screens_before_it(name, lang, asked):
    """Every head's predictions: the number asked is in no matrix of the stages shown before it
    (at 4 decimals), save S = QKᵀ where S does not divide (that is the question)."""
    walk = asked[name][0]
    scn = walk.scenario
    keys = [s.key for s in walk.stages]
    for key in ("S", "A", "Z"):
        if key not in keys:
            continue
        for head in range(scn.heads):
            q = prediction(walk, key, head, lang)
            if q is None:
                continue
            earlier = [k for k in keys[:keys.index(key)] if k != "tokens"
                       and not (key == "S" and k == "QK^T" and not walk.mode.scales(scn.scorer))]
            for k in earlier:
                for h in range(scn.heads):
                    assert not printed_in(walk.matrix(k, h), float(q.answer)), (name, key, head, k, q.answer)


def printed_in(M, x: float) -> bool:
    """Whether a table of M, as the walk prints it, shows |x| (a sign aside)."""
    values = np.abs(np.ravel(np.asarray(M, dtype=float)))
    near = values[np.isfinite(values) & (np.abs(values - abs(x)) < 1e-3)]
    return number_text(abs(x)) in {number_text(v) for v in near}


# -- the gradient question -------------------------------------------------------------------------------

TARGETS = [n for n in NAMES if "target" in yaml.safe_load(builtin_path(n).read_text(encoding="utf-8"))]


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("mode", ["scaled", "unscaled"])
def test_the_gradient_question_gives_nothing_away(name, mode):
    from attnwalk.commands.grad import backward_walk
    from attnwalk.tutor.gradquiz import grad_prediction

    walk = backward_walk(load_scenario(name), mode)
    keys = [s.key for s in walk.stages]
    for lang in LANGS:
        q = grad_prediction(walk, "dW_Q", 0, lang)
        if q is None:
            continue
        key, _, r, c = q.cell
        X = walk.matrix(walk.stage("Q").reads[0])
        assert q.answer == pytest.approx(X[:, r] @ walk.matrix("dQ")[:, c], abs=1e-12)
        assert not printed_in(np.concatenate([X[:, r], walk.matrix("dQ")[:, c]]), q.answer), (name, mode, q.text)
        for k in keys[:keys.index(key)]:
            for h in range(walk.scenario.heads):
                assert not printed_in(walk.matrix(k, h), q.answer), (name, mode, k, q.text)
        for mistake, value in q.mistakes:
            assert abs(value - q.answer) > q.tolerance and check(q, repr(value)) is False, (name, mistake)


def _saturation_missing_term():
    """saturation's ∂L/∂W_Q, scaled, with ∂L/∂S = A ⊙ ∂L/∂A (the rowsum term dropped), in numpy."""
    d = yaml.safe_load(builtin_path("saturation").read_text(encoding="utf-8"))
    X = np.array(d["embeddings"], dtype=float)
    W_Q = np.random.default_rng(d["W_Q"]["random"]["seed"]).normal(0.0, 1.0, (4, 64))
    W_K = np.random.default_rng(d["W_K"]["random"]["seed"]).normal(0.0, 1.0, (4, 64))
    W_V, T = np.array(d["W_V"], dtype=float), np.array(d["target"]["output"], dtype=float)
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    S = np.where(np.tril(np.ones((5, 5), dtype=bool)), Q @ K.T / 8, -np.inf)
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    dA = (A @ V - T) @ V.T
    full = A * (dA - np.sum(A * dA, axis=1, keepdims=True)) / 8
    dropped = A * dA / 8
    return X.T @ (full @ K), X.T @ (dropped @ K)


def test_a_missing_chain_rule_term_is_named():
    from attnwalk.commands.grad import backward_walk
    from attnwalk.tutor.gradquiz import grad_prediction

    right, missing = _saturation_missing_term()
    for lang in LANGS:
        q = grad_prediction(backward_walk(load_scenario("saturation"), "scaled"), "dW_Q", 0, lang)
        _, _, r, c = q.cell
        assert q.answer == pytest.approx(right[r, c], abs=1e-12)
        assert dict(q.mistakes)["missing_term"] == pytest.approx(missing[r, c], abs=1e-12)
        typed = f"{missing[r, c]:.4f}"
        assert check(q, typed) is False and diagnosis(q, typed)[0][0] == "missing_term"
    # the issue's cell, −0.0176: −0.0126 and the dropped term's value are both wrong at ±0.0005
    r, c = np.unravel_index(np.argmax(np.abs(right)), right.shape)
    assert f"{right[r, c]:.4f}" == "-0.0176" and abs(missing[r, c] - right[r, c]) > 0.0005
