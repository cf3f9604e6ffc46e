"""Predict-then-reveal questions built from one walk's own numbers, and the checking of answers.

Pure: `questions(walk, lang, seed)` builds the same list every time for the same arguments, and
`check(question, typed)` decides an answer; nothing here reads input or prints.

How typed answers are read (see `check`):

- numbers: "7.29", "-0.5", "1e-3", full-width digits, a decimal comma ("0,81"); a percentage is a
  fraction ("81%" = 0.81) and so is "1/4". Right when within the tolerance the question states:
  ±max(0.005, 1% of the answer), rounded up to two significant digits, so the stated one applies.
- tokens: the token's text (exactly, else ignoring case and width) or its 1-based position.
- shapes: rows and columns as "3x3", "3 × 3", "3*3", "3,3", "(3, 3)" or "3 by 3".
- choices: a, b, c (any case, "(b)" and "b)" too) or 1, 2, 3.
"""

from __future__ import annotations

import math
import random
import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from attnwalk.text import Text, text
from attnwalk.layer.axes import PickError, axes, pick_index
from attnwalk.layer.stages import stage_named
from attnwalk.layer.walk import Walk

NUMBER, TOKEN, SHAPE, CHOICE = "number", "token", "shape", "choice"
ABS_TOL, REL_TOL = 0.005, 0.01
LETTERS = "abcdefgh"

# The common mistakes the lessons list (003 §13, 004 常见错误); every quiz covers each of them.
MISTAKES: dict[str, str] = {
    "params_vs_activations": "003 §13: W_Q, W_K, W_V are parameters; Q, K, V are this input's activations",
    "scores_shape": "003 §13: QKᵀ is n × n (n × m), not n × d_k",
    "k_is_content": "003 §13: K takes part in matching; V carries the content that is mixed",
    "output_updates_v": "003 §13: the output is a new representation; it does not update V",
    "heads_repeat": "003 §13: heads are not the same attention repeated; each has its own projections",
    "qkv_same": "004: Q, K and V are different projections, not the same vector",
    "softmax_axis": "004: softmax runs along each query's key axis",
    "scale_detail": "004: √d_k is neither a rounding detail nor a guarantee against saturation",
    "read_transposed": "004: rows are the querying tokens, columns the keys",
}

# Concept questions: the text table quiz.<topic> holds question, answer, wrong_a, wrong_b, hint.
CONCEPTS: dict[str, tuple[str, ...]] = {
    "params": ("params_vs_activations",),
    "qkv": ("qkv_same",),
    "scale": ("scale_detail",),
    "softmax_axis": ("softmax_axis",),
    "read_a": ("read_transposed",),
    "k_vs_v": ("k_is_content",),
    "output": ("output_updates_v",),
    "mask": (),
    "uniform": (),
    "heads": ("heads_repeat",),
}


@dataclass(frozen=True)
class Question:
    topic: str  # the quiz.<topic> text it comes from: "cell", "argmax", "shape", "softmax_axis", …
    kind: str  # NUMBER | TOKEN | SHAPE | CHOICE
    text: str  # the question, in the walk's language
    hint: str
    answer: float | int | tuple[int, int]  # number | 0-based token | (rows, cols) | right choice
    shown: str  # the right answer as printed after a wrong one
    covers: tuple[str, ...] = ()  # MISTAKES it tests
    tolerance: float = 0.0  # NUMBER: the ± the question states
    choices: tuple[str, ...] = ()  # CHOICE: the options in the order shown (a, b, c)
    tokens: tuple[str, ...] = ()  # TOKEN: the labels that may be named, in order
    token_text: tuple[str, ...] = ()  # TOKEN: the same tokens as spelled, repeats and all
    cell: tuple[str, int, int, int] | None = None  # (stage key, head, row, col) to work out
    worked: str = ""  # questions without a cell: the arithmetic behind the answer
    example: str = ""  # SHAPE: the format to answer in, as a shape that is not the answer ("5x2")


def tolerance(value: float) -> float:
    """±max(0.005, 1% of |value|), rounded up to two significant digits (0.073 for 7.2868)."""
    raw = max(ABS_TOL, REL_TOL * abs(value))
    exp = math.floor(math.log10(raw)) - 1
    return round(math.ceil(raw / 10.0 ** exp - 1e-9) * 10.0 ** exp, max(-exp, 0))


def number_text(x: float, precision: int = 4) -> str:
    out = f"{x:.{precision}f}"
    return out[1:] if out.startswith("-") and not out.strip("-0.") else out


# -- building the questions -------------------------------------------------------------------


