"""The unembedding (features/unembed.py) and the next-token loss (target: next), each number checked
against numpy written here, apart from the program: the final norm, ℓ = Y · W_U (or tied, Y · E_vocabᵀ),
p = softmax(ℓ / T) at T = 0.5, 1 and 2, the top k, the loss L = mean −log p[i, t_(i+1)], and every
gradient against central finite differences of the loss computed by the forward pass alone."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from gradcheck import param_moved
import yaml
from rich.console import Console
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.features import unembed
from attnwalk.features.target import loss, next_token_loss
from attnwalk.layer.backward import backward
from attnwalk.layer.walk import compute
from attnwalk.render.nextview import next_panel
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.load import load_scenario, scenario_from_text

runner = CliRunner()
ENV = {"COLUMNS": "80", "NO_COLOR": "1", "ATTNWALK_LANG": None, "LANG": "C.UTF-8", "LANGUAGE": None,
       "LC_ALL": None, "LC_MESSAGES": None}

VOCAB = ["the", "river", "bank", "flows", "money"]
E_VOCAB = [[1, 0, 0.5, -0.5], [0, 1, -0.5, 0.5], [0.5, 0.5, 1, 0], [0.2, -0.3, 0.1, 0.9], [-0.4, 0.6, 0.3, 0.2]]
W_U = [[1, 0, 0.5, -1, 0.2], [0, 1, -0.5, 0.3, 1], [0.5, -0.5, 1, 2, 0], [-1, 0.5, 0, 0.1, 0.4]]


def doc(**extra) -> dict:
    """A one-head layer with W_O and a causal mask over [the, river, bank], untied, no final norm."""
    base = {"name": "nexttok", "tokens": ["the", "river", "bank"], "vocab": VOCAB,
            "embeddings": [E_VOCAB[0], E_VOCAB[1], E_VOCAB[2]],
            "W_Q": [[1, 0], [0, 1], [0.5, 0], [0, 0.5]], "W_K": [[1, 0], [0, 1], [0, 0.5], [0.5, 0]],
            "W_V": [[1, 0], [0, 1], [1, 1], [0, -1]], "W_O": [[1, 0, 0.5, 0], [0, 1, 0, 0.5]],
            "mask": "causal", "W_U": W_U, "target": "next"}
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def dumped(d: dict) -> str:
    return yaml.safe_dump(json.loads(json.dumps(d)), allow_unicode=True, sort_keys=False)  # no shared rows: no anchors


def load(d: dict):
    return scenario_from_text(dumped(d), "next.yaml")


def write(tmp_path, d: dict) -> str:
    path = tmp_path / "next.yaml"
    path.write_text(dumped(d), encoding="utf-8")
    return str(path)


# -- numpy, written apart from attnwalk ----------------------------------------------------------


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_output(d: dict) -> np.ndarray:
    """O of the one-head causal layer: softmax(QKᵀ/√d_k + M) · V · W_O (no positions)."""
    X = np.array(d["embeddings"], float)
    Q, K, V = (X @ np.array(d[k], float) for k in ("W_Q", "W_K", "W_V"))
    S = Q @ K.T / np.sqrt(Q.shape[1])
    S[np.triu(np.ones_like(S, dtype=bool), 1)] = -np.inf
    return np_softmax(S) @ V @ np.array(d["W_O"], float)


def np_norm(Y: np.ndarray, kind: str, gamma, beta, eps=1e-5) -> np.ndarray:
    if kind == "rms":
        return Y / np.sqrt((Y ** 2).mean(axis=1, keepdims=True) + eps) * gamma
    mu = Y.mean(axis=1, keepdims=True)
    return (Y - mu) / np.sqrt(((Y - mu) ** 2).mean(axis=1, keepdims=True) + eps) * gamma + beta


def np_logits(d: dict) -> np.ndarray:
    Y = np_output(d)
    if "final_norm" in d:
        width = Y.shape[1]
        Y = np_norm(Y, d["final_norm"], np.array(d.get("final_norm_gamma", np.ones(width))),
                    np.array(d.get("final_norm_beta", np.zeros(width))))
    W = np.array(d["vocab_embeddings"], float).T if d.get("tie_embeddings") else np.array(d["W_U"], float)
    return Y @ W


def np_loss(d: dict, T: float, last: str | None = None) -> float:
    P = np_softmax(np_logits(d) / T)
    ids = [VOCAB.index(t) for t in d["tokens"]] + ([VOCAB.index(last)] if last else [])
    terms = [-np.log(P[i, ids[i + 1]]) for i in range(len(ids) - 1)]
    return float(np.mean(terms))


# -- forward ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("norm", [None, "layer", "rms"])
def test_logits_and_probabilities_match_numpy(T: float, norm: str | None) -> None:
    d = doc(temperature=T, final_norm=norm,
            final_norm_gamma=[1.5, 0.5, 1, 2] if norm else None,
            final_norm_beta=[0.1, -0.2, 0, 0.3] if norm == "layer" else None)
    walk = compute(load(d))
    keys = [s.key for s in walk.stages]
    assert keys[-2:] == ["logits", "p"] and ("LN_f" in keys) == (norm is not None)
    logits = np_logits(d)
    np.testing.assert_allclose(walk.mats["logits"], logits, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(walk.mats["p"], np_softmax(logits / T), rtol=1e-12, atol=1e-15)
    assert walk.mats["p"].dtype == np.float64
    # the panel's three temperatures, whatever T the scenario walks with
    for row in range(3):
        ranked = unembed.ranked(walk, row)
        for item in ranked["next"]:
            want = [np_softmax(logits / t)[row, item["id"]] for t in (0.5, 1.0, 2.0)]
            np.testing.assert_allclose(item["p_at"], want, rtol=1e-12)


def test_huge_logits_stay_finite_at_a_small_temperature() -> None:
    d = doc(W_U=(np.array(W_U) * 400).tolist(), temperature=0.05)
    P = compute(load(d)).mats["p"]
    assert np.isfinite(P).all() and np.allclose(P.sum(axis=1), 1)


def test_tied_equals_w_u_the_table_transposed_and_embeddings_are_looked_up() -> None:
    tied = doc(W_U=None, embeddings=None, vocab_embeddings=E_VOCAB, tie_embeddings=True, final_norm="layer")
    scn = load(tied)
    np.testing.assert_array_equal(scn.main.E, np.array(E_VOCAB)[[0, 1, 2]])  # E = table[ids]
    untied = doc(W_U=np.array(E_VOCAB).T.tolist(), final_norm="layer")
    a, b = compute(scn), compute(load(untied))
    np.testing.assert_allclose(a.mats["logits"], b.mats["logits"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.mats["logits"], np_logits({**tied, "embeddings": untied["embeddings"]}),
                               rtol=1e-12, atol=1e-14)
    # given both, the tokens' embeddings must be the table's rows
    load(doc(W_U=None, vocab_embeddings=E_VOCAB, tie_embeddings=True))


def test_top_k_is_by_logit_largest_first_and_ties_by_id() -> None:
    # bank's row of W_U equal to the's: every position scores the and bank alike
    tied_cols = np.array(W_U)
    tied_cols[:, 2] = tied_cols[:, 0]
    walk = compute(load(doc(W_U=tied_cols.tolist(), top_k=4)))
    logits = walk.mats["logits"]
    for row in range(3):
        got = [item["id"] for item in unembed.ranked(walk, row)["next"]]
        want = sorted(range(len(VOCAB)), key=lambda j: (-logits[row, j], j))[:4]
        assert got == want and len(got) == 4
        assert got.index(0) < got.index(2) if 2 in got and 0 in got else True
    assert unembed.ranked(walk, 0)["top_k"] == 4


# -- the loss --------------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [0.5, 1.0, 2.0])
def test_the_loss_is_the_mean_cross_entropy_of_the_next_tokens(T: float) -> None:
    d = doc(temperature=T, final_norm="layer")
    walk = compute(load(d))
    got = loss(walk)
    assert got.value == pytest.approx(np_loss(d, T), rel=1e-12)
    assert got.rows[-1, 0] == 0.0  # nothing known after the last token
    last = compute(load(doc(temperature=T, final_norm="layer", target={"next": "flows"})))
    assert loss(last).value == pytest.approx(np_loss(d, T, last="flows"), rel=1e-12)
    # part of a sequence: the mean over the positions asked only
    P = np_softmax(np_logits(d) / T)
    assert next_token_loss(walk, [1]) == pytest.approx(-np.log(P[1, VOCAB.index("bank")]), rel=1e-12)
    assert next_token_loss(walk) == pytest.approx(got.value, rel=1e-12)


def test_the_seed_is_p_minus_onehot_over_t_and_n() -> None:
    T = 0.7
    d = doc(temperature=T)
    got = loss(compute(load(d)))
    P = np_softmax(np_logits(d) / T)
    want = np.zeros_like(P)
    for i, w in enumerate([VOCAB.index("river"), VOCAB.index("bank")]):
        want[i] = P[i] / (2 * T)
        want[i, w] -= 1 / (2 * T)
    np.testing.assert_allclose(got.seed, want, rtol=1e-12, atol=1e-15)
    assert got.reads == "logits"


# -- backward against finite differences -----------------------------------------------------------


def moved_loss(scn, name: str, cell: tuple, delta: float) -> float:
    return loss(compute(param_moved(scn, name, cell, delta))).value  # tests/gradcheck.py moves the entry


def check_param_grads(scn, names, h=1e-6) -> None:
    walk = compute(scn)
    L = loss(walk)
    grads = backward(walk, L.seeds, L.value)
    for name in names:
        g = np.atleast_1d(grads.params[name])
        W = np.atleast_1d(np.asarray(scn.param(name)))
        assert g.shape == W.shape, name
        for cell in np.ndindex(W.shape):
            fd = (moved_loss(scn, name, cell, h) - moved_loss(scn, name, cell, -h)) / (2 * h)
            assert g[cell] == pytest.approx(fd, abs=1e-7, rel=1e-5), (name, cell)


@pytest.mark.parametrize("norm", [None, "layer", "rms"])
def test_gradients_of_w_u_the_final_norm_and_the_layer_match_finite_differences(norm) -> None:
    scn = load(doc(temperature=0.8, final_norm=norm, final_norm_gamma=[1.5, 0.5, 1, 2] if norm else None,
                   target={"next": "money"}))
    names = ["W_U", "W_O", "W_V", "W_Q", "W_K"] + (["final_norm_gamma"] if norm else []) + (
        ["final_norm_beta"] if norm == "layer" else [])
    check_param_grads(scn, names)


def test_tied_gradients_reach_the_table_as_w_u() -> None:
    scn = load(doc(W_U=None, embeddings=None, vocab_embeddings=E_VOCAB, tie_embeddings=True,
                   final_norm="layer", temperature=2.0))
    walk = compute(scn)
    L = loss(walk)
    grads = backward(walk, L.seeds, L.value)
    # the table in both its uses: the tokens' E looked up in it and W_U = E_vocabᵀ
    h = 1e-6
    table = np.array(E_VOCAB, float)
    for cell in np.ndindex(table.shape):
        fd = (moved_loss(scn, "vocab_embeddings", cell, h) - moved_loss(scn, "vocab_embeddings", cell, -h)) / (2 * h)
        assert grads.params["vocab_embeddings"][cell] == pytest.approx(fd, abs=1e-7, rel=1e-5)
    check_param_grads(scn, ["W_O", "W_Q"])


def test_the_tied_table_s_text_names_both_its_uses() -> None:
    """The gradient screen's text says the sum the screen computes: the lookup's ∂L/∂E and the
    logits' ∂L/∂ℓᵀ, and that training looks the tokens up in the moved table."""
    import tomllib

    for lang, lookup in (("en", "looked up in"), ("zh", "查")):
        text = tomllib.loads((Path(unembed.__file__).parents[2] / "text" / f"{lang}.toml").read_text("utf-8"))
        stage = text["stage"]["dvocab_embeddings"]
        assert "∂L/∂E[i, :]" in stage["what"] and "∂L/∂ℓᵀ" in stage["what"]
        assert lookup in stage["mistake"] and "keep the embeddings" not in stage["mistake"]


