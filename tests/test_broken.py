"""Every broken scenario ends in exit 2 and one short line naming the file, line and field.

The corpus is tests/fixtures/broken/*.yaml; EXPECTED.tsv beside it says, for each file, the line
and field path the message must name and what it must say. Paths that are not files, resources
(an alias bomb, a 100 MB file, thousands of tokens) and numerics (huge scores, overflow, a fully
masked row) are tested here too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ComputeError, ScenarioError
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import load_scenario, scenario_from_text

ROOT = Path(__file__).resolve().parent.parent
BROKEN = Path(__file__).resolve().parent / "fixtures" / "broken"
MODES = ("scaled", "unscaled", "uniform", "hard")
runner = CliRunner()


def _expected() -> dict[str, tuple[int | None, str | None, list[str]]]:
    table = {}
    rows = [r for r in (BROKEN / "EXPECTED.tsv").read_text("utf-8").splitlines()
            if r and not r.startswith("#")]
    assert rows[0].split("\t") == ["file", "line", "field", "expect"]
    for row in rows[1:]:
        name, line, field, expect = row.split("\t")
        table[name] = (None if line == "-" else int(line), None if field == "-" else field,
                       expect.split(" && "))
    return table


EXPECTED = _expected()


def export(ref: str, *extra: str):
    return runner.invoke(app, ["export", ref, "--format", "json", *extra])


def refused(result) -> str:
    """The one line a refused command printed; asserts exit 2, nothing on stdout, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == ""
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("attnwalk: ")
    return lines[0]


def check_message(message: str, path: str, line: int | None, field: str | None,
                  expect: list[str]) -> None:
    if field is not None and field.startswith("stage:"):  # found by the layer, named at its input
        stage = field[len("stage:"):]
        assert message.startswith(f"attnwalk: {path}:{line}: embeddings: {stage} overflows"), message
    else:
        # `file:line: field: what`, or `file:line: field has ...` when the sentence starts with it
        where = f"attnwalk: {path}" + (f":{line}" if line is not None else "") + ": "
        assert message.startswith(where), (message, where)
        if field is not None:
            assert message[len(where):].startswith((f"{field}: ", f"{field} ")), (message, field)
    for piece in expect:
        assert piece in message, (piece, message)
    detail = message.split(": ", 2)[-1]
    assert len(detail) <= 300, f"message too long ({len(detail)}): {message}"


# -- the corpus --------------------------------------------------------------------------------

def test_every_fixture_has_an_expectation_and_there_are_enough():
    files = {p.name for p in BROKEN.glob("*.yaml")}
    assert files == set(EXPECTED), (files ^ set(EXPECTED))
    assert len(files) >= 40


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_file_exits_2_with_one_line_naming_file_line_and_field(name):
    line, field, expect = EXPECTED[name]
    path = str(BROKEN / name)
    check_message(refused(export(path)), path, line, field, expect)


@pytest.mark.parametrize("name", sorted(n for n, (_, f, _) in EXPECTED.items()
                                        if not (f or "").startswith("stage:")))
def test_broken_file_raises_only_scenario_error_from_the_loader(name):
    with pytest.raises(ScenarioError) as info:
        load_scenario(BROKEN / name)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["tab_indent.yaml", "alias_bomb.yaml", "binary.yaml",
                                  "misspelt_key_W_q.yaml", "mask_row_all_false.yaml",
                                  "overflow_Q.yaml", "utf16_no_bom.yaml"])
def test_a_real_process_exits_2_with_one_line_and_no_traceback(name):
    line, field, expect = EXPECTED[name]
    path = str(BROKEN / name)
    out = _python_m("export", path)
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    check_message(out.stderr.strip(), path, line, field, expect)


def _python_m(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "attnwalk", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=60)


# -- paths that are not scenario files ---------------------------------------------------------

def test_a_directory_is_refused():
    message = refused(export(str(BROKEN)))
    assert message == f"attnwalk: {BROKEN}: is a directory, not a scenario file"


def test_a_missing_path_is_refused_and_lists_the_builtins(tmp_path):
    path = str(tmp_path / "nothing.yaml")
    message = refused(export(path))
    assert message.startswith(f"attnwalk: {path}: no such file")
    assert "river_bank" in message and "girl_bangs" in message


def test_a_missing_yaml_named_like_a_builtin_suggests_it():
    message = refused(export("river_bank.yaml"))
    assert "no such file (did you mean the built-in 'river_bank'?)" in message


def test_an_unknown_builtin_suggests_the_near_name_and_lists_all():
    message = refused(export("river_bnk"))
    assert "no built-in scenario or file named 'river_bnk' (did you mean 'river_bank'?)" in message
    assert "built-ins: " in message and "causal_mask" in message


def test_an_empty_name_is_not_taken_for_the_current_directory():
    message = refused(export(""))
    assert message.startswith("attnwalk: '': no scenario named") and "river_bank" in message


def test_a_name_too_long_for_the_system_is_one_line():
    message = refused(export("a" * 5000 + ".yaml"))
    assert "is not a usable path" in message and len(message) < 400


def test_missing_and_directory_through_a_real_process(tmp_path):
    for ref, text in ((str(tmp_path / "gone.yaml"), "no such file"),
                      (str(tmp_path), "is a directory")):
        out = _python_m("export", ref)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert out.stderr == f"attnwalk: {ref}: {text}" + out.stderr.split(text, 1)[1]
        assert len(out.stderr.splitlines()) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_refused(tmp_path):
    path = tmp_path / "locked.yaml"
    path.write_text("tokens: [a]\n")
    path.chmod(0)
    assert "permission denied" in refused(export(str(path)))


# -- resources ---------------------------------------------------------------------------------

