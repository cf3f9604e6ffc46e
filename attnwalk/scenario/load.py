"""Reading a scenario: a built-in name, a file or stdin, every field checked against the others,
frozen into a Scenario (scenario.py) whose arrays are float64 and read-only.

The base layer's keys (tokens, embeddings, positional, W_Q, W_K, W_V, heads, …) are read here;
each feature's keys by its own module (attnwalk/features/), given the Draft read so far: first the
features that change the layer's shape (a source, K/V heads), then, after the weights, the rest.
A scenario's notes are checked against the stages its own layer shows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from attnwalk.errors import ScenarioError
from attnwalk.scenario import lesson, limits
from attnwalk.scenario.builtins import builtin_names, builtin_path
from attnwalk.reading.fields import Fields, kind, quoted, shape_text, shown, suggest, whole
from attnwalk.scenario.files import read_text
from attnwalk.scenario.scenario import LayerShape, Scenario, Sequence
from attnwalk.reading.yamltree import Node, indexed, parse

CORE_KEYS = ("name", "title", "description", "tokens", "ids", "embeddings", "positional",
             "W_Q", "W_K", "W_V", "heads", "focus", "dimensions", "notes")
REQUIRED = ("tokens", "embeddings", "W_Q", "W_K", "W_V")
POSITIONAL = ("none", "sinusoidal", "rope")


def keys() -> tuple[str, ...]:
    """Every key a scenario file may have: the base layer's, then each feature's."""
    from attnwalk.features import FEATURES

    return CORE_KEYS + tuple(key for feature in FEATURES for key in getattr(feature, "KEYS", ()))


@dataclass(eq=False)
class Draft(LayerShape):
    """A scenario being read: the file's top-level nodes, and what has been read so far, for the
    features' `read` to check their keys against and add their settings and parameters to."""

    f: Fields
    root: Node
    top: dict[str, Node]
    main: Sequence
    heads: int = 1
    source: Sequence | None = None
    kv_heads: int = 0
    W_Q: np.ndarray | None = None
    W_K: np.ndarray | None = None
    W_V: np.ndarray | None = None
    W_O: np.ndarray | None = None
    allowed: np.ndarray | None = None  # (n, m): every key, unless a mask says otherwise
    settings: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)

    def sequence(self, fields: dict[str, Node], prefix: str) -> Sequence:
        """A sequence read as the main one is (tokens, ids, embeddings, positional) from `fields`,
        its messages naming `prefix` + field: a feature's own sequence (cross's `source.`), read
        without the feature importing this module above it."""
        return sequence(self.f, fields, prefix)


def load_scenario(ref: str | Path) -> Scenario:
    """Load a built-in scenario by name, or a scenario file by path."""
    return load_with_text(ref)[0]


def load_with_text(ref: str | Path) -> tuple[Scenario, str]:
    """A scenario as load_scenario reads it, and the text it was read from (`train -o` writes the
    trained layer over that text: stdin cannot be read twice)."""
    ref_text = str(ref)
    file = shown(ref_text, 200)  # how messages name it: one line, however odd the name
    if not ref_text.strip():
        raise ScenarioError(f"no scenario named: give a built-in ({', '.join(builtin_names())}) "
                            "or the path to a .yaml file", file=quoted(ref_text))
    if ref_text == "-":  # the scenario piped in: `cat my.yaml | attnwalk run -`
        return _from_stdin()
    path = Path(ref_text)
    try:
        exists = path.exists()
        builtin = None if exists else builtin_path(ref_text)
    except (OSError, ValueError) as exc:  # a name too long for the system, or holding a NUL
        reason = getattr(exc, "strerror", None) or "it contains a character no path may hold"
        raise ScenarioError(f"is not a usable path: {reason}", file=file) from None
    if builtin is not None:
        path = builtin
    elif not exists:
        names = builtin_names()
        if path.suffix == "" and "/" not in ref_text and "\\" not in ref_text:
            raise ScenarioError(f"no built-in scenario or file named {quoted(ref_text)}"
                                f"{suggest(ref_text, names)}; built-ins: {', '.join(names)} "
                                "(or give the path to a .yaml file)", file=file)
        near = f" (did you mean the built-in '{path.stem}'?)" if path.stem in names else ""
        raise ScenarioError(f"no such file{near}; check the path, or name a built-in: "
                            f"{', '.join(names)}", file=file)
    text = read_text(path, file if builtin is None else None)
    return scenario_from_text(text, file if builtin is None else f"{ref_text} (built-in)",
                              default_name=path.stem, path=str(path), builtin=builtin is not None), text


