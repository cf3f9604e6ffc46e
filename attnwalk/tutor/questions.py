"""The quiz of one walk: questions built from its scenario, fair to answer and fair to judge.

`questions(walk, lang, seed)` builds the same list every time for the same arguments.

- Number questions (tutor/cellquiz.py) ask cells the walk has not worked out on screen (a screen
  works out `axes.default_cell`), off the diagonal where they can (so reading the matrix
  transposed gives another number), state the inputs to compute them from, and carry what the
  known mistakes would give (tutor/mistakes.py), to name the one a wrong answer shows. A cell
  where a misconception's number cannot be told from the answer is not asked; a masked weight
  is asked exactly.
- A what-if asks what a cell of A becomes without √d_k, where the scenario divides by it.
- Predictions before the evidence: where a row will look, from Q and K (tutor/tokenquiz.py);
  which key gets the most weight, from the whole of S; what trading two tokens does to X and Z
  (tutor/wordorder.py).
- Concept questions come from the lessons' misconceptions (003 §13, 004 常见错误), only about
  what the scenario has (the mask with a mask, heads with several heads, where K and V come from
  with a source), with this scenario's tokens in their wording; reading questions are always off
  the diagonal. Each built-in adds its own (tutor/lessonquiz.py). Their options are real
  misconceptions, each with why it is wrong; the right one's letter is spread evenly over a, b, c
  within a quiz (seeded), and the text files keep it from being the longest.
"""

from __future__ import annotations

import random

import numpy as np

from attnwalk.features import note_values
from attnwalk.layer.axes import axes, default_cell
from attnwalk.layer.stages import stage_named
from attnwalk.layer.walk import Walk
from attnwalk.text import Text, text
from attnwalk.tutor.cachequiz import cache_questions
from attnwalk.tutor.cellquiz import cell_question, givens, judging
from attnwalk.tutor.lessonquiz import lesson_questions
from attnwalk.tutor.quiz import CHOICE, NUMBER, SHAPE, Question, number_text, placed
from attnwalk.tutor.tokenquiz import argmax_question, clear_top, look_question
from attnwalk.tutor.wordorder import word_order_question

__all__ = ["questions", "cell_question"]

# Concept topics: the text table quiz.<topic> holds question, answer, wrong_a, wrong_b, why_a,
# why_b, hint; the value is the MISTAKES (tutor/quiz.py) it covers.
CONCEPTS: dict[str, tuple[str, ...]] = {
    "params": ("params_vs_activations",),
    "qkv": ("qkv_same",),
    "scale": ("scale_detail",),
    "softmax_axis": ("softmax_axis",),
    "read_a": ("read_transposed",),
    "k_vs_v": ("k_is_content",),
    "output": ("output_updates_v",),
    "mask": (),
    "heads": ("heads_repeat",),
    "cross": (),  # not in the lessons' lists, but the mix-up a source invites
    "gqa": ("heads_repeat",),  # shared K/V heads: a group still attends differently
    "alibi": (),  # a distance penalty, not a mask and not a position added to X
    "window": (),  # a sliding window: what a query further back can still reach
    "rope": (),  # issue 19: RoPE's scores depend on the offset, not on where the pair stands
}
_EN = text("en")  # the numbers of a given line are the same in every language


