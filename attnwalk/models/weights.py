"""The model's tensors, read lazily from safetensors: only the ones a layer needs, and of the
embedding tables only the sentence's rows. Everything comes back as float64."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from attnwalk.models.data import ModelError

# Tensors that are not parameters: GPT-2's causal-mask buffers (attn.bias is not c_attn's bias)
# and BERT's position-id buffer. They are never read and not counted as parameters.
BUFFERS = ("attn.bias", "attn.masked_bias", "position_ids", "rotary_emb.inv_freq")
# Tensors a causal LM keeps beside its base model, outside the prefix ("model.", "transformer.")
ROOT = ("lm_head.weight",)


class Weights:
    """One model's safetensors files, opened lazily, with the task-head prefix ("bert.",
    "transformer.", "model.") found once so names can be written as the base model spells them."""

    def __init__(self, files: tuple[Path, ...], anchor: str) -> None:
        from safetensors import SafetensorError, safe_open  # only when a model is read

        self._handles, self._where = [], {}
        for path in files:
            try:
                handle = safe_open(str(path), framework="numpy")
            except (SafetensorError, OSError, ValueError) as err:
                raise ModelError(f"{path}: not a safetensors file ({err})") from None
            self._handles.append((path, handle))
            for key in handle.keys():
                self._where[key] = (path, handle)
        self.prefix = self._find_prefix(anchor, files)
        self.file_bytes = sum(path.stat().st_size for path in files)

    def _find_prefix(self, anchor: str, files: tuple[Path, ...]) -> str:
        found = sorted(key[: -len(anchor)] for key in self._where if key.endswith(anchor)
                       and (key == anchor or key[: -len(anchor)].endswith(".")))
        if not found:
            raise ModelError(f"{files[0]}: no tensor {anchor} (under any prefix): these are not "
                             f"the weights the config describes")
        return min(found, key=len)  # "bert." beats "bert.encoder.something." if both existed

    def n_params(self) -> int:
        total = 0
        for key, (_, handle) in self._where.items():
            if not key.endswith(BUFFERS):
                total += int(np.prod(handle.get_slice(key).get_shape(), dtype=np.int64))
        return total

    def has(self, name: str) -> bool:
        return self._key(name) in self._where

    def _key(self, name: str) -> str:
        return name if name in ROOT else self.prefix + name

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._slice(name).get_shape())

    def get(self, name: str, shape: tuple[int, ...], why: str) -> np.ndarray:
        """The tensor `name` as float64, checked to have `shape`; `why` says which config fields
        gave that shape, for the message when it does not fit."""
        self._check(name, shape, why)
        return self._read(name, None)

    def rows(self, name: str, shape: tuple[int, ...], why: str, rows: list[int]) -> np.ndarray:
        """Only these rows of a table (an embedding matrix): (len(rows), shape[1]) float64."""
        self._check(name, shape, why)
        return np.stack([self._read(name, i)[0] for i in rows]) if rows else \
            np.zeros((0, shape[1]))

    def row_span(self, name: str, shape: tuple[int, ...], why: str, start: int, stop: int) -> np.ndarray:
        """Rows start … stop − 1 of a table (a slice of the LM head), float64."""
        self._check(name, shape, why)
        return self._read(name, None, (start, stop))

    def _slice(self, name: str):
        key = self._key(name)
        if key not in self._where:
            raise ModelError(f"{self._where_name()}: missing tensor {key}")
        return self._where[key][1].get_slice(key)

    def _where_name(self) -> str:
        return str(self._handles[0][0]) if len(self._handles) == 1 else str(self._handles[0][0].parent)

    def _check(self, name: str, shape: tuple[int, ...], why: str) -> None:
        found = self.shape(name)
        if found != tuple(shape):
            raise ModelError(f"{self._where_name()}: {self._key(name)} has shape "
                             f"{_shape(found)}, but config.json says {_shape(shape)} ({why})")

    def _read(self, name: str, row: int | None, span: tuple[int, int] | None = None) -> np.ndarray:
        piece = self._slice(name)
        if piece.get_dtype() in ("BF16", "F8_E4M3", "F8_E5M2"):
            return self._read_bf16(name, row, span) if piece.get_dtype() == "BF16" else _refuse(name, piece)
        start, stop = span if span is not None else (row, row + 1) if row is not None else (None, None)
        value = np.asarray(piece[start:stop], dtype=np.float64)
        return _finite(value, self._key(name))

    def _read_bf16(self, name: str, row: int | None, span: tuple[int, int] | None = None) -> np.ndarray:
        # numpy has no bfloat16, so safetensors' numpy backend cannot hand it over; the format is
        # an 8-byte header length, a JSON header with each tensor's byte offsets, then the data.
        # bfloat16 is the top half of a float32, so widening is a 16-bit shift.
        key = self._key(name)
        path = self._where[key][0]
        with open(path, "rb") as file:
            size = struct.unpack("<Q", file.read(8))[0]
            entry = json.loads(file.read(size))[key]
            shape, (start, end) = entry["shape"], entry["data_offsets"]
            width = int(np.prod(shape[1:], dtype=np.int64)) * 2
            first, last = span if span is not None else (row, row + 1) if row is not None else (None, None)
            if first is not None:
                start, end, shape = start + first * width, start + last * width, [last - first, *shape[1:]]
            file.seek(8 + size + start)
            half = np.frombuffer(file.read(end - start), dtype="<u2")
        wide = (half.astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(shape)
        return _finite(wide, key)


def _finite(value: np.ndarray, name: str) -> np.ndarray:
    # a damaged or badly converted checkpoint: say so, rather than walk a layer of NaN
    if not np.isfinite(value).all():
        raise ModelError(f"tensor {name} holds NaN or infinite values: the checkpoint is damaged")
    return value


def _refuse(name: str, piece) -> np.ndarray:
    raise ModelError(f"tensor {name}: dtype {piece.get_dtype()} is not read by attnwalk "
                     f"(float32, float16 and bfloat16 are)")


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"
