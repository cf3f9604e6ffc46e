"""Several blocks over the same tokens (`blocks:`), as a Transformer stacks its layers: block 2
reads block 1's output as its X, block 3 block 2's, and so on.

    blocks:
      - {W_Q: …, W_K: …, W_V: …, W_O: …}   # block 1: its weights (and its FFN's, its norm's γ …)
      - {W_Q: …, W_K: …, W_V: …, W_O: …}   # block 2: the same keys, its own numbers

Every block has the same shape and the same features (heads, mask, RoPE, the FFN's activation, the
norms' kind: settings stay at the top level); only the learned numbers differ, each block giving
the same keys as the first. Block 1's keys are read as if written at the top level (`lift`), so
every feature reads them as it reads a one-block layer's; block b ≥ 2's copy of a parameter P is
the parameter `P.b` (W_Q.2), read here with block 1's shape.

The graph gets block b's stages as copies of block 1's (`extend`): every stage made from X, each
reading its block's own inputs and parameters, under the key `KEY.b` and the symbol `KEY⁽ᵇ⁾`,
with block 1's text (Stage.base). A stage X⁽ᵇ⁾ = the block before's output starts each block.
The walk, the backward pass and training evaluate the graph block by block (layer/graph.blocks).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.layer import gradcells, roles
from attnwalk.layer.graph import SIGNED, Backward, Stage, fixed_terms, get
from attnwalk.numbering import shown
from attnwalk.reading.fields import kind, shape_text
from attnwalk.reading.yamltree import Node, indexed

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.graph import Context
    from attnwalk.layer.modes import Mode
    from attnwalk.reading.fields import Fields
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "blocks"
KEYS = ("blocks",)
STAGES: tuple = ()  # no stage of its own in block 1: later blocks are copies of its stages, and their X⁽ᵇ⁾
MAX_BLOCKS = 12  # a walk of 12 blocks is 12 layers' screens; more is a real model's job (`attnwalk model`)
INPUT = "X"  # what a block reads: block 1's X = E + P
ENTRY = "X_block"  # the text of a later block's X⁽ᵇ⁾ = the block before's output
CORE_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")  # read by the loader and features/output.py, not in params
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


class Blocks(NamedTuple):
    count: int  # how many blocks, 2 or more
    keys: tuple[str, ...]  # the parameters each block gives (block 1's keys)


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def count(scn: Scenario) -> int:
    """How many blocks `scn`'s layer has (1 without `blocks:`)."""
    setting = scn.setting(NAME)
    return 1 if setting is None else setting.count


def lift(f: Fields, root: Node) -> None:
    """Block 1's keys read as the top level's, before anything is read: `blocks[0]`'s mapping
    merged into the file's (a key in both is refused). Its lines stay its own."""
    top = root.value
    if not isinstance(top, dict) or "blocks" not in top:
        return
    node = top["blocks"]
    items = f.items(node, "blocks", "a list of blocks, each a mapping of its weights (W_Q: …)")
    if not items:
        raise f.error("blocks", node, "blocks is empty: give each block's weights, block 1's first")
    if len(items) > MAX_BLOCKS:
        raise f.error("blocks", node, f"there are {len(items)} blocks, more than the {MAX_BLOCKS} "
                      "a walk shows; for a real model's many layers use attnwalk model")
    first = _block(f, items[0], 0)
    for key, value in first.items():
        if key in top:
            raise f.error(key, top[key], f"{key} is given at the top level and in blocks[1]: a block's "
                          "weights go in its entry of blocks only")
        if key == "blocks":
            raise f.error(indexed("blocks", 0) + ".blocks", value, "a block cannot hold blocks")
        top[key] = value
        if root.keys is not None and items[0].keys:
            root.keys[key] = items[0].keys[key]


def _block(f: Fields, node: Node, b: int) -> dict[str, Node]:
    if not isinstance(node.value, dict):
        raise f.error(indexed("blocks", b), node, "expected a mapping of the block's weights "
                      f"(W_Q: …, W_K: …, W_V: …), got {kind(node.value, node)}")
    return node.value


