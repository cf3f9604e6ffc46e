"""Several blocks over the same tokens (`blocks:`, features/blocks.py): block b reads block b − 1's
output as its X. Every number here is checked against numpy written in this file (a plain loop
over blocks and heads) or finite differences; the surfaces (walk, grad walk, exports, errors) are
run as a learner runs them."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcheck import numeric as differenced

from attnwalk.cli import app
from attnwalk.errors import ScenarioError
from attnwalk.layer.graph import trained
from attnwalk.layer.train import descend, gradients
from attnwalk.layer.walk import compute
from attnwalk.render.screens import walk_steps
from attnwalk.scenario.load import scenario_from_text

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1", "ATTNWALK_LANG": None, "LANG": "C.UTF-8", "LC_ALL": None}

RNG = np.random.default_rng(7)
N, D, H, BLOCKS = 4, 4, 2, 3
E = RNG.normal(size=(N, D)).round(2)
WEIGHTS = [{key: RNG.normal(size=(D, D)).round(2) for key in ("W_Q", "W_K", "W_V", "W_O")}
           for _ in range(BLOCKS)]
TARGET = RNG.normal(size=(N, D)).round(2)


def rows(M: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(repr(float(x)) for x in r) + "]" for r in M) + "]"


def yaml_text(blocks=WEIGHTS, extra: str = "", causal: bool = True) -> str:
    lines = ["tokens: [the, river, bank, flooded]", f"embeddings: {rows(E)}", "positional: sinusoidal",
             f"heads: {H}"]
    if causal:
        lines.append("mask: causal")
    lines.append("blocks:")
    for block in blocks:
        first = True
        for key, W in block.items():
            value = W if isinstance(W, str) else rows(W)
            lines.append(f"  {'-' if first else ' '} {key}: {value}")
            first = False
    return "\n".join(lines) + "\n" + extra


def sinusoidal(n: int, d: int) -> np.ndarray:
    P = np.zeros((n, d))
    for pos in range(n):
        for i in range(0, d, 2):
            P[pos, i] = np.sin(pos / 10000 ** (i / d))
            P[pos, i + 1] = np.cos(pos / 10000 ** (i / d))
    return P


def reference(blocks=WEIGHTS, causal: bool = True) -> list[dict]:
    """Each block's X, A (per head) and O, by loops: written apart from attnwalk."""
    X = E + sinusoidal(N, D)
    out = []
    d_k = D // H
    for W in blocks:
        Q, K, V = X @ W["W_Q"], X @ W["W_K"], X @ W["W_V"]
        heads_A, Zs = [], []
        for h in range(H):
            cols = slice(h * d_k, (h + 1) * d_k)
            S = Q[:, cols] @ K[:, cols].T / np.sqrt(d_k)
            if causal:
                S = np.where(np.tril(np.ones((N, N), bool)), S, -np.inf)
            A = np.exp(S - S.max(axis=1, keepdims=True))
            A /= A.sum(axis=1, keepdims=True)
            heads_A.append(A)
            Zs.append(A @ V[:, cols])
        O = np.concatenate(Zs, axis=1) @ W["W_O"]
        out.append({"X": X, "A": heads_A, "O": O})
        X = O
    return out


@pytest.fixture(scope="module")
def scn():
    return scenario_from_text(yaml_text(), "three.yaml")


def key(stage: str, b: int) -> str:
    return stage if b == 0 else f"{stage}.{b + 1}"


def test_each_block_reads_the_one_before(scn):
    walk = compute(scn)
    for b, ref in enumerate(reference()):
        np.testing.assert_allclose(walk.matrix(key("X", b)), ref["X"], atol=1e-12)
        for h in range(H):
            np.testing.assert_allclose(walk.matrix(key("A", b), h), ref["A"][h], atol=1e-12)
        np.testing.assert_allclose(walk.matrix(key("O", b)), ref["O"], atol=1e-12)


