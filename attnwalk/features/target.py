"""What the layer should have computed (`target:`), the loss that says how far it is, and how
`attnwalk train` descends it (`train:`):

    target: {output: MATRIX}             Y (Z, or O with W_O) should be this n × d matrix:
                                         L = ½ Σ (Y − T)²
    target: {attend: {bank: river}}      each listed query should attend to that key:
    target: {attend: {…}, head: 2}       L = −Σ log A[query, key] (of head 2; default head 1)
    target: next                         each position should predict the token after it (with a
    target: {next: WORD}                 vocabulary, features/unembed.py): L = mean over positions i
                                         of −log p_i[token i+1]; WORD is the last position's next
    train: {steps: 40, lr: 0.5}          the lesson's own default steps and η (−−steps, −−lr win)
    train: {optimizer: adam}             Adam's steps instead of plain gradient descent (layer/train.py)

The loss stands beside the graph, not in it. It is not part of the layer: a layer computes Y, and
a loss compares Y (or one head's A) with what the learner asked for, as a training loop calls
loss.backward() on a scalar outside the model. So the forward walk, decode and export stay the
layer's own, and the loss is where the backward walk starts: `loss` gives its value, each row's
share and its gradient with respect to the stage it reads (the seed of layer/backward.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from attnwalk.errors import ComputeError
from attnwalk.layer.graph import Stage, symbol_of
from attnwalk.numbering import shown as person
from attnwalk.reading.fields import quoted, shape_text, whole
from attnwalk.reading.yamltree import shown

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell
    from attnwalk.layer.modes import Mode
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario
    from attnwalk.reading.yamltree import Node

NAME = "target"
KEYS = ("target", "train")
STAGES: tuple[Stage, ...] = ()  # the loss is not a stage of the layer: see LOSS_STAGE
KINDS = ("output", "attend", "next")
MAX_STEPS = 500  # a lesson's steps: half of a run's (layer/train.py), so --compare trains them too
DEFAULT_STEPS, DEFAULT_LR = 20, 0.1


class Target(NamedTuple):
    """A scenario's target (`target:`) and its training defaults (`train:`)."""

    kind: str  # "output" | "attend" | "next"
    T: np.ndarray | None = None  # output: the n × d matrix Y should be
    pairs: tuple[tuple[int, int], ...] = ()  # attend: (query, key); next: (position, next id), 0-based
    head: int = 0  # attend: the head whose A is asked (0-based)
    steps: int = DEFAULT_STEPS
    lr: float = DEFAULT_LR
    optimizer: str = "gd"  # "gd" | "adam" (layer/train.py's OPTIMIZERS)


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def target_of(scn: Scenario) -> Target | None:
    return scn.setting(NAME)


def extend(stages: list[Stage], scn: Scenario) -> None:
    """Nothing: the loss is not a stage of the layer (see the module's docstring)."""


def note_stages(scn: Scenario) -> tuple[Stage, ...]:
    """The backward walk's screens (L, dZ, dS, …): a lesson's notes may speak to them as to the
    forward walk's stages."""
    from attnwalk.layer.gradwalk import grad_stages

    return grad_stages(scn)


