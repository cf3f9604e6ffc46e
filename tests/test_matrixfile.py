"""Matrices given as files ({file: w.npy}): each kind loads exactly, and each bad file exits 2
naming the field and the YAML line, without a traceback and without unpickling anything."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.scenario import load as scenario_module
from attnwalk.cli import app
from attnwalk.scenario.load import load_scenario

# The lesson-002 numbers (女生撩刘海), typed in from the lesson.
E = np.array([[3.0, 1.0], [2.0, 2.0], [2.0, 4.0]])
W_Q = np.array([[-0.6, 0.9], [0.8, -0.5]])
W_K = np.array([[0.6, 0.1], [-0.1, 1.4]])
W_V = np.array([[1.0, -0.5], [-0.4, 1.2]])

W_Q_LINE = 5  # the line of W_Q in every scenario written by `scenario` below


def scenario(folder: Path, w_q: str = "[[-0.6, 0.9], [0.8, -0.5]]", *, embeddings: str =
             "[[3, 1], [2, 2], [2, 4]]", positional: str = "sinusoidal", w_k: str =
             "[[0.6, 0.1], [-0.1, 1.4]]", mask: str = "none", name: str = "s.yaml") -> Path:
    text = (f"tokens: [女生, 撩, 刘海]\n"                   # 1
            f"embeddings: {embeddings}\n"                   # 2
            f"positional: {positional}\n"                   # 3
            f"# W_Q comes next\n"                           # 4
            f"W_Q: {w_q}\n"                                 # 5
            f"W_K: {w_k}\n"                                 # 6
            f"W_V: [[1.0, -0.5], [-0.4, 1.2]]\n"            # 7
            f"mask: {mask}\n")                              # 8
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def export(path: Path):
    return CliRunner().invoke(app, ["export", str(path), "--format", "json"])


def refused(path: Path, field: str, line: int, *words: str) -> str:
    result = export(path)
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert f"{path}:{line}: {field}" in err, err
    for word in words:
        assert word in err, err
    assert "Traceback" not in result.output
    assert err.strip().count("\n") == 0, err  # one line
    return err


# -- each kind of file loads and equals its array ---------------------------------------------


def test_npy_loads_exactly(tmp_path):
    np.save(tmp_path / "wq.npy", W_Q)
    scn = load_scenario(scenario(tmp_path, "{file: wq.npy}"))
    assert scn.W_Q.dtype == np.float64
    assert np.array_equal(scn.W_Q, W_Q)
    assert not scn.W_Q.flags.writeable


def test_integer_and_float32_npy_become_float64(tmp_path):
    np.save(tmp_path / "e.npy", E.astype(np.int32))
    np.save(tmp_path / "wq.npy", W_Q.astype(np.float32))
    scn = load_scenario(scenario(tmp_path, "{file: wq.npy}", embeddings="{file: e.npy}"))
    assert scn.main.E.dtype == np.float64 and np.array_equal(scn.main.E, E)
    assert np.array_equal(scn.W_Q, W_Q.astype(np.float32).astype(np.float64))


def test_npz_with_key_and_single_array_without_key(tmp_path):
    np.savez(tmp_path / "w.npz", W_Q=W_Q, W_K=W_K)
    np.savez(tmp_path / "one.npz", W_K)
    scn = load_scenario(scenario(tmp_path, "{file: w.npz, key: W_Q}", w_k="{file: one.npz}"))
    assert np.array_equal(scn.W_Q, W_Q)
    assert np.array_equal(scn.W_K, W_K)


def test_csv_with_and_without_header(tmp_path):
    (tmp_path / "wq.csv").write_text("-0.6,0.9\n0.8,-0.5\n")
    (tmp_path / "e.csv").write_text("\ufeffx,y\n3,1\n2,2\n\n2,4\n")  # BOM, header, blank line
    scn = load_scenario(scenario(tmp_path, "{file: wq.csv}", embeddings="{file: e.csv}"))
    assert np.array_equal(scn.W_Q, W_Q)
    assert np.array_equal(scn.main.E, E)


def test_positional_and_mask_files(tmp_path):
    P = np.array([[0.0, 1.0], [0.5, 0.5], [0.25, -1.0]])
    np.save(tmp_path / "p.npy", P)
    np.save(tmp_path / "mask.npy", np.tril(np.ones((3, 3), dtype=bool)))
    (tmp_path / "mask.csv").write_text("1,0,0\n1,1,0\n1,1,1\n")
    scn = load_scenario(scenario(tmp_path, positional="{file: p.npy}", mask="{file: mask.npy}"))
    assert scn.main.positional == "explicit" and np.array_equal(scn.main.P_given, P)
    assert scn.mask_kind == "explicit"
    assert np.array_equal(scn.allowed, np.tril(np.ones((3, 3), dtype=bool)))
    scn = load_scenario(scenario(tmp_path, mask="{file: mask.csv}"))
    assert scn.allowed.dtype == bool
    assert np.array_equal(scn.allowed, np.tril(np.ones((3, 3), dtype=bool)))


def test_file_walks_like_the_written_out_matrix(tmp_path):
    np.save(tmp_path / "wq.npy", W_Q)
    by_file = json.loads(export(scenario(tmp_path, "{file: wq.npy}")).stdout)
    written = json.loads(export(scenario(tmp_path, name="t.yaml")).stdout)
    assert by_file["stages"] == written["stages"]


def test_relative_paths_start_at_the_scenario_folder(tmp_path, monkeypatch):
    (tmp_path / "weights").mkdir()
    np.save(tmp_path / "weights" / "wq.npy", W_Q)
    path = scenario(tmp_path, "{file: weights/wq.npy}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert np.array_equal(load_scenario(path).W_Q, W_Q)


def test_absolute_path(tmp_path):
    np.save(tmp_path / "wq.npy", W_Q)
    other = tmp_path / "other"
    other.mkdir()
    scn = load_scenario(scenario(other, f"{{file: '{tmp_path / 'wq.npy'}'}}"))
    assert np.array_equal(scn.W_Q, W_Q)


def test_builtin_scenarios_resolve_against_their_folder(tmp_path, monkeypatch):
    np.save(tmp_path / "wq.npy", W_Q)
    path = scenario(tmp_path, "{file: wq.npy}", name="fake_builtin.yaml")
    monkeypatch.setattr(scenario_module, "builtin_path",
                        lambda name: path if name == "fake_builtin" else None)
    monkeypatch.chdir(tmp_path.parent)
    scn = load_scenario("fake_builtin")
    assert scn.builtin and np.array_equal(scn.W_Q, W_Q)


# -- the file reference itself ----------------------------------------------------------------


def test_missing_file(tmp_path):
    refused(scenario(tmp_path, "{file: nope.npy}"), "W_Q.file", W_Q_LINE, "no such file",
            "nope.npy")


def test_directory(tmp_path):
    (tmp_path / "dir.npy").mkdir()
    refused(scenario(tmp_path, "{file: dir.npy}"), "W_Q.file", W_Q_LINE, "is a directory")


def test_unknown_extension(tmp_path):
    (tmp_path / "wq.txt").write_text("1,2\n3,4\n")
    refused(scenario(tmp_path, "{file: wq.txt}"), "W_Q.file", W_Q_LINE, "'.txt'", ".npy, .npz or .csv")


def test_unknown_key_is_suggested(tmp_path):
    refused(scenario(tmp_path, "{fiel: wq.npy}"), "W_Q.fiel", W_Q_LINE, "did you mean 'file'")


def test_missing_file_key(tmp_path):
    refused(scenario(tmp_path, "{key: W_Q}"), "W_Q", W_Q_LINE, "'file'", "missing")


def test_file_must_be_text(tmp_path):
    refused(scenario(tmp_path, "{file: [a, b]}"), "W_Q.file", W_Q_LINE, "expected a path")


def test_key_only_for_npz(tmp_path):
    np.save(tmp_path / "wq.npy", W_Q)
    refused(scenario(tmp_path, "{file: wq.npy, key: W_Q}"), "W_Q.key", W_Q_LINE, "only for .npz")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root reads files whatever their permissions")
def test_unreadable(tmp_path):
    np.save(tmp_path / "wq.npy", W_Q)
    (tmp_path / "wq.npy").chmod(0)
    try:
        refused(scenario(tmp_path, "{file: wq.npy}"), "W_Q.file", W_Q_LINE, "permission denied")
    finally:
        (tmp_path / "wq.npy").chmod(0o644)


# -- never unpickle ---------------------------------------------------------------------------


def _booby_trapped(tmp_path: Path) -> tuple[np.ndarray, Path]:
    """An object array whose unpickling would create the directory `canary`."""
    canary = tmp_path / "canary"

    class Trap:
        def __reduce__(self):
            return (os.mkdir, (str(canary),))

    array = np.empty((2, 2), dtype=object)
    array[:] = [[Trap(), 1.0], [2.0, 3.0]]
    return array, canary


def test_pickled_object_npy_is_refused_without_unpickling(tmp_path):
    array, canary = _booby_trapped(tmp_path)
    np.save(tmp_path / "trap.npy", array, allow_pickle=True)
    err = refused(scenario(tmp_path, "{file: trap.npy}"), "W_Q", W_Q_LINE,
                  "contains Python objects", "never unpickles")
    assert not canary.exists(), err
    np.load(tmp_path / "trap.npy", allow_pickle=True)  # the oracle: the trap is real
    assert canary.exists()


def test_pickled_object_in_npz_is_refused_without_unpickling(tmp_path):
    array, canary = _booby_trapped(tmp_path)
    np.savez(tmp_path / "trap.npz", W_Q=array)
    refused(scenario(tmp_path, "{file: trap.npz, key: W_Q}"), "W_Q", W_Q_LINE,
            "contains Python objects")
    assert not canary.exists()


def test_plain_pickle_named_npy_is_refused_without_unpickling(tmp_path):
    array, canary = _booby_trapped(tmp_path)
    (tmp_path / "trap.npy").write_bytes(pickle.dumps(array))
    refused(scenario(tmp_path, "{file: trap.npy}"), "W_Q", W_Q_LINE, "contains Python objects")
    assert not canary.exists()


# -- what the file holds ----------------------------------------------------------------------


@pytest.mark.parametrize("array, words", [
    (W_Q.astype(np.complex128), ("complex numbers",)),
    (np.array([["a", "b"], ["c", "d"]]), ("text",)),
    (np.array([1.0, 2.0]), ("1-D", "(2,)", "2-D matrix")),
    (np.zeros((2, 2, 2)), ("3-D",)),
    (np.float64(3.0), ("a single number",)),
    (np.zeros((0, 2)), ("empty",)),
])
def test_wrong_contents(tmp_path, array, words):
    np.save(tmp_path / "wq.npy", array)
    refused(scenario(tmp_path, "{file: wq.npy}"), "W_Q", W_Q_LINE, *words)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_entry_names_row_and_column(tmp_path, bad):
    W = W_Q.copy()
    W[1, 0] = bad
    np.save(tmp_path / "wq.npy", W)
    # W[1, 0] is the second row's first entry: counted from 1, as every message counts
    refused(scenario(tmp_path, "{file: wq.npy}"), "W_Q", W_Q_LINE, "row 2, column 1 (counted from 1)")


def test_npz_missing_key_lists_the_keys(tmp_path):
    np.savez(tmp_path / "w.npz", W_Q=W_Q, W_K=W_K)
    refused(scenario(tmp_path, "{file: w.npz, key: Wq}"), "W_Q.key", W_Q_LINE, "'Wq'", "W_Q, W_K")


def test_npz_with_several_arrays_needs_a_key(tmp_path):
    np.savez(tmp_path / "w.npz", W_Q=W_Q, W_K=W_K)
    refused(scenario(tmp_path, "{file: w.npz}"), "W_Q", W_Q_LINE, "2 arrays", "key:", "W_Q, W_K")


def test_corrupt_npy(tmp_path):
    np.save(tmp_path / "full.npy", W_Q)
    (tmp_path / "wq.npy").write_bytes((tmp_path / "full.npy").read_bytes()[:-8])
    refused(scenario(tmp_path, "{file: wq.npy}"), "W_Q.file", W_Q_LINE, "not a valid numpy file")


def test_empty_npy(tmp_path):
    (tmp_path / "wq.npy").write_bytes(b"")
    refused(scenario(tmp_path, "{file: wq.npy}"), "W_Q.file", W_Q_LINE, "empty or cut short")


def test_corrupt_npz(tmp_path):
    np.savez(tmp_path / "full.npz", W_Q=W_Q)
    (tmp_path / "w.npz").write_bytes((tmp_path / "full.npz").read_bytes()[:60])
    refused(scenario(tmp_path, "{file: w.npz}"), "W_Q.file", W_Q_LINE, "w.npz")


def test_npz_named_npy_and_npy_named_npz(tmp_path):
    with open(tmp_path / "w.npy", "wb") as handle:  # a handle, or numpy appends .npz
        np.savez(handle, W_Q=W_Q)
    refused(scenario(tmp_path, "{file: w.npy}"), "W_Q.file", W_Q_LINE, "rename it to .npz")
    np.save(tmp_path / "plain.npy", W_Q)
    (tmp_path / "p.npz").write_bytes((tmp_path / "plain.npy").read_bytes())
    refused(scenario(tmp_path, "{file: p.npz}"), "W_Q.file", W_Q_LINE, "rename it to .npy")


def test_csv_cell_that_is_not_a_number(tmp_path):
    (tmp_path / "wq.csv").write_text("-0.6,0.9\n0.8,oops\n")
    refused(scenario(tmp_path, "{file: wq.csv}"), "W_Q.file", W_Q_LINE,
            "line 2, column 2", "'oops' is not a number")


def test_csv_ragged_rows(tmp_path):
    (tmp_path / "wq.csv").write_text("-0.6,0.9\n0.8\n")
    refused(scenario(tmp_path, "{file: wq.csv}"), "W_Q.file", W_Q_LINE, "line 2 has 1 numbers")


def test_csv_first_row_with_a_typo_is_not_taken_for_a_header(tmp_path):
    (tmp_path / "wq.csv").write_text("-0.6,O.9\n0.8,-0.5\n")
    refused(scenario(tmp_path, "{file: wq.csv}"), "W_Q.file", W_Q_LINE, "line 1, column 2")


def test_csv_nan(tmp_path):
    (tmp_path / "wq.csv").write_text("-0.6,0.9\nnan,-0.5\n")
    refused(scenario(tmp_path, "{file: wq.csv}"), "W_Q", W_Q_LINE, "row 2, column 1")  # the file's line 2


def test_csv_with_semicolons_or_only_a_header(tmp_path):
    (tmp_path / "wq.csv").write_text("-0.6;0.9\n0.8;-0.5\n")
    refused(scenario(tmp_path, "{file: wq.csv}"), "W_Q.file", W_Q_LINE, "separate numbers with commas")
    (tmp_path / "wq.csv").write_text("a,b\n")
    refused(scenario(tmp_path, "{file: wq.csv}"), "W_Q.file", W_Q_LINE, "header line but no rows")


def test_empty_csv(tmp_path):
    (tmp_path / "wq.csv").write_text("\n\n")
    refused(scenario(tmp_path, "{file: wq.csv}"), "W_Q.file", W_Q_LINE, "no rows")


def test_mask_file_with_values_other_than_0_and_1(tmp_path):
    np.save(tmp_path / "mask.npy", np.array([[1, 0, 0], [1, 2, 0], [1, 1, 1]]))
    refused(scenario(tmp_path, mask="{file: mask.npy}"), "mask", 8, "has 2 at row 2, column 2", "true/false")


def test_shape_checks_still_apply(tmp_path):
    np.save(tmp_path / "wq.npy", np.zeros((3, 2)))
    refused(scenario(tmp_path, "{file: wq.npy}"), "W_Q", W_Q_LINE, "3 rows", "d_model is 2")


def test_benchmark_scenario_loads_at_a_small_size(tmp_path):
    """benchmarks/make_large.py's scenario (here 20 tokens, d_model 24, 4 heads) loads and walks."""
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "make_large.py"
    spec = importlib.util.spec_from_file_location("make_large", script)
    make_large = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_large)
    path = make_large.large_scenario(tmp_path, n=20, d_model=24, heads=4, seed=1)
    scn = load_scenario(path)
    assert (scn.n, scn.d_model, scn.heads, scn.d_k, scn.mask_kind) == (20, 24, 4, 6, "causal")
    assert np.array_equal(scn.main.E, np.load(tmp_path / "E.npy"))
    assert np.array_equal(scn.W_O, np.load(tmp_path / "W_O.npy"))
    data = json.loads(export(path).stdout)
    assert len(data["stages"]["heads"]) == 4 and len(data["stages"]["O"]) == 20
