"""One GGUF file (what llama.cpp, Ollama and LM Studio load): its metadata and its tensors, each
tensor dequantized on request by the `gguf` library's own `gguf.quants` (llama.cpp's reference
numpy code), only the rows asked for where a table is large.

The header is parsed here rather than by `gguf.GGUFReader`, a measured need: GGUFReader builds
numpy views for every string of every array (~250,000 memmap slices), and a model's vocabulary is
~100,000 strings (SmolLM2-135M: 49,152 tokens and 48,900 merges). Opening SmolLM2's file took
GGUFReader 19.3 s at load 4.5, against 0.3 s for this parse at the same load; the whole walk of
layer 1 is ~1 s of CPU. The format is small (a
magic, counts, key/value pairs, tensor descriptions, aligned data) and `gguf.constants` still
names every type and size. tests/test_gguf_file.py holds this parse to GGUFReader's, field by
field and tensor by tensor.
"""

from __future__ import annotations

import mmap
import os
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnwalk.atomic import note_input
from attnwalk.models.data import ModelError

EXTRA = "pip install 'attnwalk[gguf]'"
MAGIC = b"GGUF"
VERSIONS = (2, 3)
# GGUFValueType's scalars: struct format, numpy dtype (gguf.constants numbers them 0-12)
SCALARS = {0: ("<B", "<u1"), 1: ("<b", "<i1"), 2: ("<H", "<u2"), 3: ("<h", "<i2"), 4: ("<I", "<u4"),
           5: ("<i", "<i4"), 6: ("<f", "<f4"), 7: ("<?", "<u1"), 10: ("<Q", "<u8"), 11: ("<q", "<i8"),
           12: ("<d", "<f8")}
STRING, ARRAY = 8, 9
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS


def require_gguf():
    """The gguf library, or the one line that says how to add it."""
    try:
        import gguf  # the optional extra: only a GGUF model needs it
    except ImportError:
        raise ModelError(f"reading a GGUF file needs the gguf library: {EXTRA}") from None
    return gguf


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor is and how it is stored: shape in numpy's order (rows first), as
    GGUFReader reports it, so a Linear weight is (out, in) as in PyTorch."""

    name: str
    kind: str                         # the GGML type's name: "F32", "Q4_1", "Q6_K", …
    type_id: int
    shape: tuple[int, ...]
    offset: int                       # from the start of the file
    nbytes: int
    block_size: int                   # weights a block (1 for the float types)
    type_size: int                    # bytes a block

    @property
    def bits(self) -> float:
        """Bits a weight takes on disk, the block's scales included: Q4_1 is 20 bytes for 32, 5."""
        return self.type_size * 8 / self.block_size