def _cost(action, traced: bool = True) -> tuple[float, int]:
    """CPU seconds `action()` takes (its own work: other processes on a loaded machine do not count),
    and the peak bytes it allocates (in a second, traced run); it must raise ScenarioError."""
    start = time.process_time()
    with pytest.raises(ScenarioError) as info:
        action()
    seconds = time.process_time() - start
    assert "\n" not in str(info.value)
    if not traced:
        return seconds, 0
    tracemalloc.start()
    try:
        with pytest.raises(ScenarioError):
            action()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak


def test_an_alias_bomb_is_refused_at_once_without_expanding():
    seconds, peak = _cost(lambda: load_scenario(BROKEN / "alias_bomb.yaml"))
    assert seconds < 0.5 and peak < 2_000_000, (seconds, peak)


def test_a_100_mb_file_is_refused_without_being_read(tmp_path):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as handle:  # sparse: costs no disk, and nothing is written but the end
        handle.write(b"tokens: [a]\n")
        handle.seek(100 * 1024 * 1024)
        handle.write(b"\n")
    seconds, peak = _cost(lambda: load_scenario(path))
    assert seconds < 0.5 and peak < 2_000_000, (seconds, peak)
    assert "larger than 16 MB" in refused(export(str(path)))


def test_too_many_values_are_refused_in_about_a_second():
    text = "tokens: [" + "0, " * 300_000 + "]\n"
    seconds, _ = _cost(lambda: scenario_from_text(text, "many.yaml"), traced=False)
    assert seconds < 5, seconds


def _identity_rows(d: int, indent: str = "  ") -> str:
    return "".join(indent + "- [" + ", ".join("1" if i == j else "0" for j in range(d)) + "]\n"
                   for i in range(d))


def test_5000_tokens_load_and_export(tmp_path):
    n = 5000
    rows = "".join(f"  - [{i % 7}, 0.5, -1, {i / n}]\n" for i in range(n))
    weights = _identity_rows(4)
    # 5000 × 5000 scores are past limits.MAX_SCORES (test_hardening.py); cross-attend to 4 keys
    text = (f"tokens: [{', '.join(f't{i}' for i in range(n))}]\nembeddings:\n{rows}"
            f"W_Q:\n{weights}W_K:\n{weights}W_V:\n{weights}"
            "source:\n  tokens: [a, b, c, d]\n  embeddings:\n" + _identity_rows(4, "    "))
    scn = scenario_from_text(text, "many.yaml")
    assert scn.n == 5000 and scn.main.E.shape == (5000, 4) and scn.tokens[-1] == "t4999"
    path = tmp_path / "many.yaml"
    path.write_text(text, "utf-8")
    result = export(str(path))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert len(data["tokens"]) == 5000 and np.array(data["stages"]["A"]).shape == (5000, 4)
    assert np.allclose(np.array(data["stages"]["A"]).sum(axis=1), 1.0)


def test_a_10000_character_token_loads_and_exports(tmp_path):
    token = "长" * 5000 + "x" * 5000
    path = tmp_path / "long.yaml"
    path.write_text(f"tokens: ['{token}', b]\nembeddings: [[1, 0], [0, 1]]\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n"
                    f"focus: '{token}'\n", "utf-8")
    assert load_scenario(path).tokens[0] == token
    result = export(str(path))
    assert result.exit_code == 0 and json.loads(result.stdout)["tokens"][0] == token


# -- numerics ----------------------------------------------------------------------------------

def test_scores_of_1e300_give_finite_weights_that_sum_to_1():
    # d_k = 1: Q = [1e150, -1e150, 1e150] and K = [1e150, -1e150, 0] so S = q_i k_j is ±1e300 or 0
    text = ("tokens: [a, b, c]\nembeddings: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]\n"
            "W_Q: [[1e150], [-1e150], [1e150]]\nW_K: [[1e150], [-1e150], [0]]\n"
            "W_V: [[1, 0], [0, 1], [1, 1]]\n")
    scn = scenario_from_text(text, "huge.yaml")
    for mode in MODES:
        walk = compute(scn, mode)
        S, A = walk.matrix("S"), walk.matrix("A")
        if mode == "unscaled":
            assert np.abs(S).max() == pytest.approx(1e300)
        assert np.all(np.isfinite(A)) and np.allclose(A.sum(axis=1), 1.0), mode
        assert np.all(np.isfinite(walk.matrix("Z")))
    A = compute(scn, "scaled").matrix("A")
    assert np.array_equal(A[0], [1.0, 0.0, 0.0])  # e^(1e300 - 1e300) beats e^(-2e300) outright


@pytest.mark.parametrize("name, stage", [("overflow_Q.yaml", "Q"), ("overflow_QK.yaml", "QK^T"),
                                         ("overflow_X.yaml", "X")])
def test_products_beyond_float64_are_refused_naming_the_stage(name, stage):
    scn = load_scenario(BROKEN / name)  # every number is finite: the loader accepts it
    for mode in MODES:
        with pytest.raises(ComputeError) as info:
            compute(scn, mode)
        # the line and field of the input to make smaller: the embeddings hold the largest number
        assert str(info.value).startswith(f"{BROKEN / name}:4: embeddings: {stage} overflows float64")


def test_a_fully_masked_row_is_refused_at_load_naming_the_row_and_token(tmp_path):
    path = tmp_path / "masked.yaml"
    path.write_text("tokens: [the, big, dog]\n"
                    "embeddings: [[1, 0], [0, 1], [1, 1]]\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n"
                    "mask:\n  - [true, false, false]\n  - [true, true, false]\n"
                    "  - [false, false, false]\n", "utf-8")
    message = refused(export(str(path)))
    # the third row, 'dog', counted from 1 as the tables count it
    assert message.startswith(f"attnwalk: {path}:9: mask row 3 ('dog') allows no key")