def _from_stdin() -> tuple[Scenario, str]:
    import sys

    if sys.stdin is None or sys.stdin.isatty():
        raise ScenarioError("- reads the scenario from stdin, but stdin is a terminal; pipe a file "
                            "in: cat my.yaml | attnwalk run -", file="-")
    text = read_text(Path("/dev/stdin"), "<stdin>")
    return scenario_from_text(text, "<stdin>", default_name="stdin"), text


def scenario_from_text(text: str, file: str, default_name: str = "scenario",
                       path: str | None = None, builtin: bool = False) -> Scenario:
    """Validate a scenario given as YAML text; `file` is how errors name it.

    Raises only ScenarioError: the parser caps size and depth, so running out of memory or stack
    here means the file itself is far too big, and is said so.
    """
    try:
        return _validated(text, file, default_name, path, builtin)
    except (MemoryError, RecursionError):
        raise ScenarioError("is too large or too deeply nested to load; a scenario file should "
                            "be small", file=file) from None


def _file_matrix(f: Fields, node: Node, field: str, boolean: bool = False) -> np.ndarray:
    """`{file: wq.npy}`, read for the fields (reading/fields.py opens no file)."""
    from attnwalk.scenario.matrixfile import load_matrix_file  # only scenarios that refer to files pay for it

    return load_matrix_file(f, node, field, boolean=boolean)


def _seeded_matrix(f: Fields, node: Node, field: str, boolean: bool = False) -> np.ndarray:
    """`{random: {seed: 0, …}}`, made for the fields."""
    from attnwalk.scenario.randommatrix import random_matrix

    return random_matrix(f, node, field)


def _validated(text: str, file: str, default_name: str, path: str | None,
               builtin: bool) -> Scenario:
    from attnwalk.features import FEATURES

    f = Fields(file, str(Path(path).parent) if path else None, matrix_file=_file_matrix,
               random_matrix=_seeded_matrix)
    root = parse(text, file)
    for feature in FEATURES:  # several blocks: block 1's keys read as the top level's (features/blocks.py)
        if hasattr(feature, "lift"):
            feature.lift(f, root)
    top = f.mapping(root, "", keys())
    for feature in FEATURES:  # a key a feature fills in (the tokens' embeddings, from a vocabulary's table)
        if hasattr(feature, "fill"):
            feature.fill(f, top)
    f.mapping(root, "", keys(), REQUIRED)

    name = f.text(top["name"], "name") if "name" in top else default_name
    title = f.localized(top["title"], "title") if "title" in top else ""
    description = f.localized(top["description"], "description") if "description" in top else ""

    d = Draft(f, root, top, main=sequence(f, top, ""))
    d.heads = f.integer(top["heads"], "heads", minimum=1) if "heads" in top else 1
    for feature in FEATURES:  # what changes the layer's shape: a source (m), K/V heads (g)
        if hasattr(feature, "read_shape"):
            feature.read_shape(d)
    _read_weights(d)
    for feature in FEATURES:
        if hasattr(feature, "read"):
            feature.read(d)
    if d.allowed is None:
        d.allowed = np.ones((d.main.n, d.m), dtype=bool)

    focus = _focus(f, top["focus"], d.main.tokens) if "focus" in top else None
    dimensions = {}
    if "dimensions" in top:
        widths = {"d_model": d.main.d_model, "d_k": d.d_k, "d_v": d.d_v}
        dimensions = lesson.dimension_names(f, top["dimensions"], widths)
    scenario = Scenario(
        name=name, main=d.main, W_Q=d.W_Q, W_K=d.W_K, W_V=d.W_V, allowed=d.allowed,
        title=title, description=description, path=path, builtin=builtin, label=file, heads=d.heads,
        kv_heads=d.kv_heads, W_O=d.W_O, source=d.source, focus=focus, dimensions=dimensions,
        lines=_lines(root), settings=MappingProxyType(d.settings), params=MappingProxyType(d.params))
    if "notes" in top:  # what to notice at a stage: one of the stages this layer shows
        scenario = dataclasses.replace(scenario, notes=_notes(f, top["notes"], scenario))
    for value in (d.W_Q, d.W_K, d.W_V, d.W_O, d.allowed, d.main.E, d.main.P_given, *d.params.values()):
        if value is not None:
            value.flags.writeable = False
    return scenario