def read(d: Draft) -> None:
    """`target: {output: MATRIX} | {attend: {QUERY: KEY, …}, head: N}` and `train: {steps, lr}`."""
    f, top = d.f, d.top
    if "target" not in top:
        if "train" in top:
            raise f.error("train", top["train"], "train sets how attnwalk train descends a loss, "
                          "and there is none: add a target (target: {attend: {QUERY: KEY}} or "
                          "target: {output: MATRIX}), or remove train")
        return
    node = top["target"]
    if node.value == "next":  # `target: next`: every position but the last predicts the token after it
        spec = {"next": None}
    else:
        spec = f.mapping(node, "target", ("output", "attend", "head", "next"))
    given = [kind for kind in KINDS if kind in spec]
    if len(given) != 1:
        raise f.error("target", node, "give exactly one of target.output (the n × d matrix the "
                      "layer's output should be), target.attend (QUERY: KEY pairs) or target: next "
                      "(each position's next token), not " + (f"both {' and '.join(given)}" if len(given) == 2
                                                              else "more than one" if given else "none"))
    if given[0] == "next":
        if "head" in spec:
            raise f.error("target.head", spec["head"], "target.head names the head whose weights "
                          "target.attend asks for; a next-token target reads the probabilities p")
        target = Target("next", pairs=_next_pairs(d, node, spec["next"]))
    elif given[0] == "output":
        if "head" in spec:
            raise f.error("target.head", spec["head"], "target.head names the head whose weights "
                          "target.attend asks for; an output target compares the whole output Y")
        target = Target("output", T=_output(d, spec["output"]))
    else:
        head = 0
        if "head" in spec:
            head = f.integer(spec["head"], "target.head", minimum=1) - 1
            if head >= d.heads:
                raise f.error("target.head", spec["head"], f"target.head is {whole(person(head))}, but "
                              f"there {'is' if d.heads == 1 else 'are'} only {d.heads} "
                              f"head{'s' if d.heads > 1 else ''} (count from 1)")
        target = Target("attend", pairs=_pairs(d, spec["attend"]), head=head)
    if "train" in top:
        train = f.mapping(top["train"], "train", ("steps", "lr", "optimizer"))
        if "steps" in train:
            steps = f.integer(train["steps"], "train.steps", minimum=1)
            if steps > MAX_STEPS:
                raise f.error("train.steps", train["steps"], f"train.steps is {whole(steps)}; at most "
                              f"{whole(MAX_STEPS)} (a lesson shows its point in far fewer)")
            target = target._replace(steps=steps)
        if "lr" in train:
            lr = f.number(train["lr"], "train.lr")
            if lr <= 0:
                raise f.error("train.lr", train["lr"], f"train.lr is the step size η of W ← W − η · "
                              f"∂L/∂W and must be above 0, got {lr:g}")
            target = target._replace(lr=lr)
        if "optimizer" in train:
            target = target._replace(optimizer=_optimizer(f, train["optimizer"]))
    d.settings[NAME] = target


def _optimizer(f: Any, node: Node) -> str:
    """`train.optimizer`: gd (W ← W − η · ∂L/∂W, the default) or adam."""
    from attnwalk.layer.train import OPTIMIZERS

    name = f.text(node, "train.optimizer")
    if name not in OPTIMIZERS:
        raise f.error("train.optimizer", node, f"train.optimizer is {quoted(name, 20)}; expected one of "
                      f"{', '.join(OPTIMIZERS)} (gd: plain gradient descent, adam: Adam's steps)")
    return name


def _output(d: Draft, node: Node) -> np.ndarray:
    """The matrix the output should be: n × d_model with W_O (O), else n × h·d_v (Z, or concat)."""
    T = d.f.matrix(node, "target.output")
    width = d.main.d_model if d.W_O is not None else d.heads * d.d_v
    what = "d_model (the output is O = concat · W_O)" if d.W_O is not None else (
        "h·d_v (the output is concat, every head's Z side by side)" if d.heads > 1 else "d_v (the output is Z)")
    if T.shape != (d.main.n, width):
        raise d.f.error("target.output", node, f"target.output is {shape_text(T)}, but it must be "
                        f"n × {what} = {d.main.n} × {width}")
    T.flags.writeable = False
    return T


def _next_pairs(d: Draft, node: Node, last: Node | None) -> tuple[tuple[int, int], ...]:
    """(position, id of the token after it) for every position but the last, and for the last
    when `next: WORD` names the word after it (0-based)."""
    from attnwalk.features import unembed

    vocab = unembed.draft_vocab(d)
    if vocab is None:
        raise d.f.error("target", node, "a next-token target needs a vocabulary: add vocab: [WORD, …] "
                        "with W_U (or tie_embeddings and vocab_embeddings)")
    tokens = d.main.tokens
    pairs = [(i, vocab.index(tokens[i + 1])) for i in range(len(tokens) - 1)]
    if last is not None:
        word = d.f.text(last, "target.next")
        if word not in vocab:
            listed = ", ".join(quoted(w, 20) for w in vocab[:12]) + (", …" if len(vocab) > 12 else "")
            raise d.f.error("target.next", last, f"{quoted(word, 20)} is not in vocab ({listed}): "
                            "target.next is the word after the last token")
        pairs.append((len(tokens) - 1, vocab.index(word)))
    if not pairs:
        raise d.f.error("target", node, "one token and no next word: nothing to predict; give target: "
                        "{next: WORD}, the word after it, or more tokens")
    return tuple(pairs)


