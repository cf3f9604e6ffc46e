"""One GGUF file opened as a model: its Config from the metadata (ggufconfig.py), its tensors
under the names the families read (ggufweights.py), its tokenizer from `tokenizer.ggml.*`
(gguftokens.py). The `gguf` library is imported here, only when a GGUF file is given."""

from __future__ import annotations

from pathlib import Path

from attnwalk.models.config import Config
from attnwalk.models.ggufconfig import gguf_config
from attnwalk.models.ggufile import GGUFFile
from attnwalk.models.gguftokens import gguf_tokenizer
from attnwalk.models.ggufweights import GGUFWeights


def open_gguf(path: Path) -> tuple[Config, GGUFWeights, object]:
    """(config, weights, tokenizer) of the model in the GGUF file at `path`."""
    file = GGUFFile(path)
    config = gguf_config(file)
    weights = GGUFWeights(file, config.family, file.fields["general.architecture"], config.n_heads,
                          config.n_kv_heads)
    tokenizer = gguf_tokenizer(file.fields, path)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return config, weights, tokenizer