def _read_weights(d: Draft) -> None:
    """W_Q, W_K, W_V, each d_model rows, split evenly into the heads (K and V: the K/V heads)."""
    f, top, heads, kv_heads, groups = d.f, d.top, d.heads, d.kv_heads, d.groups
    d.W_Q = W_Q = _weights(f, top, "W_Q", d.main.d_model)
    d.W_K = W_K = _weights(f, top, "W_K", d.main.d_model)
    d.W_V = W_V = _weights(f, top, "W_V", d.main.d_model)
    if heads > W_Q.shape[1]:
        raise f.error("heads", top["heads"], f"heads is {whole(heads)}, but W_Q has only "
                      f"{W_Q.shape[1]} columns; each head needs at least one")
    for key, W, count in (("W_Q", W_Q, heads), ("W_V", W_V, groups)):
        if W.shape[1] % count:
            who = f"{whole(count)} heads" if key == "W_Q" or not kv_heads else f"{whole(count)} K/V heads"
            raise f.error(key, top[key], f"{key} has {W.shape[1]} columns, which {who} cannot "
                          f"split evenly; its width must be {'kv_heads' if key == 'W_V' and kv_heads else 'heads'}"
                          " × per-head width")
    d_k = W_Q.shape[1] // heads
    if W_K.shape[1] != groups * d_k:
        if kv_heads:
            raise f.error("W_K", top["W_K"], f"W_K has {W_K.shape[1]} columns, but with kv_heads "
                          f"{whole(kv_heads)} it must be kv_heads × d_k = {kv_heads} × {d_k} = "
                          f"{kv_heads * d_k} (d_k = W_Q's {W_Q.shape[1]} columns / {heads} heads)")
        raise f.error("W_K", top["W_K"], f"W_K has {W_K.shape[1]} columns, but W_Q has "
                      f"{W_Q.shape[1]}; queries and keys need the same width d_k to be compared")
    _check_cost(f, d.root, d.main, d.source, heads, W_Q, heads * d.d_v)


def _notes(f: Fields, node: Node, scn: Scenario) -> dict:
    """`notes`: a stage of this layer (by key, symbol or a common spelling) to what to notice there."""
    from attnwalk.features import catalog
    from attnwalk.layer.stages import stage_by_name, typed_name

    shown_here = tuple(s for s in scn.graph if s.shown)
    for feature in scn.features:  # a feature's own screens (a target's backward walk) may have notes
        if hasattr(feature, "note_stages"):
            shown_here += feature.note_stages(scn)

    def resolve(name: str) -> str | None:
        stage = stage_by_name(name, shown_here)
        if stage is None and stage_by_name(name, catalog()) is not None:
            other = stage_by_name(name, catalog()).key
            raise f.error(f"notes.{shown(name)}", node.value[name], f"this scenario has no {other} "
                          f"stage; its stages are: {', '.join(typed_name(s) for s in shown_here)}")
        return None if stage is None else stage.key

    return lesson.stage_notes(f, node, resolve, ", ".join(s.key for s in shown_here))


def _lines(root: Node) -> dict[str, int]:
    """The line of every top-level key and of the source's keys, for messages after loading."""
    lines = dict(root.keys or {})
    source = root.value.get("source")
    if source is not None and source.keys:
        lines.update({f"source.{key}": line for key, line in source.keys.items()})
    return lines


