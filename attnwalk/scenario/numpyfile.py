""".npy and .npz files read header first: the shape and dtype are checked before any data is read.

np.load reads a whole array before anyone can look at its shape (a 288 MB .npy of the wrong shape
costs 340 MB), and an .npz member expands to whatever it says (389 KB on disk, 400 MB in memory).
Here the header of the .npy, or of the chosen .npz member, is read on its own with
numpy.lib.format's read_magic and read_array_header_*; only a 2-D array of plain numbers within
limits.MAX_MATRIX is then read, exactly its declared bytes. Nothing is ever unpickled.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy

from attnwalk.scenario.files import megabytes
from attnwalk.scenario.limits import MAX_MATRIX, amount

NUMERIC = "biuf"  # numpy dtype kinds that hold plain numbers: bool, int, uint, float
MAX_NPZ_BYTES = 1024 * 1024 * 1024  # an archive of a real model's weights: only its directory is read
MAX_DIRECTORY = 4 * 1024 * 1024  # an .npz's list of members: ~40,000 arrays
HEADER_SLACK = 64 * 1024  # a member's header beside its data
PICKLED = ("contains Python objects; attnwalk never unpickles — save it with numpy.save of a "
           "float array")


class BadArray(Exception):
    """What is wrong with an array file, as the end of a message about it ('is 3-D, ...')."""


def read_npy(handle: BinaryIO, size: int | None, field: str) -> np.ndarray:
    """The array in the .npy stream `handle` (`size` bytes long when known), or BadArray."""
    shape, fortran, dtype = _header(handle, field)
    count = shape[0] * shape[1]
    want = count * dtype.itemsize
    if size is not None and size - handle.tell() < want:
        raise BadArray(f"is not a valid numpy file: it is cut short (its header promises "
                       f"{_shape(shape)} numbers, "
                       f"{amount(want)} bytes, but {amount(max(size - handle.tell(), 0))} follow "
                       "it); save it again with numpy.save")
    data = handle.read(want)
    if len(data) < want:
        raise BadArray(f"is not a valid numpy file: it is cut short (its header promises "
                       f"{_shape(shape)} numbers); save it again with numpy.save")
    array = np.frombuffer(data, dtype=dtype, count=count)
    return array.reshape(shape[::-1]).T if fortran else array.reshape(shape)


def _header(handle: BinaryIO, field: str) -> tuple[tuple[int, int], bool, np.dtype]:
    first = handle.read(npy.MAGIC_LEN)
    if len(first) < npy.MAGIC_LEN and npy.MAGIC_PREFIX.startswith(first):
        raise BadArray("is empty or cut short; save it again with numpy.save")
    if first[:2] == b"PK":
        raise BadArray("is an .npz archive, not a .npy file; rename it to .npz and give key: to "
                       "pick an array")
    if first[:1] == b"\x80" and 2 <= first[1:2][0] <= 5 if len(first) > 1 else False:
        raise BadArray("is a Python pickle, not a .npy file: it contains Python objects, and "
                       "attnwalk never unpickles — save the array with numpy.save")
    try:
        version = npy.read_magic(io.BytesIO(first))
    except ValueError:
        raise BadArray("is not a .npy file (it does not start with numpy's \\x93NUMPY mark); "
                       "save the array with numpy.save, or give a .csv of numbers") from None
    try:
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(handle)
        elif version in ((2, 0), (3, 0)):
            # 3.0 is 2.0 with the header in UTF-8 rather than latin-1, for non-ASCII field names:
            # a plain array's header is ASCII, the same bytes in both (a record array is refused)
            shape, fortran, dtype = npy.read_array_header_2_0(handle)
        else:
            raise BadArray(f"is a .npy file of version {version[0]}.{version[1]}, which numpy "
                           f"{np.__version__} does not read; save it again with numpy.save")
    except (ValueError, EOFError, SyntaxError, TypeError) as exc:
        raise BadArray(f"has a damaged .npy header ({_said(exc)}); save it again with numpy.save") from None
    if dtype.hasobject:
        raise BadArray(PICKLED)
    if dtype.kind not in NUMERIC or dtype.fields is not None or dtype.subdtype is not None:
        what = {"c": "complex numbers", "U": "text", "S": "bytes", "V": "records (a structured "
                "array)", "M": "dates", "m": "time spans"}.get(dtype.kind, f"dtype {dtype}")
        raise BadArray(f"holds {what} (dtype {dtype}); attnwalk needs real numbers: save a "
                       "float array")
    if len(shape) != 2:
        shown = "a single number" if not shape else f"{len(shape)}-D, shape {tuple(shape)}"
        raise BadArray(f"is {shown}; {field} must be a 2-D matrix (rows × columns): reshape it "
                       "before saving")
    if shape[0] * shape[1] == 0:
        raise BadArray(f"is empty (shape {tuple(shape)}); {field} needs at least one row and one "
                       "column")
    if shape[0] * shape[1] > MAX_MATRIX:
        raise BadArray(f"holds {_shape(shape)} = {amount(shape[0] * shape[1])} numbers, more "
                       f"than the {amount(MAX_MATRIX)} one matrix may hold")
    return (int(shape[0]), int(shape[1])), fortran, dtype


def _said(exc: Exception) -> str:
    """numpy's reason, on one line and without the reprs of its parser's objects: a header
    holding `range(2)` was "malformed node or string: <ast.Call object at 0x7f…>"."""
    text = _OBJECT.sub(lambda m: f"{m.group(1).rsplit('.', 1)[-1]} (not a plain value)", str(exc))
    return " ".join(text.split())[:80]


_OBJECT = re.compile(r"<([\w.]+) object at 0x[0-9a-fA-F]+>")


def read_npz(handle: BinaryIO, size: int, key: str | None, field: str) -> np.ndarray:
    """The array `key` of the .npz archive `handle` (its only one when key is None). Raises
    BadArray, or KeyError(names) when the key is missing or needed."""
    if size > MAX_NPZ_BYTES:
        raise BadArray(f"is {megabytes(size)}, more than the {megabytes(MAX_NPZ_BYTES)} an .npz "
                       "archive may be")
    if handle.read(len(npy.MAGIC_PREFIX)) == npy.MAGIC_PREFIX:
        raise BadArray("holds a single .npy array, not an .npz archive; rename it to .npy (and "
                       "drop key:)")
    handle.seek(0)
    directory = _directory_size(handle)
    if directory > MAX_DIRECTORY:
        raise BadArray(f"lists {megabytes(directory)} of member names, more than the "
                       f"{megabytes(MAX_DIRECTORY)} an .npz archive's directory may hold")
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise BadArray(f"is not a valid .npz archive ({exc}); save it again with numpy.savez") \
            from None
    with archive:
        members = {(name[:-4] if name.endswith(".npy") else name): name
                   for name in archive.namelist()}
        if key is None and len(members) != 1:
            raise KeyError(list(members))
        if key is not None and key not in members:
            raise KeyError(list(members))
        info = archive.getinfo(members[key if key is not None else next(iter(members))])
        limit = MAX_MATRIX * 8 + HEADER_SLACK
        if info.file_size > limit:  # the size the archive declares, before anything expands
            raise BadArray(f"member {info.filename!r} would expand to {megabytes(info.file_size)} "
                           f"({megabytes(info.compress_size)} stored), more than the "
                           f"{megabytes(limit)} one matrix may take")
        try:
            with archive.open(info) as member:
                return read_npy(member, info.file_size, field)
        except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError) as exc:
            raise BadArray(f"has a damaged member {info.filename!r} ({exc}); save it again with "
                           "numpy.savez") from None


def _directory_size(handle: BinaryIO) -> int:
    """The size of a zip's central directory, from its end record (0 when it cannot be told)."""
    try:
        end = zipfile._EndRecData(handle)  # the record zipfile itself reads first
    except (OSError, ValueError, AttributeError):
        return 0
    finally:
        handle.seek(0)
    return int(end[zipfile._ECD_SIZE]) if end else 0


def _shape(shape: tuple[int, ...]) -> str:
    return " × ".join(amount(s) for s in shape)
