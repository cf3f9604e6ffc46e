"""Reading one field of a scenario: a Node in, a checked Python or numpy value out.

Every check raises ScenarioError naming the field and the place in it, counted from 1 as a learner
counts rows (`W_Q row 2, value 1`; yamltree.indexed), and the line of the value.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from attnwalk.errors import ScenarioError
from attnwalk.reading.yamlerrors import fullwidth_fix
from attnwalk.reading.yamltree import Node, indexed, shown

LANGUAGES = ("en", "zh")  # the languages of text/*.toml (text/ is not the scenario's to import)
SEPARATORS = "，、"  # a Chinese comma typed where a YAML list needs ', '
MATRIX_FORMS = ("a matrix is a list of rows ([[1, 0], [0, 1]]), a file ({file: w.npy}) or seeded "
                "random numbers ({random: {seed: 0, rows: 2, cols: 2}})")

_NOT_FINITE = {"nan", "inf", "infinity"}  # plain words numpy would take for numbers; YAML does not

# What a missing required key should hold, for the message that asks for it.
REQUIRED_HINTS = {
    "tokens": " (the list of tokens, e.g. tokens: [the, cat, sat])",
    "embeddings": " (one row of d_model numbers per token)",
    "W_Q": " (the query weights: d_model rows × heads·d_k columns)",
    "W_K": " (the key weights: d_model rows × heads·d_k columns)",
    "W_V": " (the value weights: d_model rows × heads·d_v columns)",
    "file": " (the path of a .npy, .npz or .csv file)",
}


MatrixReader = Callable[..., np.ndarray]  # (fields, node, field, boolean=False) -> the matrix


def _not_here(f: Fields, node: Node, field: str, boolean: bool = False) -> np.ndarray:
    raise f.error(field, node, "expected a matrix written out: these fields were given no reader "
                  "for a matrix from a file or a seed")


class Fields:
    """The checkers for one file, so every error names it."""

    def __init__(self, file: str, base_dir: str | None = None, *, matrix_file: MatrixReader | None = None,
                 random_matrix: MatrixReader | None = None) -> None:
        self.file = file
        self.base_dir = base_dir  # where `{file: ...}` matrices are looked for; None: the cwd
        # how a `{file: ...}` and a `{random: ...}` matrix become numbers: handed in by the loader
        # (scenario/matrixfile.py, randommatrix.py), which opens files this package does not
        self._matrix_file = matrix_file or _not_here
        self._random_matrix = random_matrix or _not_here

    def error(self, field: str, node: Node | None, message: str) -> ScenarioError:
        """`file:line: field: message`; a message that starts with the field's own name
        ('W_Q has 3 rows, ...') is not prefixed with it again."""
        line = node.line if node is not None else None
        if message.startswith((f"{field} ", f"{field}:")):
            error = ScenarioError(message, file=self.file, line=line)
            error.field = field
            return error
        return ScenarioError(message, file=self.file, field=field, line=line)

    # -- mappings -------------------------------------------------------------------------------

    def mapping(self, node: Node, field: str, known: tuple[str, ...],
                required: tuple[str, ...] = ()) -> dict[str, Node]:
        """A mapping whose keys are all known and include the required ones."""
        if not isinstance(node.value, dict):
            what = "a scenario must be" if not field else "expected"
            example = ", ".join(f"{k}:" for k in (required or known)[:2])
            raise self.error(field or "(top level)", node,
                             f"{what} a mapping of keys ({example} ...), "
                             f"got {kind(node.value, node)}")
        for key in node.value:
            if key not in known:
                line = (node.keys or {}).get(key)
                path = f"{field}.{shown(key)}" if field else shown(key)
                near = suggest(key, known)
                listed = ", ".join(known)
                if not field and len(listed) > 160:  # every feature adds keys: name the page, not all
                    listed = ", ".join(known[:10]) + ", … (attnwalk init FILE writes them all; docs/scenarios.md)"
                expected = near or f"; the keys {'here' if field else 'of a scenario'} are {listed}"
                raise ScenarioError(f"unknown key{expected}", file=self.file, field=path,
                                    line=line)
        for key in required:
            if key not in node.value:
                path = f"{field}.{key}" if field else key
                raise self.error(path, node, f"required key '{key}' is missing"
                                 f"{REQUIRED_HINTS.get(key, '')}")
        return node.value

    # -- scalars --------------------------------------------------------------------------------

    def text(self, node: Node, field: str) -> str:
        """Text as written: `1e-3` stays `1e-3` and `yes` stays `yes`."""
        if isinstance(node.value, (list, dict)):
            raise self.error(field, node, f"expected text, got {kind(node.value)}")
        if node.value is None:
            raise self.error(field, node, "expected text, got nothing (an empty value); "
                             "quote it if you mean the word: 'null'")
        return node.raw if node.raw is not None else str(node.value)

    def localized(self, node: Node, field: str) -> str | dict[str, str]:
        """A string, or a mapping of language to string ({en: ..., zh: ...})."""
        if isinstance(node.value, dict):
            return {lang: self.text(sub, f"{field}.{lang}")
                    for lang, sub in self.languages(node, field, "text").items()}
        return self.text(node, field)

    def languages(self, node: Node, field: str, what: str) -> dict[str, Node]:
        """A mapping of language (en, zh) to `what` in that language: every key a known language,
        at least one. Title, description, notes and dimension names all read theirs here."""
        if not node.value:
            raise self.error(field, node, f"expected {what} or {{en: ..., zh: ...}}, got an empty "
                             "mapping")
        for lang in node.value:
            if lang not in LANGUAGES:
                near = suggest(lang, LANGUAGES)
                raise ScenarioError(f"unknown language{near or ''}; the languages are "
                                    f"{', '.join(LANGUAGES)} ({{en: ..., zh: ...}})", file=self.file,
                                    field=f"{field}.{shown(str(lang))}",
                                    line=(node.keys or {}).get(lang, node.line))
        return node.value

    def integer(self, node: Node, field: str, minimum: int | None = None) -> int:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer() and math.isfinite(value):
                value = int(value)
            else:
                raise self.error(field, node,
                                 f"expected a whole number, got {kind(node.value, node)}")
        if minimum is not None and value < minimum:
            raise self.error(field, node, f"must be at least {minimum}, got {whole(value)}")
        return value

    def number(self, node: Node, field: str) -> float:
        value = node.value
        if isinstance(value, bool):
            raise self.error(field, node, f"expected a number, got the boolean "
                             f"{node.raw or str(value).lower()} (YAML reads yes/no/on/off/true/"
                             "false as booleans)")
        if isinstance(value, str) and value.strip().lower().lstrip("+-") in _NOT_FINITE:
            value = float(value.strip())  # `nan`, `inf`, `-Infinity`: say why they are refused
        if not isinstance(value, (int, float)):
            raise self.error(field, node, f"expected a number, got {kind(value, node)}")
        try:
            value = float(value)
        except OverflowError:  # a whole number with hundreds of digits
            value = math.inf
        if math.isnan(value):
            raise self.error(field, node, "expected a number, got NaN (not a number)")
        if math.isinf(value):
            if node.raw is not None and node.raw.lower().lstrip("+-") not in _NOT_FINITE | {".inf"}:
                raise self.error(field, node, f"the number {shown(node.raw, 24)} is too large: "
                                 "float64 holds at most about ±1.8e308")
            raise self.error(field, node, "expected a finite number, got infinity")
        return value

    def boolean(self, node: Node, field: str) -> bool:
        value = node.value
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise self.error(field, node, f"expected true or false, got {kind(value, node)}")

    def choice(self, node: Node, field: str, choices: tuple[str, ...]) -> str:
        value = node.value
        if isinstance(value, str) and value.lower() in choices:
            return value.lower()
        if value is None and "none" in choices:
            return "none"
        listed = " | ".join(choices)
        got = quoted(value) if isinstance(value, str) else kind(value, node)
        near = suggest(value, choices) if isinstance(value, str) else ""
        raise self.error(field, node, f"expected one of {listed}, got {got}{near}")

    # -- lists and matrices ---------------------------------------------------------------------

    def items(self, node: Node, field: str, what: str = "a list") -> list[Node]:
        if not isinstance(node.value, list):
            raise self.error(field, node, f"expected {what}, got {kind(node.value)}")
        return node.value

    def strings(self, node: Node, field: str) -> tuple[str, ...]:
        items = self.items(node, field, "a list of token strings")
        if not items:
            raise self.error(field, node, "needs at least one token")
        out = tuple(self.text(item, indexed(field, i)) for i, item in enumerate(items))
        for i, (item, text) in enumerate(zip(items, out)):
            if item.quoted or ("，" not in text and "、" not in text):
                continue
            pieces = [p for p in re.split(f"[{SEPARATORS}]", text) if p.strip()]
            if len(pieces) > 1:  # `[女生，撩，刘海]` is one token to YAML
                fixed = ", ".join(p.strip() for p in pieces)
                raise self.error(indexed(field, i), item, f"{quoted(text)} is read as one item: "
                                 f"{fullwidth_fix(text)} between items; write [{shown(fixed, 60)}]"
                                 " (or quote it to keep it whole)")
        return out

    def vector(self, node: Node, field: str) -> np.ndarray:
        items = self.items(node, field, "a list of numbers")
        if not items:
            raise self.error(field, node, "expected a list of numbers, got an empty list")
        return np.array([self.number(item, indexed(field, i)) for i, item in enumerate(items)],
                        dtype=np.float64)

    def matrix(self, node: Node, field: str) -> np.ndarray:
        """A rectangular list of rows of numbers, as float64 (rows × columns)."""
        if isinstance(node.value, dict) and "random" in node.value:  # {random: {seed: 0, ...}}
            return self._random_matrix(self, node, field)
        if isinstance(node.value, dict):  # {file: wq.npy}; a misspelt key is reported there
            self._matrix_mapping(node, field)
            return self._matrix_file(self, node, field)
        rows = self.items(node, field, "a matrix: a list of rows, each a list of numbers")
        if not rows:
            raise self.error(field, node, "expected a matrix with at least one row, got an "
                             "empty list")
        width = None
        out = []
        for i, row in enumerate(rows):
            where = indexed(field, i)  # "W_Q row 2"
            cells = self.items(row, where, "a row: a list of numbers")
            if not cells and width is None:
                raise self.error(where, row, "a row needs at least one number")
            # each number read before the row's length is compared: `[0.2， 0.9]` in any row is
            # one item to YAML, and the full-width comma is the mistake to name, not the length
            numbers = [self.number(c, indexed(field, i, j)) for j, c in enumerate(cells)]
            if width is None:
                width = len(cells)
            elif len(cells) != width:
                raise self.error(where, row, f"{where} has {count(len(cells), 'number')}, but "
                                 f"row 1 has {width}; every row needs the same length")
            out.append(numbers)
        return np.array(out, dtype=np.float64)

    def _matrix_mapping(self, node: Node, field: str, forms: str = MATRIX_FORMS) -> None:
        """A mapping where a matrix belongs must be {file: ...} or {random: ...}; a key that is
        neither, nor a near miss of one, gets the forms a matrix may take."""
        keys = list(node.value)
        if "file" in keys or "random" in keys or any(suggest(str(k), ("file", "random", "key"))
                                                     for k in keys):
            return
        listed = ", ".join(shown(str(k), 20) for k in keys[:4]) or "none"
        raise self.error(field, node, f"expected a matrix, got a mapping (keys: {listed}); {forms}")

    def bool_matrix(self, node: Node, field: str) -> np.ndarray:
        if isinstance(node.value, dict):  # {file: mask.npy}
            self._matrix_mapping(node, field, "a mask is a list of rows of true/false or a file "
                                 "({file: mask.npy})")
            return self._matrix_file(self, node, field, boolean=True)
        rows = self.items(node, field, "a matrix of true/false: a list of rows")
        if not rows:
            raise self.error(field, node, "expected a matrix of true/false with one row per "
                             "query, got an empty list")
        out = []
        for i, row in enumerate(rows):
            where = indexed(field, i)
            cells = self.items(row, where, "a row of true/false")
            entries = [self.boolean(c, indexed(field, i, j)) for j, c in enumerate(cells)]  # as matrix()
            if out and len(cells) != len(out[0]):
                raise self.error(where, row, f"{where} has {count(len(cells), 'entry')}, but row 1 "
                                 f"has {len(out[0])}; every row needs the same length")
            out.append(entries)
        return np.array(out, dtype=bool).reshape(len(out), len(out[0]))


def kind(value: Any, node: Node | None = None) -> str:
    """How a value reads to a person: 'a list', 'the text 'abc'', 'nothing (null)'."""
    raw = node.raw if node is not None else None
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return f"the boolean {raw or str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {shown(raw or repr(value), 24)}"
    if isinstance(value, str):
        fix = fullwidth_fix(value)
        return f"the text {quoted(value)}" + (f" ({fix})" if fix else "")
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def whole(n: int) -> str:
    """A whole number for a message: as it is, or about it when it has too many digits."""
    text = str(n)
    return text if len(text) <= 15 else f"{float(n):.3g}" if abs(n) < 1e308 else "a huge number"


def count(n: int, noun: str) -> str:
    """'1 entry', '3 entries', '2 numbers'."""
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("y") else f"{n} {noun}s"


def quoted(text: str, limit: int = 40) -> str:
    return f"'{shown(text, limit)}'"


def suggest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    """' (did you mean 'W_Q'?)' for a near miss, else ''."""
    if len(word) > 64:  # nobody misspells a name that long
        return ""
    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered:
        return f" (did you mean '{lowered[word.lower()]}'? names are case-sensitive)"
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[c] for c in close]
    return f" (did you mean '{close[0]}'?)" if close else ""


def shape_text(a: np.ndarray) -> str:
    """"3 × 2": an array's shape as the messages write it."""
    return " × ".join(str(s) for s in a.shape)