def _check_cost(f: Fields, root: Node, main: Sequence, source: Sequence | None, heads: int,
                W_Q: np.ndarray, hd_v: int) -> None:
    """Refuse, before the mask or any stage is allocated, a walk too big to compute (limits.py).
    `hd_v` is concat's width, heads·d_v: with shared K/V heads, wider than W_V."""
    m = source.n if source else main.n
    problems = limits.walk_size(main.n, m, main.d_model, W_Q.shape[1], hd_v, heads)
    if problems:
        field, message = problems[0]
        if field == "tokens" and source is not None and m > main.n and "scores" in message:
            field = "source.tokens"
        key, _, sub = field.partition(".")
        keys = root.value[key].keys if sub else root.keys
        raise ScenarioError(message, file=f.file, field=field, line=(keys or {}).get(sub or key))


def sequence(f: Fields, top: dict[str, Node], prefix: str) -> Sequence:
    """A run of tokens: its tokens, ids, embeddings and positions (`prefix`: "source." for a source)."""
    tokens = f.strings(top["tokens"], f"{prefix}tokens")
    n = len(tokens)
    E = f.matrix(top["embeddings"], f"{prefix}embeddings")
    if E.shape[0] != n:
        raise f.error(f"{prefix}embeddings", top["embeddings"], f"{prefix}embeddings have "
                      f"{E.shape[0]} rows, but there are {n} tokens; give one row per token")
    ids = None
    if "ids" in top:
        items = f.items(top["ids"], f"{prefix}ids", "a list of whole numbers")
        ids = tuple(f.integer(node, indexed(f"{prefix}ids", i), minimum=0) for i, node in enumerate(items))
        if len(ids) != n:
            raise f.error(f"{prefix}ids", top["ids"], f"there are {len(ids)} ids but {n} tokens; "
                          "give one id per token")
    positional, P = "none", None
    node = top.get("positional")
    if node is not None:
        if isinstance(node.value, (list, dict)):  # rows, or {file: p.npy}
            positional, P = "explicit", f.matrix(node, f"{prefix}positional")
            if P.shape != E.shape:
                raise f.error(f"{prefix}positional", node, f"{prefix}positional is {shape_text(P)}, but "
                              f"it must match the embeddings: n × d_model = {shape_text(E)}")
        else:
            positional = f.choice(node, f"{prefix}positional", POSITIONAL + ("explicit matrix",))
            if positional not in POSITIONAL:
                raise f.error(f"{prefix}positional", node, "give the matrix itself as a list of rows")
    return Sequence(tokens=tokens, E=E, positional=positional, P_given=P, ids=ids)


def _focus(f: Fields, node: Node, tokens: tuple[str, ...]) -> int:
    """`focus: bank` or `focus: 4` (1-based): the query row whose arithmetic the walk shows."""
    value = node.value
    if not isinstance(value, (bool, int)) and node.raw in tokens:  # a token such as 0E0 or 1.5,
        return tokens.index(node.raw)  # read as a number but written as the token is (whole numbers stay positions)
    if isinstance(value, str) or node.quoted:
        if str(value) in tokens:
            return tokens.index(str(value))
        listed = ", ".join(shown(t, 20) for t in tokens[:12]) + (", …" if len(tokens) > 12 else "")
        raise f.error("focus", node, f"{quoted(str(value))} is not one of the tokens ({listed}); "
                      "give a token or its position counting from 1")
    if isinstance(value, (bool, list, dict)) or value is None:
        raise f.error("focus", node, f"expected a token or its position counting from 1, got "
                      f"{kind(value, node)}")
    index = f.integer(node, "focus", minimum=1)
    if index > len(tokens):
        raise f.error("focus", node, f"focus is {whole(index)}, but there are only "
                      f"{len(tokens)} tokens (count from 1)")
    return index - 1


def _weights(f: Fields, top: dict[str, Node], key: str, d_model: int) -> np.ndarray:
    W = f.matrix(top[key], key)
    if W.shape[0] != d_model:
        raise f.error(key, top[key], f"{key} has {W.shape[0]} rows, but d_model is {d_model} "
                      f"(embeddings have {d_model} columns)")
    return W


