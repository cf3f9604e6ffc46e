"""positional: rope end to end: `attnwalk export` against a layer written here from the formulas
(issue 19: θ_i = base^(−2i/d_head), pair i turned by pos · θ_i; half pairs i with i + d/2, interleaved
2i with 2i + 1), over random scenarios in both pairings, with several heads and masks; the
shift-invariance of QKᵀ seen through the program; the load-time refusals; the JSON keys."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.cli import app


def matrix(M: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(repr(float(x)) for x in row) + "]" for row in M) + "]"


def scenario_yaml(E, W_Q, W_K, W_V, *, heads=1, pairing="half", base=10000.0, mask="none",
                  tokens=None) -> str:
    tokens = tokens or [f"t{i}" for i in range(len(E))]
    return (f"tokens: [{', '.join(tokens)}]\nembeddings: {matrix(E)}\npositional: rope\n"
            f"rope: {{base: {base!r}, pairing: {pairing}}}\nheads: {heads}\n"
            f"W_Q: {matrix(W_Q)}\nW_K: {matrix(W_K)}\nW_V: {matrix(W_V)}\nmask: {mask}\n")


def export(tmp_path, text: str, *args: str) -> dict:
    path = tmp_path / "rope.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["export", str(path), "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- the layer, from the formulas ------------------------------------------------------------------


def rotated(x: np.ndarray, base: float, pairing: str, offset: int = 0) -> np.ndarray:
    """Each row (position p = row + offset) with pair i turned by p · θ_i, one 2 × 2 rotation
    matrix at a time."""
    n, d = x.shape
    out = x.copy()
    for p in range(n):
        for i in range(d // 2):
            a, b = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
            phi = (p + offset) * base ** (-2 * i / d)
            R = np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])
            out[p, [a, b]] = R @ x[p, [a, b]]
    return out


def reference(E, W_Q, W_K, W_V, heads, base, pairing, allowed, mode="scaled") -> list[dict]:
    X = E  # RoPE adds nothing to X
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    d_k, d_v = Q.shape[1] // heads, V.shape[1] // heads
    out = []
    for h in range(heads):
        q, k, v = Q[:, h * d_k:(h + 1) * d_k], K[:, h * d_k:(h + 1) * d_k], V[:, h * d_v:(h + 1) * d_v]
        q_rot, k_rot = rotated(q, base, pairing), rotated(k, base, pairing)
        raw = q_rot @ k_rot.T
        S = raw / np.sqrt(d_k) if mode == "scaled" else raw
        masked = np.where(allowed, S, -np.inf)
        e = np.exp(masked - masked.max(axis=1, keepdims=True))
        A = e / e.sum(axis=1, keepdims=True)
        out.append({"Q": q, "K": k, "Q_rot": q_rot, "K_rot": k_rot, "QK^T": raw, "S": S, "A": A,
                    "Z": A @ v})
    return out


def random_case(seed: int):
    rng = np.random.default_rng(seed)
    n, d_model, heads = int(rng.integers(2, 7)), int(rng.integers(2, 6)), int(rng.integers(1, 4))
    d_k, d_v = 2 * int(rng.integers(1, 4)), int(rng.integers(1, 4))
    E = rng.normal(size=(n, d_model))
    W_Q, W_K = rng.normal(size=(d_model, heads * d_k)), rng.normal(size=(d_model, heads * d_k))
    W_V = rng.normal(size=(d_model, heads * d_v))
    base = float(rng.choice([10000.0, 500000.0, 10.0, 2.5]))
    return E, W_Q, W_K, W_V, heads, base


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_export_matches_the_formulas(tmp_path, seed: int, pairing: str, mask: str) -> None:
    E, W_Q, W_K, W_V, heads, base = random_case(seed)
    n = len(E)
    allowed = np.ones((n, n), bool) if mask == "none" else np.tril(np.ones((n, n), bool))
    data = export(tmp_path, scenario_yaml(E, W_Q, W_K, W_V, heads=heads, pairing=pairing, base=base,
                                          mask=mask))
    np.testing.assert_array_equal(data["stages"]["P"], np.zeros_like(E))  # P is not added
    np.testing.assert_allclose(data["stages"]["X"], E, atol=0)
    expected = reference(E, W_Q, W_K, W_V, heads, base, pairing, allowed)
    got = data["stages"]["heads"] if heads > 1 else [data["stages"]]
    for h in range(heads):
        for key in ("Q_rot", "K_rot", "QK^T", "S", "A", "Z"):
            np.testing.assert_allclose(got[h][key], expected[h][key], atol=1e-10, err_msg=f"{h} {key}")


@pytest.mark.parametrize("mode", ["unscaled", "uniform"])
def test_other_modes_read_the_rotated_scores(tmp_path, mode: str) -> None:
    E, W_Q, W_K, W_V, heads, base = random_case(99)
    data = export(tmp_path, scenario_yaml(E, W_Q, W_K, W_V, heads=heads, base=base), "--mode", mode)
    expected = reference(E, W_Q, W_K, W_V, heads, base, "half", np.ones((len(E),) * 2, bool), mode)
    got = data["stages"]["heads"] if heads > 1 else [data["stages"]]
    for h in range(heads):
        np.testing.assert_allclose(got[h]["QK^T"], expected[h]["QK^T"], atol=1e-10)
        if mode == "unscaled":
            np.testing.assert_allclose(got[h]["A"], expected[h]["A"], atol=1e-10)
        else:  # uniform: the scores are computed, then ignored
            np.testing.assert_allclose(got[h]["A"], np.full((len(E),) * 2, 1 / len(E)), atol=1e-15)


def test_the_pairings_differ_and_position_zero_is_not_turned(tmp_path) -> None:
    E, W_Q, W_K, W_V, _, base = random_case(5)
    half = export(tmp_path, scenario_yaml(E, W_Q[:, :4], W_K[:, :4], W_V, base=base))["stages"]
    inter = export(tmp_path, scenario_yaml(E, W_Q[:, :4], W_K[:, :4], W_V, base=base,
                                           pairing="interleaved"))["stages"]
    for stages in (half, inter):
        np.testing.assert_allclose(stages["Q_rot"][0], stages["Q"][0], atol=0)
    assert not np.allclose(half["Q_rot"][1:], inter["Q_rot"][1:])
    # a rotation keeps each pair's length, so each row's length too
    np.testing.assert_allclose(np.linalg.norm(half["Q_rot"], axis=1), np.linalg.norm(half["Q"], axis=1))


# -- the score depends only on the offset ------------------------------------------------------------


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("shift", [1, 3, 7])
def test_three_tokens_moved_right_keep_their_scores(tmp_path, pairing: str, shift: int) -> None:
    """The same three tokens, first at positions 0-2, then after `shift` others: their block of QKᵀ
    is the same, because each score depends only on the offset (and differs from the unrotated)."""
    rng = np.random.default_rng(shift)
    E, pad = rng.normal(size=(3, 4)), rng.normal(size=(shift, 4))
    W_Q, W_K, W_V = rng.normal(size=(4, 6)), rng.normal(size=(4, 6)), rng.normal(size=(4, 2))
    alone = export(tmp_path, scenario_yaml(E, W_Q, W_K, W_V, pairing=pairing))["stages"]
    moved = export(tmp_path, scenario_yaml(np.vstack([pad, E]), W_Q, W_K, W_V, pairing=pairing))["stages"]
    block = np.array(moved["QK^T"])[shift:, shift:]
    np.testing.assert_allclose(block, alone["QK^T"], atol=1e-12)
    assert not np.allclose(np.array(moved["Q_rot"])[shift:], alone["Q_rot"])  # the vectors did move
    assert not np.allclose(alone["QK^T"], np.array(alone["Q"]) @ np.array(alone["K"]).T)


def test_the_walk_shows_the_shift_and_the_difference(tmp_path) -> None:
    E, W_Q, W_K, W_V, heads, base = random_case(3)
    path = tmp_path / "walk.yaml"
    path.write_text(scenario_yaml(E, W_Q, W_K, W_V, heads=heads, base=base), encoding="utf-8")
    result = CliRunner().invoke(app, ["explain", str(path), "QK^T", "2", "1"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Move every position 3 places right: t1 from 1 to 4, t0 from 0 to 3, the offset still 1" in out
    before, after = re.search(r"QKᵀ\[t1, t0\]: (\S+) → (\S+)", out).groups()
    assert before == after
    change = float(re.search(r"largest change anywhere in QKᵀ after the move: (\S+?)\.?\s", out).group(1))
    assert 0 <= change < 1e-12
    q_rot = reference(E, W_Q, W_K, W_V, heads, base, "half", np.ones((len(E),) * 2, bool))[0]["Q_rot"]
    first = float(re.search(r"q_rot_t1 = \[([-\d.]+),", out).group(1))  # the rotated vectors are dotted
    assert abs(first - q_rot[1, 0]) < 1e-4


# -- the worked rotation agrees with its own digits ---------------------------------------------------


@pytest.mark.parametrize(("stage", "row", "col"), [("Q_rot", "3", "2"), ("K_rot", "2", "1"),
                                                   ("Q_rot", "4", "3")])
def test_the_worked_rotation_checks_on_a_calculator(tmp_path, stage: str, row: str, col: str) -> None:
    E, W_Q, W_K, W_V, _, base = random_case(11)
    E = np.vstack([E, E])  # at least 4 tokens
    path = tmp_path / "cell.yaml"
    path.write_text(scenario_yaml(E, W_Q[:, :4], W_K[:, :4], W_V), encoding="utf-8")
    result = CliRunner().invoke(app, ["explain", str(path), stage, row, col], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    pos, dim = int(row) - 1, int(col)  # the position counts from 0; dimensions are labelled from 1
    # the dimensions counted from 1 as the columns are, the pair as θ_i counts it, from 0
    pair = re.search(r"Dimension (\d+) of \S+ row turns together with dimension (\d+) \(dimensions counted "
                     r"from 1, as the table's columns\): they are pair i = (\d+) of θ_i \(i counted from 0, as "
                     r"the formula counts it\), at position (\d+)", out)
    a, b, i, shown_pos = map(int, pair.groups())
    a, b = min(a, b), max(a, b)
    assert shown_pos == pos and dim in (a, b) and b - a == 2  # half: i with i + d/2 = i + 2
    theta = float(re.search(rf"θ_{i} = 10000\^\(−{2 * i}/4\) = (\S+)", out).group(1))
    assert abs(theta - 10000 ** (-2 * i / 4)) <= 0.5 * 10 ** -4 * 1.01 or abs(theta - 10000 ** (-i / 2)) < 1e-5
    angle = float(re.search(rf"{pos} × θ_{i} = {pos} × \S+ = (\S+) rad", out).group(1))
    decimals = len(str(angle).split(".")[1]) if "." in str(angle) else 4
    cos, sin = map(float, re.search(r"cos \S+ = (\S+), sin \S+ = (\S+)", out).groups())
    assert abs(cos - np.cos(angle)) <= 0.51 * 10 ** -decimals  # of the angle as printed
    assert abs(sin - np.sin(angle)) <= 0.51 * 10 ** -decimals
    assert abs(angle - pos * theta) <= 0.51 * 10 ** -decimals


# -- refused at load time, in one line ------------------------------------------------------------------


BASE = """tokens: [a, b]
embeddings: [[1, 0], [0, 1]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0], [0, 1]]
W_V: [[1, 0], [0, 1]]
"""


@pytest.mark.parametrize(("extra", "line", "words"), [
    ("positional: rope\nW_O: [[1, 0], [0, 1]]\nheads: 2\n", 6, "d_k (per head) must be even, but it is 1"),
    ("positional: rope\nrope: {pairing: zigzag}\n", 7, "expected one of half | interleaved"),
    ("positional: rope\nrope: {base: 1}\n", 7, "rope.base must be greater than 1"),
    ("positional: rope\nrope: {bse: 3}\n", 7, "did you mean 'base'?"),
    ("positional: sinusoidal\nrope: {base: 100}\n", 7, "rope is only used with positional: rope"),
    ("positional: rope\nscore: additive\nw_a: [1, 1]\n", 6, "positional: rope needs dot-product scores"),
    ("positional: rope\nsource:\n  tokens: [x]\n  embeddings: [[1, 1]]\n", 6,
     "positional: rope cannot be used with a source"),
    ("source:\n  tokens: [x]\n  embeddings: [[1, 1]]\n  positional: rope\n", 9,
     "rope cannot be the source's positional encoding"),
])
def test_refusals_name_the_file_line_and_field(tmp_path, extra: str, line: int, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BASE + extra, encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--scenario", str(path), "--no-pause"])
    assert result.exit_code == 2
    message = result.output.strip()
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(f"attnwalk: {path}:{line}:"), message
    assert words in message


def test_an_odd_head_width_is_refused_for_one_head_too(tmp_path) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text(BASE.replace("W_Q: [[1, 0], [0, 1]]", "W_Q: [[1, 0, 1], [0, 1, 1]]")
                    .replace("W_K: [[1, 0], [0, 1]]", "W_K: [[1, 0, 1], [0, 1, 1]]")
                    + "positional: rope\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["export", str(path), "--format", "json"])
    assert result.exit_code == 2 and "must be even, but it is 3" in result.output


# -- the JSON keys ----------------------------------------------------------------------------------


def test_json_keys(tmp_path) -> None:
    E, W_Q, W_K, W_V, _, _ = random_case(1)
    one = export(tmp_path, scenario_yaml(E, W_Q[:, :2], W_K[:, :2], W_V))
    assert list(one["stages"])[:9] == ["E", "P", "X", "Q", "K", "V", "Q_rot", "K_rot", "QK^T"]
    two = export(tmp_path, scenario_yaml(E, np.hstack([W_Q[:, :2]] * 2), np.hstack([W_K[:, :2]] * 2),
                                         np.hstack([W_V] * 2), heads=2))
    assert "Q_rot" not in two["stages"] and "heads" in two["stages"]
    for head in two["stages"]["heads"]:
        assert {"Q_rot", "K_rot"} <= set(head) and np.shape(head["Q_rot"]) == (len(E), 2)
    plain = export(tmp_path, BASE)  # without RoPE there are no rotated stages
    assert "Q_rot" not in plain["stages"]


# -- every rotated cell of a walk checks on a calculator --------------------------------------------


def _panel(walk, key: str, row: int, col: int, head: int) -> str:
    import io

    from rich.console import Console

    from attnwalk.render.options import ViewOptions
    from attnwalk.render.worked import worked_cell

    console = Console(width=100, file=io.StringIO(), color_system=None)
    console.print(worked_cell(walk.view(head), key, row, col, ViewOptions(width=100)))
    lines = [line.strip()[1:-1].strip() for line in console.file.getvalue().splitlines()
             if line.strip().startswith("│")]
    return re.sub(r"\s+", " ", " ".join(lines))


def _half(text: str) -> float:
    return 0.5 * 10.0 ** -(len(text.split(".")[1]) if "." in text else 0) + 1e-12


@pytest.mark.parametrize("name", ["rope", "random"])
def test_every_rotated_cell_checks_with_its_own_digits(tmp_path, name: str) -> None:
    from attnwalk.layer.walk import compute
    from attnwalk.scenario.load import load_scenario, scenario_from_text

    if name == "rope":
        scn = load_scenario("rope")
    else:
        E, W_Q, W_K, W_V, _, base = random_case(21)
        scn = scenario_from_text(scenario_yaml(E * 3, W_Q[:, :6], W_K[:, :6], W_V, base=base,
                                               pairing="interleaved"), "r.yaml")
    walk = compute(scn)
    num = r"-?\d+\.\d+"
    for key in ("Q_rot", "K_rot"):
        M = walk.matrix(key)
        for row in range(M.shape[0]):
            for col in range(M.shape[1]):
                text = _panel(walk, key, row, col, 0)
                theta = re.search(rf"θ_\d+ = \S+ = ({num})", text).group(1)
                angle = re.search(rf"{row} × θ_\d+ = {row} × {re.escape(theta)} = ({num}) rad", text).group(1)
                assert abs(row * float(theta) - float(angle)) <= _half(angle)
                cos, sin = re.search(rf"cos {re.escape(angle)} = ({num}), sin {re.escape(angle)} = ({num})",
                                     text).groups()
                assert abs(np.cos(float(angle)) - float(cos)) <= _half(cos)
                assert abs(np.sin(float(angle)) - float(sin)) <= _half(sin)
                chain = re.search(rf"= \(?({num})\)? × \(?({num})\)? \+ \(?({num})\)? × \(?({num})\)? "
                                  rf"= \(?({num})\)? \+ \(?({num})\)? = ({num})", text)
                x_a, f_a, x_b, f_b, p_a, p_b, end = chain.groups()
                assert {abs(float(f_a)), abs(float(f_b))} == {abs(float(cos)), abs(float(sin))}
                assert abs(float(x_a) * float(f_a) - float(p_a)) <= _half(p_a)
                assert abs(float(x_b) * float(f_b) - float(p_b)) <= _half(p_b)
                assert abs(float(p_a) + float(p_b) - float(end)) <= 1e-9
                table = f"{M[row, col]:.4f}"
                assert abs(float(end) - float(table)) <= 0.5e-4 + 1e-12, (key, row, col, text)