def test_the_final_norm_and_logits_text_names_no_y_the_screen_may_not_show() -> None:
    """next_token has no FFN: its screen reads LN_f(O), so the text says the formula's matrix,
    not Y."""
    import tomllib

    for lang in ("en", "zh"):
        text = tomllib.loads((Path(unembed.__file__).parents[2] / "text" / f"{lang}.toml").read_text("utf-8"))
        assert "LN_f(Y)" not in text["stage"]["LN_f"]["what"]
        assert not text["stage"]["logits"]["what"].startswith("ℓ = Y")


def test_the_probabilities_own_backward_matches_finite_differences() -> None:
    """p's backward, given any ∂L/∂p: ∂L/∂ℓ = p ⊙ (∂L/∂p − rowsum(p ⊙ ∂L/∂p)) / T."""
    from attnwalk.layer.walk import whole
    from attnwalk.layer.modes import mode_named

    T = 0.6
    scn = load(doc(temperature=T))
    stage = next(s for s in scn.graph if s.key == "p")
    rng = np.random.default_rng(0)
    logits, dp = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    ctx = whole(scn, mode_named("scaled"), 1.0)
    (dl,) = stage.backward.grad(ctx, dp, np_softmax(logits / T), logits)
    h = 1e-6
    for cell in np.ndindex(logits.shape):
        up, down = logits.copy(), logits.copy()
        up[cell] += h
        down[cell] -= h
        fd = (np.sum(dp * np_softmax(up / T)) - np.sum(dp * np_softmax(down / T))) / (2 * h)
        assert dl[cell] == pytest.approx(fd, abs=1e-8)


