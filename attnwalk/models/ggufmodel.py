"""One GGUF file opened as a model: its Config from the metadata (ggufconfig.py), its tensors
under the names the families read (ggufweights.py), its tokenizer from `tokenizer.ggml.*`
(gguftokens.py). The `gguf` library is imported here, only when a GGUF file is given."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from attnwalk.models.config import Config
from attnwalk.models.ggufconfig import gguf_config
from attnwalk.models.ggufile import GGUFFile
from attnwalk.models.gguftokens import gguf_tokenizer
from attnwalk.models.ggufweights import GGUFWeights


def open_gguf(path: Path) -> tuple[Config, GGUFWeights, Callable[[], object]]:
    """(config, weights, the function that builds the tokenizer) of the model in the GGUF file at
    `path`. The tokenizer is built when first needed, so the weights' threads can start first."""
    file = GGUFFile(path)
    config = gguf_config(file)
    weights = GGUFWeights(file, config.family, file.fields["general.architecture"], config.n_heads,
                          config.n_kv_heads)

    def tokenizer():
        built = gguf_tokenizer(file.fields, path)
        built.no_padding()
        built.no_truncation()
        return built
    return config, weights, tokenizer
