"""Editing a YAML file's text in place, value by value (train -o: the trained layer written over
the scenario it was read from). yaml.compose's marks say where each value starts and ends; a span
is replaced by a value written so that it reads back exactly (numbers with every digit float64
holds, a matrix a row per line, texts plain, folded or double-quoted as they survive), and what
lies outside the spans, comments included, stays as it was written. PyYAML itself keeps no
comments, so a dump of the loaded values would lose them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml

from attnwalk.errors import ScenarioError


@dataclass(frozen=True)
class FileRef:
    """`{file: name}` (with `key:` for an .npz member)."""

    name: str
    key: str | None = None

    def __str__(self) -> str:
        key = f", key: {text_value(self.key, 0)}" if self.key is not None else ""
        return f"{{file: {text_value(self.name, 0)}{key}}}"


class Edits:
    """Spans of the text to replace, applied at the end from the last to the first."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: list[tuple[int, int, str]] = []
        self.appended: list[str] = []

    def put(self, root: yaml.Node, place: tuple[str | int, ...], value: Any) -> None:
        """`key: value` at `place`, replacing what is there, or added to its mapping."""
        parent = _find(root, place[:-1])
        key = place[-1]
        if not isinstance(parent, yaml.MappingNode):
            raise ScenarioError(f"cannot write the trained {'.'.join(map(str, place))}: the file has no "
                                f"mapping at {'.'.join(map(str, place[:-1])) or 'its top'}")
        for key_node, value_node in parent.value:
            if key_node.value == key:
                column = key_node.start_mark.column
                self.spans.append((key_node.start_mark.index, _end(value_node, self.text),
                                   _entry(str(key), value, column, parent.flow_style)))
                return
        # a key the file left to its default: added after the mapping's last entry
        if parent.flow_style:  # {a: 1, b: 2}: before the closing brace
            at = parent.end_mark.index - 1
            self.spans.append((at, at, (", " if parent.value else "") + _entry(str(key), value, 0, True)))
        elif parent is root:
            self.appended.append(_entry(str(key), value, 0, False))
        else:  # a block mapping inside another (a block's mapping in blocks:): at its keys' column
            column = parent.value[0][0].start_mark.column
            at = _end(parent.value[-1][1], self.text)
            self.spans.append((at, at, "\n" + " " * column + _entry(str(key), value, column, False)))

    def drop(self, root: yaml.Node, key: str, why: str) -> None:
        """Remove top-level `key` and its value; a comment in its place says `why`."""
        for key_node, value_node in root.value:
            if key_node.value == key:
                self.spans.append((key_node.start_mark.index, _end(value_node, self.text),
                                   f"# {key}: left out: {why}"))

    def value(self, node: yaml.Node, value: np.ndarray | FileRef) -> None:
        """Replace the value `node` alone (a matrix inside a mapping or a list) with `value`."""
        new = str(value) if isinstance(value, FileRef) else _flow_matrix(value, node.start_mark.column)
        self.spans.append((node.start_mark.index, _end(node, self.text), new))

    def applied(self) -> str:
        out = self.text
        last = len(out) + 1
        for start, end, new in sorted(self.spans, reverse=True):
            if end > last:  # nested spans are never both edited (matrices inside a trained key are skipped)
                raise AssertionError("overlapping edits")
            out = out[:start] + new + out[end:]
            last = start
        if self.appended:
            out = out.rstrip("\n") + "\n" + "\n".join(self.appended) + "\n"
        return out


def _find(root: yaml.Node, place: tuple[str | int, ...]) -> yaml.Node | None:
    node: yaml.Node | None = root
    for step in place:
        if isinstance(step, int) and isinstance(node, yaml.SequenceNode) and 0 <= step < len(node.value):
            node = node.value[step]
        elif isinstance(step, str) and isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == step), None)
        else:
            return None
    return node