# -- bad input: one line, file:line: field, exit 2 -------------------------------------------------


@pytest.mark.parametrize("extra, line_of, message", [
    ({"tokens": ["the", "river", "shore"]}, "tokens", "the token 'shore' is not in vocab"),
    ({"W_U": [[1, 0], [0, 1], [1, 1], [0, 0]]}, "W_U", "W_U is 4 × 2, but it must be d_model × |vocab| = 4 × 5"),
    ({"top_k": 6}, "top_k", "top_k is 6, but vocab has only 5 words"),
    ({"temperature": 0}, "temperature", "temperature must be above 0"),
    ({"temperature": -1}, "temperature", "temperature must be above 0"),
    ({"tie_embeddings": True}, "W_U", "remove W_U, or tie_embeddings"),
    ({"W_U": None, "tie_embeddings": True}, "tie_embeddings", "give vocab_embeddings"),
    ({"vocab_embeddings": [[9, 9, 9, 9]] + E_VOCAB[1:]}, "embeddings", "embedding is not row 1 of vocab_embeddings"),
    ({"vocab": ["the", "river", "bank", "the", "money"]}, "vocab", "is in the vocabulary twice"),
    ({"target": {"next": "sea"}}, "target", "'sea' is not in vocab"),
    ({"W_U": None}, "vocab", "give W_U"),
])
def test_bad_input_is_one_line_with_file_line_and_field(tmp_path, extra, line_of, message) -> None:
    d = doc(**extra)
    path = write(tmp_path, d)
    result = runner.invoke(app, ["run", path], env=ENV)
    assert result.exit_code == 2, result.output
    out = result.output.strip()
    assert "\n" not in out and "Traceback" not in out, out
    assert message in out, out
    lines = (tmp_path / "next.yaml").read_text().splitlines()
    line = int(re.match(rf"attnwalk: {re.escape(path)}:(\d+): ", out).group(1))
    start = next(k for k, text in enumerate(lines, start=1) if text.startswith(f"{line_of}:"))
    end = next((k for k, text in enumerate(lines, start=1) if k > start and not text.startswith((" ", "-"))),
               len(lines) + 1)
    assert start <= line < end, (line, start, end, out)  # the key's line, or a line of its value