def _pairs(d: Draft, node: Node) -> tuple[tuple[int, int], ...]:
    """`{QUERY: KEY, …}`: tokens or 1-based positions; a pair the mask forbids is refused."""
    f = d.f
    spec = node.value
    if not isinstance(spec, dict) or not spec:
        raise f.error("target.attend", node, "expected QUERY: KEY pairs, e.g. attend: {bank: river} "
                      "(tokens, or positions counted from 1)")
    keys = (d.source or d.main).tokens
    pairs = []
    for raw, value in spec.items():
        line = (node.keys or {}).get(raw, node.line)
        field = f"target.attend.{shown(str(raw))}"
        query = _position(f, field, str(raw), line, d.main.tokens, "query")
        key = _position(f, field, value.raw if value.raw is not None else value.value, value.line, keys, "key")
        if d.allowed is not None and not d.allowed[query, key]:
            raise f.error(field, value, f"the mask forbids query {quoted(d.main.tokens[query], 20)} "
                          f"(row {person(query)}) to attend to key {quoted(keys[key], 20)} (column "
                          f"{person(key)}): its weight is always exactly 0, so −log A would be infinite; "
                          "choose a key the mask allows")
        pairs.append((query, key))
    return tuple(pairs)


def _position(f: Any, field: str, value: Any, line: int, tokens: tuple[str, ...], what: str) -> int:
    """A token, or its position counted from 1 (a token that looks like a number wins)."""
    text = str(value) if value is not None else ""
    if text in tokens:
        if tokens.count(text) > 1:
            where = ", ".join(str(person(i)) for i, t in enumerate(tokens) if t == text)
            raise f.error(field, _At(line), f"the {what} {quoted(text, 20)} appears more than once "
                          f"(positions {where}); give its position instead")
        return tokens.index(text)
    if text.isdecimal() and 1 <= int(text) <= len(tokens):
        return int(text) - 1
    listed = ", ".join(quoted(t, 20) for t in tokens[:12]) + (", …" if len(tokens) > 12 else "")
    raise f.error(field, _At(line), f"the {what} {quoted(text, 20)} is not one of the tokens ({listed}) "
                  f"nor a position 1–{len(tokens)}")


class _At(NamedTuple):  # the line an error names, where there is no Node to hand (a mapping's key)
    line: int


# -- the loss -------------------------------------------------------------------------------------


class Loss(NamedTuple):
    value: float  # L
    rows: np.ndarray  # (n, 1): each query row's share of L
    reads: str  # the stage L is computed from: "O", "concat" or "A"
    head: int | None  # for A: the head; None for the output
    seed: np.ndarray  # ∂L/∂ of that stage: Y − T, or −1/A[q, k] at the pairs

    @property
    def seeds(self) -> dict[tuple[str, int | None], np.ndarray]:
        """Where the backward pass starts (layer/backward.py)."""
        return {(self.reads, self.head): self.seed}


def reads(scn: Scenario) -> str:
    """The stage the loss reads: the layer's output (O, or concat), A, or the next-token logits."""
    from attnwalk.layer.backward import output_of
    from attnwalk.layer.roles import next_logits

    kind = target_of(scn).kind
    return "A" if kind == "attend" else next_logits(scn.graph).key if kind == "next" else output_of(scn.graph)


def loss(walk: Walk) -> Loss:
    """L for `walk`, each row's share, and ∂L/∂ of the stage it reads (the backward pass's seed).
    ComputeError when an asked weight is exactly 0 in float64 (−log 0 is infinite)."""
    scn = walk.scenario
    target = target_of(scn)
    if target.kind == "next":
        return _next_loss(walk, target)
    if target.kind == "output":
        key = reads(scn)
        R = walk.mats[key] - target.T  # (n, d): Y − T
        rows = 0.5 * np.sum(R * R, axis=1, keepdims=True)  # (n, 1)
        return Loss(float(rows.sum()), rows, key, None, R)
    A = walk.matrix("A", target.head)
    rows = np.zeros((scn.n, 1))
    seed = np.zeros_like(A)  # (n, m)
    for q, k in target.pairs:
        if A[q, k] <= 0.0:
            fix = "smaller weights" if walk.mode.divides else "the scaled mode, or smaller weights"
            raise ComputeError(f"A[{person(q)}, {person(k)}] is exactly 0 in float64 under {walk.mode.name} "
                               f"weights, so −log A is infinite: the scores are too far apart (try {fix})",
                               stage="A")
        rows[q, 0] -= np.log(A[q, k])
        seed[q, k] -= 1.0 / A[q, k]  # ∂(−log a)/∂a = −1/a
    return Loss(float(rows.sum()), rows, "A", target.head, seed)