def _end(node: yaml.Node, text: str) -> int:
    """Where `node` ends in `text`: a scalar before trailing blanks; a block collection after its
    last item and that item's comment on the same line (the comment of an old row), but not the
    comments and blank lines that follow (its own end mark takes them in)."""
    if isinstance(node, yaml.ScalarNode):
        start, end = node.start_mark.index, node.end_mark.index
        return start + len(text[start:end].rstrip())
    if node.flow_style or not node.value:
        return node.end_mark.index
    last = node.value[-1]
    end = _end(last[1] if isinstance(node, yaml.MappingNode) else last, text)
    line_end = text.find("\n", end)
    rest = text[end:] if line_end < 0 else text[end:line_end]
    return end + len(rest) if rest.lstrip().startswith("#") else end


# -- writing values ----------------------------------------------------------------------------------


def _number(x: float) -> str:
    """Every digit float64 has: repr is the shortest text that reads back as the same float."""
    if not math.isfinite(x):
        raise ScenarioError(f"cannot write the trained layer: a parameter is {x}")
    return repr(float(x))


def _cell(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    return _number(float(x))


def _row(row: np.ndarray) -> str:
    return "[" + ", ".join(_cell(x) for x in row) + "]"


def _flow_matrix(value: np.ndarray, column: int) -> str:
    """A matrix where a value stood: `[[…],` a row per line, each under the first."""
    rows = [_row(r) for r in value]
    pad = "\n" + " " * (column + 1)
    return "[" + ("," + pad).join(rows) + "]"


def text_value(value: str, column: int, flow: bool = False) -> str:
    """A text as it reads back exactly, Chinese as written: a name plain, a long text folded (`>-`,
    wrapped at spaces, a blank line for each line break), else double-quoted. `column` is where
    its continuation lines start; inside a flow mapping ({…}) never folded."""
    if _PLAIN.fullmatch(value) and value.lower() not in _WORDS:
        return value
    if not flow and (len(value) > 90 or "\n" in value):
        folded = _folded(value)
        if folded is not None:
            return "\n".join(line and " " * column + line if k else line
                             for k, line in enumerate(folded.split("\n")))
    dumped = yaml.safe_dump(value, default_style='"', allow_unicode=True, width=100).rstrip("\n")
    return dumped.replace("\n", "\n" + " " * column)


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_WORDS = {"yes", "no", "true", "false", "on", "off", "null", "y", "n"}


def _folded(value: str) -> str | None:
    """`value` as a folded block (its lines to be indented under its key), or None where folding
    would not read back the same (leading spaces, a trailing line break, runs of spaces)."""
    import textwrap

    lines: list[str] = []
    for k, paragraph in enumerate(value.split("\n")):
        if k:
            lines.append("")  # a blank line: one line break
        lines += textwrap.wrap(paragraph, 96, break_long_words=False, break_on_hyphens=False)
    block = ">-\n" + "\n".join(lines)
    try:
        same = yaml.safe_load("v: " + block.replace("\n", "\n  ")) == {"v": value}
    except yaml.YAMLError:
        same = False
    return block if same else None


def _entry(key: str, value: Any, column: int, flow: bool) -> str:
    """`key: value` for a key at `column`: a matrix a row per line, a list of numbers on one line,
    a text double-quoted, a mapping of texts (en, zh) a language per line."""
    inner = " " * (column + 2)
    if isinstance(value, FileRef):
        return f"{key}: {value}"
    if isinstance(value, np.ndarray) and value.ndim == 2:
        if flow:
            return f"{key}: {_flow_matrix(value, column + len(key) + 2)}"
        return f"{key}:" + "".join(f"\n{inner}- {_row(r)}" for r in value)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return f"{key}: {_row(value)}"
    if isinstance(value, np.ndarray):
        return f"{key}: {_number(float(value))}"
    if isinstance(value, dict):
        if flow:
            return f"{key}: {{" + ", ".join(f"{k}: {text_value(v, 0, flow=True)}" for k, v in value.items()) + "}"
        return f"{key}:" + "".join(f"\n{inner}{k}: {text_value(v, column + 4)}" for k, v in value.items())
    if isinstance(value, str):
        return f"{key}: {text_value(value, column + 2, flow)}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{key}: {_number(value)}"
    return f"{key}: {yaml.safe_dump(value, default_flow_style=True).strip()}"