def questions(walk: Walk, lang: str = "en", seed: int | None = None,
              count: int | None = None) -> list[Question]:
    """The quiz for `walk`. Without a seed the cells are on the focus row (the row the walk works
    through) and the order is fixed; a seed picks other rows, columns and heads and shuffles the
    order. `count` keeps the first questions of the order."""
    tx = text(lang)
    pick = random.Random(seed) if seed is not None else None
    scn = walk.scenario
    head = pick.randrange(scn.heads) if pick else 0
    A = walk.matrix("A", head)
    row = _row(walk, A, pick)
    cells = {key: _cell(walk, key, head, row, pick) for key in ("QK^T", "S", "A", "Z")}

    def number(key: str) -> Question | None:
        if cells[key] is None:
            return None
        r, c, given = cells[key]
        return cell_question(walk, key, r, c, head, lang, given=given)

    concept = _concepts(walk, tx, head, row, pick)
    out = [number("QK^T"), _shape_question(walk, tx), concept("params"), concept("qkv"),
           look_question(walk, tx, head, row),
           number("S") if walk.scale != 1.0 else None,  # S = QKᵀ: the QKᵀ question asked it
           concept("scale"), concept("softmax_axis")]
    argmax_row = _argmax_row(walk, A, pick)
    if argmax_row is not None:
        out.append(argmax_question(walk, tx, head, argmax_row))
    out += [number("A"), concept("read_a"), concept("k_vs_v"), number("Z"), concept("output")]
    if walk.scale != 1.0 and walk.mode.reads_scores and walk.mode.smooth and cells["A"] is not None:
        out.append(_what_if(walk, head, row, cells["A"], lang))
    forbidden = [(int(r), int(c)) for r, c in np.argwhere(~scn.allowed)]
    if forbidden:
        r, c = pick.choice(forbidden) if pick else forbidden[0]
        out.append(cell_question(walk, "A", r, c, head, lang, hint=tx.t("quiz.mask.hint")))
        out.append(concept("mask"))
    for feature in scn.features:  # the mix-up each feature invites (a feature's `concepts`)
        out += [concept(topic) for topic in getattr(feature, "concepts", lambda scn: ())(scn)]
    out.append(word_order_question(walk, tx))
    out += lesson_questions(walk, tx)
    from attnwalk.tutor.tiledquiz import tiled_questions  # --tiles B: predict m and l after a block

    out += tiled_questions(walk, tx, head, pick)
    out += cache_questions(walk, tx, pick)  # a causal mask: what a KV cache reuses, what it saves
    from attnwalk.tutor.gradquiz import grad_questions  # a target: which gradients are 0, and why

    out += grad_questions(walk, tx, pick)
    out = [q for q in out if q is not None]
    _spread_answers(out, random.Random(f"attnwalk:{seed}"))
    if pick:
        pick.shuffle(out)
    _in_stage_order(out, walk)
    return out[:count] if count is not None else out


def _in_stage_order(out: list[Question], walk: Walk) -> None:
    """The number questions, wherever the shuffle put them, asked in the layer's order (the
    graph's): each states its inputs, and an input must not be a later question's answer (S gives
    QKᵀ[i, j]). The what-if reads A: it comes right after A's questions."""
    order = {s.key: 2 * i for i, s in enumerate(walk.graph)}
    slots = [i for i, q in enumerate(out) if q.kind == NUMBER]
    rank = lambda q: order["A"] + 1 if q.mode else order.get(q.cell[0] if q.cell else q.topic, 2 * len(order))  # noqa: E731
    for i, q in zip(slots, sorted((out[i] for i in slots), key=rank)):
        out[i] = q


# -- which cells ----------------------------------------------------------------------------------


def _row(walk: Walk, A: np.ndarray, pick: random.Random | None) -> int:
    """The query row the number questions use: the focus row (else the last), or a random one."""
    scn = walk.scenario
    if pick:
        clear = [r for r in range(scn.n) if clear_top(A[r], scn.allowed[r]) is not None]
        return pick.choice(clear or list(range(scn.n)))
    return scn.focus if scn.focus is not None else scn.n - 1


