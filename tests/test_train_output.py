"""`attnwalk train NAME -o trained.yaml`: the trained layer as a scenario file that run, grad,
export and train take, for every trainable scenario: each built-in (those without a target given
one here), and user files with matrix files, seeded random matrices and the features. The file's
layer must be the trained one to the bit: train of the file starts at the loss the run ended on,
and every stage of its walk equals the trained walk's (computed here in-process, apart from the
file). What is refused is one line, exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.export.data import to_json, walk_data
from attnwalk.layer.train import descend
from attnwalk.layer.walk import compute
from attnwalk.scenario.builtins import builtin_names, builtin_path
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.scenario.trained import param_place

ENV = {"COLUMNS": "100", "NO_COLOR": "1"}


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, input=input)


def ok(*args: str, input: str | None = None) -> str:
    result = invoke(*args, input=input)
    assert result.exit_code == 0, result.output
    return result.stdout


def refused(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def trainable(name: str) -> str:
    """Built-in `name`'s text, with a target where it has none: its last query should attend to
    the first key its mask allows it (a few quick steps)."""
    text = builtin_path(name).read_text(encoding="utf-8")
    if "\ntarget:" in text:
        return text
    scn = load_scenario(name)
    key = int(np.flatnonzero(scn.allowed[-1])[0])
    return text + f"\ntarget: {{attend: {{{scn.n}: {key + 1}}}}}\ntrain: {{steps: 3, lr: 0.1}}\n"


def assert_same_walk(a, b) -> None:
    """Every stage of two walks, to the bit."""
    assert set(a.mats) == set(b.mats)
    for key in a.mats:
        assert np.array_equal(a.mats[key], b.mats[key]), key
    assert len(a.heads) == len(b.heads)
    for h, (ha, hb) in enumerate(zip(a.heads, b.heads)):
        assert set(ha.mats) == set(hb.mats)
        for key in ha.mats:
            assert np.array_equal(ha.mats[key], hb.mats[key]), (h, key)


def round_trip(src: Path | str, out: Path, *extra: str) -> tuple[list, object]:
    """train src -o out (JSON), then the trained layer computed in-process from src: each step's
    loss and the last step's walk."""
    steps = json.loads(ok("train", src, "--format", "json", "-o", out, *extra))["steps"]
    assert out.is_file()
    scn = load_scenario(str(src))
    last = None
    from attnwalk.features.target import target_of

    for last in descend(scn, "scaled", len(steps) - 1, _lr(scn, extra), target_of(scn).optimizer):
        pass
    assert last is not None and last.loss == steps[-1]["loss"]
    return steps, last


def _lr(scn, extra: tuple) -> float:
    from attnwalk.features.target import target_of

    return float(extra[extra.index("--lr") + 1]) if "--lr" in extra else target_of(scn).lr


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_round_trips(name: str, tmp_path: Path) -> None:
    src = tmp_path / f"{name}.yaml"
    src.write_text(trainable(name), encoding="utf-8")
    out = tmp_path / "out" / "trained.yaml"
    out.parent.mkdir()
    from attnwalk.layer.train import draws

    # a lesson that draws its sequences (induction) trains 3 of its steps here; its L is the mean
    # over each step's draws, which neither a new run's step 0 nor grad of the file's tokens repeats
    drawn = draws(load_scenario(name))
    steps, last = round_trip(src, out, *(("--steps", "3") if drawn else ()))
    # train of the file starts exactly where the run ended
    again = json.loads(ok("train", out, "--steps", "1", "--format", "json"))["steps"]
    assert drawn or again[0]["loss"] == steps[-1]["loss"]
    # run's walk of the file is the trained walk, every stage to the bit
    assert_same_walk(compute(load_scenario(str(out)), "scaled"), last.walk)
    # export and grad take it; export's numbers are the trained walk's
    exported = json.loads(ok("export", out, "--format", "json"))
    assert exported["stages"] == json.loads(to_json(walk_data(last.walk)))["stages"]
    assert drawn or json.loads(ok("grad", out, "--format", "json"))["loss"] == steps[-1]["loss"]
    ok("run", out, "--no-pause")