def test_an_unembedding_key_without_a_vocabulary_is_refused() -> None:
    d = doc(vocab=None, target=None)
    with pytest.raises(ScenarioError, match="W_U belongs to the unembedding, which needs the vocabulary"):
        load(d)


def test_a_next_target_needs_a_vocabulary() -> None:
    d = doc(vocab=None, W_U=None)
    with pytest.raises(ScenarioError, match="a next-token target needs a vocabulary"):
        load(d)


# -- what the learner sees -------------------------------------------------------------------------


def test_the_printed_walk_ends_on_the_next_token_with_its_panel(tmp_path) -> None:
    path = write(tmp_path, doc(final_norm="layer"))
    out = runner.invoke(app, ["run", path], env=ENV).stdout
    stages = re.findall(r"^Stage \d+ / \d+ +(\S+)", out, re.M)
    assert stages[-4:] == ["O", "LN_f(O)", "ℓ", "p"]  # after the heads, the output, then the head
    assert "Next token after bank (row 3): top 5 of 5" in out
    assert "p at T = 0.5" in out and "p at T = 2" in out
    assert "Each row of p predicts the token AFTER its position" in out
    zh = runner.invoke(app, ["run", path, "--lang", "zh"], env=ENV).stdout
    assert "下一个 token" in zh and "p（T = 0.5）" in zh and "top-5 的 p" in zh


