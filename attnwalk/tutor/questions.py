"""The quiz of one walk: questions built from its scenario, fair to answer.

`questions(walk, lang, seed)` builds the same list every time for the same arguments.

- Number questions ask cells the walk has not worked out on screen (a screen works out
  `axes.default_cell`), off the diagonal where they can (so reading the matrix transposed gives
  another number), and state the inputs to compute them from. Each carries what the known
  mistakes would give (tutor/mistakes.py), to name the one a wrong answer shows.
- A what-if asks what a cell of A becomes without √d_k, where the scenario divides by it.
- Concept questions come from the lessons' misconceptions (003 §13, 004 常见错误), only about
  what the scenario has (the mask with a mask, heads with several heads, where K and V come from
  with a source), with this scenario's
  tokens in their wording; reading questions are always off the diagonal. Their options are real
  misconceptions, each with why it is wrong; the right one's letter is spread evenly over a, b, c
  within a quiz (seeded), and the text files keep it from being the longest.
"""

from __future__ import annotations

import random

import numpy as np

from attnwalk.layer.axes import axes, default_cell
from attnwalk.layer.stages import stage_named
from attnwalk.layer.walk import Walk, with_mode
from attnwalk.text import Text, text
from attnwalk.tutor import mistakes
from attnwalk.tutor.cachequiz import cache_questions
from attnwalk.tutor.quiz import CHOICE, NUMBER, SHAPE, TOKEN, LETTERS, Question, number_text, tolerance

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
GIVEN_MAX = 8  # a row of inputs longer than this is not printed (the shapes lesson has 100 keys)


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
    number = lambda key: _cell_question(walk, tx, key, head, *cells[key])  # noqa: E731
    concept = _concepts(walk, tx, head, row, pick)

    out = [number("QK^T"), _shape_question(walk, tx), concept("params"), concept("qkv"),
           number("S") if walk.scale != 1.0 else None,  # S = QKᵀ: the QKᵀ question asked it
           concept("scale"), concept("softmax_axis")]
    argmax_row = _argmax_row(walk, A, row, pick)
    if argmax_row is not None:
        out.append(_argmax_question(walk, tx, head, argmax_row))
    out += [number("A"), concept("read_a"), concept("k_vs_v"), number("Z"), concept("output")]
    if walk.scale != 1.0 and walk.mode.reads_scores and walk.mode.smooth:
        out.append(_what_if(walk, tx, head, *cells["A"][:2]))
    forbidden = np.argwhere(~scn.allowed)
    if len(forbidden):
        r, c = pick.choice(list(forbidden)) if pick else forbidden[0]
        out.append(_cell_question(walk, tx, "A", head, int(r), int(c), hint=tx.t("quiz.mask.hint")))
        out.append(concept("mask"))
    if scn.heads > 1:  # with shared K/V heads "each head has its own W_K, W_V" would be false
        out.append(concept("gqa" if scn.groups < scn.heads else "heads"))
    if scn.bias == "alibi":
        out.append(concept("alibi"))
    if scn.mask_kind == "window" and scn.window_causal and scn.window < scn.n:
        out.append(concept("window"))
    if scn.source is not None:
        out.append(concept("cross"))
    if scn.rope is not None:
        out.append(concept("rope"))
    from attnwalk.tutor.tiledquiz import tiled_questions  # --tiles B: predict m and l after a block

    out += tiled_questions(walk, tx, head, pick)
    out += cache_questions(walk, tx, pick)  # a causal mask: what a KV cache reuses, what it saves
    from attnwalk.tutor.gradquiz import grad_questions  # a target: which gradients are 0, and why

    out += grad_questions(walk, tx, pick)
    out = [q for q in out if q is not None]
    _spread_answers(out, random.Random(f"attnwalk:{seed}"))
    if pick:
        pick.shuffle(out)
    _in_stage_order(out)
    return out[:count] if count is not None else out


_PIPELINE = {"QK^T": 0, "S": 1, "A": 2, "Z": 4, "tiled": 5}


def _in_stage_order(out: list[Question]) -> None:
    """The number questions, wherever the shuffle put them, asked in the layer's order: each
    states its inputs, and an input must not be a later question's answer (S gives QKᵀ[i, j])."""
    slots = [i for i, q in enumerate(out) if q.kind == NUMBER]
    rank = lambda q: 3 if q.mode else _PIPELINE[q.cell[0] if q.cell else q.topic]  # noqa: E731
    # (the what-if reads A; the tiled questions have no cell, and come after Z)
    for i, q in zip(slots, sorted((out[i] for i in slots), key=rank)):
        out[i] = q


# -- which cells ----------------------------------------------------------------------------------


def _row(walk: Walk, A: np.ndarray, pick: random.Random | None) -> int:
    """The query row the number questions use: the focus row (else the last), or a random one."""
    scn = walk.scenario
    if pick:
        clear = [r for r in range(scn.n) if _unique_top(A[r], scn.allowed[r])]
        return pick.choice(clear or list(range(scn.n)))
    return scn.focus if scn.focus is not None else scn.n - 1