def questions(walk: Walk, lang: str = "en", seed: int | None = None,
              count: int | None = None) -> list[Question]:
    """The quiz for `walk`: its own cells, shapes and argmax, and the concept questions.

    Without a seed the cells are the focus row's (as the walk shows them) and the order is fixed;
    a seed picks other rows, columns and heads and shuffles the order. Choices are shuffled
    either way, deterministically. `count` keeps the first questions of the order.
    """
    tx = text(lang)
    pick = random.Random(seed) if seed is not None else None
    scn = walk.scenario
    head = pick.randrange(scn.heads) if pick else 0
    A = walk.matrix("A", head)
    rows, cols = axes(walk, stage_named("A"), head)
    row = _row(walk, A, pick)
    allowed = [int(j) for j in np.flatnonzero(scn.allowed[row])]
    top = _top(A[row], scn.allowed[row])

    def col(default: int) -> int:
        return pick.choice(allowed) if pick else default

    others = [j for j in allowed if j != top]
    cells = {"QK^T": (row, col(top)), "S": (row, col(others[0] if others else top)),
             "A": (row, col(top)), "Z": (row, pick.randrange(scn.d_v) if pick else 0)}

    def cell(key: str, covers: tuple[str, ...] = ()) -> Question:
        r, c = cells[key]
        return _cell_question(walk, tx, key, head, r, c, covers)

    def concept(topic: str) -> Question:
        return _concept(tx, topic, seed, row_token=rows[row], col_token=cols[top])

    out = [cell("QK^T"), _shape_question(walk, tx), concept("params"), concept("qkv"),
           cell("S"), concept("scale"), concept("softmax_axis")]
    if _unique_top(A[row], scn.allowed[row]):
        out.append(_argmax_question(walk, tx, head, row))
    out += [cell("A"), concept("read_a"), concept("k_vs_v"), cell("Z"), concept("output")]
    forbidden = np.argwhere(~scn.allowed)
    if len(forbidden):
        r, c = pick.choice(list(forbidden)) if pick else forbidden[0]
        out.append(_cell_question(walk, tx, "A", head, int(r), int(c), (), hint=tx.t("quiz.mask.hint")))
    out += [concept("mask"), concept("uniform"), concept("heads")]
    if pick:
        pick.shuffle(out)
    return out[:count] if count is not None else out


def _row(walk: Walk, A: np.ndarray, pick: random.Random | None) -> int:
    """The query row the number questions use: the focus row (else the last), or a random one."""
    scn = walk.scenario
    if pick:
        clear = [r for r in range(scn.n) if _unique_top(A[r], scn.allowed[r])]
        return pick.choice(clear or list(range(scn.n)))
    return scn.focus if scn.focus is not None else scn.n - 1


def _top(a: np.ndarray, allowed: np.ndarray) -> int:
    return int(np.argmax(np.where(allowed, a, -np.inf)))


def _unique_top(a: np.ndarray, allowed: np.ndarray) -> bool:
    """True when one allowed key has clearly the most weight (a question with one answer)."""
    ranked = np.sort(a[allowed])[::-1]
    return len(ranked) == 1 or ranked[0] - ranked[1] > 1e-6


def _in_head(walk: Walk, tx: Text, head: int, question: str) -> str:
    """The question, led by its head ("head 1 / 2 · …") when the scenario has several."""
    heads = walk.scenario.heads
    return f"{tx.t('ui.head', head=head + 1, heads=heads)} · {question}" if heads > 1 else question


def _cell_question(walk: Walk, tx: Text, key: str, head: int, row: int, col: int,
                   covers: tuple[str, ...], hint: str | None = None) -> Question:
    stage = walk.stage(key)
    value = float(walk.matrix(key, head)[row, col])
    rows, cols = axes(walk, stage, head, tx.lang)
    tol = tolerance(value)
    name = stage.symbol
    if stage.square:
        question = tx.t("quiz.cell.question", stage=name, row=row + 1, col=col + 1,
                        row_token=rows[row], col_token=cols[col], tol=f"{tol:g}")
    else:
        question = tx.t("quiz.cell.question_dim", stage=name, row_token=rows[row], col=cols[col],
                        tol=f"{tol:g}")
    question = _in_head(walk, tx, head, question)
    if hint is None:
        additive = walk.scenario.score == "additive" and key == "QK^T"
        hint = tx.t("score.additive.explain") if additive else tx.t(
            "quiz.cell.hint", formula=stage.formula_in(walk.scenario, walk.mode))
    return Question("cell", NUMBER, question, hint, value, number_text(value), covers,
                    tolerance=tol, cell=(key, head, row, col))


def _shape_question(walk: Walk, tx: Text) -> Question:
    scn = walk.scenario
    example = shape_example(scn.n, scn.m, scn.d_k)
    return Question("shape", SHAPE, tx.t("quiz.shape.question", example=example),
                    tx.t("quiz.shape.hint"), (scn.n, scn.m), f"{scn.n} × {scn.m}", ("scores_shape",),
                    worked=tx.t("quiz.shape.worked", n=scn.n, m=scn.m, d_k=scn.d_k), example=example)


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
                    worked=tx.t("quiz.argmax.worked", token=rows[row], weights=weights))