def test_the_file_names_what_it_was_trained_from(tmp_path: Path) -> None:
    out = tmp_path / "t.yaml"
    steps, last = round_trip("backprop", out)
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Trained by attnwalk train from the built-in backprop: 20 steps")
    assert f"lr = 0.2, scaled mode; the loss L went from\n# {steps[0]['loss']!r} to {steps[-1]['loss']!r}" in text
    scn = load_scenario(str(out))
    assert scn.name == "backprop_trained"
    assert scn.title["en"].endswith("(trained)") and scn.title["zh"].endswith("（训练后）")
    assert "反向传播" in text and "\\u" not in text  # Chinese as written, not escaped
    assert scn.description["zh"].startswith("训练后：backprop") and "还是 river_bank 那一层" in scn.description["zh"]
    assert not scn.notes and "# notes: left out" in text  # they spoke of the numbers before training
    assert "# the query row whose arithmetic the walk works through" in text  # comments kept
    assert "# geography asks for geography" not in text  # a comment on W_Q's old numbers is not
    # every digit: the trained W_K, as the file holds it, is the trained one
    assert np.array_equal(scn.W_K, last.walk.scenario.W_K)
    row = "  - [" + ", ".join(repr(float(x)) for x in last.walk.scenario.W_K[0]) + "]"
    assert row in text.splitlines()  # a row per line


def test_a_user_file_with_matrix_files_and_seeded_matrices(tmp_path: Path) -> None:
    src_dir, out_dir = tmp_path / "src", tmp_path / "elsewhere"
    src_dir.mkdir(), out_dir.mkdir()
    rng = np.random.default_rng(3)
    np.save(src_dir / "e.npy", rng.normal(size=(4, 6)))
    np.savez(src_dir / "w.npz", wk=rng.normal(size=(6, 4)))
    np.savetxt(src_dir / "wv.csv", rng.normal(size=(6, 4)), delimiter=",")
    np.save(src_dir / "mask.npy", np.tril(np.ones((4, 4), dtype=bool)))
    src = src_dir / "mine.yaml"
    src.write_text("""# a user's file: the numbers in files and seeds
tokens: [一, 只, 猫, 睡]
embeddings: {file: e.npy}
W_Q: {random: {seed: 7, rows: 6, cols: 4, scale: 0.5}}
W_K: {file: w.npz, key: wk}
W_V: {file: wv.csv}
W_O: {random: {seed: 8, rows: 4, cols: 6}}
heads: 2
mask: {file: mask.npy}
positional: rope
sinks: [0.5, -0.5]
target: {attend: {4: 2}, head: 2}
train: {steps: 5, lr: 0.3}
""", encoding="utf-8")
    out = out_dir / "t.yaml"
    steps, last = round_trip(src, out)
    text = out.read_text(encoding="utf-8")
    assert "{file:" not in text and "{random:" not in text  # self-contained: every number inline
    for name in ("e.npy", "w.npz", "wv.csv", "mask.npy"):
        (src_dir / name).unlink()  # it needs none of them
    scn = load_scenario(str(out))
    assert np.array_equal(scn.param("sinks"), last.walk.scenario.param("sinks"))
    assert not np.array_equal(scn.param("sinks"), [0.5, -0.5])  # the sinks were trained
    assert scn.allowed.tolist() == np.tril(np.ones((4, 4), dtype=bool)).tolist()
    assert_same_walk(compute(scn, "scaled"), last.walk)
    again = json.loads(ok("train", out, "--steps", "1", "--format", "json"))["steps"]
    assert again[0]["loss"] == steps[-1]["loss"]


def test_matrices_too_large_for_yaml_go_beside_it(tmp_path: Path) -> None:
    src = tmp_path / "big.yaml"
    src.write_text("""tokens: [a, b, c]
embeddings: {random: {seed: 1, rows: 3, cols: 400}}
W_Q: {random: {seed: 2, rows: 400, cols: 300, scale: 0.05}}
W_K: {random: {seed: 3, rows: 400, cols: 300, scale: 0.05}}
W_V: [[0.1], [0.2]]
""".replace("W_V: [[0.1], [0.2]]", "W_V: {random: {seed: 4, rows: 400, cols: 2}}")
                   + "target: {attend: {3: 1}}\ntrain: {steps: 2, lr: 0.5}\n", encoding="utf-8")
    out = tmp_path / "t.yaml"
    steps, last = round_trip(src, out)
    for name in ("W_Q", "W_K"):  # 120,000 numbers each: more than a scenario's YAML holds
        assert np.array_equal(np.load(tmp_path / f"t.{name}.npy"), last.walk.scenario.param(name))
    assert_same_walk(compute(load_scenario(str(out)), "scaled"), last.walk)