def read(d: Draft) -> None:
    """Blocks 2 … N: each the same keys as block 1, each a parameter of block 1's shape."""
    f, top = d.f, d.top
    if "blocks" not in top:
        return
    items = f.items(top["blocks"], "blocks")
    if d.source is not None:
        raise f.error("blocks", top["blocks"], "several blocks over a source (cross-attention) are "
                      "not walked; remove source or blocks")
    first = _block(f, items[0], 0)
    shapes: dict[str, np.ndarray] = {}
    for key in first:
        value = getattr(d, key) if key in CORE_WEIGHTS else d.params.get(key)
        if value is None:
            raise f.error(f"{indexed('blocks', 0)}.{key}", first[key], f"{key} is not a block's "
                          "weight: settings (heads, norm, the FFN's activation, …) apply to every "
                          "block; move it to the top level")
        shapes[key] = value
    if d.W_O is None and d.heads * d.d_v != d.main.d_model:
        raise f.error("blocks", top["blocks"], f"the next block reads this block's output as its X, "
                      f"which must be d_model = {d.main.d_model} wide; the heads' Z side by side is "
                      f"{d.heads * d.d_v}: give each block a W_O")
    for b, item in enumerate(items[1:], start=1):
        mine = _block(f, item, b)
        for key in mine:
            if key not in shapes:
                raise f.error(f"{indexed('blocks', b)}.{key}", mine[key], f"block {shown(b)} gives "
                              f"{key}, which block 1 does not; every block gives the same keys "
                              f"({', '.join(shapes)})")
        for key, like in shapes.items():
            field = f"{indexed('blocks', b)}.{key}"
            if key not in mine:
                raise f.error(indexed("blocks", b), item, f"block {shown(b)} has no {key}; every block "
                              f"gives the same keys as block 1 ({', '.join(shapes)})")
            value = f.vector(mine[key], field) if np.ndim(like) == 1 else f.matrix(mine[key], field)
            if value.shape != np.shape(like):
                raise f.error(field, mine[key], f"{key} of block {shown(b)} is {shape_text(value)}, but "
                              f"block 1's is {shape_text(np.asarray(like))}: every block has the same shape")
            d.params[f"{key}.{shown(b)}"] = value
    d.settings[NAME] = Blocks(len(items), tuple(shapes))


# -- the graph: block b's stages, copies of block 1's ----------------------------------------------


def superscript(symbol: str, b: int) -> str:
    """`symbol` of block b: A⁽²⁾, (S + M)⁽²⁾."""
    mark = f"⁽{str(b).translate(_SUPERSCRIPT)}⁾"
    return f"({symbol}){mark}" if " " in symbol else f"{symbol}{mark}"


def _entry(ctx: Context, Y: np.ndarray) -> np.ndarray:
    return np.array(Y, dtype=np.float64)  # (n, d_model): the block before's output, as it is


def _entry_grad(ctx: Context, dX: np.ndarray, X: np.ndarray, Y: np.ndarray) -> tuple:
    return (dX,)


def _entry_cell(c: Cell) -> list:
    """X⁽²⁾[bank, 3] = Y[bank, 3] = 0.41: the number itself, passed on."""
    name = c.stage.reads[0]
    at = f"[{c.rows[c.row]}, {c.cols[c.col]}]"
    return [f"{c.sym()}{at} = {c.sym(name)}{at} = {c.num(c.value)}",
            c.prose(c.say("blocks.entry_cell", block=b_of(c.stage), before=b_of(c.stage) - 1))]


def b_of(stage: Stage) -> int:
    """The block a stage belongs to, counted from 1."""
    return shown(stage.block)


def _entry_stage(b: int, reads: str) -> Stage:
    return Stage(f"{INPUT}.{b}", superscript(INPUT, b), f"{superscript(INPUT, b)} = $0", "n", "d_model",
                 _entry, reads=(reads,), kind=SIGNED, worked=_entry_cell,
                 aliases=_aliases(Stage(INPUT, INPUT, "", "n", "d_model", None), b),
                 backward=Backward(_entry_grad, fixed_terms("{d}"), gradcells.passed), block=b - 1, base=ENTRY)


def made_from_input(stages: list[Stage]) -> list[Stage]:
    """Block 1's stages that a next block repeats: every stage made from X, in order."""
    made = {INPUT}
    out = []
    for stage in stages:
        if any(name in made for name in stage.inputs):
            made.add(stage.key)
            out.append(stage)
    return out


def extend(stages: list[Stage], scn: Scenario) -> None:
    setting: Blocks = scn.setting(NAME)
    first = made_from_input(stages)
    mine = set(setting.keys)
    last = previous = roles.block_output(tuple(stages)).key  # block 1's output: what block 2 reads
    end = stages.index(get(stages, last)) + 1
    tail = stages[end:]  # after the block's output (none today): kept after the last block
    del stages[end:]
    for b in range(2, setting.count + 1):
        renamed = {s.key: f"{s.key}.{b}" for s in first}
        renamed[INPUT] = f"{INPUT}.{b}"
        stages.append(_entry_stage(b, previous))
        symbols = {s.symbol: superscript(s.symbol, b) for s in first if " " not in s.symbol}
        symbols["X"] = superscript(INPUT, b)
        for stage in first:
            stages.append(_copy(stage, b, renamed, mine, symbols))
        previous = renamed[last]
    stages.extend(tail)