def _next_loss(walk: Walk, target: Target) -> Loss:
    """L = (1/N) Σ_i −log p_i[t_(i+1)] over the N positions whose next token is known, p =
    softmax(ℓ / T); ∂L/∂ℓ = (p − onehot(t_(i+1))) / (T · N) on those rows, 0 on the others."""
    from attnwalk.features import unembed
    from attnwalk.layer import nexttoken

    scn = walk.scenario
    key, T = reads(scn), unembed.temperature(scn)
    logits = walk.mats[key]  # (n, V)
    logp = nexttoken.log_softmax_t(logits, T)  # (n, V)
    p = nexttoken.softmax_t(logits, T)
    count = len(target.pairs)
    rows = np.zeros((scn.n, 1))
    seed = np.zeros_like(logits)
    for i, w in target.pairs:
        rows[i, 0] -= logp[i, w] / count
        seed[i] += p[i] / (T * count)
        seed[i, w] -= 1.0 / (T * count)
    return Loss(float(rows.sum()), rows, key, None, seed)


def retargeted(scn: Scenario) -> Scenario:
    """`scn`, whose tokens were drawn in place of the file's (features/sequences.py), with its
    next-token target made for them: each position but the last predicts the token after it."""
    ids = scn.main.ids
    pairs = tuple((i, int(ids[i + 1])) for i in range(len(ids) - 1))
    return scn.with_setting(NAME, target_of(scn)._replace(pairs=pairs))


def next_token_loss(walk: Walk, positions: Iterable[int] | None = None) -> float:
    """The mean of −log p_i[token i+1] over `positions` (0-based; those whose next token the
    target knows; all of them when None): the loss on part of a sequence (the second copy of a
    repeated one, where an induction head can predict)."""
    from attnwalk.features import unembed
    from attnwalk.layer import nexttoken

    scn = walk.scenario
    wanted = None if positions is None else set(positions)
    pairs = [(i, w) for i, w in target_of(scn).pairs if wanted is None or i in wanted]
    if not pairs:
        raise ValueError("none of the positions asked has a next token to predict")
    logp = nexttoken.log_softmax_t(walk.mats[reads(scn)], unembed.temperature(scn))
    return float(-np.mean([logp[i, w] for i, w in pairs]))


# -- the loss on the backward walk's screens (layer/gradwalk.py asks for these) --------------------


def _output_symbol(scn: Scenario) -> str:
    """How the loss names the output Y: O, concat, or with one head its Z."""
    out = reads(scn) if target_of(scn).kind == "output" else "concat"
    return "Z" if out == "concat" and scn.heads == 1 else symbol_of(out, scn)  # O, a block's Y


def _loss_formula(base: str, scn: Scenario, mode: Mode, stage: Stage) -> str:
    target = target_of(scn)
    if target.kind == "next":  # N: the positions whose next token is known
        return f"L = Σ_i L_i,  L_i = −log p[i, t_(i+1)] / N,  N = {len(target.pairs)}"
    if target.kind == "attend":
        head = f"_{person(target.head)}" if scn.heads > 1 else ""
        return f"L = Σ_i L_i = −Σ_{{(i, k) ∈ target}} log A{head}[i, k]"  # math only: the same in every language
    return f"L = Σ_i L_i,  L_i = ½ Σ_c ({_output_symbol(scn)}[i, c] − T[i, c])²"


def _attend_parts(c: Cell, row: int) -> list[tuple[int, float, float]]:
    """Row `row`'s asked keys k, each with A[row, k] as printed and −log of it as printed."""
    target = target_of(c.scn)
    parts = []
    for k in (k for q, k in target.pairs if q == row):
        a = c.printed(float(c.walk.forward.matrix("A", target.head)[row, k]))
        parts.append((k, a, c.printed(-np.log(a))))
    return parts