def _concept(tx: Text, topic: str, seed: int | None, **values: str) -> Question:
    field = lambda name: tx.t(f"quiz.{topic}.{name}", **values)  # noqa: E731
    options = [field("answer"), field("wrong_a"), field("wrong_b")]
    order = list(range(len(options)))
    random.Random(f"{'attnwalk' if seed is None else seed}:{topic}").shuffle(order)
    return Question(topic, CHOICE, field("question"), field("hint"), order.index(0),
                    f"{LETTERS[order.index(0)]}) {options[0]}", CONCEPTS[topic],
                    choices=tuple(options[i] for i in order))


# -- reading answers --------------------------------------------------------------------------


def _fold(raw: str) -> str:
    """Full-width digits and letters made plain, the minus sign made ASCII, the ends trimmed."""
    return unicodedata.normalize("NFKC", raw).replace("−", "-").strip()


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?", re.IGNORECASE)
_SHAPE = re.compile(r"\(?\s*(\d+)\s*(?:x|×|\*|,|by|乘|\s)\s*(\d+)\s*\)?", re.IGNORECASE)
_QUOTES = "\"'`「」『』“”‘’()[]"


def parse_number(raw: str) -> float | None:
    s = _fold(raw).replace(" ", "")
    scale = 1.0
    if s.endswith("%"):
        s, scale = s[:-1], 0.01
    if s.count(",") == 1 and "." not in s:
        s = s.replace(",", ".")  # a decimal comma
    parts = s.split("/")
    if len(parts) > 2 or not all(_NUMBER.fullmatch(p) for p in parts):
        return None
    values = [float(p) for p in parts]
    if len(values) == 2:
        if values[1] == 0:
            return None
        values = [values[0] / values[1]]
    return values[0] * scale


def parse_shape(raw: str) -> tuple[int, int] | None:
    match = _SHAPE.fullmatch(_fold(raw))
    return (int(match[1]), int(match[2])) if match else None


def parse_choice(raw: str, count: int) -> int | None:
    s = _fold(raw).lower().strip(_QUOTES + ". ")
    if len(s) == 1 and s in LETTERS[:count]:
        return LETTERS.index(s)
    if s.isdecimal() and 1 <= int(s) <= count:
        return int(s) - 1
    return None


def parse_token(raw: str, tokens: tuple[str, ...], labels: tuple[str, ...]) -> int | None:
    """The 0-based token a typed answer names (as `explain` and the walk's c read it: a token, a
    label such as the#4, or a number from 1), or None when it names none or is a repeated token
    without its number."""
    try:
        return pick_index(_fold(raw).strip(_QUOTES + " "), tokens, labels)
    except PickError:
        return None


def check(q: Question, raw: str) -> bool | None:
    """Whether `raw` answers `q`, or None when it cannot be read as that kind of answer."""
    if q.kind == NUMBER:
        x = parse_number(raw)
        return None if x is None else abs(x - float(q.answer)) <= q.tolerance + 1e-12
    if q.kind == SHAPE:
        shape = parse_shape(raw)
        return None if shape is None else shape == q.answer
    if q.kind == CHOICE:
        choice = parse_choice(raw, len(q.choices))
        return None if choice is None else choice == q.answer
    found = parse_token(raw, q.token_text, q.tokens)
    return None if found is None else found == q.answer


def unreadable(q: Question, tx: Text, raw: str = "") -> str:
    """What to type instead, when `check` could not read an answer `raw`."""
    if q.kind == NUMBER:
        return tx.t("quiz.not_a_number")
    if q.kind == SHAPE:
        return tx.t("quiz.not_a_shape", example=q.example)
    if q.kind == CHOICE:
        return tx.t("quiz.not_a_choice", choices=choice_list(q))
    try:
        pick_index(_fold(raw).strip(_QUOTES + " "), q.token_text, q.tokens)
    except PickError as err:
        if err.repeated:  # a token spelled twice in the sentence: which one is meant?
            return tx.t("ui.repeated_token", value=err.value,
                        rows=tx.t("ui.list_sep").join(map(str, err.repeated)))
    return tx.t("quiz.not_a_token", tokens=", ".join(q.tokens), count=len(q.tokens))


def counted_wrong(q: Question, raw: str, tx: Text) -> str:
    """Why a piped line that `check` could not read is scored wrong: "(not a number: counted as
    wrong)". A script cannot be asked again, and skipping the line would shift every later answer."""
    if not raw.strip():
        return tx.t("quiz.piped_empty")
    kind = {NUMBER: "number", SHAPE: "shape", CHOICE: "choice"}.get(q.kind, "token")
    return tx.t(f"quiz.piped_{kind}", choices=choice_list(q), count=len(q.tokens))


def choice_list(q: Question) -> str:
    return "/".join(LETTERS[:len(q.choices)])
