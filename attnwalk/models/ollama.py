"""`--model ollama:NAME[:TAG]`: the GGUF blob of a model Ollama has pulled, found through its
manifests, offline. Ollama keeps, under OLLAMA_MODELS (else ~/.ollama/models):

    manifests/registry.ollama.ai/library/smollm2/135m    a JSON manifest, one per name and tag
    blobs/sha256-<hex>                                   each layer, named by its digest

The manifest's layer of media type application/vnd.ollama.image.model is the GGUF file itself.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from attnwalk.atomic import note_input
from attnwalk.models.data import ModelError

PREFIX = "ollama:"
REGISTRY = "registry.ollama.ai"
MODEL_LAYER = "application/vnd.ollama.image.model"
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
MAX_MANIFEST = 1 << 20  # a manifest is a few hundred bytes
MAX_PART, MAX_HOST = 80, 350  # Ollama's own limits on a name's parts (types/model/name.go)


def ollama_models() -> Path:
    """Where Ollama keeps its models: OLLAMA_MODELS, else ~/.ollama/models."""
    return Path(os.environ.get("OLLAMA_MODELS") or Path.home() / ".ollama" / "models").expanduser()


def manifest_path(spec: str) -> tuple[Path, str]:
    """The manifest of `NAME[:TAG]` (`library/NAME` unless a namespace or host is given) and the
    name as Ollama prints it, "smollm2:135m"."""
    name, _, tag = spec.partition(":")
    tag = tag or "latest"
    parts = name.split("/")
    if not name or len(parts) > 3 or not all(_PART.fullmatch(p) for p in parts) \
            or not _PART.fullmatch(tag) or any(p in (".", "..") for p in parts):
        raise ModelError(f"{PREFIX}{_shown(spec)}: not an Ollama model name (NAME, NAME:TAG or "
                         f"NAMESPACE/NAME:TAG, as `ollama list` shows them)")
    if len(tag) > MAX_PART or any(len(p) > MAX_PART for p in parts[-2:]) or len(parts[0]) > MAX_HOST:
        raise ModelError(f"{PREFIX}{_shown(spec)}: {len(spec):,} characters, too long for an Ollama "
                         f"model name (a name, a namespace and a tag are at most {MAX_PART} characters "
                         f"each, a host {MAX_HOST})")
    host, *rest = parts if len(parts) == 3 else [REGISTRY, *(["library"] if len(parts) == 1 else []), *parts]
    return ollama_models() / "manifests" / host / Path(*rest) / tag, f"{name}:{tag}"


def _shown(spec: str) -> str:
    """A name as typed, cut to what a message line can hold."""
    return spec if len(spec) <= 100 else spec[:100] + "…"


def find_ollama(spec: str) -> tuple[Path, str]:
    """The GGUF blob of an Ollama model, and its name: a one-line ModelError if there is none."""
    manifest, name = manifest_path(spec)
    store = ollama_models()
    try:
        found = manifest.is_file()
    except OSError as err:  # a name the file system cannot hold (ENAMETOOLONG) or reach
        raise ModelError(f"{PREFIX}{_shown(spec)}: cannot look it up in "
                         f"Ollama's store ({err.strerror or err})") from None
    if not found:
        raise ModelError(f"{PREFIX}{spec}: no model {name} in Ollama's store ({store}; OLLAMA_MODELS "
                         f"sets another): pull it first (`ollama pull {name}`) or give the .gguf file")
    try:
        if manifest.stat().st_size > MAX_MANIFEST:
            raise ValueError("larger than any manifest")
        layers = json.loads(manifest.read_text(encoding="utf-8"))["layers"]
        model = [layer for layer in layers if layer.get("mediaType") == MODEL_LAYER]
    except RecursionError:  # JSON nested deeper than the parser goes: no manifest is
        raise ModelError(f"{manifest}: not an Ollama manifest (its JSON is nested too deeply to read)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ModelError(f"{manifest}: not an Ollama manifest ({err})") from None
    if not model:
        raise ModelError(f"{manifest}: the manifest names no model layer ({MODEL_LAYER})")
    digest = model[0].get("digest")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ModelError(f"{manifest}: the model layer's digest {digest!r} is not sha256:<64 hex digits>")
    blob = store / "blobs" / digest.replace(":", "-")
    if not blob.is_file():
        raise ModelError(f"{manifest}: its model blob {blob.name} is missing from {store / 'blobs'} "
                         f"(an interrupted pull? `ollama pull {name}` again)")
    size = model[0].get("size")
    if isinstance(size, int) and blob.stat().st_size != size:
        raise ModelError(f"{blob}: {blob.stat().st_size:,} bytes, but the manifest says {size:,}: "
                         f"the pull did not finish (`ollama pull {name}` again)")
    note_input(manifest)  # inputs both: no output of this command (-o, --save) may replace them
    note_input(blob)
    return blob, name
