"""Matrices given as files: `W_Q: {file: wq.npy}` instead of a list of rows written out.

Real models' weights (d_model 768, 12 heads) are too big to type into YAML, so any matrix of a
scenario may name a `.npy`, `.npz` (with `key:`) or `.csv` file, relative to the scenario file's
folder (absolute paths work too). Only regular files are opened (a FIFO or /dev/zero is refused
before anything is read); a .npy's or .npz member's shape and dtype are checked from its header
before its data is read (numpyfile.py), and nothing is ever unpickled.

A `.csv` is rows of numbers separated by commas. A first line in which no cell is a number is taken
for a header and skipped; any other cell that is not a number is an error naming its line and column.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np

from attnwalk.errors import ScenarioError
from attnwalk.reading.fields import Fields, kind
from attnwalk.scenario.files import NotAFileError, megabytes, open_regular, read_capped
from attnwalk.scenario.numpyfile import MAX_NPZ_BYTES, NUMERIC, PICKLED, BadArray, read_npy, read_npz
from attnwalk.reading.yamltree import Node
from attnwalk.numbering import shown as person

KEYS = ("file", "key")
SUFFIXES = (".npy", ".npz", ".csv")
MAX_CSV_BYTES = 16 * 1024 * 1024  # as a scenario file: text this large belongs in a .npy


def load_matrix_file(fields: Fields, node: Node, field: str, *, boolean: bool = False) -> np.ndarray:
    """The matrix that `{file: ..., key: ...}` at `node` refers to: 2-D, finite float64 (or bool)."""
    spec = fields.mapping(node, field, KEYS, ("file",))
    file_node = spec["file"]
    if not isinstance(file_node.value, str) or not file_node.value:
        raise fields.error(f"{field}.file", file_node, "expected a path to a .npy, .npz or .csv "
                           f"file, got {kind(file_node.value)}")
    name = file_node.value
    path = resolve(fields, name)
    suffix = path.suffix.lower()
    where = f"{field}.file"
    if suffix not in SUFFIXES:
        raise fields.error(where, file_node, f"'{name}' has an unknown extension "
                           f"'{path.suffix}'; give a .npy, .npz or .csv file")
    if "key" in spec and suffix != ".npz":
        raise fields.error(f"{field}.key", spec["key"], f"key: is only for .npz archives, "
                           f"but '{name}' is a {suffix} file holding one array; remove key:")
    try:
        # a .npy's header says how much of it is read; an .npz's directory, which member
        handle, size = open_regular(path, MAX_CSV_BYTES if suffix == ".csv" else MAX_NPZ_BYTES)
    except NotAFileError as exc:
        raise fields.error(where, file_node, f"'{name}' {exc}") from None
    except FileNotFoundError:
        raise fields.error(where, file_node, f"no such file '{name}' (looked for {path.absolute()}; "
                           "relative paths start at the scenario file's folder)") from None
    except PermissionError:
        raise fields.error(where, file_node, f"'{name}' cannot be read: permission denied") from None
    except (OSError, ValueError) as exc:
        raise fields.error(where, file_node, f"'{name}' cannot be read: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        with handle:
            if suffix == ".csv":
                array = _read_csv(fields, file_node, where, name, read_capped(handle, size, MAX_CSV_BYTES))
            elif suffix == ".npz":
                array = _read_npz(fields, spec, field, name, handle, size)
            else:
                array = read_npy(handle, size, field)
    except BadArray as exc:
        raise fields.error(where, file_node, f"'{name}' {exc}") from None
    except OSError as exc:
        raise fields.error(where, file_node,
                           f"'{name}' cannot be read: {exc.strerror or exc}") from None
    return _checked(fields, node, field, name, array, boolean)


def resolve(fields: Fields, name: str) -> Path:
    """Where `{file: name}` is: relative to the scenario file's folder (train -o names it anew)."""
    path = Path(name).expanduser()
    if path.is_absolute():
        return path
    return (Path(fields.base_dir) if fields.base_dir is not None else Path.cwd()) / path


def _read_npz(fields: Fields, spec: dict[str, Node], field: str, name: str, handle,
              size: int) -> np.ndarray:
    key_node = spec.get("key")
    if key_node is not None and not isinstance(key_node.value, (str, int, float)) \
            or key_node is not None and isinstance(key_node.value, bool):
        raise fields.error(f"{field}.key", key_node, f"expected the name of an array in "
                           f"'{name}', got {kind(key_node.value, key_node)}")
    key = None if key_node is None else (key_node.raw if key_node.raw is not None
                                         else str(key_node.value))
    try:
        return read_npz(handle, size, key, field)
    except KeyError as exc:
        keys = exc.args[0]
        shown = ", ".join(keys) if keys else "none"
        if key_node is not None:
            raise fields.error(f"{field}.key", key_node,
                               f"'{name}' has no array '{key}'; its arrays: {shown}") from None
        raise fields.error(field, spec["file"], f"'{name}' holds {len(keys)} arrays; say "
                           f"which with key: (its arrays: {shown})") from None