def test_the_worked_cells_hold_for_their_digits() -> None:
    walk = compute(load_scenario("next_token"))
    out = runner.invoke(app, ["explain", "next_token", "logits", "5", "bank"], env=ENV).stdout
    assert "ℓ[river, bank] = 1.3708" in out
    m = re.search(r"= ([-\d.]+) \+ \(?([-\d.]+)\)? \+ \(?([-\d.]+)\)? \+ \(?([-\d.]+)\)? = ([-\d.]+)", out)
    parts = [float(x) for x in m.groups()]
    assert round(sum(parts[:4]), 4) == parts[4]
    out = runner.invoke(app, ["explain", "next_token", "p", "5", "bank"], env=ENV).stdout
    total = float(re.search(r"row sum = [^=]* = ([\d.]+)", out, re.S).group(1))
    top = float(re.search(r"bank: ([\d.]+) / ([\d.]+) = ([\d.]+)", out).group(1))
    assert f"{top / total:.4f}" == f"{walk.mats['p'][4, 5]:.4f}"
    exps = [float(x) for x in re.findall(r"= e\^\(?[-\d.]+\)? = ([\d.]+)", out)]
    assert len(exps) == 8 and float(f"{sum(exps):.4g}") == total  # the sum to as many digits as its terms
    assert "e^(1.3708 − 1.3708) = e^0.0000" in out  # T = 1: no division written


def test_the_gradient_cells_say_which_word_is_right_and_print_a_one_term_sum_once() -> None:
    out = runner.invoke(app, ["grad", "next_token", "--no-pause"], env={**ENV, "COLUMNS": "200"}).stdout
    assert "water is not the token after river: nothing is subtracted" in out
    assert "Subtract 0" not in out
    lookup = re.search(r"∂L/∂E\[by, 1\] = [^\n│]*", out).group(0).strip()
    assert re.fullmatch(r"∂L/∂E\[by, 1\] = -?[\d.]+", lookup), lookup
    zh = runner.invoke(app, ["grad", "next_token", "--no-pause", "--lang", "zh"], env={**ENV, "COLUMNS": "200"}).stdout
    assert "water 不是 river 后面的那个 token：这一格什么也不减" in zh


