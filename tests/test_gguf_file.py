"""Reading GGUF files: the header parse against gguf's own GGUFReader, each quantized weight's
block read apart against gguf.quants, finding files (a path, a directory, ollama:NAME in a store
laid out as Ollama lays it out), damaged files, and the message when the gguf extra is missing."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'attnwalk[gguf]'")

from attnwalk.models.data import ModelError  # noqa: E402
from attnwalk.models.find import find_model  # noqa: E402
from attnwalk.models.ggufile import GGUFFile  # noqa: E402
from attnwalk.models.ggufweights import unpermute_rows  # noqa: E402
from attnwalk.models.model import open_model  # noqa: E402
from attnwalk.models.quantblock import StoredWeight  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gguf"
FILES = sorted(FIXTURES.glob("*.gguf"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_header_parse_agrees_with_gguf_reader(path: Path) -> None:
    ours, theirs = GGUFFile(path), gguf.GGUFReader(path)
    for key, field in theirs.fields.items():
        if key.startswith("GGUF."):
            continue
        value = field.contents()
        if isinstance(value, float) or (isinstance(value, list) and value and isinstance(value[0], float)):
            np.testing.assert_array_equal(np.float32(ours.fields[key]), np.float32(value))
        else:
            assert ours.fields[key] == value, key
    assert set(ours.fields) == {k for k in theirs.fields if not k.startswith("GGUF.")}
    assert [t.name for t in theirs.tensors] == list(ours.tensors)
    for tensor in theirs.tensors:
        info = ours.tensors[tensor.name]
        assert info.kind == tensor.tensor_type.name and info.offset == tensor.data_offset
        assert info.shape == tuple(reversed(tensor.shape.tolist()))
        expected = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        np.testing.assert_array_equal(ours.dequantized(tensor.name), expected.reshape(info.shape))


def test_llama_cpp_permutation_is_undone_row_for_row() -> None:
    # llama.cpp's permute (convert_hf_to_gguf.py) applied to the row numbers, then looked up
    heads, d = 3, 8
    hf = np.arange(heads * d)
    permuted = hf.reshape(heads, 2, d // 2).swapaxes(1, 2).reshape(-1)  # GGUF row g holds HF row permuted[g]
    assert (permuted[unpermute_rows(heads * d, heads)] == hf).all()


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "F16", "BF16", "F32"])
def test_every_weight_of_a_block_is_its_fields_equation(kind: str) -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(0, 0.1, (3, 64)).astype(np.float32)
    qtype = gguf.GGMLQuantizationType[kind]
    raw = gguf.quants.quantize(values, qtype).view(np.uint8).reshape(3, -1)
    stored = _stored(kind, raw, (3, 64))
    whole = gguf.quants.dequantize(raw, qtype).reshape(3, 64)
    for row in range(3):
        for i in range(64):
            block = stored.block(i, row)
            assert block.value == float(whole[row, i])
            assert block.first == i - i % block.size and block.index == i % block.size
            if kind.startswith("Q"):
                f, q = block.fields, block.q
                expected = {"Q4_0": f["d"] * (q - 8), "Q5_0": f["d"] * (q - 16), "Q8_0": f["d"] * q,
                            "Q4_1": f["d"] * q + f.get("m", 0), "Q5_1": f["d"] * q + f.get("m", 0)}[kind]
                assert abs(expected - block.value) <= 1e-6 * (abs(f["d"]) * 32 + abs(f.get("m", 0)))
                low, high = {"Q4_0": (0, 16), "Q4_1": (0, 16), "Q5_0": (0, 32), "Q5_1": (0, 32),
                             "Q8_0": (-128, 128)}[kind]
                assert low <= q < high
                assert block.qs[block.index] == q and len(block.qs) == block.size
            else:
                assert block.formula == "w" and block.q is None


@pytest.mark.parametrize("kind", ["Q4_K", "Q5_K", "Q6_K"])
def test_k_quant_super_blocks_are_read_apart(kind: str) -> None:
    file = GGUFFile(FIXTURES / "kquant-blocks.gguf")
    name = f"{kind.lower()}.weight"
    info = file.tensors[name]
    stored = StoredWeight(info=info, raw=file.raw(name), rows=np.arange(2))
    whole = file.dequantized(name)
    subs = set()
    for row in range(2):
        for i in range(256):
            block = stored.block(i, row)
            f, q = block.fields, block.q
            assert block.size == 256 and block.formula is not None, (row, i)
            assert block.sub == i // block.sub_size
            expected = f["d"] * f["sc"] * (q - 32) if kind == "Q6_K" else f["d"] * f["sc"] * q - f["dmin"] * f["m"]
            assert abs(expected - whole[row, i]) <= 1e-6 * max(1e-3, abs(f["d"] * f["sc"]) * 64)
            assert block.value == whole[row, i]
            subs.add((row, block.sub))
    assert len(subs) == 2 * (16 if kind == "Q6_K" else 8)


def _stored(kind: str, raw: np.ndarray, shape: tuple[int, int]) -> StoredWeight:
    from attnwalk.models.ggufile import TensorInfo

    qtype = gguf.GGMLQuantizationType[kind]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    info = TensorInfo(name="w", kind=kind, type_id=int(qtype), shape=shape, offset=0, nbytes=raw.nbytes,
                      block_size=block, type_size=size)
    return StoredWeight(info=info, raw=raw, rows=np.arange(shape[0]))


# -- finding a GGUF ------------------------------------------------------------------------------------


def test_a_directory_holding_one_gguf_is_that_model(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes((FIXTURES / "tiny-llama.gguf").read_bytes())
    files = find_model(str(tmp_path))
    assert files.gguf == tmp_path / "m.gguf" and files.source == f"directory {tmp_path}"
    (tmp_path / "n.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelError, match="holds 2 GGUF files"):
        find_model(str(tmp_path))


def ollama_store(root: Path, name: str, tag: str, blob: bytes, namespace: str = "library") -> str:
    """A store as Ollama lays it out: manifests/<host>/<namespace>/<name>/<tag>, blobs/sha256-<hex>."""
    digest = hashlib.sha256(blob).hexdigest()
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / f"sha256-{digest}").write_bytes(blob)
    manifest = root / "manifests" / "registry.ollama.ai" / namespace / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    config = {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:" + "0" * 64, "size": 2}
    layers = [{"mediaType": "application/vnd.ollama.image.license", "digest": "sha256:" + "1" * 64, "size": 5},
              {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": len(blob)}]
    manifest.write_text(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                                    "config": config, "layers": layers}))
    return digest


def test_ollama_finds_a_model_in_its_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "models"
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    digest = ollama_store(store, "tinyllama", "q4", (FIXTURES / "tiny-llama.gguf").read_bytes())
    ollama_store(store, "tinyqwen", "latest", (FIXTURES / "tiny-qwen2.gguf").read_bytes(), namespace="someone")
    files = find_model("ollama:tinyllama:q4")
    assert files.gguf == store / "blobs" / f"sha256-{digest}" and files.name == "tinyllama:q4"
    model = open_model("ollama:tinyllama:q4")
    assert model.info.model_type == "llama" and model.info.file_format == "gguf"
    assert open_model("ollama:someone/tinyqwen").info.model_type == "qwen2"  # :latest by default
    with pytest.raises(ModelError, match="no model tinyllama:latest in Ollama's store"):
        find_model("ollama:tinyllama")
    with pytest.raises(ModelError, match="not an Ollama model name"):
        find_model("ollama:../../etc")


def test_ollama_default_store_is_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    ollama_store(tmp_path / ".ollama" / "models", "tiny", "latest", (FIXTURES / "tiny-gpt2.gguf").read_bytes())
    assert open_model("ollama:tiny").info.family == "gpt2"


def test_an_unfinished_ollama_pull_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "models"
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    digest = ollama_store(store, "tiny", "latest", (FIXTURES / "tiny-llama.gguf").read_bytes())
    blob = store / "blobs" / f"sha256-{digest}"
    blob.write_bytes(blob.read_bytes()[:1000])
    with pytest.raises(ModelError, match="the pull did not finish"):
        find_model("ollama:tiny")
    blob.unlink()
    with pytest.raises(ModelError, match="missing"):
        find_model("ollama:tiny")


@pytest.mark.parametrize("cut", [3, 40, 2000, -100])
def test_a_cut_or_damaged_file_is_one_line(tmp_path: Path, cut: int) -> None:
    data = (FIXTURES / "tiny-llama.gguf").read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:cut])
    with pytest.raises(ModelError, match="cut.gguf"):
        open_model(str(path))


def test_a_huge_count_is_refused_before_it_is_read(tmp_path: Path) -> None:
    data = bytearray((FIXTURES / "tiny-llama.gguf").read_bytes())
    data[16:24] = (2 ** 60).to_bytes(8, "little")  # the metadata count
    path = tmp_path / "huge.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="the file is damaged"):
        open_model(str(path))


def test_without_the_extra_a_gguf_says_how_to_add_it(tmp_path: Path) -> None:
    # a fresh interpreter where `import gguf` fails, as in an install without attnwalk[gguf]
    blocker = tmp_path / "gguf.py"
    blocker.write_text("raise ImportError('No module named gguf')\n")
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from attnwalk.cli import run; "
              "sys.argv = ['attnwalk', 'model', 'hi', '--model', sys.argv[2]]; run()")
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path), str(FIXTURES / "tiny-llama.gguf")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "attnwalk: reading a GGUF file needs the gguf library: pip install 'attnwalk[gguf]'"]