def _read_csv(fields: Fields, file_node: Node, where: str, name: str, raw: bytes) -> np.ndarray:
    if len(raw) > MAX_CSV_BYTES:
        raise fields.error(where, file_node, f"'{name}' is more than {megabytes(MAX_CSV_BYTES)}; "
                           "save a matrix that large with numpy.save as a .npy file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise fields.error(where, file_node, f"'{name}' is not UTF-8 text; save the .csv as "
                           "UTF-8") from None
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise fields.error(where, file_node, f"'{name}' has no rows of numbers")
    skip = first + 1 if not any(_is_number(c) for c in lines[first].split(",")) else 0
    if skip and not any(line.strip() for line in lines[skip:]):
        raise fields.error(where, file_node, f"'{name}' has a header line but no rows of numbers")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an empty file is reported below, not warned about
            array = np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2, dtype=np.float64,
                               skiprows=skip, comments=None)
    except ValueError:
        raise fields.error(where, file_node, _csv_problem(name, lines, skip)) from None
    if not np.isfinite(array).all():
        too_large = _too_large(name, lines, skip, array)
        if too_large:
            raise fields.error(where, file_node, too_large)
    return array


def _too_large(name: str, lines: list[str], skip: int, array: np.ndarray) -> str | None:
    """Where a number written out in full is beyond float64 (a 5,000,000-digit one reads as
    infinity), as the line and column it is typed at; None when the file itself says inf or nan
    (_checked names those)."""
    i, j = np.argwhere(~np.isfinite(array))[0]
    rows = [(number, line) for number, line in enumerate(lines[skip:], start=person(skip)) if line.strip()]
    number, line = rows[i]
    cell = line.split(",")[j].strip()
    if cell.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        return None
    shown = f"'{cell}'" if len(cell) <= 16 else f"'{cell[:12]}…' ({sum(ch.isdigit() for ch in cell):,} digits)"
    return (f"'{name}' line {number}, column {person(j)}: the number {shown} is beyond what float64 holds "
            "(±1.8e308); every entry must be a finite number")


def _csv_problem(name: str, lines: list[str], skip: int) -> str:
    """The first bad line of a CSV numpy refused, found by reading it again slowly."""
    width = None
    for number, line in enumerate(lines[skip:], start=person(skip)):
        if not line.strip():
            continue
        cells = line.split(",")
        for column, cell in enumerate(cells, start=1):
            if not _is_number(cell):
                hint = "; separate numbers with commas" if any(c in cell for c in ";\t") else ""
                return (f"'{name}' line {number}, column {column}: '{cell.strip()[:20]}' is not "
                        f"a number{hint}")
        if width is None:
            width = len(cells)
        elif len(cells) != width:
            return (f"'{name}' line {number} has {len(cells)} numbers, but the first row has "
                    f"{width}; every row needs the same length")
    return f"'{name}' is not a table of numbers separated by commas"


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _checked(fields: Fields, node: Node, field: str, name: str, array: np.ndarray,
             boolean: bool) -> np.ndarray:
    dtype_kind = array.dtype.kind
    if dtype_kind == "O":
        raise fields.error(field, node, f"'{name}' {PICKLED}")
    if dtype_kind not in NUMERIC:
        what = {"c": "complex numbers", "U": "text", "S": "bytes", "V": "records (a structured "
                "array)", "M": "dates", "m": "time spans"}.get(dtype_kind, f"dtype {array.dtype}")
        raise fields.error(field, node, f"'{name}' holds {what} (dtype {array.dtype}); "
                           "attnwalk needs real numbers: save a float array")
    if array.ndim != 2:
        shape = "a single number" if array.ndim == 0 else f"{array.ndim}-D, shape {array.shape}"
        raise fields.error(field, node, f"'{name}' is {shape}; {field} must be a 2-D matrix "
                           "(rows × columns): reshape it before saving")
    if array.size == 0:
        raise fields.error(field, node, f"'{name}' is empty (shape {array.shape}); "
                           f"{field} needs at least one row and one column")
    if boolean:
        return _mask_values(fields, node, field, name, array)
    values = np.asarray(array, dtype=np.float64)
    finite = np.isfinite(values)
    if not finite.all():
        i, j = np.argwhere(~finite)[0]
        bad = "NaN" if np.isnan(values[i, j]) else ("-" if values[i, j] < 0 else "") + "infinity"
        raise fields.error(field, node, f"'{name}' has {bad} at row {person(i)}, column {person(j)} "
                           "(counted from 1); every entry must be a finite number")
    return values


def _mask_values(fields: Fields, node: Node, field: str, name: str, array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "b":
        return np.array(array, dtype=bool)
    bad = (array != 0) & (array != 1)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise fields.error(field, node, f"'{name}' has {array[i, j]} at row {person(i)}, column {person(j)} "
                           "(counted from 1); "
                           "a mask holds only true/false (or 1/0)")
    return array == 1
