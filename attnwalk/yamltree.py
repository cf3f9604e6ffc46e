"""A strict YAML reader that keeps line numbers.

PyYAML's own loaders expand aliases (an alias bomb), accept `!!python/...` tags and silently keep
the last of two duplicate keys, and lose the line of every value. Here the parser's event stream is
turned into a small tree of `Node`s instead, refusing anchors, aliases, explicit tags and duplicate
keys as they arrive, so nothing is ever expanded and every value knows its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import ScenarioError

MAX_DEPTH = 32  # a scenario is at most a mapping of lists of lists; deeper is a mistake

try:  # libyaml's parser is several times faster on real-size matrices
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - pure-Python PyYAML
    from yaml import SafeLoader as _Loader


@dataclass
class Node:
    """A YAML value and the line (1-based) where it starts."""

    value: Any  # str | int | float | bool | None | list[Node] | dict[str, Node]
    line: int
    column: int = 1
    quoted: bool = False
    keys: dict[str, int] = field(default_factory=dict)  # mapping: key -> line of the key

    def plain(self) -> Any:
        """The value with all Nodes removed (lists and dicts of Python values)."""
        if isinstance(self.value, list):
            return [n.plain() for n in self.value]
        if isinstance(self.value, dict):
            return {k: n.plain() for k, n in self.value.items()}
        return self.value


# YAML 1.1 plain scalars, as a person writing a scenario means them. Unlike PyYAML, `1e-3` and `5.`
# are numbers; `yes`/`no`/`on`/`off` stay booleans so they can be refused with a clear message.
_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
_FLOAT = re.compile(r"^[-+]?(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?$")
_SPECIAL = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"), ".nan": float("nan")}
_BOOL = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_NULL = {"", "~", "null"}


def _scalar(text: str) -> Any:
    low = text.lower()
    if low in _NULL:
        return None
    if low in _BOOL:
        return _BOOL[low]
    if _INT.match(text):
        return int(text.replace("_", ""))
    if _FLOAT.match(text):
        return float(text.replace("_", ""))
    if low in _SPECIAL:
        return _SPECIAL[low]
    return text


def _describe(mark: Any) -> tuple[int | None, int | None]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (None, None)


def parse(text: str, file: str) -> Node:
    """Parse one YAML document into Nodes; every refusal is a ScenarioError with its line."""

    def fail(message: str, mark: Any) -> ScenarioError:
        line, _ = _describe(mark)
        return ScenarioError(message, file=file, line=line)

    loader = _Loader(text)
    stack: list[tuple[Node, str | None]] = []  # open collections, and a mapping's pending key
    root: Node | None = None
    documents = 0
    try:
        while True:
            event = loader.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                break
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise fail("the file holds more than one YAML document (a second '---'); "
                               "put one scenario per file", event.start_mark)
                continue
            if isinstance(event, (yaml.StreamStartEvent, yaml.DocumentEndEvent)):
                continue
            if isinstance(event, yaml.AliasEvent):
                raise fail(f"YAML aliases (*{event.anchor}) are not allowed in a scenario; "
                           "write the values out", event.start_mark)
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                node, _ = stack.pop()
                if stack:
                    _attach(stack, node, file)
                else:
                    root = node
                continue
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                raise fail(f"YAML anchors (&{anchor}) are not allowed in a scenario; "
                           "write the values out", event.start_mark)
            tag = getattr(event, "tag", None)
            if tag is not None:  # any explicit tag: !!python/object, !!str, !custom ...
                raise fail(f"YAML tags ({tag}) are not allowed in a scenario; "
                           "write plain numbers, strings and lists", event.start_mark)
            line, column = _describe(event.start_mark)
            if isinstance(event, yaml.ScalarEvent):
                quoted = event.style in ("'", '"', "|", ">")
                value = event.value if quoted else _scalar(event.value)
                node = Node(value, line, column, quoted=quoted)
                if stack:
                    _attach(stack, node, file)
                else:
                    root = node
                continue
            if len(stack) >= MAX_DEPTH:
                raise fail(f"the file nests deeper than {MAX_DEPTH} levels; "
                           "a scenario needs at most 3", event.start_mark)
            if isinstance(event, yaml.SequenceStartEvent):
                stack.append((Node([], line, column), None))
            elif isinstance(event, yaml.MappingStartEvent):
                stack.append((Node({}, line, column), None))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = _describe(mark)
        problem = exc.problem or exc.context or "invalid YAML"
        at = f" (column {column})" if column else ""
        raise ScenarioError(f"YAML syntax error: {problem}{at}", file=file, line=line) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"YAML error: {exc}", file=file) from None
    finally:
        loader.dispose()
    if root is None:
        raise ScenarioError("the file is empty; a scenario needs at least tokens, embeddings, "
                            "W_Q, W_K and W_V", file=file)
    return root


def _attach(stack: list[tuple[Node, str | None]], node: Node, file: str) -> None:
    parent, pending = stack[-1]
    if isinstance(parent.value, list):
        parent.value.append(node)
        return
    if pending is None:  # this node is a key
        if isinstance(node.value, (list, dict)):
            raise ScenarioError("a mapping key must be a plain name, not a list or mapping",
                                file=file, line=node.line)
        key = str(node.value) if node.value is not None else ""
        if key in parent.value or key in parent.keys:
            raise ScenarioError(f"duplicate key '{key}' (first on line {parent.keys[key]}); "
                                "keep one", file=file, line=node.line)
        parent.keys[key] = node.line
        stack[-1] = (parent, key)
    else:
        parent.value[pending] = node
        stack[-1] = (parent, None)