def test_quantized_weights_are_written_as_trained(tmp_path: Path) -> None:
    """Training moves the numbers read back from the blocks off the grid; the file holds them as
    they are, with quantize: none (quantizing them again would be another layer)."""
    src = tmp_path / "q.yaml"
    src.write_text(trainable("quantized"), encoding="utf-8")
    out = tmp_path / "t.yaml"
    steps, last = round_trip(src, out)
    scn = load_scenario(str(out))
    assert scn.setting("quantize") is None and "quantize: none" in out.read_text(encoding="utf-8")
    assert np.array_equal(scn.W_Q, last.walk.scenario.W_Q)


def test_from_stdin_and_as_a_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped in (`train - -o`): the text read from stdin is the one rewritten; piped out: the
    table, then one line on stderr naming the file."""
    import subprocess
    import sys

    text = builtin_path("saturation").read_text(encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "attnwalk", "train", "-", "--no-pause", "--steps", "4",
                           "-o", "piped.yaml"], input=text, capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "piped.yaml").read_text().startswith("# Trained by attnwalk train from <stdin>: 4 steps")
    assert load_scenario(str(tmp_path / "piped.yaml")).name == "saturation_trained"
    monkeypatch.chdir(tmp_path)
    result = invoke("train", "backprop", "--no-pause", "--steps", "3", "-o", "table.yaml")
    assert result.exit_code == 0 and "is written to table.yaml" in result.stderr
    assert json.loads(ok("train", "table.yaml", "--steps", "1", "--format", "json"))["steps"][0]["loss"] == \
        json.loads(ok("train", "backprop", "--steps", "3", "--format", "json"))["steps"][-1]["loss"]


def test_refused_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "mine.yaml"
    text = builtin_path("backprop").read_text(encoding="utf-8")
    src.write_text(text, encoding="utf-8")
    assert "a file this command reads" in refused("train", src, "-o", src)
    link = tmp_path / "link.yaml"
    os.symlink(src, link)
    assert "a file this command reads" in refused("train", src, "-o", link)
    assert src.read_text(encoding="utf-8") == text  # untouched
    assert "does not exist" in refused("train", src, "-o", tmp_path / "no" / "t.yaml")
    assert "folder" in refused("train", src, "-o", tmp_path)
    assert "--compare" in refused("train", src, "--compare", "-o", tmp_path / "t.yaml")
    assert not (tmp_path / "t.yaml").exists()


def test_onto_a_matrix_file_it_reads_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "wq.npy", np.eye(2))
    src = tmp_path / "m.yaml"
    src.write_text("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_Q: {file: wq.npy}\n"
                   "W_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\ntarget: {attend: {2: 1}}\n", encoding="utf-8")
    before = (tmp_path / "wq.npy").read_bytes()
    assert "a file this command reads" in refused("train", src, "-o", tmp_path / "wq.npy", "--no-pause")
    assert (tmp_path / "wq.npy").read_bytes() == before


def test_json_with_output_writes_both(tmp_path: Path) -> None:
    out = tmp_path / "t.yaml"
    result = invoke("train", "backprop", "--steps", "2", "--format", "json", "-o", out)
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)["steps"]) == 3 and out.is_file()
    assert result.stderr == ""  # stdout is the JSON; nothing else is said
    ok("train", "backprop", "--steps", "2", "--format", "json", "-o", os.devnull)  # a device, as it is


def test_another_mode_is_named_and_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "t.yaml"
    steps = json.loads(ok("train", "backprop", "--steps", "3", "--mode", "unscaled", "--format", "json",
                          "-o", out))["steps"]
    assert "in unscaled mode: give --mode unscaled to go on" in out.read_text(encoding="utf-8")
    again = json.loads(ok("train", out, "--steps", "1", "--mode", "unscaled", "--format", "json"))["steps"]
    assert again[0]["loss"] == steps[-1]["loss"]


def test_nothing_is_written_to_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["HOME"])  # the temporary one of conftest's fixture
    before = sorted(home.rglob("*"))
    monkeypatch.chdir(tmp_path)
    ok("train", "backprop", "--steps", "2", "--format", "json", "-o", "t.yaml")
    assert sorted(home.rglob("*")) == before and (tmp_path / "t.yaml").is_file()


def test_a_later_block_param_lives_in_blocks() -> None:
    assert param_place("W_Q") == ("W_Q",) and param_place("sinks") == ("sinks",)
    from test_blocks import yaml_text

    stacked = scenario_from_text(yaml_text(), "three.yaml")  # three blocks: W_Q, W_K, W_V, W_O each
    assert param_place("W_Q", stacked) == ("blocks", 0, "W_Q")
    assert param_place("W_Q.2", stacked) == ("blocks", 1, "W_Q") and param_place("W_O.3", stacked) == ("blocks", 2, "W_O")


def test_texts_read_back_as_written() -> None:
    """A text that folding would change (runs of spaces, a leading space) is double-quoted."""
    from attnwalk.scenario.yamledit import text_value

    for value in ("a  b " * 30, " lead" + "x " * 60, "第一行\n\n第二行 " + "词 " * 50, "yes", "1e3", "plain_name"):
        loaded = scenario_from_text(f"name: {text_value(value, 6)}\ntokens: [a]\nembeddings: [[1]]\n"
                                    "W_Q: [[1]]\nW_K: [[1]]\nW_V: [[1]]\n", "t")
        assert loaded.name == value


# -- heads --scenario: the scores of `attnwalk heads` over a scenario's own tokens ----------------


REPEATED = """tokens: [s, a, b, c, a, b, c]
embeddings: {random: {seed: 1, rows: 7, cols: 4}}
W_Q: {random: {seed: 2, rows: 4, cols: 4}}
W_K: {random: {seed: 3, rows: 4, cols: 4}}
W_V: {random: {seed: 4, rows: 4, cols: 4}}
heads: 2
mask: causal
"""


def numpy_weights(text_seeds: tuple[int, int, int], n: int, d: int, heads: int) -> np.ndarray:
    """Each head's causal softmax(Q Kᵀ / √d_k), written here from the seeds: (H, n, n)."""
    E = np.random.default_rng(text_seeds[0]).normal(0.0, 1.0, size=(n, d))
    W_Q = np.random.default_rng(text_seeds[1]).normal(0.0, 1.0, size=(d, d))
    W_K = np.random.default_rng(text_seeds[2]).normal(0.0, 1.0, size=(d, d))
    d_k = d // heads
    out = []
    for h in range(heads):
        Q = E @ W_Q[:, h * d_k:(h + 1) * d_k]  # (n, d_k)
        K = E @ W_K[:, h * d_k:(h + 1) * d_k]
        S = Q @ K.T / np.sqrt(d_k)  # (n, n)
        S[np.triu_indices(n, 1)] = -np.inf
        A = np.exp(S - S.max(axis=1, keepdims=True))
        out.append(A / A.sum(axis=1, keepdims=True))
    return np.array(out)