def test_the_panel_fits_80_by_24() -> None:
    walk = compute(load_scenario("next_token"))
    stage = walk.stage("p")
    for lang in ("en", "zh"):
        console = Console(width=80, file=io.StringIO(), record=True, color_system=None)
        console.print(next_panel(walk.view(0), stage, ViewOptions(lang=lang)))
        lines = console.export_text().splitlines()
        assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
        assert "river" in lines[0] and "5" in lines[0]


def test_the_panel_shows_top_k_renormalised() -> None:
    """The last column: p at the scenario's T over the sum of the top k's p (numpy, from p)."""
    walk = compute(load_scenario("next_token"))
    k, p = unembed.setting(walk.scenario).top_k, walk.mats["p"][4]
    top = np.argsort(-p, kind="stable")[:k]
    console = Console(width=80, file=io.StringIO(), record=True, color_system=None)
    console.print(next_panel(walk.view(0), walk.stage("p"), ViewOptions()))
    rows = [line.split() for line in console.export_text().splitlines() if re.match(r"│ \d ", line)]
    assert len(rows) == k
    for row, j in zip(rows, top):
        assert float(row[-2]) == pytest.approx(p[j] / p[top].sum(), abs=1e-4)


def test_the_app_shows_the_panel_at_80_by_24() -> None:
    from appdriver import drive
    from attnwalk.render.screens import walk_steps

    walk = compute(load_scenario("next_token"))
    start = [s.key for s, _ in walk_steps(walk)].index("p")
    driven = drive("next_token", keys=["end"] * 1, size=(80, 24), start=start)
    seen = "\n".join(s for s in driven.screens if s)
    assert "p" in seen and "softmax" in seen
    from attnwalk.app.panes import worked_view

    console = Console(width=80, file=io.StringIO(), record=True, color_system=None)
    console.print(worked_view(walk, walk.stage("p"), 0, (4, 0), ViewOptions()))
    assert "Next token after river (row 5)" in console.export_text()


def test_the_app_s_panel_follows_the_cursor_s_row() -> None:
    import asyncio

    from attnwalk.app.walk import WalkApp
    from attnwalk.render.screens import walk_steps

    walk = compute(load_scenario("next_token"))
    tokens = walk.scenario.tokens

    async def seen_after_up() -> tuple[int, str]:
        app = WalkApp(walk, ViewOptions(), start=[s.key for s, _ in walk_steps(walk)].index("p"))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press("up")
            await pilot.pause()
            console = Console(width=80, file=io.StringIO(), record=True, color_system=None)
            console.print(app.query_one("#worked").content)
            return app.cursor[0], console.export_text()

    row, shown = asyncio.run(seen_after_up())
    assert row == len(tokens) - 2 and f"Next token after {tokens[row]} (row {row + 1})" in shown


def test_json_export_has_the_next_tokens_sorted(tmp_path) -> None:
    path = write(tmp_path, doc(top_k=3, temperature=0.5))
    data = json.loads(runner.invoke(app, ["export", path, "--format", "json"], env=ENV).stdout)
    logits = np.array(data["stages"]["logits"])
    np.testing.assert_allclose(data["stages"]["p"], np_softmax(logits / 0.5), rtol=1e-12)
    rows = data["unembedding"]["positions"]
    assert [r["token"] for r in rows] == ["the", "river", "bank"] and data["unembedding"]["vocab"] == VOCAB
    for i, row in enumerate(rows):
        ids = [item["id"] for item in row["next"]]
        assert ids == sorted(range(5), key=lambda j: (-logits[i, j], j))[:3]
        for item in row["next"]:
            assert set(item) == {"token", "id", "logit", "p"} and item["token"] == VOCAB[item["id"]]
            assert item["p"] == pytest.approx(np_softmax(logits / 0.5)[i, item["id"]], rel=1e-12)
    assert data["next"] == rows[-1]["next"]