def _copy(stage: Stage, b: int, renamed: dict[str, str], mine: set[str], symbols: dict[str, str]) -> Stage:
    """Block b's copy of block 1's `stage`: its key, symbol, inputs and parameters block b's."""
    def param(name: str) -> str:
        return f"{name}.{b}" if name in mine else name

    words = _renamer(b, symbols, tuple(p for p in stage.params if p in mine))
    return stage._replace(
        key=renamed[stage.key], symbol=superscript(stage.symbol, b),
        reads=tuple(renamed.get(r, r) for r in stage.reads),
        keys=tuple(renamed.get(k, k) for k in stage.keys),
        params=tuple(param(p) for p in stage.params),
        weight=param(stage.weight) if stage.weight else None,
        learned=tuple(param(p) for p in stage.learned),
        aliases=_aliases(stage, b),
        formula_for=_formula(stage.formula_for, stage.symbol, words), block=b - 1, base=stage.text_key,
        worked=_worked(stage.worked, words) if stage.worked else None,
        backward=_renamed_backward(stage.backward, b, mine) if stage.backward else None)


def _aliases(stage: Stage, b: int) -> tuple[str, ...]:
    """What a learner may type for block b's copy (g in the walk, explain): A.2, A2, A 2, A^(2),
    A(2), 2.A, A⁽²⁾, for each spelling of block 1's stage."""
    names = {stage.key.lower(), stage.symbol.lower().replace(" ", ""), *stage.aliases}
    mark = f"⁽{str(b).translate(_SUPERSCRIPT)}⁾"
    out: list[str] = []
    for name in sorted(names):
        out += [f"{name}.{b}", f"{name}^({b})", f"{name}({b})", f"{b}.{name}", f"{name}{mark}"]
        if not name[-1:].isdigit():
            out.append(f"{name}{b}")
    return tuple(out)


def _renamer(b: int, symbols: dict[str, str], params: tuple[str, ...]):
    """Block 1's text as block b writes it: the block's stages' symbols (Z = A · V), its
    parameters' (W_Q, or W_Q.2 as a formula names the parameter read), their vectors' (q.2_i)."""
    words = sorted({*symbols, *params}, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w⁽])(" + "|".join(re.escape(w) for w in words)
                         + rf")(?:\.{b})?(?![A-Za-z0-9⁽⁾ᵀ]|\^\()")
    vectors = re.compile(rf"(?<![\w])([a-z]+)\.{b}(?![0-9])")

    def renamed(text: str) -> str:
        text = vectors.sub(lambda m: superscript(m.group(1), b), text)
        return pattern.sub(lambda m: symbols.get(m.group(1)) or superscript(m.group(1), b), text)
    return renamed


def _formula(inner, symbol: str, renamed):
    """The formula of a copy: block 1's, with its own symbol on the left and block b's symbols
    (Q⁽²⁾ = X⁽²⁾ · W_Q⁽²⁾). What it reads graph.equation writes from the copies' symbols."""
    def formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
        text = inner(base, scn, mode, stage) if inner is not None else base
        if text.startswith(f"{symbol} = "):
            text = f"{stage.symbol} = {text[len(symbol) + 3:]}"
        return renamed(text)
    return formula


def _worked(inner, renamed):
    """A copy's worked cell: block 1's arithmetic (its numbers are the copy's: a cell reads what
    its stage reads), each line naming block b's matrices."""
    def worked(c: Cell) -> list:
        def one(line: object) -> object:  # under --ascii the marks are spelled ^(2) as the rest
            if isinstance(line, str):
                return c.plain(renamed(line))
            if getattr(line, "spans", None) == [] and hasattr(line, "plain"):  # a plain sentence (Prose)
                return type(line)(c.plain(renamed(line.plain)))
            return line
        return [one(line) for line in inner(c)]
    return worked


def _renamed_backward(backward: Backward, b: int, mine: set[str]) -> Backward:
    symbols = {f"{k}.{b}": superscript(k, b) for k in mine}  # ∂L/∂W_Q⁽²⁾
    symbols.update({f"{k}.{b}" if k in mine else k: superscript(v, b) if k in mine else v
                    for k, v in backward.symbols.items()})  # a norm's γ⁽²⁾
    cols = {f"{k}.{b}" if k in mine else k: v for k, v in backward.param_cols.items()}
    return backward._replace(symbols=symbols, param_cols=cols)


def param_place(scn: Scenario, name: str) -> tuple[str | int, ...] | None:
    """Where a block's parameter is written in a scenario file (train -o): block b's W_Q (W_Q.b)
    in the b-th mapping of `blocks:`, block 1's in the first; None for a parameter every block
    shares (written at the top level)."""
    setting: Blocks = scn.setting(NAME)
    base, dot, block = name.rpartition(".")
    if dot and block.isdecimal() and base in setting.keys:
        return ("blocks", int(block) - 1, base)
    return ("blocks", 0, name) if name in setting.keys else None


def refuse_decode(scn: Scenario) -> str | None:
    return "decoding walks one block; this scenario has several (blocks:)"


def extra_work(scn: Scenario) -> int:
    """What blocks 2 … N add to a training step's forward pass: each as much as block 1."""
    from attnwalk.layer.cost import dims_of, work

    return (count(scn) - 1) * sum(w.count for w in work(dims_of(scn)))


def export(walk, data: dict) -> None:
    """The JSON says how many blocks there are; every block's stages and weights are under their
    keys already (A.2, W_Q.2)."""
    data["shape"]["blocks"] = count(walk.scenario)
