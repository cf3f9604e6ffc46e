"""Issue 39, hardening round four: a model file is an input too, no spreadsheet formulas, no
traceback, no warning line before a message, bounded training, the progress file's lock and its
malformed entries, and what `serve` offers and says. Each kind with cases of its own, over every
command that reads or writes a file.

The rule: exit 0 with correct work, or exit 2 with one `attnwalk:` line naming the file, line or
key; no traceback, no warning lines. Most run in-process (CliRunner); the ones that must see
the warnings Python prints, the time or the memory run the program (tests/bounded.py).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from bounded import attnwalk, refused

from attnwalk.cli import app
from attnwalk.layer.safe import spreadsheet_cell
from attnwalk.scenario.builtins import builtin_path

runner = CliRunner()
GGUF = Path(__file__).resolve().parent / "fixtures" / "gguf"
ENV = {"COLUMNS": "100", "NO_COLOR": "1"}


def one_line(result, where: str = "") -> str:
    """A refusal in-process: exit 2, nothing on stdout, one `attnwalk:` line, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"attnwalk: {where}"), (lines[0], where)
    return lines[0]


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), env=ENV, input=input)


def gguf_file(tmp_path: Path, name: str = "tiny-llama", as_name: str = "o.gguf") -> Path:
    pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'attnwalk[gguf]'")
    path = tmp_path / as_name
    shutil.copy(GGUF / f"{name}.gguf", path)
    return path


def ollama_store(root: Path, blob: bytes, name: str = "tiny", manifest: bytes | None = None) -> tuple[Path, Path]:
    """An Ollama store holding one model: its blob and its manifest."""
    import hashlib

    digest = hashlib.sha256(blob).hexdigest()
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    blob_path = root / "blobs" / f"sha256-{digest}"
    blob_path.write_bytes(blob)
    manifest_path = root / "manifests" / "registry.ollama.ai" / "library" / name / "latest"
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    manifest_path.write_bytes(manifest if manifest is not None else json.dumps(
        {"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"}]}).encode())
    return blob_path, manifest_path


# -- 1. an output never replaces a file the command reads ---------------------------------------


@pytest.mark.parametrize("how", ["same", "link", "folder's only GGUF", "--save as .txt"])
def test_no_output_replaces_the_gguf_file_it_walks(tmp_path: Path, how: str) -> None:
    model = gguf_file(tmp_path, as_name="m.txt" if how == "--save as .txt" else "o.gguf")
    before = model.read_bytes()
    out = {"same": model, "link": tmp_path / "l.json", "folder's only GGUF": model,
           "--save as .txt": model}[how]
    if how == "link":
        out.symlink_to(model)
    spec = str(tmp_path) if how == "folder's only GGUF" else str(model)
    if how == "--save as .txt":
        result = invoke("model", "hello", "--model", spec, "--no-pause", "--save", str(out))
        option = "--save"
    else:
        result = invoke("model", "hello", "--model", spec, "--format", "json", "-o", str(out))
        option = "--output"
    assert "a file this command reads" in one_line(result, f"{option} {out}: ")
    assert model.read_bytes() == before


@pytest.mark.parametrize("which", ["blob", "manifest"])
def test_no_output_replaces_an_ollama_blob_or_manifest(tmp_path: Path, monkeypatch, which: str) -> None:
    pytest.importorskip("gguf")
    blob, manifest = ollama_store(tmp_path / "ollama", (GGUF / "tiny-llama.gguf").read_bytes())
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    target = blob if which == "blob" else manifest
    before = target.read_bytes()
    result = invoke("model", "hello", "--model", "ollama:tiny", "--format", "json", "-o", str(target))
    assert "a file this command reads" in one_line(result, f"--output {target}: ")
    assert target.read_bytes() == before
    ok = invoke("model", "hello", "--model", "ollama:tiny", "--format", "json", "-o", str(tmp_path / "x.json"))
    assert ok.exit_code == 0 and json.loads((tmp_path / "x.json").read_text(encoding="utf-8"))


