"""A strict YAML reader that keeps line numbers.

PyYAML's own loaders expand aliases (an alias bomb), accept `!!python/...` tags and silently keep
the last of two duplicate keys, and lose the line of every value. Here the parser's event stream is
turned into a small tree of `Node`s instead, refusing anchors, aliases, explicit tags and duplicate
keys as they arrive, so nothing is ever expanded and every value knows its line. The tree is capped
in depth and in size, so no input can make it recurse or grow without bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml

from attnwalk.errors import ScenarioError
from attnwalk.reading.yamlerrors import syntax_error
from attnwalk.numbering import shown as person

MAX_DEPTH = 32  # a scenario is at most a mapping of lists of lists; deeper is a mistake
MAX_VALUES = 200_000  # about a 450 × 450 matrix (a second to read); bigger ones go in .npy files

TOO_DEEP = (f"the file nests deeper than {MAX_DEPTH} levels of lists and mappings; a scenario "
            "needs at most 3")

try:  # libyaml's parser is several times faster on real-size matrices
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - pure-Python PyYAML
    from yaml import SafeLoader as _Loader


@dataclass(slots=True)
class Node:
    """A YAML value and the line (1-based) where it starts."""

    value: Any  # str | int | float | bool | None | list[Node] | dict[str, Node]
    line: int
    column: int = 1
    quoted: bool = False
    keys: dict[str, int] | None = None  # mapping: key -> line of the key
    raw: str | None = None  # a plain scalar as written (`1e-3`, `yes`), for text and messages

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
_SPECIAL = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"),
            ".nan": float("nan")}
_BOOL = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_NULL = {"", "~", "null"}
_NUMERIC_START = frozenset("0123456789-+.")


_SCALAR, _ALIAS, _STREAM_END, _DOCUMENT_START = (
    yaml.ScalarEvent, yaml.AliasEvent, yaml.StreamEndEvent, yaml.DocumentStartEvent)
_SEQUENCE_START, _SEQUENCE_END, _MAPPING_START, _MAPPING_END = (
    yaml.SequenceStartEvent, yaml.SequenceEndEvent, yaml.MappingStartEvent, yaml.MappingEndEvent)


@lru_cache(maxsize=4096)  # matrices repeat their numbers (0, 1, 0.5); the values are immutable
def _scalar(text: str) -> Any:
    if text[:1] in _NUMERIC_START:
        if _INT.match(text):
            digits = text.replace("_", "")
            try:
                return int(digits)
            except ValueError:  # more digits than Python converts; as a float it is infinite
                return float(digits)
        if _FLOAT.match(text):
            return float(text.replace("_", ""))
    low = text.lower()
    if low in _NULL:
        return None
    if low in _BOOL:
        return _BOOL[low]
    if low in _SPECIAL:
        return _SPECIAL[low]
    return text


def _tag_as_written(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag


def parse(text: str, file: str) -> Node:
    """Parse one YAML document into Nodes; every refusal is a ScenarioError with its line."""
    try:
        return _parse(text, file)
    except yaml.MarkedYAMLError as exc:
        raise syntax_error(exc, text, file) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a control code)
        char = chr(exc.character) if isinstance(exc.character, int) else str(exc.character)
        at = text.find(char)
        line = text.count("\n", 0, at) + 1 if at >= 0 else None
        raise ScenarioError(f"the file contains the control character {_codepoint(char)}, which "
                            "YAML does not allow; delete it", file=file, line=line) from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ScenarioError(f"YAML error: {detail}", file=file) from None
    except UnicodeError:  # lone surrogates cannot be handed to libyaml as UTF-8
        raise ScenarioError("contains characters that are not valid Unicode text; save the file "
                            "as UTF-8", file=file) from None


def _parse(text: str, file: str) -> Node:
    def fail(message: str, mark: Any) -> ScenarioError:
        return ScenarioError(message, file=file, field=_path(stack),
                             line=person(mark.line) if mark is not None else None)

    loader = _Loader(text)
    stack: list[list[Any]] = []  # open collections: [node, a mapping's pending key or None]
    root: Node | None = None
    documents = 0
    values = 0
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if event is None or kind is _STREAM_END:
                break
            if kind is _SCALAR or kind is _SEQUENCE_START or kind is _MAPPING_START:
                if event.anchor is not None:
                    raise fail(f"YAML anchors (&{event.anchor}) are not allowed in a scenario; "
                               "write the values out", event.start_mark)
                if event.tag is not None:  # any explicit tag: !!python/object, !!str, !custom
                    raise fail(f"YAML tags ({_tag_as_written(event.tag)}) are not allowed in a "
                               "scenario; write plain numbers, text and lists", event.start_mark)
                values += 1
                if values > MAX_VALUES:
                    raise fail(f"the file holds more than {MAX_VALUES:,} values; a scenario is "
                               "written by hand and far smaller (put large matrices in .npy "
                               "files: W_Q: {file: wq.npy})", event.start_mark)
                mark = event.start_mark
                if kind is _SCALAR:
                    text = event.value
                    if not event.style:  # plain (None or ""): a number, boolean, null or text
                        node = Node(_scalar(text), person(mark.line), person(mark.column), raw=text)
                    else:  # quoted or a block of text: always text
                        node = Node(text, person(mark.line), person(mark.column), quoted=True)
                    if not stack:
                        root = node
                    elif type(stack[-1][0].value) is list:  # a matrix cell: the common case
                        stack[-1][0].value.append(node)
                    else:
                        _attach(stack, node, file)
                    continue
                if len(stack) >= MAX_DEPTH:
                    raise fail(TOO_DEEP, mark)
                if kind is _SEQUENCE_START:
                    stack.append([Node([], person(mark.line), person(mark.column)), None])
                else:
                    stack.append([Node({}, person(mark.line), person(mark.column), keys={}), None])
                continue
            if kind is _SEQUENCE_END or kind is _MAPPING_END:
                node = stack.pop()[0]
                if stack:
                    _attach(stack, node, file)
                else:
                    root = node
                continue
            if kind is _ALIAS:
                raise fail(f"YAML aliases (*{event.anchor}) are not allowed in a scenario; "
                           "write the values out", event.start_mark)
            if kind is _DOCUMENT_START:
                documents += 1
                if documents > 1:
                    raise fail("the file holds more than one YAML document (a second '---'); "
                               "put one scenario per file", event.start_mark)
            # StreamStart and DocumentEnd carry nothing
    finally:
        loader.dispose()
    if root is None or root.value is None:
        raise ScenarioError("the file has no scenario in it (it is empty, or only comments); a "
                            "scenario needs at least tokens, embeddings, W_Q, W_K and W_V",
                            file=file, line=root.line if root is not None and root.raw else None)
    return root


def _attach(stack: list[list[Any]], node: Node, file: str) -> None:
    top = stack[-1]
    parent = top[0]
    if type(parent.value) is list:
        parent.value.append(node)
        return
    pending = top[1]
    if pending is None:  # this node is a key
        if isinstance(node.value, (list, dict)):
            raise ScenarioError("a mapping key must be a plain name, not a list or mapping",
                                file=file, line=node.line)
        key = node.raw if node.raw is not None else str(node.value)
        if key in parent.keys:
            where = _path(stack)
            raise ScenarioError(f"duplicate key (first on line {parent.keys[key]}); keep one",
                                file=file, line=node.line,
                                field=f"{where}.{shown(key)}" if where else shown(key))
        parent.keys[key] = node.line
        top[1] = key
    else:
        parent.value[pending] = node
        top[1] = None


# What the items of a list field are called in messages, by the field's last name: a matrix's
# rows hold values (a mask's, entries); any other list holds items (tokens, ids) or values (w_a)
_MATRICES = {"embeddings", "positional", "W_Q", "W_K", "W_V", "W_O", "mask"}
_VALUES = {"w_a"}


def indexed(field: str, *indices: int) -> str:
    """A place inside a list field as a learner counts it, from 1: `embeddings row 2, value 2`
    for embeddings[1][1], `tokens item 3`, `mask row 2, entry 1`, `w_a value 2`."""
    name = field.rsplit(".", 1)[-1]
    if name in _MATRICES:
        nouns = ["row", "entry" if name == "mask" else "value"]
    else:
        nouns = ["value" if name in _VALUES else "item"]
    parts = [f"{nouns[k] if k < len(nouns) else 'item'} {person(i)}" for k, i in enumerate(indices)]
    return " ".join(filter(None, (field, ", ".join(parts))))


def _path(stack: list[list[Any]]) -> str | None:
    """Where the parser is, as the loader names fields: `W_Q row 2, value 1`, `source.tokens`."""
    field, indices = "", []
    for node, pending in stack:
        if isinstance(node.value, list):
            indices.append(len(node.value))
        elif pending is None:
            break
        elif indices:  # a mapping inside a list: nothing a scenario has; keep the place so far
            field, indices = indexed(field, *indices) + f".{shown(pending)}", []
        else:
            field += f".{shown(pending)}" if field else shown(pending)
    out = indexed(field, *indices)
    if len(out) > 60:
        return out[:60] + "…"
    return out or None


def shown(text: str, limit: int = 40) -> str:
    """Text fit for a one-line message: cut to `limit` characters, control characters escaped."""
    text = text if len(text) <= limit else text[:limit] + "…"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _codepoint(char: str) -> str:
    return f"U+{ord(char):04X}" if len(char) == 1 else repr(char)