def _output_parts(c: Cell, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Row `row`'s Y and T, Y − T as printed, Σ (Y − T)² of those digits and L_i = ½ of it."""
    target = target_of(c.scn)
    Y, T = c.walk.forward.mats[reads(c.scn)][row], target.T[row]
    diff = np.array([c.printed(c.printed(y) - c.printed(t)) for y, t in zip(Y, T)])
    squares = c.dot_value(diff, diff)
    return Y, T, diff, squares, c.printed(c.printed(squares) / 2)


def _next_parts(c: Cell, row: int) -> list[tuple[str, float, float, float]]:
    """Row `row`'s next word (none for the last position, unless the target names it), with
    p[row, word] as printed, −log of it as printed and L_i = that / N as printed."""
    from attnwalk.features import unembed
    from attnwalk.layer.roles import next_token

    target = target_of(c.scn)
    walk = c.walk.forward
    p = walk.mats[next_token(walk.computed).key]  # (n, V) at the scenario's T
    vocab, count = unembed.vocabulary(c.scn), len(target.pairs)
    parts = []
    for w in (w for i, w in target.pairs if i == row):
        a = c.printed(float(p[row, w]))
        nl = c.printed(-np.log(a)) if a > 0 else c.printed(float(-walk.mats[reads(c.scn)][row, w]))
        parts.append((vocab[w], a, nl, c.printed(nl / count)))
    return parts


def _row_loss(c: Cell, row: int) -> float:
    """L_i as row `row`'s worked cell arrives at it, from the digits it prints."""
    if target_of(c.scn).kind == "next":
        return float(sum(value for *_, value in _next_parts(c, row)))
    if target_of(c.scn).kind == "attend":
        return float(sum(value for _, _, value in _attend_parts(c, row)))
    return _output_parts(c, row)[-1]


def _loss_cell(c: Cell) -> list:
    """L_i with the row's numbers, then L = Σ L_i from every row's L_i as its own cell prints it,
    so that the sum checks with the digits shown (one asked row: L is that row's L_i)."""
    from attnwalk.layer.axes import token_labels

    tok = c.rows[c.row]
    lines: list = []
    if target_of(c.scn).kind == "next":
        parts = _next_parts(c, c.row)
        if not parts:
            lines.append(c.prose(c.say("unembed.loss_last", token=tok)))
        count = len(target_of(c.scn).pairs)
        for word, a, nl, value in parts:
            c.lands(value)
            lines.append(f"L_{tok} = {c.mk.minus}log p[{tok}, {word}] / N = {c.mk.minus}log {c.num(a)} / {count} = "
                         f"{c.num(nl)} / {count} = {c.num(value)}")
    elif target_of(c.scn).kind == "attend":
        parts = _attend_parts(c, c.row)
        if not parts:
            lines.append(c.prose(c.say("grad.cell.not_asked", token=tok)))
        for k, a, value in parts:
            c.lands(value)
            lines.append(f"L_{tok} = {c.mk.minus}log A[{tok}, {token_labels(c.scn.key_tokens)[k]}] = "
                         f"{c.mk.minus}log {c.num(a)} = {c.num(value)}")
    else:
        out = _output_symbol(c.scn)
        Y, T, diff, squares, half = _output_parts(c, c.row)
        c.lands(half)
        lines += [f"{out}[{tok}] {c.mk.minus} T[{tok}] = {c.vec(Y)} {c.mk.minus} {c.vec(T)} = {c.vec(diff)}",
                  *c.dot(f"Σ_c ({out} {c.mk.minus} T)[{tok}, c]²", diff, diff, squares),
                  f"L_{tok} = ½ {c.mk.times} {c.product(squares)} = {c.num(half)}"]
    rows = [_row_loss(c, row) for row in range(len(c.rows))]
    shares = [value for value in rows if value != 0.0]
    total = c.printed(sum(shares))
    c.lands(total, on=float(c.walk.matrix(LOSS_STAGE.key).sum()))  # and it is L, as `grad` reports it
    added = c.terms([c.num(shares[0]), *(c.operand(v) for v in shares[1:])], len(shares)) + " = " \
        if len(shares) > 1 else ""
    return [c.plain(line) if isinstance(line, str) else line for line in lines] + [
        c.prose(c.say("grad.cell.total", total=added + c.num(total)))]


LOSS_STAGE = Stage("L", "L", "L", "n", "L_i", None, formula_for=_loss_formula,
                   variants=lambda scn, mode: (target_of(scn).kind,), worked=_loss_cell, aliases=("loss",))


def seed_term(scn: Scenario) -> str:
    """The loss's own part of the gradient of what it reads, as a formula."""
    if target_of(scn).kind == "attend":
        return "(−1 / A[q, k])_{(q, k) ∈ target}"  # math only; 0 at every other cell, as the text says
    if target_of(scn).kind == "next":
        return "(p − onehot(t_(i+1))) / (T · N)"  # the softmax's and −log's gradients together
    return f"{_output_symbol(scn)} − T"


def seed_cell(c: Cell) -> tuple[list, float]:
    """The loss's own part at this cell: Y − T, or −1/A at an asked pair (0 at any other)."""
    target = target_of(c.scn)
    walk = c.walk.forward
    tok, col = c.rows[c.row], c.cols[c.col]
    if target.kind == "next":
        return _next_seed_cell(c, target)
    if target.kind == "attend":
        if c.head != target.head or (c.row, c.col) not in target.pairs:
            return [c.prose(c.say("grad.cell.not_asked_cell"))], 0.0
        a = c.printed(float(walk.matrix("A", c.head)[c.row, c.col]))
        value = c.printed(-1.0 / a)
        return [f"{c.mk.minus}1 / A[{tok}, {col}] = {c.mk.minus}1 / {c.num(a)} = {c.num(value)}"], value
    y = c.printed(float(walk.mats[reads(c.scn)][c.row, c.col]))
    t = c.printed(float(target.T[c.row, c.col]))
    value = c.printed(y - t)
    return [f"{_output_symbol(c.scn)}[{tok}, {col}] {c.mk.minus} T[{tok}, {col}] = {c.num(y)} {c.mk.minus} "
            f"{c.operand(t)} = {c.num(value)}"], value


def _next_seed_cell(c: Cell, target: Target) -> tuple[list, float]:
    """(p[i, w] − [w is the next token]) / (T · N): the loss's part of ∂L/∂ℓ at this cell."""
    from attnwalk.features import unembed
    from attnwalk.layer.roles import next_token

    walk = c.walk.forward
    tok, word = c.rows[c.row], c.cols[c.col]
    nexts = [w for i, w in target.pairs if i == c.row]
    if not nexts:
        return [c.prose(c.say("unembed.loss_last", token=tok))], 0.0
    T, count = unembed.temperature(c.scn), len(target.pairs)
    p = c.printed(float(walk.mats[next_token(walk.computed).key][c.row, c.col]))
    one = 1 if c.col in nexts else 0
    below = c.printed(T * count)
    value = c.printed(c.printed(p - one) / below)
    c.lands(value)
    return [f"(p[{tok}, {word}] {c.mk.minus} {one}) / (T {c.mk.times} N) = ({c.num(p)} {c.mk.minus} {one}) / "
            f"({c.short(T)} {c.mk.times} {count}) = {c.num(c.printed(p - one))} / {c.short(below)} = {c.num(value)}",
            c.prose(c.say("unembed.seed_cell", word=word, token=tok) if one else c.say(
                "unembed.seed_cell_other", word=word, token=tok, right=" / ".join(c.cols[w] for w in nexts)))], value


def grad_variants(scn: Scenario) -> tuple[str, ...]:
    """The backward walk's text variants this target calls for: an attend target reads A alone;
    a next-token target reads the logits, after the output."""
    kind = target_of(scn).kind
    return (kind,) if kind in ("attend", "next") else ()


def export(walk: Walk, data: dict[str, Any]) -> None:
    """The target, as the scenario gives it: `{"output": rows}` or `{"attend": [[q, k], …],
    "head": h}` (0-based, as JSON indices are)."""
    target = target_of(walk.scenario)
    if target.kind == "output":
        data["target"] = {"output": target.T.tolist()}
    elif target.kind == "next":
        from attnwalk.features import unembed

        vocab = unembed.vocabulary(walk.scenario)
        data["target"] = {"next": [{"position": i, "id": w, "token": vocab[w]} for i, w in target.pairs]}
    else:
        data["target"] = {"attend": [list(p) for p in target.pairs], "head": target.head}