def test_no_output_replaces_a_sharded_model_s_index_or_shard(tmp_path: Path) -> None:
    from safetensors import safe_open

    source = Path(__file__).resolve().parent / "fixtures" / "models" / "tiny-bert"
    model = tmp_path / "sharded"
    model.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(source / name, model / name)
    shard = "model-00001-of-00001.safetensors"
    shutil.copy(source / "model.safetensors", model / shard)
    with safe_open(str(model / shard), framework="numpy") as handle:
        names = list(handle.keys())
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {n: shard for n in names}}),
                                                        encoding="utf-8")
    for target in (model / "model.safetensors.index.json", model / shard):
        before = target.read_bytes()
        result = invoke("model", "the river bank", "--model", str(model), "-f", "json", "-o", str(target))
        assert "a file this command reads" in one_line(result, f"--output {target}: ")
        assert target.read_bytes() == before


@pytest.mark.parametrize("which", ["worksheet", "answers"])
def test_grade_writes_over_neither_the_worksheet_nor_the_answers(tmp_path: Path, which: str) -> None:
    sheet = invoke("quiz", "girl_bangs", "--seed", "1", "--format", "json").stdout
    (tmp_path / "ws.json").write_text(sheet, encoding="utf-8")
    (tmp_path / "a.csv").write_text("student,1\nana,4x4\n", encoding="utf-8")
    target = tmp_path / ("ws.json" if which == "worksheet" else "a.csv")
    before = target.read_bytes()
    result = invoke("grade", str(tmp_path / "ws.json"), str(tmp_path / "a.csv"), "-f", "csv", "-o", str(target))
    one_line(result, f"--output {target}: ")
    assert target.read_bytes() == before


# -- 2. spreadsheet formulas -------------------------------------------------------------------

FORMULAS = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1:A2)", '=HYPERLINK("http://x","y")',
            "\t=1+1", "\r=1+1", "-", "=", "+"]


@pytest.mark.parametrize("cell", FORMULAS)
def test_a_text_cell_that_begins_a_formula_is_shown_not_computed(cell: str) -> None:
    assert spreadsheet_cell(cell) == "'" + cell  # OWASP: a leading apostrophe


@pytest.mark.parametrize("cell", ["-0.25", "-1", "+3", "-1e-05", "-inf", "1.5", "ana", "a=b", "", "'=x", "bank"])
def test_a_number_or_a_plain_word_stays_as_it_is(cell: str) -> None:
    assert spreadsheet_cell(cell) == cell


def test_grade_csv_escapes_every_formula_name_and_keeps_its_numbers(tmp_path: Path) -> None:
    sheet = invoke("quiz", "girl_bangs", "--seed", "1", "--format", "json").stdout
    (tmp_path / "ws.json").write_text(sheet, encoding="utf-8")
    names = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1:A2)", '=HYPERLINK("http://evil","x")', "-5"]
    rows = io.StringIO()
    csv.writer(rows, lineterminator="\n").writerows([["student", "1"], *[[n, "4x4"] for n in names]])
    (tmp_path / "a.csv").write_text(rows.getvalue(), encoding="utf-8")
    for written in ("stdout", "file"):
        args = ["grade", str(tmp_path / "ws.json"), str(tmp_path / "a.csv"), "-f", "csv"]
        result = invoke(*args, *(["-o", str(tmp_path / "g.csv")] if written == "file" else []))
        assert result.exit_code == 0, result.output
        text = result.stdout if written == "stdout" else (tmp_path / "g.csv").read_text(encoding="utf-8")
        table = list(csv.reader(io.StringIO(text)))
        students = [row[0] for row in table[1:]]
        assert students == ["'" + n for n in names[:-1]] + ["-5"]  # -5 is a number: left as it is
        grid = table[0].index("Q1")  # then each question's answer and whether it was right
        for row in table[1:]:
            assert all(cell.lstrip("-").isdigit() for cell in row[1:grid])  # scores and counts: numbers
            answers, right = row[grid::2], row[grid + 1::2]
            assert answers[0] == "4x4" and all(cell in ("", "0", "1") for cell in right)