def test_heads_scores_a_scenario_on_its_own_tokens(tmp_path: Path) -> None:
    src = tmp_path / "rep.yaml"
    src.write_text(REPEATED, encoding="utf-8")
    data = json.loads(ok("heads", "--scenario", src, "--format", "json"))
    A = numpy_weights((1, 2, 3), 7, 4, 2)
    assert data["tokens"] == ["s", "a", "b", "c", "a", "b", "c"] and (data["first"], data["repeat"]) == (1, 3)
    for h, head in enumerate(data["heads"]):
        assert (head["layer"], head["head"]) == (1, h + 1)
        assert head["previous_token"] == pytest.approx(np.mean([A[h, i, i - 1] for i in range(1, 7)]), abs=1e-12)
        # the second copy is positions 4, 5, 6; the token after each one's first occurrence: 2, 3, 4
        assert head["induction"] == pytest.approx(np.mean([A[h, 4, 2], A[h, 5, 3], A[h, 6, 4]]), abs=1e-12)
        assert head["first_token"] == pytest.approx(np.mean(A[h, 1:, 0]), abs=1e-12)
        assert head["self"] == pytest.approx(np.mean(np.diag(A[h])), abs=1e-12)
    screen = ok("heads", "--scenario", src)
    assert "scenario's own 7 tokens" in screen and "induction: mean of" in screen


def test_heads_of_a_trained_file_have_no_induction_without_a_repeat(tmp_path: Path) -> None:
    out = tmp_path / "t.yaml"
    ok("train", "backprop", "--format", "json", "-o", out)
    data = json.loads(ok("heads", "-s", out, "-f", "json"))
    assert data["repeat"] is None and data["heads"][0]["induction"] is None
    A = compute(load_scenario(str(out)), "scaled").matrix("A", 0)
    assert data["heads"][0]["self"] == pytest.approx(float(np.mean(np.diag(A))), abs=1e-12)
    assert "no induction score" in ok("heads", "-s", out)
    assert "--model" in refused("heads", "-s", out, "--model", "x")
    assert "--length" in refused("heads", "-s", out, "--length", "3")
    assert "cross-attention" in refused("heads", "-s", "cross_attention")