def _cell(walk: Walk, key: str, head: int, row: int,
          pick: random.Random | None) -> tuple[int, int, bool]:
    """A cell of stage `key` the walk did not work out on screen: on `row` where it can, off the
    diagonal and on an allowed key for query × key stages, else on any row; and whether the
    question may state its inputs (not when every such cell's answer is among them)."""
    scn = walk.scenario
    M = walk.matrix(key, head)
    shown = default_cell(walk, key, head)
    square = walk.stage(key).square

    def fits(r: int, c: int, given: bool) -> bool:
        if (r, c) == shown or (square and (r == c or not scn.allowed[r, c])):
            return False
        # never the answer among the inputs it states (Z from a one-hot column of V is a weight)
        return not given or number_text(float(M[r, c])) not in _given(walk, _EN, key, head, r, c)

    order = _key_order(walk, head, row) if square else list(range(M.shape[1]))
    for given in (True, False):  # else asked without its inputs
        choices = [(row, c) for c in order if fits(row, c, given)]
        if not choices:
            choices = [(r, c) for r in range(M.shape[0]) for c in range(M.shape[1]) if fits(r, c, given)]
        if choices:
            r, c = pick.choice(choices) if pick else choices[0]
            return r, c, given
    return row, 0, False


def _key_order(walk: Walk, head: int, row: int) -> list[int]:
    """The keys of `row`, the most attended first (the default question asks the runner-up)."""
    return [int(j) for j in np.argsort(-walk.matrix("A", head)[row], kind="stable")]


def _top(a: np.ndarray, allowed: np.ndarray) -> int:
    return int(np.argmax(np.where(allowed, a, -np.inf)))


def _unique_top(a: np.ndarray, allowed: np.ndarray) -> bool:
    """True when one allowed key has clearly the most weight (a question with one answer)."""
    ranked = np.sort(a[allowed])[::-1]
    return len(ranked) == 1 or ranked[0] - ranked[1] > 1e-6


def _argmax_row(walk: Walk, A: np.ndarray, row: int, pick: random.Random | None) -> int | None:
    """A row to ask "which key most?" of: one with a clear top and more than one key to choose
    from, not the focus row the walk's A screen works through (else it, if nothing else fits)."""
    scn = walk.scenario
    fits = [r for r in range(scn.n) if scn.allowed[r].sum() > 1 and _unique_top(A[r], scn.allowed[r])]
    others = [r for r in fits if r != default_cell(walk, "A")[0]]
    if not fits:
        return None
    return (pick.choice(others or fits)) if pick else (others or fits)[0]


# -- number questions -----------------------------------------------------------------------------


def _in_head(walk: Walk, tx: Text, head: int, question: str) -> str:
    """The question, led by its head ("head 1 / 2 · …") when the scenario has several."""
    heads = walk.scenario.heads
    return f"{tx.t('ui.head', head=head + 1, heads=heads)} · {question}" if heads > 1 else question


def _cell_question(walk: Walk, tx: Text, key: str, head: int, row: int, col: int,
                   given: bool = True, hint: str | None = None) -> Question:
    stage = walk.stage(key)
    value = float(walk.matrix(key, head)[row, col])
    rows, cols = axes(walk, stage, head, tx.lang)
    tol = tolerance(value)
    if stage.square:
        question = tx.t("quiz.cell.question", stage=stage.symbol, row=row + 1, col=col + 1,
                        row_token=rows[row], col_token=cols[col], tol=f"{tol:g}")
    else:
        question = tx.t("quiz.cell.question_dim", stage=stage.symbol, row_token=rows[row], col=cols[col],
                        tol=f"{tol:g}")
    if hint is None:
        additive = walk.scenario.score == "additive" and key == "QK^T"
        hint = tx.t("score.additive.explain") if additive else tx.t(
            "quiz.cell.hint", formula=stage.formula_in(walk.scenario, walk.mode))
    return Question("cell", NUMBER, _in_head(walk, tx, head, question), hint, value, number_text(value),
                    ("read_transposed",) if stage.square else (), tolerance=tol,
                    cell=(key, head, row, col), given=_given(walk, tx, key, head, row, col) if given else "",
                    mistakes=tuple(mistakes.candidates(walk, key, head, row, col)),
                    qid=f"cell:{key}:{head}:{row}:{col}")


def _vector(values) -> str:
    return "[" + ", ".join(number_text(float(v)) for v in values) + "]"