def test_grad_and_train_run_on_a_next_token_target(tmp_path) -> None:
    path = write(tmp_path, doc(final_norm="layer"))
    data = json.loads(runner.invoke(app, ["grad", path, "--format", "json"], env=ENV).stdout)
    assert data["loss"] == pytest.approx(np_loss(doc(final_norm="layer"), 1.0), rel=1e-12)
    assert {"logits", "W_U", "W_O", "final_norm_gamma"} <= set(data["grads"])
    assert data["target"]["next"][0] == {"position": 0, "id": 1, "token": "river"}
    walk = runner.invoke(app, ["grad", path], env=ENV).stdout
    assert "∂L/∂ℓ = (p − onehot(t_(i+1))) / (T · N)" in walk and "Gradient of W_U" in walk
    out = runner.invoke(app, ["train", path, "--steps", "20", "--format", "json"], env=ENV)
    assert out.exit_code == 0, out.output
    losses = [s["loss"] for s in json.loads(out.stdout)["steps"]]
    assert losses[-1] < 0.5 * losses[0]
    assert "W_U" in runner.invoke(app, ["train", path, "--steps", "1"], env=ENV).stdout


def test_the_lesson_says_its_numbers() -> None:
    scn = load_scenario("next_token")
    walk = compute(scn)
    P, logits = walk.mats["p"], walk.mats["logits"]
    vocab = unembed.vocabulary(scn)
    bank, water = vocab.index("bank"), vocab.index("water")
    text = scn.description["en"]
    assert f"ℓ[river, bank] = {logits[4, bank]:.4f}" in text and f"water {logits[4, water]:.4f}" in text
    assert f"p = {P[4, bank]:.4f} for bank and {P[4, water]:.4f} for water" in text
    for T, word in ((0.5, "T = 0.5 bank gets"), (2.0, "T = 2 only")):
        assert f"{word} {np_softmax(logits / T)[4, bank]:.4f}" in text
    assert f"is {loss(walk).value:.4f}" in text
    assert vocab[int(P[1].argmax())] == "money" and f"money ({P[1].max():.4f})" in text
    assert f"by ({P[1, vocab.index('by')]:.4f})" in text and vocab[int(P[2].argmax())] == "water"
    from attnwalk.features.target import target_of
    from attnwalk.layer.train import descend

    given = target_of(scn)
    last = list(descend(scn, "scaled", given.steps, given.lr))[-1]
    assert f"brings it to {last.loss:.4f} in {given.steps} steps" in text
    assert f"降到 {last.loss:.4f}" in scn.description["zh"]


def test_tied_training_moves_the_table_for_both_its_uses() -> None:
    """E = E_vocab[ids] and W_U = E_vocabᵀ are one table: after training the tokens still enter
    with the table's rows (the embeddings stay tied), and the loss fell."""
    from attnwalk.layer.train import descend

    scn = load_scenario("next_token")
    steps = list(descend(scn, "scaled", 5, 0.5))
    trained = steps[-1].walk
    table = trained.scenario.param("vocab_embeddings")
    ids = unembed.token_ids(scn)
    np.testing.assert_array_equal(trained.mats["E"], table[ids])
    assert not np.array_equal(table, scn.param("vocab_embeddings")) and steps[-1].loss < steps[0].loss