def test_the_walk_goes_block_by_block(scn):
    walk = compute(scn)
    steps = [(stage.key, stage.block, h) for stage, h in walk_steps(walk)]
    seen_blocks = [b for _, b, _ in steps]
    assert seen_blocks == sorted(seen_blocks)  # block 1's screens, then block 2's, then block 3's
    assert [k for k, _, _ in steps if k.startswith("X")] == ["X", "X.2", "X.3"]
    for b in range(1, BLOCKS):  # each block's heads walked inside it
        heads = [h for k, blk, h in steps if blk == b and k == key("A", b)]
        assert heads == list(range(H))


def test_a_later_block_writes_its_own_symbols(scn):
    by_key = {s.key: s for s in scn.graph}
    assert by_key["Q.2"].formula_in(scn) == "Q⁽²⁾ = X⁽²⁾ · W_Q⁽²⁾ = [Q⁽²⁾_1 | Q⁽²⁾_2]"
    assert by_key["Z.3"].formula_in(scn) == "Z⁽³⁾ = A⁽³⁾ · V⁽³⁾"
    assert by_key["X.2"].formula_in(scn) == "X⁽²⁾ = O"
    assert by_key["X.3"].formula_in(scn) == "X⁽³⁾ = O⁽²⁾"
    for stage in scn.graph:  # no parameter's file name (W_Q.2) in what a learner reads
        assert not re.search(r"\w\.\d", stage.formula_in(scn)), stage.formula_in(scn)


