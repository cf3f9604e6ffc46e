"""A scenario: the tokens, their embeddings and the layer's weights, validated and frozen.

`load_scenario` is the only way in: it reads a built-in name or a file, checks every field and every
shape against the others, and returns a Scenario whose arrays are float64 and read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnwalk.errors import ScenarioError
from attnwalk.layer import masks  # the named masks are the layer's to define
from attnwalk.layer.rope import PAIRINGS, Rope  # as the score kinds, the RoPE settings are the layer's to define
from attnwalk.layer.scores import SCORES  # the score kinds are the layer's to define
from attnwalk.scenario import lesson, limits
from attnwalk.scenario.builtins import builtin_names, builtin_path
from attnwalk.scenario.fields import Fields, kind, quoted, shown, suggest, whole
from attnwalk.scenario.files import read_text
from attnwalk.scenario.yamltree import Node, indexed, parse

KEYS = ("name", "title", "description", "tokens", "ids", "embeddings", "positional",
        "W_Q", "W_K", "W_V", "W_O", "mask", "heads", "kv_heads", "bias", "source", "score", "w_a", "qk_norm",
        "qk_scale", "focus", "dimensions", "notes", "rope", "tiles")
SOURCE_KEYS = ("tokens", "ids", "embeddings", "positional")
REQUIRED = ("tokens", "embeddings", "W_Q", "W_K", "W_V")
POSITIONAL = ("none", "sinusoidal", "rope")
MASKS = ("none", "causal")
MASK_KEYS = ("causal", "window")  # mask: {causal: true, window: 3}
BIASES = ("none", "alibi")


@dataclass(frozen=True, eq=False)  # no __eq__: == on numpy fields can only raise; defines faster
class Sequence:
    """A run of tokens and their embeddings: the main sequence, or a cross-attention source."""

    tokens: tuple[str, ...]
    E: np.ndarray  # (n, d_model)
    positional: str  # "none" | "sinusoidal" | "explicit" | "rope" (P = 0; q and k are rotated)
    P_given: np.ndarray | None = None  # (n, d_model) when positional is explicit
    ids: tuple[int, ...] | None = None

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def d_model(self) -> int:
        return self.E.shape[1]


@dataclass(frozen=True, eq=False)  # no __eq__, as Sequence
class Scenario:
    """A validated scenario: one sequence (and a source for cross-attention) and the layer's weights."""

    name: str
    main: Sequence
    W_Q: np.ndarray  # (d_model, h·d_k)
    W_K: np.ndarray  # (d_model, h·d_k)
    W_V: np.ndarray  # (d_model, h·d_v)
    mask_kind: str  # "none" | "causal" | "window" | "explicit"
    allowed: np.ndarray  # (n, m) bool: may query i attend to key j
    title: str | dict[str, str] = ""  # one text, or language -> text ({en: ..., zh: ...})
    description: str | dict[str, str] = ""
    path: str | None = None  # the file it came from
    builtin: bool = False
    label: str = "<scenario>"  # how messages name it: the path as given, or "name (built-in)"
    heads: int = 1
    kv_heads: int = 0  # g: K and V have g heads, each shared by heads/g query heads (0: g = heads)
    bias: str = "none"  # "none" | "alibi": −m_h·|i − j| added to head h's scores
    window: int | None = None  # mask: {window: w}: the keys a query sees, including itself
    window_causal: bool = True  # the window looks back only (0 ≤ i − j < w), else |i − j| < w
    W_O: np.ndarray | None = None  # (h·d_v, d_model)
    source: Sequence | None = None  # keys and values come from here (cross-attention)
    score: str = "dot"  # "dot" | "additive"
    w_a: np.ndarray | None = None  # (d_k,) for additive scores
    qk_norm: bool = False
    qk_scale: float = 1.0
    focus: int | None = None  # the query row whose cells the walk works through (0-based)
    tiles: int | None = None  # B: add the tiled (online) softmax, keys B at a time (layer/tiled.py)
    dimensions: dict = field(default_factory=dict)  # "d_model" | "d_k" | "d_v" -> {lang: names}
    notes: dict = field(default_factory=dict)  # stage key -> what to notice there (text or {lang: text})
    rope: Rope | None = None  # positional: rope: its base and pairing (layer/rope.py)
    lines: dict = field(default_factory=dict)  # field ("tokens", "source.tokens") -> its line in the file
    # A real model's layer (`attnwalk model`; never from a file): the projections' biases and
    # the models.data.ModelLayer the extra stages read (embeddings, LayerNorms, residual)
    b_Q: np.ndarray | None = None  # (h·d_k,)
    b_K: np.ndarray | None = None  # (h·d_k,)
    b_V: np.ndarray | None = None  # (h·d_v,)
    b_O: np.ndarray | None = None  # (d_model,)
    model: object | None = None  # models.data.ModelLayer

    def bias_after(self, weight: str) -> np.ndarray | None:
        """The bias added after `weight` ("W_Q" -> b_Q), or None."""
        return getattr(self, "b_" + weight[2:], None)

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.main.tokens

    @property
    def key_tokens(self) -> tuple[str, ...]:
        """The tokens the keys and values belong to: the source's, or the sequence's own."""
        return (self.source or self.main).tokens

    @property
    def n(self) -> int:
        return self.main.n

    @property
    def m(self) -> int:
        return (self.source or self.main).n

    @property
    def d_model(self) -> int:
        return self.main.d_model

    @property
    def d_k(self) -> int:
        """Width of one head's queries and keys."""
        return self.W_Q.shape[1] // self.heads

    @property
    def d_v(self) -> int:
        return self.W_V.shape[1] // self.groups

    @property
    def groups(self) -> int:
        """g, the number of K/V heads: heads (ordinary multi-head), fewer with GQA, 1 with MQA."""
        return self.kv_heads or self.heads

    def kv_head(self, head: int) -> int:
        """The K/V head query head `head` reads (0-based): heads/g consecutive query heads share one."""
        from attnwalk.layer.gqa import kv_head_of

        return kv_head_of(self.heads, self.groups)[head]

    @property
    def masked(self) -> bool:
        return self.mask_kind != "none"

    def dimension_names(self, dim: str, lang: str) -> tuple[str, ...] | None:
        """The names the scenario gives the columns of `dim` ("d_model", "d_k", "d_v") in `lang`
        (else in the language it gives), or None."""
        names = self.dimensions.get(dim)
        return None if names is None else lesson.in_language(names, lang)

    def overflow_where(self, stage: str) -> str:
        """`file:line: field` of the input to make smaller when `stage` overflows float64 (the
        largest of those it is made from; blame.py), else the file alone."""
        from attnwalk.scenario.blame import overflow_where

        return overflow_where(self, stage)

    @property
    def scorer(self):  # -> layer.scores.Score
        """How this scenario's queries and keys make a score (dot or additive)."""
        return SCORES[self.score]