def _given(walk: Walk, tx: Text, key: str, head: int, row: int, col: int) -> str:
    """The numbers a cell is computed from, as the walk's earlier stages show them: the answer is
    never among them."""
    scn = walk.scenario
    mats = walk.heads[head].mats
    rows, cols = axes(walk, stage_named("A"), head, tx.lang)
    if key == "QK^T" and scn.score == "dot" and not scn.qk_norm and scn.d_k <= GIVEN_MAX:
        rot = "_rot" if scn.rope else ""  # RoPE: the rotated vectors are the ones dotted
        return tx.t("rope.given" if rot else "quiz.given.qk", row_token=rows[row], col_token=cols[col],
                    q=_vector(mats["Q" + rot][row]), k=_vector(mats["K" + rot][col]))
    if key == "S":
        return tx.t("quiz.given.s", row_token=rows[row], col_token=cols[col],
                    value=number_text(float(mats["QK^T"][row, col])), d_k=scn.d_k)
    if key == "A" and scn.m <= GIVEN_MAX:
        scores = [number_text(float(s)) if ok else "−∞"
                  for s, ok in zip(walk.scores(head)[row], scn.allowed[row])]
        # the scores softmax reads, named as the walk does: QKᵀ itself where this walk does not
        # divide (the what-if question's unscaled walk), not the S of the learner's walk
        base = "QKᵀ" if scn.score == "dot" and not walk.mode.divides else "S"
        base = f"{base} + B" if scn.bias == "alibi" else base
        name = f"{base} + M" if not scn.allowed.all() else base
        return tx.t("quiz.given.a", name=name, row_token=rows[row], scores="[" + ", ".join(scores) + "]")
    if key == "Z" and scn.m <= GIVEN_MAX:
        dims = axes(walk, stage_named("Z"), head, tx.lang)[1]
        return tx.t("quiz.given.z", row_token=rows[row], col=dims[col], a=_vector(mats["A"][row]),
                    v=_vector(mats["V"][:, col]))
    return ""


def _what_if(walk: Walk, tx: Text, head: int, row: int, col: int) -> Question:
    """"Without √d_k, what does A[bank, river] become?": the cell of A in the unscaled mode."""
    unscaled = with_mode(walk, "unscaled")
    value = float(unscaled.matrix("A", head)[row, col])
    rows, cols = axes(walk, stage_named("A"), head, tx.lang)
    tol = tolerance(value)
    before = float(walk.matrix("A", head)[row, col])
    question = tx.t("quiz.what_if.question", row_token=rows[row], col_token=cols[col],
                    before=number_text(before), d_k=walk.scenario.d_k, tol=f"{tol:g}")
    found = [(n, v) for n, v in mistakes.candidates(unscaled, "A", head, row, col)]
    found.append(("kept_scale", before))
    return Question("what_if", NUMBER, _in_head(walk, tx, head, question),
                    tx.t("alibi.what_if_hint" if walk.scenario.bias == "alibi" else "quiz.what_if.hint",
                         row_token=rows[row]),
                    value, number_text(value), ("scale_detail",), tolerance=tol,
                    cell=("A", head, row, col), mode="unscaled",
                    given=_given(unscaled, tx, "A", head, row, col), mistakes=tuple(found),
                    qid=f"what_if:{head}:{row}:{col}")


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


def _argmax_question(walk: Walk, tx: Text, head: int, row: int) -> Question:
    scn = walk.scenario
    A = walk.matrix("A", head)
    rows, cols = axes(walk, stage_named("A"), head)
    top = _top(A[row], scn.allowed[row])
    question = _in_head(walk, tx, head, tx.t("quiz.argmax.question", token=rows[row]))
    weights = " · ".join(f"{cols[j]} {number_text(A[row, j])}" for j in range(len(cols)))
    return Question("argmax", TOKEN, question, tx.t("quiz.argmax.hint", token=rows[row]), top,
                    cols[top], ("read_transposed",), tokens=tuple(cols),
                    token_text=scn.key_tokens,
                    worked=tx.t("quiz.argmax.worked", token=rows[row], weights=weights),
                    qid=f"argmax:{head}:{row}")


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
        values = {"row_token": rows[cell[0]], "col_token": cols[cell[1]], "heads": scn.heads,
                  "kv_heads": scn.groups, "group": scn.heads // scn.groups, "window": scn.window or 0}
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


def _spread_answers(out: list[Question | None], rng: random.Random) -> None:
    """Place each concept question's right option so that, within the quiz, the letters a, b, c
    are each right about equally often (a seeded shuffle of a, b, c, a, b, c, …), and the wrong
    options in a random order."""
    concept = [i for i, q in enumerate(out) if q is not None and q.kind == CHOICE]
    slots = [i % 3 for i in range(len(concept))]
    rng.shuffle(slots)
    for i, slot in zip(concept, slots):
        q = out[i]
        wrong = [1, 2]
        rng.shuffle(wrong)
        order = wrong[:slot] + [0] + wrong[slot:]
        out[i] = Question(q.topic, CHOICE, q.text, q.hint, slot, f"{LETTERS[slot]}) {q.choices[0]}",
                          q.covers, choices=tuple(q.choices[j] for j in order),
                          why=tuple(q.why[j] for j in order), qid=q.qid)


def cell_question(walk: Walk, key: str, row: int, col: int, head: int = 0, lang: str = "en",
                  what_if: bool = False) -> Question:
    """The number question on one chosen cell (a what-if: that cell of A without √d_k), as the
    quiz would ask it."""
    if what_if:
        return _what_if(walk, text(lang), head, row, col)
    return _cell_question(walk, text(lang), key, head, row, col)