def test_export_csv_escapes_formula_tokens_and_keeps_negative_values_numbers(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text('tokens: ["=1+1", "-2+3", "@SUM(A1)", "+x"]\n'
                    "embeddings: [[1, -0.25], [-2, 0.5], [0, -1], [3, 1]]\n"
                    "W_Q: [[1, 0], [0, -1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[-1, 0], [0, 1]]\n", encoding="utf-8")
    result = invoke("export", str(path), "-f", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    labels = {row["row_label"] for row in rows if row["stage"] == "X"}
    assert labels == {"'=1+1", "'-2+3", "'@SUM(A1)", "'+x"}
    assert {row["col_label"] for row in rows if row["stage"] == "A"} == labels
    values = [row["value"] for row in rows]
    assert "-0.25" in values and "-1.0" in values  # negative numbers stay numbers, unescaped
    assert all(not v.startswith("'") for v in values)
    float_values = [float(v) for v in values]  # every value reads back as a number
    assert float_values[[r["stage"] for r in rows].index("X")] == 1.0


# -- 3. tracebacks -----------------------------------------------------------------------------


def huge_target(tmp_path: Path, value: str) -> Path:
    text = builtin_path("backprop").read_text(encoding="utf-8")
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("target:"))
    lines[at] = f"target: {{output: [[{value}, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]}}"
    path = tmp_path / "huge.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, at + 1


@pytest.mark.parametrize("value", ["1e200", "1e308", "-1e200"])
@pytest.mark.parametrize("args", [["--no-pause"], ["--format", "json"], ["--no-pause", "--lang", "zh"]])
def test_a_target_whose_loss_leaves_float64_is_one_line_in_grad(tmp_path: Path, value: str, args) -> None:
    path, line = huge_target(tmp_path, value)
    message = one_line(invoke("grad", str(path), *args), f"{path}:{line}: target: ")
    assert "overflows float64" in message


def test_a_target_whose_loss_leaves_float64_is_one_line_in_train(tmp_path: Path) -> None:
    path, line = huge_target(tmp_path, "1e200")
    for args in (["--no-pause"], ["--format", "json"]):
        assert "overflows float64" in one_line(invoke("train", str(path), *args), f"{path}:{line}: target: ")


def test_an_asked_weight_of_exactly_0_names_the_file(tmp_path: Path) -> None:
    text = builtin_path("layer_norm").read_text(encoding="utf-8")
    path = tmp_path / "ln.yaml"
    path.write_text(text.replace("\nnorm: layer\n", "\nnorm: layer\nnorm_gamma: [3e38, 3e38, 3e38, 3e38]\n"),
                    encoding="utf-8")
    for command in ("grad", "train"):
        message = one_line(invoke(command, str(path), "--no-pause"), f"{path}: A[")
        assert "is exactly 0 in float64 under scaled weights" in message and "try smaller weights" in message


def test_a_target_large_but_inside_float64_is_walked(tmp_path: Path) -> None:
    path, _ = huge_target(tmp_path, "1e150")  # L ≈ 5e299: finite, written in scientific notation
    result = invoke("grad", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["loss"] == pytest.approx(0.5 * 1e300, rel=1e-6)


def _tokenizer_fields(name: str) -> tuple[dict, Path]:
    pytest.importorskip("gguf")
    from attnwalk.models.ggufile import GGUFFile

    path = GGUF / f"{name}.gguf"
    return dict(GGUFFile(path).fields), path


@pytest.mark.parametrize("change", ["bidi", "nul", "cut to 10", "all the same", "a merge not two tokens"])
@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gpt2", "tiny-mistral"])
def test_a_vocabulary_that_no_longer_fits_is_one_model_error(name: str, change: str) -> None:
    from attnwalk.models.data import ModelError
    from attnwalk.models.gguftokens import gguf_tokenizer

    fields, path = _tokenizer_fields(name)
    tokens = list(fields["tokenizer.ggml.tokens"])
    merged = [m.split(" ")[0] for m in fields.get("tokenizer.ggml.merges", [])] or tokens[3:]
    victim = next(t for t in merged if t in tokens)  # a token the merges (or the scores) use
    if change in ("bidi", "nul"):
        tokens[tokens.index(victim)] = ("\u202e" if change == "bidi" else "\x00") + victim
    elif change == "cut to 10":
        tokens = tokens[:10]
        for key in ("tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            if key in fields:
                fields[key] = fields[key][:10]
    elif change == "all the same":
        tokens = ["a"] * len(tokens)
    elif "tokenizer.ggml.merges" in fields:
        fields["tokenizer.ggml.merges"] = ["nospace", *fields["tokenizer.ggml.merges"][1:]]
    else:
        pytest.skip("a SentencePiece vocabulary has no merges to break")
    fields["tokenizer.ggml.tokens"] = tokens
    try:
        tokenizer = gguf_tokenizer(fields, path)
    except ModelError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: ") and "\n" not in message
        assert "\u202e" not in message and "\x00" not in message  # escaped, never obeyed
        return
    # a SentencePiece vocabulary cut or renamed still cuts a sentence (unknown pieces as <unk>)
    assert name == "tiny-mistral" and change in ("bidi", "nul", "cut to 10")
    assert tokenizer.encode("the river").ids


def test_a_gguf_whose_token_was_renamed_in_place_is_one_line(tmp_path: Path) -> None:
    model = gguf_file(tmp_path)
    data = bytearray(model.read_bytes())
    entry = struct.pack("<Q", 1) + b"h"  # the one-letter token "h" of the vocabulary ("h e" merges it)
    at = data.index(entry) + 8
    data[at:at + 1] = b"\x00"  # the same length: every offset after it still holds
    model.write_bytes(bytes(data))
    message = one_line(invoke("model", "the river", "--model", str(model), "--no-pause"), f"{model}: ")
    assert "tokenizer.ggml.tokens and tokenizer.ggml.merges do not fit together" in message


def test_an_ollama_manifest_nested_100000_deep_is_one_line(tmp_path: Path, monkeypatch) -> None:
    deep = ('{"layers": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    _, manifest = ollama_store(tmp_path / "ollama", b"GGUF", manifest=deep)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    message = one_line(invoke("model", "hi", "--model", "ollama:tiny"), f"{manifest}: ")
    assert "nested too deeply" in message


@pytest.mark.parametrize("depth", [600, 100_000])
def test_a_worksheet_nested_deep_is_one_line_and_quick(tmp_path: Path, depth: int) -> None:
    (tmp_path / "ws.json").write_text('{"questions": ' + "[" * depth + "]" * depth + "}", encoding="utf-8")
    (tmp_path / "a.csv").write_text("student,1\nana,1\n", encoding="utf-8")
    line = refused("grade", str(tmp_path / "ws.json"), str(tmp_path / "a.csv"), where=f"{tmp_path / 'ws.json'}: ")
    assert "nested too deeply" in line


# -- 4. no warning lines before the message ----------------------------------------------------


@pytest.mark.parametrize("lr", ["inf", "1e400", "nan", "-inf"])
def test_a_learning_rate_is_a_finite_positive_number_checked_first(lr: str) -> None:
    line = refused("train", "backprop", "--lr", lr, "--no-pause", where="--lr ")
    assert "finite number above 0" in line and "try --lr" not in line


def damaged(tmp_path: Path, how: str) -> Path:
    """tiny-llama.gguf with blk.0.attn_q.weight (Q4_1) damaged: its first block's scale an f16
    infinity, its type said to be Q4_0, or its data said to start one byte later."""
    pytest.importorskip("gguf")
    from attnwalk.models.ggufile import GGUFFile

    model = gguf_file(tmp_path, as_name=f"{how}.gguf")
    info = GGUFFile(model).tensors["blk.0.attn_q.weight"]
    data = bytearray(model.read_bytes())
    if how == "inf scale":
        data[info.offset:info.offset + 2] = np.float16(np.inf).tobytes()
    else:
        name = b"blk.0.attn_q.weight"
        at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
        kind_at = at + 4 + 8 * struct.unpack_from("<I", data, at)[0]  # after n_dims and the dims
        if how == "type":
            struct.pack_into("<I", data, kind_at, 2)  # Q4_0
        else:
            struct.pack_into("<Q", data, kind_at + 4, struct.unpack_from("<Q", data, kind_at + 4)[0] + 1)
    model.write_bytes(bytes(data))
    return model


@pytest.mark.parametrize("how", ["inf scale", "type", "offset"])
def test_a_damaged_gguf_tensor_is_its_one_line_without_warnings(tmp_path: Path, how: str) -> None:
    model = damaged(tmp_path, how)
    line = refused("model", "the river", "--model", str(model), "--no-pause", where=f"{model}: ")
    assert "tensor blk.0.attn_q.weight" in line and "damaged" in line


def norm_weights(tmp_path: Path, name: str) -> Path:
    """A GGUF file whose every F32 norm weight is 3e38 (float32 holds up to 3.4e38)."""
    pytest.importorskip("gguf")
    from attnwalk.models.ggufile import GGUFFile

    model = gguf_file(tmp_path, name, f"norm-{name}.gguf")
    data = bytearray(model.read_bytes())
    for tensor, info in GGUFFile(model).tensors.items():
        if "norm" in tensor and info.kind == "F32":
            data[info.offset:info.offset + info.nbytes] = np.full(info.nbytes // 4, 3e38, np.float32).tobytes()
    model.write_bytes(bytes(data))
    return model


@pytest.mark.parametrize("name, lang, extra", [("tiny-mistral", "en", []), ("tiny-mistral", "zh", []),
                                               ("tiny-gpt2", "en", ["--tiles", "2"])])
def test_norm_weights_of_3e38_walk_without_warnings_or_nan(tmp_path: Path, name: str, lang: str, extra) -> None:
    # layer 2 of these models reads rows near 1e77: every score of a row far below −700, so each
    # e^s underflows to 0; the worked cell printed "0.000 / 0.000 = nan" after numpy's warnings,
    # and the tiled cell overflowed e^(s − m) (a raw score past its rounded maximum), then 0 / 0
    model = norm_weights(tmp_path, name)
    out, _ = attnwalk("model", "I sat by the river", "--model", str(model), "--layer", "2", "--no-pause",
                      "--lang", lang, *extra, env={"COLUMNS": "100"})
    assert out.returncode == 0 and out.stderr == "", out.stderr[-2000:]
    assert "nan" not in out.stdout and "0.000 / 0.000" not in out.stdout
    if not extra:
        assert ("underflows to 0" if lang == "en" else "下溢成 0") in out.stdout


def test_the_a_cell_of_a_row_below_minus_700_works_the_stable_form_only() -> None:
    import warnings

    from attnwalk.layer.cells import EXP_SAFE
    from attnwalk.layer.walk import compute
    from attnwalk.render.options import ViewOptions
    from attnwalk.render.worked import worked_cell
    from attnwalk.scenario.load import scenario_from_text

    scn = scenario_from_text("tokens: [a, b]\nembeddings: [[30, 30], [30, 31]]\n"
                             "W_Q: [[-40, 0], [0, -40]]\nW_K: [[40, 0], [0, 40]]\nW_V: [[1, 0], [0, 1]]\n",
                             "deep.yaml")
    walk = compute(scn)
    assert walk.matrix("S", 0).max() < -EXP_SAFE  # every score of every row below −700
    console = Console(width=100, file=io.StringIO(), color_system=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning fails the test
        console.print(worked_cell(walk.view(0), "A", 0, 0, ViewOptions(width=100)))
    text = console.file.getvalue()
    assert "nan" not in text and "underflows to 0" in text and "e^(s − max)" in text


# -- 5. the user's input is exit 2, not 1 ---------------------------------------------------------


def test_an_ollama_name_longer_than_ollama_allows_is_exit_2(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path))
    for spec in ("a" * 5000, "a" * 81, "tiny:" + "t" * 81, "x/" + "n" * 81):
        message = one_line(invoke("model", "hi", "--model", f"ollama:{spec}"), "ollama:")
        assert "too long for an Ollama model name" in message and len(message) < 400


LONG = "a" * 5000


@pytest.mark.parametrize("args", [["export", "girl_bangs", "-o", f"{LONG}.json"], ["model", "hi", "--model", LONG],
                                  ["run", "girl_bangs", "--no-pause", "--save", f"{LONG}.svg"],
                                  ["init", f"{LONG}.yaml"], ["export", "girl_bangs", "-o", f"d/{LONG}/x.json"]])
def test_a_path_too_long_for_the_file_system_is_exit_2_in_one_short_line(tmp_path: Path, monkeypatch, args) -> None:
    monkeypatch.chdir(tmp_path)
    message = one_line(invoke(*args))
    assert "characters" in message and len(message) < 300


@pytest.mark.parametrize("target", ["/proc/version", "/sys/attnwalk.json", "/proc/attnwalk.json"])
def test_an_output_in_a_folder_no_file_can_be_made_in_is_exit_2(target: str) -> None:
    if not os.path.isdir(os.path.dirname(target)):
        pytest.skip(f"no {os.path.dirname(target)} here")
    for option, args in (("--output", ["export", "girl_bangs", "-o", target]),
                         ("--save", ["run", "girl_bangs", "--no-pause", "--save", target + ".txt"])):
        one_line(invoke(*args), f"{option} {args[-1]}: cannot write in ")
    assert not os.path.exists("/sys/attnwalk.json")


# -- 6. training is bounded --------------------------------------------------------------------


@pytest.mark.parametrize("steps, compare", [("20000", False), ("1000000000", False), ("600", True)])
def test_a_run_of_too_many_steps_is_refused_before_it_starts(steps: str, compare: bool) -> None:
    from attnwalk.layer.train import MAX_RUN_STEPS

    args = ["train", "backprop", "--steps", steps, "--no-pause", *(["--compare"] if compare else [])]
    line = refused(*args, where=f"--steps {int(steps):,}: ")
    most = MAX_RUN_STEPS // (2 if compare else 1)
    assert f"use --steps {most} or fewer" in line


def test_the_largest_run_allowed_ends_within_the_bounds() -> None:
    from attnwalk.layer.train import MAX_RUN_STEPS

    out, _ = attnwalk("train", "backprop", "--steps", str(MAX_RUN_STEPS), "--no-pause")
    assert out.returncode == 0 and out.stderr == "" and f"in {MAX_RUN_STEPS} steps" in out.stdout


def test_a_lesson_asks_at_most_half_a_run(tmp_path: Path) -> None:
    text = builtin_path("backprop").read_text(encoding="utf-8").replace("train: {steps: 20,", "train: {steps: 501,")
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    assert "train.steps is 501; at most 500" in one_line(invoke("train", str(tmp_path / "t.yaml")), f"{tmp_path / 't.yaml'}:")


def _peak(steps: int) -> int:
    import gc

    from attnwalk.commands.train import train_command

    gc.collect()
    tracemalloc.start()
    try:
        train_command(name="backprop", steps=steps, lr=None, mode="scaled", compare=False, every=None,
                      head=None, no_pause=True, precision=4, ascii=False, lang="en")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_printed_run_keeps_its_memory_flat_in_the_steps(capsys) -> None:
    _peak(5)  # imports and caches first
    short, long = _peak(25), _peak(500)
    capsys.readouterr()
    # every step held (as before), 1,000 steps peaked at ~10.8 MB against ~0.6 MB for 50 (~10 KB a
    # step); kept, the peaks are a few hundred KB either way, varying with when the collector runs
    assert long < 3 * short and long < 2_500_000, (short, long)


def test_a_printed_run_keeps_only_the_steps_it_shows() -> None:
    from attnwalk.layer.train import descend
    from attnwalk.render.trainview import kept, rows_shown
    from attnwalk.scenario.load import load_scenario

    shown = rows_shown(100, 10)
    steps = kept(descend(load_scenario("backprop"), "scaled", 100, 0.2), shown)
    assert [s.step for s in steps] == shown == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert [s.step for s in kept(descend(load_scenario("backprop"), "scaled", 7, 0.2), [0, 5])] == [0, 5, 7]


def test_a_diverging_run_s_summary_is_in_the_walk_s_number_format() -> None:
    import re

    result = invoke("train", "saturation", "--lr", "1000", "--steps", "30", "--no-pause")
    assert result.exit_code == 0, result.output
    summary = next(line for line in result.stdout.splitlines() if "L went from" in line)
    assert not re.search(r"\d{12}", result.stdout)  # no number of dozens of digits anywhere
    assert re.search(r"\(-\d\.\de\+\d+% of where it started\)", " ".join(result.stdout.split())), summary


# -- 7. the progress file ----------------------------------------------------------------------


def _state() -> Path:
    from attnwalk.tutor.progress import state_dir

    state = state_dir()
    state.mkdir(parents=True, exist_ok=True)
    return state


@pytest.mark.parametrize("to", ["elsewhere", "/dev/null"])
def test_the_lock_file_lies_in_the_state_folder_whatever_progress_links_to(tmp_path: Path, to: str) -> None:
    state = _state()
    elsewhere = tmp_path / "dotfiles"
    elsewhere.mkdir()
    (state / "progress.json").symlink_to(elsewhere / "progress.json" if to == "elsewhere" else to)
    existed = os.path.exists("/dev/null.lock")
    result = invoke("quiz", "river_bank", "--count", "1", input="1\n")
    assert result.exit_code == 0, result.output
    assert (state / "progress.json.lock").is_file()
    assert list(elsewhere.iterdir()) == ([elsewhere / "progress.json"] if to == "elsewhere" else [])
    assert os.path.exists("/dev/null.lock") == existed  # none made beside the device
    if to == "elsewhere":
        assert json.loads((elsewhere / "progress.json").read_text(encoding="utf-8"))["scenarios"]["river_bank"]


def test_a_lock_file_name_taken_by_a_link_is_not_followed(tmp_path: Path) -> None:
    state = _state()
    (state / "progress.json.lock").symlink_to(tmp_path / "made-through-the-link")
    result = invoke("quiz", "river_bank", "--count", "1", input="1\n")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "made-through-the-link").exists()
    assert json.loads((state / "progress.json").read_text(encoding="utf-8"))["scenarios"]["river_bank"]


@pytest.mark.parametrize("entry", ['{"quiz": "TYPEMARK"}', '"TYPEMARK"', '{"walk": ["TYPEMARK"]}',
                                   '{"quiz": {"best": "TYPEMARK"}}', '{"quiz": {"attempts": "TYPEMARK"}}',
                                   '{"quiz": {"mistakes": {"column_softmax": "TYPEMARK"}}}'])
def test_a_malformed_entry_is_kept_aside_and_said(entry: str) -> None:
    state = _state()
    text = '{"version": 1, "scenarios": {"river_bank": ' + entry + "}}"
    (state / "progress.json").write_text(text, encoding="utf-8")
    shown = invoke("progress")
    assert "is damaged" in one_line(shown, "the progress file ") and "kept" in shown.stderr
    result = invoke("quiz", "river_bank", "--count", "1", input="1\n")
    assert result.exit_code == 0, result.output
    kept = [p for p in state.iterdir() if p.name.startswith("progress-damaged-")]
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == text  # TYPEMARK and all
    assert f"kept as {kept[0]}" in result.stderr
    assert "TYPEMARK" not in (state / "progress.json").read_text(encoding="utf-8")


# -- 8. serve ----------------------------------------------------------------------------------


def _lessons(tmp_path: Path) -> Path:
    folder = tmp_path / "lessons"
    folder.mkdir()
    shutil.copy(builtin_path("river_bank"), folder / "mine.yaml")
    return folder


def test_a_lesson_link_that_leaves_the_folder_is_refused_and_never_offered(tmp_path: Path) -> None:
    pytest.importorskip("textual_serve")
    from attnwalk.serve.lessons import Offered

    folder = _lessons(tmp_path)
    outside = tmp_path / "private.yaml"
    shutil.copy(builtin_path("girl_bangs"), outside)
    (folder / "shared.yaml").symlink_to(outside)
    (folder / "inner.yaml").symlink_to(folder / "mine.yaml")  # a link within the folder is its own
    message = one_line(invoke("serve", "--lessons", str(folder), "--port", "1"), f"--lessons {folder}: ")
    assert "shared.yaml is a link to a file outside the folder" in message
    offered = Offered(folder)
    assert [lesson.key for lesson in offered.lessons() if not lesson.builtin] == ["inner.yaml", "mine.yaml"]
    assert offered.find("shared.yaml") is None and offered.find("inner.yaml") is not None


@pytest.mark.parametrize("content", ["root:x:0:0:SECRET-LINE:/root:/bin/bash\nnext:x\n",
                                     "SECRET-KEY: [1\n", "tokens: [SECRET-TOKEN]\nembeddings: nope\n"])
def test_a_file_that_is_not_a_scenario_is_named_never_quoted(tmp_path: Path, content: str) -> None:
    pytest.importorskip("textual_serve")
    from attnwalk.serve.lessons import Offered, rows

    folder = _lessons(tmp_path)
    (folder / "notes.yaml").write_text(content, encoding="utf-8")
    message = one_line(invoke("serve", "--lessons", str(folder), "--port", "1"), f"{folder / 'notes.yaml'}:")
    assert "SECRET" not in message and "not a scenario attnwalk can offer" in message
    problems = [row["problem"] for row in rows(Offered(folder), "en") if row["problem"]]
    assert len(problems) == 1 and "SECRET" not in problems[0] and "notes.yaml" in problems[0]