def test_the_printed_walk_names_the_block(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(yaml_text())
    out = runner.invoke(app, ["run", str(path)], env=ENV)
    assert out.exit_code == 0, out.output
    screen = out.stdout[out.stdout.index("A⁽²⁾  Attention weights   head 1 / 2"):]
    assert re.search(r"^block\s+2 / 3", screen[:600], flags=re.M), screen[:600]
    assert "X⁽³⁾  The next block's input" in out.stdout
    worked = out.stdout[out.stdout.index("Worked cell: O⁽²⁾"):]
    assert "W_O⁽²⁾[:, " in worked.split("╰")[0]  # the cell names block 2's weight, not block 1's
    ascii_out = runner.invoke(app, ["run", str(path), "--ascii"], env=ENV)
    assert "A^(2)" in ascii_out.stdout and "⁽" not in ascii_out.stdout
    zh = runner.invoke(app, ["run", str(path), "--lang", "zh"], env=ENV)
    assert re.search(r"^块\s+第 2 / 3 个", zh.stdout, flags=re.M)


def test_export_json_holds_every_block(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(yaml_text())
    out = runner.invoke(app, ["export", str(path), "--format", "json"], env=ENV)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    ref = reference()
    np.testing.assert_allclose(data["stages"]["O.3"], ref[2]["O"], atol=1e-12)
    np.testing.assert_allclose(data["weights"]["W_K.2"], WEIGHTS[1]["W_K"])
    assert data["shape"]["blocks"] == BLOCKS
    latex = runner.invoke(app, ["export", str(path), "--format", "latex"], env=ENV).stdout
    assert "X^{(2)}" in latex and "⁽" not in latex


def loss_of(scn) -> float:
    return gradients(compute(scn)).loss


def assert_gradients(scn, names, atol: float, rtol: float) -> None:
    """Each parameter's gradient from the backward pass against central differences of the loss,
    every cell (tests/gradcheck.py: the forward walk run again with one entry moved)."""
    grads = gradients(compute(scn)).params
    for name in names:
        shape = np.shape(scn.param(name))
        numeric = differenced(scn, "scaled", name, None, shape, True, list(np.ndindex(*shape)))
        np.testing.assert_allclose(grads[name], numeric, atol=atol, rtol=rtol, err_msg=name)


def test_gradients_through_the_stack_match_finite_differences():
    scn = scenario_from_text(yaml_text(extra=f"target:\n  output: {rows(TARGET)}\n"), "three.yaml")
    names = trained(scn.graph)
    assert names == tuple(f"{w}{'' if b == 0 else f'.{b + 1}'}" for b in range(BLOCKS)
                          for w in ("W_Q", "W_K", "W_V", "W_O"))
    # the loss by numpy: ½ Σ (O⁽³⁾ − T)²
    assert loss_of(scn) == pytest.approx(0.5 * np.sum((reference()[-1]["O"] - TARGET) ** 2), abs=1e-12)
    assert_gradients(scn, names, atol=1e-7, rtol=1e-6)


def test_training_moves_every_block():
    scn = scenario_from_text(yaml_text(extra=f"target:\n  output: {rows(TARGET)}\n"), "three.yaml")
    steps = list(descend(scn, "scaled", 3, 1e-4))
    assert steps[-1].loss < steps[0].loss
    before, after = steps[0].walk.scenario, steps[-1].walk.scenario
    for name in ("W_Q", "W_O.2", "W_V.3"):
        assert not np.array_equal(before.param(name), after.param(name)), name


def test_the_backward_walk_starts_at_the_last_block(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(yaml_text(extra=f"target:\n  output: {rows(TARGET)}\n"))
    out = runner.invoke(app, ["grad", str(path)], env=ENV)
    assert out.exit_code == 0, out.output
    titles = re.findall(r"^Stage \d+ / \d+\s+(\S+)", out.stdout, flags=re.M)
    assert titles[:2] == ["L", "∂L/∂O⁽³⁾"]
    assert titles.index("∂L/∂X⁽³⁾") < titles.index("∂L/∂O⁽²⁾") < titles.index("∂L/∂X⁽²⁾") < titles.index("∂L/∂O")
    assert titles[-1] == "∂L/∂X" and "∂L/∂W_Q⁽²⁾" in titles


@pytest.mark.parametrize("change, field, says", [
    (lambda b: b[:1] + [{k: v for k, v in b[1].items() if k != "W_V"}] + b[2:], "blocks[2]", "has no W_V"),
    (lambda b: b[:1] + [{**b[1], "W_O": np.ones((3, 4))}] + b[2:], "blocks[2].W_O", "block 1's is 4 × 4"),
    (lambda b: [{**b[0], "norm": "layer"}] + b[1:], "norm", "move it to the top level"),
    (lambda b: b[:1] + [{**b[1], "W_X": np.ones((4, 4))}] + b[2:], "blocks[2].W_X", "every block gives the same keys"),
])
def test_a_block_unlike_the_first_is_refused_with_its_line(change, field, says):
    text = yaml_text(change([dict(b) for b in WEIGHTS]))
    with pytest.raises(ScenarioError) as exc:
        scenario_from_text(text, "bad.yaml")
    message = str(exc.value)
    assert message.startswith("bad.yaml:") and says in message, message
    line = int(message.split(":")[1])
    assert field.split(".")[-1].split("[")[0] in text.splitlines()[line - 1] or "- " in text.splitlines()[line - 1]


def test_refusals_name_the_file_and_exit_2(tmp_path):
    cases = {
        "twice": yaml_text() + f"W_Q: {rows(WEIGHTS[0]['W_Q'])}\n",
        "empty": "tokens: [a]\nembeddings: [[1, 0]]\nblocks: []\n",
        "many": "tokens: [a]\nembeddings: [[1, 0]]\nblocks: [" + ", ".join(
            ["{W_Q: [[1, 0], [0, 1]], W_K: [[1, 0], [0, 1]], W_V: [[1, 0], [0, 1]]}"] * 13) + "]\n",
        "narrow": "tokens: [a]\nembeddings: [[1, 0]]\nheads: 1\nblocks: [{W_Q: [[1], [0]], W_K: [[1], [0]], "
                  "W_V: [[1], [0]]}, {W_Q: [[1], [0]], W_K: [[1], [0]], W_V: [[1], [0]]}]\n",
    }
    says = {"twice": "at the top level and in blocks[1]", "empty": "blocks is empty",
            "many": "more than the 12", "narrow": "give each block a W_O"}
    for name, text in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        out = runner.invoke(app, ["run", str(path)], env=ENV)
        assert out.exit_code == 2, (name, out.output)
        assert out.output.startswith(f"attnwalk: {path}:") and says[name] in out.output, out.output
        assert "Traceback" not in out.output and len(out.output.strip().splitlines()) == 1


def test_decode_says_it_walks_one_block(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(yaml_text())
    out = runner.invoke(app, ["decode", str(path)], env=ENV)
    assert out.exit_code == 2 and "several (blocks:)" in out.output


# -- whole blocks: a pre-norm, the residual and the FFN in each (features/residual.py, ffn.py) ----

D_FF = 6
FFN_WEIGHTS = [{**w, "W_1": RNG.normal(size=(D, D_FF)).round(2), "b_1": RNG.normal(size=D_FF).round(2),
                "W_2": RNG.normal(size=(D_FF, D)).round(2), "norm_gamma": RNG.normal(size=D).round(2)}
               for w in WEIGHTS[:2]]


def vec(v: np.ndarray) -> str:
    return "[" + ", ".join(repr(float(x)) for x in v) + "]"


def ffn_yaml(extra: str = "") -> str:
    lines = ["tokens: [the, river, bank, flooded]", f"embeddings: {rows(E)}", "positional: sinusoidal",
             f"heads: {H}", "mask: causal", "norm: layer", "residual: true", "ffn: gelu", "blocks:"]
    for block in FFN_WEIGHTS:
        for i, (k, W) in enumerate(block.items()):
            lines.append(f"  {'-' if i == 0 else ' '} {k}: {vec(W) if W.ndim == 1 else rows(W)}")
    return "\n".join(lines) + "\n" + extra


def gelu(u: np.ndarray) -> np.ndarray:  # the tanh form (Hendrycks and Gimpel, 2016), as GPT-2
    return 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))


def ffn_reference() -> np.ndarray:
    """The last block's output Y by numpy: X → LN → attention → H = X + O → U, G, F → Y = H + F."""
    X = E + sinusoidal(N, D)
    d_k = D // H
    for W in FFN_WEIGHTS:
        mu, var = X.mean(axis=1, keepdims=True), X.var(axis=1, keepdims=True)
        LN = (X - mu) / np.sqrt(var + 1e-5) * W["norm_gamma"]
        Q, K, V = LN @ W["W_Q"], LN @ W["W_K"], LN @ W["W_V"]
        Zs = []
        for h in range(H):
            c = slice(h * d_k, (h + 1) * d_k)
            S = np.where(np.tril(np.ones((N, N), bool)), Q[:, c] @ K[:, c].T / np.sqrt(d_k), -np.inf)
            A = np.exp(S - S.max(axis=1, keepdims=True))
            Zs.append(A / A.sum(axis=1, keepdims=True) @ V[:, c])
        Hs = X + np.concatenate(Zs, axis=1) @ W["W_O"]
        mu, var = Hs.mean(axis=1, keepdims=True), Hs.var(axis=1, keepdims=True)
        LN2 = (Hs - mu) / np.sqrt(var + 1e-5)  # γ₂ = 1: not given
        X = Hs + gelu(LN2 @ W["W_1"] + W["b_1"]) @ W["W_2"]
    return X


def test_whole_blocks_follow_numpy():
    scn = scenario_from_text(ffn_yaml(), "ffn.yaml")
    from attnwalk.layer import roles

    walk = compute(scn)
    last = roles.block_output(walk.graph)
    assert last.block == 1
    np.testing.assert_allclose(walk.matrix(last.key), ffn_reference(), atol=1e-12)


def test_gradients_through_whole_blocks_match_finite_differences():
    target = RNG.normal(size=(N, D)).round(2)
    scn = scenario_from_text(ffn_yaml(f"target:\n  output: {rows(target)}\n"), "ffn.yaml")
    assert loss_of(scn) == pytest.approx(0.5 * np.sum((ffn_reference() - target) ** 2), abs=1e-10)
    assert_gradients(scn, ("W_Q", "W_1", "W_2.2", "W_K.2", "W_O"), atol=1e-6, rtol=1e-6)


# -- to the next token: the unembedding after the last block (features/unembed.py) ---------------

VOCAB = ["the", "river", "bank", "flooded", "money"]
W_U = RNG.normal(size=(D, len(VOCAB))).round(2)


def test_the_next_token_loss_reaches_every_block():
    """Two whole blocks, a final LayerNorm and W_U, target: next (L = mean of −log p_i[t_(i+1)]):
    the loss by numpy, and gradients by finite differences, block 1's weights included."""
    extra = (f"vocab: {VOCAB}\nW_U: {rows(W_U)}\nfinal_norm: layer\ntemperature: 2\n"
             "target: next\n")
    scn = scenario_from_text(ffn_yaml(extra), "next.yaml")
    Y = ffn_reference()
    mu, var = Y.mean(axis=1, keepdims=True), Y.var(axis=1, keepdims=True)
    logits = ((Y - mu) / np.sqrt(var + 1e-5)) @ W_U / 2  # T = 2
    logp = logits - logits.max(axis=1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    nxt = [VOCAB.index(t) for t in ["river", "bank", "flooded"]]
    expected = -np.mean([logp[i, nxt[i]] for i in range(3)])
    assert loss_of(scn) == pytest.approx(expected, abs=1e-12)
    assert_gradients(scn, ("W_U", "W_V", "W_1.2", "W_Q.2"), atol=1e-7, rtol=1e-6)


def test_train_writes_every_block_back_where_it_was_read(tmp_path):
    """train -o on three blocks: each block's trained weights in its own entry of blocks:, and the
    file walks to the trained numbers bit for bit."""
    path = tmp_path / "three.yaml"
    path.write_text(yaml_text(extra=f"target:\n  output: {rows(TARGET)}\n"))
    out = tmp_path / "trained.yaml"
    result = runner.invoke(app, ["train", str(path), "--steps", "3", "--lr", "0.0001", "-o", str(out)], env=ENV)
    assert result.exit_code == 0, result.output
    scn = scenario_from_text(path.read_text(), "three.yaml")
    last = list(descend(scn, "scaled", 3, 1e-4))[-1].walk.scenario  # the layer after step 3
    trained_scn = scenario_from_text(out.read_text(), str(out))
    for name in trained(scn.graph):
        assert np.array_equal(trained_scn.param(name), last.param(name)), name
    assert not np.array_equal(trained_scn.param("W_Q.2"), scn.param("W_Q.2"))
    text = out.read_text()
    assert text.count("- W_Q:") == 3 and "\nW_Q:" not in text  # block 1's weights stay in blocks[1]


def test_heads_scores_each_block_as_a_layer(tmp_path):
    """attnwalk heads --scenario: a row per block, each head's previous-token score the mean of
    A[i, i − 1] of that block's weights (by the loops above)."""
    path = tmp_path / "three.yaml"
    path.write_text(yaml_text())
    out = runner.invoke(app, ["heads", "--scenario", str(path), "--format", "json"], env=ENV)
    assert out.exit_code == 0, out.output
    scores = {(h["layer"], h["head"]): h for h in json.loads(out.stdout)["heads"]}
    assert len(scores) == BLOCKS * H
    for b, ref in enumerate(reference()):
        for h in range(H):
            A = ref["A"][h]
            previous = np.mean([A[i, i - 1] for i in range(1, N)])
            assert scores[(b + 1, h + 1)]["previous_token"] == pytest.approx(previous, abs=1e-12)


def test_a_later_blocks_cells_work_with_its_own_numbers(scn):
    """Every worked cell of blocks 2 and 3 reads its own block's matrices: S⁽²⁾ divides QKᵀ⁽²⁾ (not
    block 1's QKᵀ), A⁽²⁾'s softmax lands on A⁽²⁾, Z⁽²⁾ on Z⁽²⁾; each ends on the table's number."""
    from test_worked_geometry import cell_text

    from attnwalk.render import style
    from attnwalk.render.options import ViewOptions

    walk = compute(scn)
    for stage in walk.stages:
        if stage.block == 0 or stage.kind == "tokens":
            continue
        for h in range(H if stage.per_head else 1):
            M = walk.matrix(stage.key, h)
            row, col = N - 1, 0
            text = cell_text(walk, stage.key, row, col, head=h)
            assert "from the rounded numbers shown this comes to" not in text, (stage.key, text)
            table = style.number(float(M[row, col]), ViewOptions())
            last = re.findall(rf"{re.escape(stage.symbol)}\[[^\]]+\] = (-?[0-9.]+(?:e[-+]?[0-9]+)?)", text)
            assert last and last[-1] == table, (stage.key, h, table, text)
    s2 = cell_text(walk, "S.2", 3, 1)
    raw = walk.matrix("QK^T.2", 0)[3, 1]
    assert f"QKᵀ⁽²⁾[flooded, river] / √d_k = {raw:.4f}" in s2, s2
