"""The layer as a graph of named matrices.

Each Stage names the matrices it is computed from: `reads`, taken row by row (row i of Q is made
from row i of X), and `keys`, taken whole, one row per key (QKᵀ's row i reads every row of K).
A name is an earlier stage or a parameter of the scenario (W_Q, b_Q, a norm's γ). A layer is an
ordered tuple of stages, the base layer's (stages.py) with each of its scenario's features'
stages inserted and rerouted (attnwalk/features/); evaluating the walk is evaluating that graph.

Because every stage says what it reads and along which axis, the same graph is evaluated two ways:
whole, every row at once (walk.py), and one row at a time with the key-side inputs cached
(kvcache.py: decoding). A stage's compute takes a Context and its inputs in the order declared:

    Stage("QK^T", reads=("Q",), keys=("K",), compute=lambda ctx, Q, K: Q @ K.T)  # (n, d_k) @ (d_k, m)

Stages before the first per-head one are computed once; each head computes the per-head stages
from its own column block of every split matrix (Q, K, V); a stage that reads a per-head stage
from every head (`across`: concat) comes after them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from attnwalk.layer.modes import Mode
    from attnwalk.scenario.scenario import Scenario

# What a stage's matrix holds, which decides its colours and how a cell is explained.
SIGNED = "signed"  # any real numbers: diverging colours
WEIGHTS = "weights"  # rows of a distribution: sequential colours
MASKED = "masked"  # scores with -inf where the mask forbids: grey cells
TOKENS = "tokens"  # the token list itself, no matrix

Mats = Mapping[str, np.ndarray]


def _always(mode: Mode) -> bool:
    return True


def _no_variants(scn: Scenario, mode: Mode) -> tuple[str, ...]:
    return ()


def _no_notes(scn: Scenario, mode: Mode) -> list[str]:
    return []


class Backward(NamedTuple):
    """A stage's backward pass, kept beside its forward (as micrograd keeps `_backward` beside each
    op): how the gradient of its output becomes the gradients of its inputs, and how that is
    written and worked out on the backward walk's screens (layer/backward.py, layer/gradwalk.py).

    `grad(ctx, dOut, out, *inputs)` returns one gradient per input, in the order the stage
    declares them (reads, keys, params), each the input's shape; None where no gradient flows
    into that input (a fixed position table, ALiBi's bias, the scores under uniform weights).
    `terms(scn, mode)` gives, per input, what the stage adds to that input's gradient as a
    formula ("{d} · {1}ᵀ": {d} is ∂L/∂ of this stage, {0}, {1}, … its inputs' symbols, {out} its
    own), None where `grad` gives none. `cell(c, stage, index)` works out one cell of input
    `index`'s gradient as this stage contributes it, with the walk's numbers, and returns the
    lines and the value they arrive at (layer/gradcells.py; gradscreens.py sums them). `symbols`
    prints a parameter whose key is not how a formula writes it (norm_gamma: γ)."""

    grad: Callable[..., tuple]
    terms: Callable[[Scenario, Mode], tuple[str | None, ...]]
    cell: Callable[..., tuple] | None = None
    symbols: Mapping[str, str] = MappingProxyType({})
    # a 1-D parameter's named columns (sinks: h), or "rows × cols" of a matrix that is not the
    # stage's weight (a tied unembedding's table: vocab × d_model)
    param_cols: Mapping[str, str] = MappingProxyType({})


def fixed_terms(*terms: str | None) -> Callable[[Scenario, Mode], tuple[str | None, ...]]:
    """Backward terms that are the same in every scenario and mode."""
    return lambda scn, mode: terms


class Stage(NamedTuple):  # not a frozen dataclass, whose definition costs every start ~0.7 ms more
    """One stage of the layer, as every command names, computes, shows and explains it."""

    key: str  # the name in exports, in `explain` and in the text files: "QK^T"
    symbol: str  # how it is printed: "QKᵀ"
    formula: str  # as the lessons write it; `formula_for` varies it per scenario and mode
    rows: str  # named dimension of the rows: "n" (queries) or "m" (keys)
    cols: str  # named dimension of the columns: "d_model", "d_k", "d_v", "m" (keys), "h·d_v"
    compute: Callable[..., np.ndarray] | None  # compute(ctx, *reads, *keys, *params); None: the tokens
    reads: tuple[str, ...] = ()  # the stages its row i is made from: row i of each
    keys: tuple[str, ...] = ()  # the stages it reads whole, a row per key (K, V): what decoding caches
    params: tuple[str, ...] = ()  # the learned parameters it is made with (W_Q, b_Q, a norm's γ)
    kind: str = SIGNED
    per_head: bool = False  # computed once per head in multi-head scenarios
    split: bool = False  # its columns are h blocks, one per head (Q, K, V: each head reads its own; concat)
    shared: bool = False  # split into g K/V heads, each read by heads/g query heads (K, V; kv_heads)
    across: bool = False  # reads its per-head inputs from every head, as a list (concat)
    shown: bool = True  # walked, explained and exported; a hidden stage is only computed
    formula_for: Callable[[str, Scenario, Mode, Stage], str] | None = None  # (base, scn, mode, stage) -> formula
    variants: Callable[[Scenario, Mode], tuple[str, ...]] = _no_variants  # text variants, most specific first
    notes: Callable[[Scenario, Mode], list[str]] = _no_notes  # text keys of what this scenario adds
    worked: Callable[[Any], list] | None = None  # one cell's arithmetic (a layer.cells.Cell)
    overflow: str = ""  # the fix to suggest when the stage overflows float64 ("" = not checked)
    field: str | None = None  # a stage made from the scenario alone: the field its numbers are (E: embeddings)
    weight: str | None = None  # the learned matrix that makes it (a parameter): "W_Q"
    weight_rows: str = "d_model"  # the named dimension of that matrix's rows (its columns: cols)
    weight_exported: bool = True  # its weight in the JSON export (a real model's FFN: too big to write)
    exported: bool = True  # in `export --format json` (S+M is S with −∞: the JSON keeps S and mask)
    aliases: tuple[str, ...] = ()  # other spellings a learner may type, lower case
    in_mode: Callable[[Mode], bool] = _always  # is it defined in this mode? (tiled: not in hard)
    step: Callable[..., str] | None = None  # step(scn, mode, *reads' rows): its row t as decoding writes it
    backward: Backward | None = None  # its gradients (None: the backward pass cannot go through it)
    learned: tuple[str, ...] = ()  # parameters besides `weight` that training moves (attention sinks)
    panel: str = ""  # a panel its screen shows beside the matrix, by name: "cost", "tiles", "glance" (render/)
    # a softmax's logit besides the keys, for head h (an attention sink): it takes part in the
    # normaliser but is no key's, so a row's weights sum to 1 minus its share (cells, tiles)
    extra_logit: Callable[[Scenario, int], float] | None = None
    block: int = 0  # the block it belongs to, from 0: several blocks over the same tokens (features/blocks.py)
    base: str = ""  # a later block's copy: the key of block 1's stage it repeats, whose text it has

    @property
    def text_key(self) -> str:
        """The key its words are filed under in the text files: block 1's stage's for a copy."""
        return self.base or self.key

    @property
    def square(self) -> bool:
        """True when both axes are tokens (query × key), so columns are labelled by token."""
        return self.cols == "m"

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every name it is computed from, in the order compute takes them: the stages it reads
        row by row, those it reads whole, then its parameters."""
        return self.reads + self.keys + self.params

    def of(self, scn: Scenario | None) -> Stage:
        """This stage as `scn`'s layer has it (its features may have changed its reads and text),
        else as it is."""
        if scn is not None:
            for stage in scn.graph:
                if stage.key == self.key:
                    return stage
        return self

    def text_variants(self, scn: Scenario | None = None, mode: Mode | str | None = None) -> tuple[str, ...]:
        """The names of the text variants that fit `scn` under `mode`, most specific first: the
        text files may give a variant its own fields ([stage."S".unscaled] title, what, …)."""
        from attnwalk.layer.modes import mode_named

        return () if scn is None else self.of(scn).variants(scn, mode_named(mode or "scaled"))

    def notes_in(self, scn: Scenario, mode: Mode | str | None = None) -> list[str]:
        """The text keys of what `scn` adds at this stage under `mode`."""
        from attnwalk.layer.modes import mode_named

        return self.of(scn).notes(scn, mode_named(mode or "scaled"))

    def formula_in(self, scn: Scenario | None = None, mode: Mode | str | None = None) -> str:
        """The formula as `scn` computes it under `mode`: every screen, explanation and export
        that prints a formula reads this. Formulas are math only, the same in every language."""
        from attnwalk.layer.modes import mode_named

        stage = self.of(scn)
        base = stage.equation(scn)
        if scn is None or stage.formula_for is None:
            return base
        return stage.formula_for(base, scn, mode_named(mode or "scaled"), stage)

    def equation(self, scn: Scenario | None = None) -> str:
        """The formula with $0, $1, … written as the symbols of the stages it reads, so that what
        Q reads is said once, in `reads` (Q = X · W_Q; Q = LN(X) · W_Q behind a norm)."""
        if "$" not in self.formula:
            return self.formula
        out = self.formula
        names = self.reads + self.keys
        for i in reversed(range(len(names))):  # $10 before $1
            symbol = symbol_of(names[i], scn)
            out = out.replace(f"${i}", symbol if out.strip() == f"${i}" else grouped(symbol))
        return out


def grouped(symbol: str) -> str:
    """A stage's symbol as an operand inside a formula: a sum in brackets, (S + B) + M; one already
    bracketed whole (a later block's (S + M)⁽²⁾) as it is."""
    if not any(op in symbol for op in (" + ", " − ")):
        return symbol
    return symbol if bracketed_whole(symbol) else f"({symbol})"


def bracketed_whole(symbol: str) -> bool:
    """Is `symbol` one bracket from its first character to its last, a block's mark aside
    ((S + M)⁽²⁾, or (S + M)^(2) in ASCII)?"""
    import re

    symbol = re.sub(r"(⁽[⁰¹²³⁴⁵⁶⁷⁸⁹]+⁾|\^\(\d+\))$", "", symbol)
    if not (symbol.startswith("(") and symbol.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(symbol):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(symbol) - 1:
            return False
    return True


def symbol_of(name: str, scn: Scenario | None = None) -> str:
    """How stage `name` is printed in a formula: its symbol in the scenario's graph."""
    if scn is not None:
        for stage in scn.graph:
            if stage.key == name:
                return stage.symbol
        return param_symbol(scn.graph, name)  # a parameter: W_Q, a later block's W_Q⁽²⁾
    return name


Graph = tuple[Stage, ...]  # a layer's stages in the order they are shown; reads name earlier ones


# -- building a graph: what a feature does to the base layer ---------------------------------------


def index(stages: list[Stage] | Graph, key: str) -> int:
    for i, stage in enumerate(stages):
        if stage.key == key:
            return i
    raise KeyError(key)


def get(stages: Iterable[Stage], key: str) -> Stage:
    """The stage `key` of `stages` (KeyError when there is none)."""
    for stage in stages:
        if stage.key == key:
            return stage
    raise KeyError(key)


def has(stages: Iterable[Stage], key: str) -> bool:
    return any(stage.key == key for stage in stages)


def insert_after(stages: list[Stage], key: str, *new: Stage) -> None:
    """Put `new` right after stage `key`."""
    at = index(stages, key) + 1
    stages[at:at] = new


def insert_before(stages: list[Stage], key: str, *new: Stage) -> None:
    at = index(stages, key)
    stages[at:at] = new


def replace(stages: list[Stage], key: str, **changes: Any) -> None:
    """Stage `key` with some of its fields changed (its compute, reads, formula, …)."""
    at = index(stages, key)
    stages[at] = stages[at]._replace(**changes)


def reroute(stages: list[Stage], old: str, new: str, readers: Iterable[str] | None = None) -> None:
    """Every stage (of `readers`, else every stage but `new` itself) that reads `old` reads `new`
    instead: a stage put between a matrix and those that read it (X → LN → Q, K, V)."""
    wanted = None if readers is None else set(readers)
    for i, stage in enumerate(stages):
        if stage.key == new or (wanted is not None and stage.key not in wanted):
            continue
        if old in stage.inputs:
            stages[i] = stage._replace(reads=tuple(new if r == old else r for r in stage.reads),
                                       keys=tuple(new if r == old else r for r in stage.keys))


def interpose(stages: list[Stage], after: str, stage: Stage, readers: Iterable[str] | None = None) -> None:
    """Insert `stage` after `after` and make the stages that read `after` read it instead."""
    insert_after(stages, after, stage)
    reroute(stages, after, stage.key, readers)


def amend(stages: list[Stage], key: str, *, variants: Callable | None = None,
          notes: Callable | None = None, formula: Callable | None = None) -> None:
    """Say what a feature changes in stage `key`'s text: `variants(scn, mode, names)` and
    `notes(scn, mode, keys)` are given what the stage (and the features before) say and return
    them changed (a variant in front is tried first); `formula(text, scn, mode)` rewrites the
    formula as written so far."""
    stage = stages[index(stages, key)]
    changes: dict[str, Any] = {}
    if variants is not None:
        before = stage.variants
        changes["variants"] = lambda scn, mode: tuple(variants(scn, mode, before(scn, mode)))
    if notes is not None:
        mine = stage.notes
        changes["notes"] = lambda scn, mode: list(notes(scn, mode, mine(scn, mode)))
    if formula is not None:
        inner = stage.formula_for
        changes["formula_for"] = lambda base, scn, mode, st: formula(
            inner(base, scn, mode, st) if inner is not None else base, scn, mode)
    replace(stages, key, **changes)


# -- what it is evaluated with ---------------------------------------------------------------------


@dataclass(eq=False)
class Context:
    """What a stage computes from besides its inputs: the scenario, the mode, --amplify, which
    rows are being computed, and (for stages that read every head) the heads so far.

    The whole walk computes every row: `rows` and `key_rows` are 0 … n − 1 and 0 … m − 1. Decoding
    computes one token's row: both are [t], and `keys` is 0 … t, the keys in the cache."""

    scn: Scenario
    mode: Mode
    amplify: float
    rows: np.ndarray  # positions (0-based) of the query rows computed
    key_rows: np.ndarray  # positions of the key-side rows computed (a source's in cross-attention)
    keys: np.ndarray  # positions of every key the rows attend to
    head: int = 0  # the head whose per-head stages are being computed
    here: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # the current stage's rows

    @cached_property
    def allowed(self) -> np.ndarray:
        """The mask for these rows and keys: (rows, keys) bool. Taken once: the rows and keys are
        fixed for a context, and each head's S + M, A (and their backward) read it (36 copies of
        a 512 × 512 mask were a quarter of m's walk in another mode)."""
        return self.scn.allowed[np.ix_(self.rows, self.keys)]

    @property
    def scale(self) -> float:
        """What S divides QKᵀ by in this mode, for this score kind: √d_k or 1."""
        return self.mode.divisor(self.scn.scorer, self.scn.d_k)

    def seen(self, S: np.ndarray) -> np.ndarray:
        """The scores the weights are made from: × --amplify, −∞ where the mask forbids."""
        from attnwalk.layer import ops

        if self.amplify != 1.0:
            S = ops.finite(S * self.amplify, "S", "use a smaller --amplify")
        return ops.masked(S, self.allowed)


def trained(stages: Iterable[Stage]) -> tuple[str, ...]:
    """The parameters gradient descent moves, in graph order: each stage's learned matrix (W_Q,
    W_K, W_V, W_O) and what a feature's stage says it learns; a lesson's other parameters (a norm's
    γ, w_a, a real model's biases) stay as given."""
    names: list[str] = []
    for stage in stages:
        for name in ((stage.weight,) if stage.weight else ()) + stage.learned:
            if name in stage.params and name not in names:
                names.append(name)
    return tuple(names)


def param_symbol(stages: Iterable[Stage], name: str) -> str:
    """How parameter `name` is written: as the stage that reads it writes it (a norm's γ, a later
    block's W_Q⁽²⁾), else its name."""
    for stage in stages:
        if name in stage.params and stage.backward is not None:
            return stage.backward.symbols.get(name, name)
    return name


def head_dependent(stages: Graph) -> set[str]:
    """The keys of the per-head stages and of every stage made from one."""
    found = {s.key for s in stages if s.per_head}
    grew = True
    while grew:  # a stage shown before the heads may be made from them (a model's every-head glance)
        more = {s.key for s in stages if any(name in found for name in s.inputs)} - found
        found |= more
        grew = bool(more)
    return found


def blocks(stages: Graph) -> list[Graph]:
    """The stages of each block, the blocks in the order they first appear (one block unless
    features/blocks.py made more; the backward walk's screens meet the last block first): each
    block is evaluated, or walked, as one layer, before its heads, per head, after them."""
    order: dict[int, list[Stage]] = {}
    for stage in stages:
        order.setdefault(stage.block, []).append(stage)
    return [tuple(group) for group in order.values()]


def segments(stages: Graph) -> tuple[list[Stage], list[Stage], list[Stage]]:
    """The stages computed before the heads, the per-head ones, and those made from the heads'
    (of one block: `blocks` splits a layer of several)."""
    dependent = head_dependent(stages)
    before = [s for s in stages if s.key not in dependent]
    per_head = [s for s in stages if s.per_head]
    after = [s for s in stages if s.key in dependent and not s.per_head]
    return before, per_head, after


def needed(stages: Graph, goals: Iterable[str]) -> Graph:
    """The stages `goals` are made from (themselves included), in order."""
    wanted = set(goals)
    for stage in reversed(stages):
        if stage.key in wanted:
            wanted.update(stage.inputs)
    return tuple(s for s in stages if s.key in wanted)


def ancestors(stages: Graph, key: str, through: Callable[[Stage], bool] | None = None) -> list[str]:
    """Every name stage `key` is made from, nearest first, parameters included (not looking past
    a stage for which `through` is False)."""
    by_key = {s.key: s for s in stages}
    order: list[str] = []
    frontier = list(by_key[key].inputs) if key in by_key else []
    while frontier:
        name = frontier.pop(0)
        if name in order:
            continue
        order.append(name)
        if name in by_key and (through is None or through(by_key[name])):
            frontier.extend(by_key[name].inputs)
    return order


def block(M: np.ndarray, h: int, count: int) -> np.ndarray:
    """Block h of a matrix split into `count` column blocks: (rows, count·d) -> (rows, d)."""
    width = M.shape[1] // count
    return M[:, h * width:(h + 1) * width]


def head_block(stage: Stage, M: np.ndarray, head: int, scn: Scenario) -> np.ndarray:
    """The block of split stage `stage`'s matrix that query head `head` reads: its own (Q), or its
    group's K/V head's (K, V with kv_heads)."""
    if stage.shared:
        return block(M, scn.kv_head(head), scn.groups)
    return block(M, head, scn.heads)
