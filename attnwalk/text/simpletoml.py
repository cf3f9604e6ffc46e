"""The few forms of TOML attnwalk/text/*.toml are written in, parsed without tomllib.

Every walk reads its words from those files, and importing tomllib and parsing with it took ~4 ms of
each start. The files use only [tables] (dotted, with quoted parts like [stage."QK^T"]), comments,
`key = "string"` and `key = \"\"\"multi-line string\"\"\"`. `loads` parses those and gives up with
ValueError on anything else (other values, comments after a value, line-continuing backslashes, a
table or key defined twice), so i18n can hand such a file to tomllib; tests/test_i18n.py checks both
text files parse to exactly what tomllib gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_NAME = r'(?:[A-Za-z0-9_-]+|"[^"\\\n]*")'
_TABLE = re.compile(rf"\[\s*({_NAME}(?:\s*\.\s*{_NAME})*)\s*\]")
_NAME_PART = re.compile(r'[A-Za-z0-9_-]+|"([^"\\\n]*)"')
_PAIR = re.compile(r'([A-Za-z0-9_-]+)\s*=\s*"((?:[^"\\\n]|\\.)*)"')
_LONG = re.compile(r'([A-Za-z0-9_-]+)\s*=\s*"""(.*)')
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "b": "\b", "f": "\f", "r": "\r"}


def loads(source: str) -> dict:
    """A text file's tables as nested dicts of strings; ValueError where it leaves the subset."""
    root: dict = {}
    table = root
    tables: set[tuple[str, ...]] = set()
    lines = iter(source.splitlines())
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if match := _PAIR.fullmatch(stripped):
            _put(table, match.group(1), _unescape(match.group(2)))
        elif match := _TABLE.fullmatch(stripped):
            path = tuple(part.group(1) if part.group(1) is not None else part.group(0)
                         for part in _NAME_PART.finditer(match.group(1)))
            if path in tables:
                raise ValueError(f"table [{match.group(1)}] defined twice")
            tables.add(path)
            table = root
            for name in path:
                table = table.setdefault(name, {})
                if not isinstance(table, dict):
                    raise ValueError(f"[{match.group(1)}]: {name} is not a table")
        elif match := _LONG.fullmatch(stripped):
            _put(table, match.group(1), _long_string(match.group(2), lines))
        else:
            raise ValueError(f"not in the subset: {line!r}")
    return root


def _put(table: dict, key: str, value: str) -> None:
    if key in table:
        raise ValueError(f"key {key} defined twice")
    table[key] = value


def _long_string(rest: str, lines: Iterator[str]) -> str:
    """The body of a \"\"\" string opened on this line (`rest` follows the quotes): a newline right
    after the opening quotes is dropped, as TOML says."""
    body = [] if rest == "" else [rest]
    if '"""' not in rest:
        for line in lines:
            body.append(line)
            if '"""' in line:
                break
    text = "\n".join(body)
    if not text.endswith('"""') or text.count('"""') != 1 or "\\\n" in text:
        raise ValueError("a multi-line string this subset does not read")
    return _unescape(text[:-3])


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text

    def one(match: re.Match) -> str:
        code = match.group(1)
        if code in _ESCAPES:
            return _ESCAPES[code]
        if code[0] in "uU" and len(code) > 1:
            return chr(int(code[1:], 16))
        raise ValueError(f"escape \\{code}")

    return _ESCAPE.sub(one, text)