def load_scenario(ref: str | Path) -> Scenario:
    """Load a built-in scenario by name, or a scenario file by path."""
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
                              default_name=path.stem, path=str(path), builtin=builtin is not None)


def _from_stdin() -> Scenario:
    import sys

    if sys.stdin is None or sys.stdin.isatty():
        raise ScenarioError("- reads the scenario from stdin, but stdin is a terminal; pipe a file "
                            "in: cat my.yaml | attnwalk run -", file="-")
    text = read_text(Path("/dev/stdin"), "<stdin>")
    return scenario_from_text(text, "<stdin>", default_name="stdin")


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


def _validated(text: str, file: str, default_name: str, path: str | None,
               builtin: bool) -> Scenario:
    f = Fields(file, str(Path(path).parent) if path else None)
    root = parse(text, file)
    top = f.mapping(root, "", KEYS, REQUIRED)

    name = f.text(top["name"], "name") if "name" in top else default_name
    title = f.localized(top["title"], "title") if "title" in top else ""
    description = f.localized(top["description"], "description") if "description" in top else ""

    main = _sequence(f, top, "")
    source = None
    if "source" in top:
        src = f.mapping(top["source"], "source", SOURCE_KEYS, ("tokens", "embeddings"))
        source = _sequence(f, src, "source.")
        if source.d_model != main.d_model:
            raise f.error("source.embeddings", src["embeddings"],
                          f"source.embeddings has {source.d_model} columns, but the main "
                          f"sequence's d_model is {main.d_model}; both must share d_model")

    heads = f.integer(top["heads"], "heads", minimum=1) if "heads" in top else 1
    kv_heads = _kv_heads(f, top, heads)
    groups = kv_heads or heads
    W_Q = _weights(f, top, "W_Q", main.d_model)
    W_K = _weights(f, top, "W_K", main.d_model)
    W_V = _weights(f, top, "W_V", main.d_model)
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
    _check_cost(f, root, main, source, heads, W_Q, heads * (W_V.shape[1] // groups))
    W_O = None
    if "W_O" in top:
        W_O = f.matrix(top["W_O"], "W_O")
        concat = heads * (W_V.shape[1] // groups)  # every query head's Z, d_v wide
        if W_O.shape != (concat, main.d_model):
            raise f.error("W_O", top["W_O"], f"W_O is {_shape(W_O)}, but it must be "
                          f"(h·d_v) × d_model = {concat} × {main.d_model}")

    score = f.choice(top["score"], "score", SCORES) if "score" in top else "dot"
    w_a = None
    if score == "additive":
        if "w_a" not in top:
            raise f.error("w_a", top["score"], "w_a is missing: score: additive needs w_a, a list "
                          "of d_k numbers")
        w_a = f.vector(top["w_a"], "w_a")
        d_k = W_Q.shape[1] // heads
        if w_a.shape[0] != d_k:
            raise f.error("w_a", top["w_a"], f"w_a has {w_a.shape[0]} numbers, but d_k "
                          f"(per head) is {d_k}")
    elif "w_a" in top:
        raise f.error("w_a", top["w_a"], "w_a is only used with score: additive; remove it, or "
                      "add score: additive")
    qk_norm = f.boolean(top["qk_norm"], "qk_norm") if "qk_norm" in top else False
    qk_scale = 1.0
    if "qk_scale" in top:
        if not qk_norm:
            raise f.error("qk_scale", top["qk_scale"], "qk_scale is only used with qk_norm: true; "
                          "remove it, or add qk_norm: true")
        qk_scale = f.number(top["qk_scale"], "qk_scale")

    focus = _focus(f, top["focus"], main.tokens) if "focus" in top else None
    tiles = f.integer(top["tiles"], "tiles", minimum=1) if "tiles" in top else None  # B keys a block
    dimensions = notes = {}
    if "dimensions" in top:
        widths = {"d_model": main.d_model, "d_k": W_Q.shape[1] // heads, "d_v": W_V.shape[1] // groups}
        dimensions = lesson.dimension_names(f, top["dimensions"], widths)
    if "notes" in top:
        from attnwalk.layer.stages import MODEL_ONLY, STAGES, stage_by_name  # the layer's to define

        stages = tuple(s for s in STAGES if s.key not in MODEL_ONLY)  # a real layer's: not in a file
        notes = lesson.stage_notes(f, top["notes"],
                                   lambda name: getattr(stage_by_name(name, stages), "key", None),
                                   ", ".join(s.key for s in stages))
    m = source.n if source else main.n
    mask_kind, allowed, window, window_causal = _mask(f, top, main, m, source is not None)
    bias = _bias(f, top, source is not None)
    rope = _rope(f, top, main, source, W_Q.shape[1] // heads, score)

    scenario = Scenario(
        name=name, main=main, W_Q=W_Q, W_K=W_K, W_V=W_V, mask_kind=mask_kind, allowed=allowed,
        title=title, description=description, path=path, builtin=builtin, label=file, heads=heads,
        kv_heads=kv_heads, bias=bias, window=window, window_causal=window_causal, W_O=W_O,
        source=source, score=score, w_a=w_a, qk_norm=qk_norm, qk_scale=qk_scale,
        focus=focus, tiles=tiles, dimensions=dimensions, notes=notes, rope=rope, lines=_lines(root))
    for value in (W_Q, W_K, W_V, W_O, w_a, allowed, main.E, main.P_given):
        if value is not None:
            value.flags.writeable = False
    return scenario


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


def _sequence(f: Fields, top: dict[str, Node], prefix: str) -> Sequence:
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
                raise f.error(f"{prefix}positional", node, f"{prefix}positional is {_shape(P)}, but "
                              f"it must match the embeddings: n × d_model = {_shape(E)}")
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


def _rope(f: Fields, top: dict[str, Node], main: Sequence, source: Sequence | None, d_k: int,
          score: str) -> Rope | None:
    """`positional: rope` with `rope: {base: 10000, pairing: half | interleaved}` (both optional), or
    None; refused where the rotation has no meaning here: an odd d_k (dimensions turn in pairs), a
    source (two sequences share no position axis) and additive scores (no dot product)."""
    src = top["source"].value if source is not None else {}
    if source is not None and source.positional == "rope":
        raise f.error("source.positional", src["positional"], "rope cannot be the source's "
                      "positional encoding: RoPE rotates a sequence's queries and keys together, and "
                      "a source has keys only; give it none or sinusoidal")
    node = top.get("rope")
    if main.positional != "rope":
        if node is not None:
            raise f.error("rope", node, "rope is only used with positional: rope; remove it, or "
                          "set positional: rope")
        return None
    where = top["positional"]
    if source is not None:
        raise f.error("positional", where, "positional: rope cannot be used with a source: RoPE "
                      "makes a score depend on the offset between the query's and the key's "
                      "positions, and a source's positions are not on the same axis as the "
                      "queries' (models that use RoPE rotate only in self-attention); remove "
                      "source, or use positional: sinusoidal")
    if score != "dot":
        raise f.error("positional", where, f"positional: rope needs dot-product scores: it turns q "
                      f"and k so that q · k depends on their offset, and score: {score} has no "
                      "q · k; remove score, or use positional: sinusoidal")
    if d_k % 2:
        raise f.error("positional", where, f"positional: rope turns the queries' and keys' "
                      f"dimensions in pairs, so d_k (per head) must be even, but it is {d_k}; give "
                      "W_Q and W_K an even number of columns per head")
    rope = Rope()
    if node is not None:
        fields = f.mapping(node, "rope", ("base", "pairing"))
        if "base" in fields:
            base = f.number(fields["base"], "rope.base")
            if base <= 1:  # θ_i = base^(−2i/d_k) must fall with i: each later pair turns more slowly
                raise f.error("rope.base", fields["base"], f"rope.base must be greater than 1, got "
                              f"{base:g} (Llama 2 uses 10000, Llama 3 500000)")
            rope = rope._replace(base=base)
        if "pairing" in fields:
            rope = rope._replace(pairing=f.choice(fields["pairing"], "rope.pairing", PAIRINGS))
    return rope


def _weights(f: Fields, top: dict[str, Node], key: str, d_model: int) -> np.ndarray:
    W = f.matrix(top[key], key)
    if W.shape[0] != d_model:
        raise f.error(key, top[key], f"{key} has {W.shape[0]} rows, but d_model is {d_model} "
                      f"(embeddings have {d_model} columns)")
    return W


def _kv_heads(f: Fields, top: dict[str, Node], heads: int) -> int:
    """`kv_heads: g` (grouped-query attention; 1 is multi-query): g must divide heads. 0 when absent."""
    if "kv_heads" not in top:
        return 0
    g = f.integer(top["kv_heads"], "kv_heads", minimum=1)
    if g > heads or heads % g:
        raise f.error("kv_heads", top["kv_heads"], f"kv_heads is {whole(g)}, but it must divide "
                      f"heads ({heads}) so that each K/V head serves the same number of query heads"
                      f"; choose one of {', '.join(str(d) for d in range(1, heads + 1) if heads % d == 0)}")
    return g


def _bias(f: Fields, top: dict[str, Node], cross: bool) -> str:
    if "bias" not in top:
        return "none"
    bias = f.choice(top["bias"], "bias", BIASES)
    if bias == "alibi" and cross:
        raise f.error("bias", top["bias"], "bias: alibi needs keys from the same sequence: it "
                      "penalises the distance |i − j| between a query's position and a key's, and a "
                      "source's positions are another sequence's; remove bias or the source")
    return bias


def _band(f: Fields, node: Node, n: int, cross: bool) -> tuple[np.ndarray, int | None, bool]:
    """mask: {causal: true|false, window: w}: the allowed keys, the window (None without) and
    whether it looks back only."""
    spec = f.mapping(node, "mask", MASK_KEYS, ())
    is_causal = f.boolean(spec["causal"], "mask.causal") if "causal" in spec else False
    width = f.integer(spec["window"], "mask.window", minimum=1) if "window" in spec else None
    if cross:
        raise f.error("mask", node, "mask: {causal, window} needs keys from the same sequence; "
                      "with a source the keys are another sequence (give an explicit n × m mask instead)")
    if width is None:
        if not is_causal:
            raise f.error("mask", node, "mask: {causal: false} without a window masks nothing; "
                          "write mask: none, or give window: w")
        return masks.causal(n), None, True
    return masks.window(n, width, is_causal), width, is_causal


def _mask(f: Fields, top: dict[str, Node], main: Sequence, m: int,
          cross: bool) -> tuple[str, np.ndarray, int | None, bool]:
    n = main.n
    node = top.get("mask")
    if node is None:
        return "none", np.ones((n, m), dtype=bool), None, True
    if isinstance(node.value, dict) and any(key in node.value for key in MASK_KEYS):
        allowed, width, is_causal = _band(f, node, n, cross)
        return ("causal" if width is None else "window"), allowed, width, is_causal
    if isinstance(node.value, (list, dict)):  # rows, or {file: mask.npy}
        allowed = f.bool_matrix(node, "mask")
        if allowed.shape != (n, m):
            want = "n × m (queries × source keys)" if cross else "n × n"
            raise f.error("mask", node, f"mask is {_shape(allowed)}, but it must be {want} = "
                          f"{n} × {m}")
        kind = "explicit"
    else:
        kind = f.choice(node, "mask", MASKS)
        if kind == "none":
            return "none", np.ones((n, m), dtype=bool), None, True
        if cross:
            raise f.error("mask", node, "mask: causal needs keys from the same sequence; with a "
                          "source the keys are another sequence with no 'future' to hide "
                          "(give an explicit n × m mask instead)")
        allowed = masks.causal(n)
    for i, row in enumerate(allowed):
        if not row.any():
            raise f.error(indexed("mask", i), node.value[i] if isinstance(node.value, list) else node,
                          f"{indexed('mask', i)} ({quoted(main.tokens[i], 20)}) allows no key: every query "
                          "must be allowed to attend to at least one key (set at least one "
                          "entry of the row to true)")
    return kind, allowed, None, True


def _shape(a: np.ndarray) -> str:
    return " × ".join(str(s) for s in a.shape)