def _cell(walk: Walk, key: str, head: int, row: int,
          pick: random.Random | None) -> tuple[int, int, bool] | None:
    """A cell of stage `key` the walk did not work out on screen: on `row` where it can, off the
    diagonal and on an allowed key for query × key stages, else on any row; one that can be
    asked fairly (cellquiz.judging); and whether the question may state its inputs (not when
    every such cell's answer is among them). None where no cell can be asked."""
    scn = walk.scenario
    M = walk.matrix(key, head)
    shown = default_cell(walk, key, head)
    square = walk.stage(key).square

    def fits(r: int, c: int, strict: bool, diagonal: bool = False) -> bool:
        if (r, c) == shown or (square and ((r == c and not diagonal) or not scn.allowed[r, c])):
            return False
        inputs = givens(walk, _EN, key, head, r, c)
        if not inputs:  # nothing a person could compute it from by hand: not asked
            return False
        # rather not the answer among the inputs it states (Z from a one-hot column of V is a weight)
        if strict and number_text(float(M[r, c])) in inputs:
            return False
        return judging(walk, key, head, r, c) is not None

    order = _key_order(walk, head, row) if square else list(range(M.shape[1]))
    if not givens(walk, _EN, key, head, row, order[0]):  # inputs too long to give, whichever the cell
        return None
    # the rows nearest the focus first, a bounded number of them
    others = sorted(range(M.shape[0]), key=lambda r: (abs(r - row), r))[:CANDIDATES]
    # Rather a cell whose answer is not among its inputs; else one whose answer is, with its inputs
    # all the same: a dot product is still worked out when it equals an entry of q or k (1 · 1 +
    # 1 · 0 = 1). Never Z from a one-hot column of V: its answer is a weight the question gives
    # (issue 37). Never without the inputs: a cell nobody can work out by hand is not asked.
    # On the diagonal only where no cell off it can be asked (a symmetric QKᵀ: reading it
    # transposed gives every number off the diagonal, issue 37).
    for diagonal, strict in ((False, True), (False, False), (True, True), (True, False)):
        if (diagonal and not square) or (key == "Z" and not strict):
            continue
        # a bounded look (a real-size layer has 262,144 cells a head): the focus row, then the
        # cells of the nearest rows, until CANDIDATES fit
        choices = [(row, c) for c in order if fits(row, c, strict, diagonal)]
        if not choices:
            for r in others[1:]:
                choices += [(r, c) for c in range(M.shape[1]) if fits(r, c, strict, diagonal)]
                if len(choices) >= CANDIDATES:
                    break
        if choices:
            r, c = pick.choice(choices) if pick else choices[0]
            return r, c, True
    return None


CANDIDATES = 32


def _what_if(walk: Walk, head: int, row: int, cell: tuple[int, int, bool], lang: str) -> Question | None:
    """"Without √d_k, what does A[r, c] become?": on the A question's cell, else on the first
    allowed cell of the focus row (then the nearest rows) where that can be judged fairly."""
    scn = walk.scenario
    others = sorted(range(scn.n), key=lambda r: (abs(r - row), r))[:CANDIDATES]
    tries = [cell[:2]] + [(r, c) for r in others for c in range(scn.m) if r != c and scn.allowed[r, c]]
    for r, c in tries[:CANDIDATES]:
        question = cell_question(walk, "A", r, c, head, lang, what_if=True)
        if question is not None:
            return question
    return None


def _key_order(walk: Walk, head: int, row: int) -> list[int]:
    """The keys of `row`, the most attended first (the default question asks the runner-up)."""
    return [int(j) for j in np.argsort(-walk.matrix("A", head)[row], kind="stable")]


def _argmax_row(walk: Walk, A: np.ndarray, pick: random.Random | None) -> int | None:
    """A row to ask "which key most?" of: one with a clear top and more than one key to choose
    from, not the focus row the walk's A screen works through (else it, if nothing else fits)."""
    scn = walk.scenario
    fits = [r for r in range(scn.n) if scn.allowed[r].sum() > 1 and clear_top(A[r], scn.allowed[r]) is not None]
    others = [r for r in fits if r != default_cell(walk, "A")[0]]
    if not fits:
        return None
    return (pick.choice(others or fits)) if pick else (others or fits)[0]