def test_after_a_residual_and_an_ffn_the_unembedding_reads_the_block_s_output() -> None:
    """With the rest of the block (H = X + O, Y = H + F), ℓ reads Y: checked against numpy here,
    and every weight's gradient, the tied table's included, against finite differences."""
    ffn = {"residual": True, "ffn": "relu", "W_1": [[1, -0.5, 0.2], [0.3, 1, -1], [0.5, 0.5, 0], [-0.2, 0.1, 0.8]],
           "b_1": [0.1, -0.2, 0.05], "W_2": [[0.5, 0, -0.5, 1], [0, 1, 0.3, 0], [1, -1, 0, 0.2]],
           "b_2": [0, 0.1, 0, -0.1]}
    d = doc(W_U=None, vocab_embeddings=E_VOCAB, tie_embeddings=True, final_norm="rms", temperature=0.7, **ffn)
    scn = load(d)
    walk = compute(scn)
    H = np.array(d["embeddings"], float) + np_output(d)
    Y = H + np.maximum(H @ np.array(ffn["W_1"]) + ffn["b_1"], 0) @ np.array(ffn["W_2"]) + ffn["b_2"]
    logits = np_norm(Y, "rms", np.ones(4), None) @ np.array(E_VOCAB).T
    np.testing.assert_allclose(walk.mats["logits"], logits, rtol=1e-12, atol=1e-13)
    assert loss(walk).value == pytest.approx(np.mean([-np.log(np_softmax(logits / 0.7)[i, j])
                                                       for i, j in ((0, 1), (1, 2))]), rel=1e-12)
    check_param_grads(scn, ["W_1", "W_2", "W_O", "vocab_embeddings"])


def test_two_heads_without_w_o_read_concat_and_their_gradients_match() -> None:
    d = doc(heads=2, W_O=None, W_Q=[[1, 0, 0, 1], [0, 1, 1, 0], [0.5, 0, 0, 0.5], [0, 0.5, 1, 0]],
            W_K=[[1, 0, 0.5, 0], [0, 1, 0, 1], [0, 0.5, 1, 0], [0.5, 0, 0, 1]],
            W_V=[[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, -1, 1, 1]], temperature=2.0)
    scn = load(d)
    assert [s.key for s in scn.graph if s.key in ("concat", "logits")] == ["concat", "logits"]
    assert next(s for s in scn.graph if s.key == "logits").reads == ("concat",)  # h·d_v = d_model
    check_param_grads(scn, ["W_U", "W_Q", "W_K", "W_V"])


def test_decode_goes_on_to_the_next_token_s_probabilities() -> None:
    from attnwalk.layer.kvcache import decode

    dec = decode(load_scenario("next_token"))
    d = yaml.safe_load((Path(__file__).resolve().parents[1] / "scenarios" / "next_token.yaml").read_text())
    P = np_softmax(np_logits(d))
    for t, step in enumerate(dec.steps):  # made from tokens 1 … t+1 alone, as the whole causal walk
        assert list(step.block)[-2:] == ["logits", "p"]
        np.testing.assert_allclose(step.block["p"], P[t], rtol=1e-12)
    out = runner.invoke(app, ["decode", "next_token"], env={**ENV, "COLUMNS": "100"}).stdout
    assert "p row 5, whole layer" in out and "Z row 5, whole layer" in out


@pytest.mark.parametrize("name", ["next_token", "block", "induction"])
def test_the_tokens_stage_shows_each_token_s_place_in_the_vocabulary(name: str) -> None:
    scn = load_scenario(name)
    vocab = list(unembed.setting(scn).vocab)
    out = runner.invoke(app, ["run", name, "--no-pause"], env={**ENV, "COLUMNS": "200"}).stdout
    first = out.split("Stage 2 /")[0]
    assert "gives no ids" not in first and "its place in the vocabulary" in first
    rows = re.findall(r"^ *(\d+) +(\d+) +(\S+) +(\S+) *$", first, re.M)
    assert [(tok, int(i)) for _, _, tok, i in rows][:3] == [(t, vocab.index(t)) for t in scn.tokens[:3]]