class GGUFFile:
    """A GGUF file opened for reading (memory-mapped: only what is read is paged in)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        gguf = require_gguf()
        self._quants = gguf.quants
        try:
            with open(path, "rb") as file:
                note_input(os.fstat(file.fileno()))  # the file as opened: no -o or --save may replace it
                self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as err:
            raise ModelError(f"{path}: cannot read the GGUF file ({err})") from None
        self.file_bytes = len(self._map)
        self._at = 0
        if self._take(4) != MAGIC:
            raise ModelError(f"{path}: not a GGUF file (it does not start with GGUF)")
        version = self._scalar("<I")
        if version & 0xFFFF == 0:
            raise ModelError(f"{path}: a big-endian GGUF file, which attnwalk does not read")
        if version not in VERSIONS:
            raise ModelError(f"{path}: GGUF version {version}, attnwalk reads versions 2 and 3")
        n_tensors, n_fields = self._scalar("<Q"), self._scalar("<Q")
        self._bounded(n_tensors, 24, "tensor count")
        self._bounded(n_fields, 12, "metadata count")
        self.fields: dict[str, object] = {}
        for _ in range(n_fields):
            key = self._string()
            self.fields[key] = self._value(self._scalar("<I"), key)
        infos = [self._tensor_info() for _ in range(n_tensors)]
        alignment = self.fields.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
            raise ModelError(f"{path}: general.alignment {alignment!r} is not a power of two")
        start = -(-self._at // alignment) * alignment
        self.tensors = {info[0]: self._placed(gguf, *info, start) for info in infos}

    # -- tensors ------------------------------------------------------------------------------------

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as stored, (rows, bytes a row): blocks of `type_size` bytes."""
        info = self.tensors[name]
        rows = int(np.prod(info.shape[:-1], dtype=np.int64)) if len(info.shape) > 1 else 1
        data = np.frombuffer(self._map, dtype=np.uint8, count=info.nbytes, offset=info.offset)
        return data.reshape(rows, info.nbytes // rows)

    def dequantized(self, name: str, rows: list[int] | None = None) -> np.ndarray:
        """The tensor (or these rows of it) as float64: float types widened, quantized blocks
        expanded by gguf.quants.dequantize exactly as llama.cpp's reference code does (to float32)."""
        info = self.tensors[name]
        raw = self.raw(name)
        if rows is not None:
            raw = raw[rows]
        try:
            # a damaged block (a scale of f16 infinity, a wrong type) makes numpy warn inside gguf's
            # code before the check below can say so in one line: the warnings are not the learner's
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                values = self._quants.dequantize(raw, info.type_id)
        except NotImplementedError:
            raise ModelError(f"{self.path}: tensor {name} is stored as {info.kind}, which the gguf "
                             f"library cannot dequantize") from None
        if not np.isfinite(values).all():  # a damaged file: say so, rather than walk a layer of NaN
            raise ModelError(f"{self.path}: tensor {name} holds NaN or infinite values: the file is damaged")
        shape = (len(rows), *info.shape[1:]) if rows is not None else info.shape
        return np.asarray(values, dtype=np.float64).reshape(shape)

    # -- the header ---------------------------------------------------------------------------------

    def _take(self, size: int) -> bytes:
        if self._at + size > self.file_bytes:
            raise ModelError(f"{self.path}: the GGUF header ends early (at byte {self._at:,}): "
                             f"the file is cut short or damaged")
        piece = self._map[self._at:self._at + size]
        self._at += size
        return piece

    def _scalar(self, fmt: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self._take(size))[0]

    def _bounded(self, count: int, least: int, what: str) -> None:
        # a damaged count must not make us loop or allocate past what the file could hold
        if count * least > self.file_bytes:
            raise ModelError(f"{self.path}: {what} {count:,} cannot fit in a file of "
                             f"{self.file_bytes:,} bytes: the file is damaged")

    def _string(self) -> str:
        size = self._scalar("<Q")
        self._bounded(size, 1, "a string length")
        try:
            return self._take(size).decode("utf-8")
        except UnicodeDecodeError:
            raise ModelError(f"{self.path}: a string at byte {self._at:,} is not UTF-8") from None

    def _value(self, kind: int, key: str):
        if kind in SCALARS:
            value = self._scalar(SCALARS[kind][0])
            return bool(value) if kind == 7 else value
        if kind == STRING:
            return self._string()
        if kind == ARRAY:
            item, count = self._scalar("<I"), self._scalar("<Q")
            if item in SCALARS:  # a block of numbers: one read, no loop
                dtype = np.dtype(SCALARS[item][1])
                self._bounded(count, dtype.itemsize, f"{key}'s length")
                values = np.frombuffer(self._take(count * dtype.itemsize), dtype=dtype)
                return values.astype(bool).tolist() if item == 7 else values.tolist()
            if item == STRING:
                self._bounded(count, 8, f"{key}'s length")
                return self._strings(count)
            self._bounded(count, 12, f"{key}'s length")
            return [self._value(item, key) for _ in range(count)]
        raise ModelError(f"{self.path}: metadata {key}: value type {kind} is not a GGUF type")

    def _strings(self, count: int) -> list[str]:
        # the vocabulary: ~100,000 length-prefixed strings, read straight from the map
        found, at, data, end = [], self._at, self._map, self.file_bytes
        unpack = struct.Struct("<Q").unpack_from
        for _ in range(count):
            if at + 8 > end:
                self._at = at
                self._take(8)  # raises: the header ends early
            size = unpack(data, at)[0]
            at += 8
            if at + size > end:
                self._at = at
                self._take(size)
            found.append(data[at:at + size].decode("utf-8", errors="replace"))
            at += size
        self._at = at
        return found

    def _tensor_info(self) -> tuple[str, tuple[int, ...], int, int]:
        name = self._string()
        n_dims = self._scalar("<I")
        if not 1 <= n_dims <= MAX_DIMS:
            raise ModelError(f"{self.path}: tensor {name} has {n_dims} dimensions (1 to 4 expected)")
        dims = tuple(self._scalar("<Q") for _ in range(n_dims))
        return name, dims, self._scalar("<I"), self._scalar("<Q")

    def _placed(self, gguf, name: str, dims: tuple[int, ...], type_id: int, offset: int,
                start: int) -> TensorInfo:
        try:
            kind = gguf.GGMLQuantizationType(type_id)
        except ValueError:
            raise ModelError(f"{self.path}: tensor {name} has GGML type {type_id}, which the gguf "
                             f"library does not know (a newer file than the library: upgrade gguf)") from None
        block, size = gguf.GGML_QUANT_SIZES[kind]
        count = int(np.prod(dims, dtype=np.int64))
        if dims[0] % block:
            raise ModelError(f"{self.path}: tensor {name}: rows of {dims[0]} do not split into "
                             f"{kind.name} blocks of {block}")
        nbytes = count // block * size
        begin = start + offset
        if begin + nbytes > self.file_bytes:
            raise ModelError(f"{self.path}: tensor {name} runs past the end of the file: the file is "
                             f"cut short (a partial download?)")
        return TensorInfo(name=name, kind=kind.name, type_id=int(kind), shape=tuple(reversed(dims)),
                          offset=begin, nbytes=nbytes, block_size=block, type_size=size)