def _shape_question(walk: Walk, tx: Text) -> Question:
    scn = walk.scenario
    example = shape_example(scn.n, scn.m, scn.d_k)
    return Question("shape", SHAPE, tx.t("quiz.shape.question", example=example),
                    tx.t("quiz.shape.hint"), (scn.n, scn.m), f"{scn.n} × {scn.m}", ("scores_shape",),
                    worked=tx.t("quiz.shape.worked", n=scn.n, m=scn.m, d_k=scn.d_k), example=example,
                    qid="shape")


_EXAMPLES = ((5, 2), (4, 7), (6, 3), (2, 8))


def shape_example(n: int, m: int, d_k: int) -> str:
    """A shape to show the answer's format with, "5x2", that is neither the answer nor a shape the
    learner might take for it (n × m either way round, n × d_k, d_k × m): a hint of "3x3" gave
    the answer away for three tokens."""
    near = {(n, m), (m, n), (n, d_k), (d_k, m), (d_k, n), (m, d_k), (d_k, d_k)}
    rows, cols = next(shape for shape in _EXAMPLES if shape not in near)  # n, m, d_k can't rule out all 4
    return f"{rows}x{cols}"


# -- concept questions ----------------------------------------------------------------------------


def _concepts(walk: Walk, tx: Text, head: int, row: int, pick: random.Random | None):
    """A maker of the concept questions this scenario has, worded with its tokens: the reading
    question on an allowed cell off the diagonal, the mask question on a masked one."""
    scn = walk.scenario
    rows, cols = axes(walk, stage_named("A"), head, tx.lang)
    off = [(r, c) for r in range(scn.n) for c in range(scn.m) if r != c and scn.allowed[r, c]]
    on_row = [cell for cell in off if cell[0] == row]
    read = (pick.choice(off) if pick else (on_row or off)[0]) if off else None
    masked = [(int(r), int(c)) for r, c in np.argwhere(~scn.allowed)]
    blocked = (pick.choice(masked) if pick else masked[-1]) if masked else None

    def concept(topic: str) -> Question | None:
        if topic == "scale" and not walk.scenario.scorer.divides:
            return None  # additive scores are never divided by √d_k
        cell = {"read_a": read, "mask": blocked, "rope": read}.get(topic, (row, row))  # rope: two tokens
        if cell is None:
            return None
        # the layer's shape ({heads}, {kv_heads}, {group}) and what its features add ({window})
        values = {"row_token": rows[cell[0]], "col_token": cols[cell[1]], **note_values(scn, topic)}
        return _concept(tx, topic, values, "biased" if "b_Q" in scn.params else "")

    return concept


def _concept(tx: Text, topic: str, values: dict, variant: str = "") -> Question:
    """Options in the text's order (answer, wrong_a, wrong_b); `_spread_answers` places them. A
    variant's own fields ([quiz.params.biased]: a real layer adds biases) come first."""
    def field(name: str) -> str:
        key = f"quiz.{topic}.{variant}.{name}"
        return tx.t(key if variant and tx.has(key) else f"quiz.{topic}.{name}", **values)
    return Question(topic, CHOICE, field("question"), field("hint"), 0, field("answer"),
                    CONCEPTS[topic], choices=(field("answer"), field("wrong_a"), field("wrong_b")),
                    why=("", field("why_a"), field("why_b")), qid=f"concept:{topic}")


def _spread_answers(out: list[Question], rng: random.Random) -> None:
    """Place each choice question's right option so that, within the quiz, the letters a, b, c
    are each right about equally often (a seeded shuffle of a, b, c, a, b, c, …), and the wrong
    options in a random order."""
    concept = [i for i, q in enumerate(out) if q.kind == CHOICE]
    slots = [i % 3 for i in range(len(concept))]
    rng.shuffle(slots)
    for i, slot in zip(concept, slots):
        out[i] = placed(out[i], rng, slot)