def test_in_a_terminal_the_layer_is_written_when_the_learner_quits(tmp_path: Path) -> None:
    """The live view (a real pseudo-terminal): run to the end, q, and the file holds the last step."""
    pytest.importorskip("pexpect")
    from test_pty import finish, spawn

    out = tmp_path / "t.yaml"
    child = spawn("train", "backprop", "--steps", "5", "-o", str(out))
    child.expect(r"step 5 / 5 · done")
    child.send("q")
    assert finish(child) == 0
    assert "is written to" in child.before
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Trained by attnwalk train from the built-in backprop: 5 steps")
    expected = json.loads(ok("train", "backprop", "--steps", "5", "--format", "json"))["steps"][-1]["loss"]
    assert json.loads(ok("train", out, "--steps", "1", "--format", "json"))["steps"][0]["loss"] == expected


def test_a_file_written_as_one_flow_mapping(tmp_path: Path) -> None:
    """`{tokens: …, W_Q: …}` on a line or two: the keys it lacks (name, title, description) go in
    before its closing brace, its texts double-quoted."""
    src = tmp_path / "flow.yaml"
    src.write_text("{tokens: [a, b, c], embeddings: [[1, 0], [0, 1], [1, 1]], W_Q: [[1, 0], [0, 1]],\n"
                   " W_K: {random: {seed: 1, rows: 2, cols: 2}}, W_V: [[1, 0], [0, 1]], target: {attend: {3: 1}}}\n",
                   encoding="utf-8")
    out = tmp_path / "t.yaml"
    steps, last = round_trip(src, out)
    scn = load_scenario(str(out))
    assert scn.name == "flow_trained" and scn.title == {"en": "flow, trained", "zh": "flow（训练后）"}
    assert_same_walk(compute(scn, "scaled"), last.walk)


def test_a_printed_run_of_several_blocks_shows_each_blocks_a_and_says_which(tmp_path: Path) -> None:
    """Block 2's A at the start is the one test_blocks' loops compute (written apart from attnwalk)."""
    from test_blocks import reference, yaml_text

    src = tmp_path / "three.yaml"
    src.write_text(yaml_text() + "target: {attend: {3: 1}}\ntrain: {steps: 1, lr: 0.5}\n", encoding="utf-8")
    out = ok("train", str(src), "--no-pause")
    start = out.index("A at the start (scaled) · block 2 / 3")
    section = out[start:out.index("block 3 / 3", start)]
    A = reference()[1]["A"][0]
    flooded = next(line for line in section.splitlines() if line.strip().startswith("flooded"))
    assert f"{A[3, 1]:.4f}" in flooded.split()[2]  # flooded's row, river's weight
    assert "A after step 1 (scaled) · block 3 / 3" in out


def test_train_json_gives_each_steps_gradient_size_and_on_drawn_sequences_no_bulky_a() -> None:
    data = json.loads(ok("train", "backprop", "--steps", "2", "--format", "json"))
    table = ok("train", "backprop", "--steps", "2", "--no-pause", "--every", "1")
    for step in data["steps"]:
        assert f"{step['grad_norm']:.4f}" in table and "A" in step
    assert data["layer"] == 1
    drawn = json.loads(ok("train", "induction", "--steps", "1", "--format", "json"))
    assert all("A" not in step and "grad_norm" in step and len(step["heads"]) == 4 for step in drawn["steps"])
    assert {(h["layer"], h["head"]) for h in drawn["steps"][0]["heads"]} == {(1, 1), (1, 2), (2, 1), (2, 2)}


def test_heads_of_a_scenario_give_no_false_reason_count_in_words_and_name_the_mode_in_chinese() -> None:
    en = " ".join(ok("heads", "--scenario", "induction").split())
    assert "2 layers × 2 heads" in en and "(s)" not in en
    assert "no vocabulary" not in en and "in the scaled mode" in en  # induction has a vocabulary
    assert "1 layer × 1 head" in ok("heads", "--scenario", "backprop")
    zh = "".join(ok("heads", "--scenario", "induction", "--lang", "zh").split())
    assert "按缩放模式" in zh and "scaled" not in zh and "没有词表" not in zh
    assert json.loads(ok("heads", "--scenario", "backprop", "--format", "json"))["mode"] == "scaled"
