"""A quiz question, and the reading and checking of answers to it.

Pure: `check(question, typed)` decides an answer; nothing here reads input or prints. The questions
are built in tutor/questions.py, a wrong number's mistake is diagnosed in tutor/mistakes.py.

How typed answers are read (see `check`):

- numbers: "7.29", "-0.5", "1e-3", full-width digits, a decimal comma ("0,81"); a percentage is a
  fraction ("81%" = 0.81) and so is "1/4". Right when within the tolerance the question states,
  which comes from the precision it asks (`fair`): half a unit of the second decimal (±0.005),
  of the third significant digit for large numbers (±0.05 from 10 on), of the second significant
  digit for small ones (±0.0005 for -0.0176, ±5e-08 for -3.66e-06: relative, so two small numbers
  never agree for being small), one place finer where a misconception's number would lie inside
  it; a question asked exactly (a masked weight, a count) takes that number and nothing else:
  1e-300 is not 0.
- tokens: the token's text (exactly, else ignoring case and width) or its 1-based position.
- shapes: rows and columns as "3x3", "3 × 3", "3*3", "3,3", "(3, 3)" or "3 by 3".
- choices: a, b, c (any case, "(b)" and "b)" too) or 1, 2, 3.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, replace

from attnwalk.render.options import ViewOptions
from attnwalk.render.style import number
from attnwalk.text import Text
from attnwalk.layer.axes import PickError, pick_index

NUMBER, TOKEN, SHAPE, CHOICE = "number", "token", "shape", "choice"
LETTERS = "abcdefgh"

# The common mistakes the lessons list (003 §13, 004 常见错误); every quiz covers each of them that
# its scenario has (heads_repeat only with several heads).
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
    "word_order": "002 §2.1, 004: without positions attention is permutation-equivariant: reordering "
                  "the tokens only reorders the rows; positions (or a mask) are what make order matter",
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
    why: tuple[str, ...] = ()  # CHOICE: why each option is wrong ("" for the right one)
    given: str = ""  # NUMBER: the inputs to compute it from ("S[撩, :] = [3.1919, 3.8314, 5.1526]")
    mode: str = ""  # NUMBER: a what-if's mode ("unscaled"); the walk's own when ""
    mistakes: tuple[tuple[str, float], ...] = ()  # NUMBER: what each known mistake gives (mistakes.py);
    # TOKEN: the 0-based token each one names
    qid: str = ""  # the same question in another run of the same quiz (for --review)
    masked: bool = False  # NUMBER: a masked weight, exactly 0: any other answer is the misconception


def tolerance(value: float, finer: int = 0) -> float:
    """Half a unit of the last place asked: of the second decimal (±0.005), of the third
    significant digit from 10 on (±0.05 for 72.87, ±5 for 1234), of the second below 0.1
    (±0.0005 for 0.0176, ±5e-08 for 3.66e-06), `finer` places finer."""
    magnitude = math.floor(math.log10(abs(value))) if value else 0
    places = (max(magnitude, 0) - 2 if magnitude >= -1 else magnitude - 1) - finer  # the last place asked: 10^places
    return round(0.5 * 10.0 ** places, max(-places + 1, 0))


PRINTED = 5e-5 + 1e-12  # half a unit of the fourth decimal: how far printing moves a number
FINER = 1  # how many places finer a question may ask: 3 decimals, which the 4 given still support


def fair(answer: float, found: list[tuple[str, float]], masked: bool = False,
         shown=None) -> tuple[float, tuple[tuple[str, float], ...]] | None:
    """The tolerance to ask `answer` with, and the mistakes to list (`found`, mistakes.py), or None
    when a misconception gives a number no precision asked can tell from the answer (the question
    is then not asked). A slip inside the tolerance is dropped (not wrong at that precision); a
    misconception inside it asks one decimal more; a value is listed under one name, the first in
    mistakes.NAMES. A masked weight is asked exactly (tolerance 0)."""
    from attnwalk.tutor.mistakes import NAMES, SLIPS

    shown = shown or number_text
    # inside: answered as printed (4 decimals), the mistake's number would be accepted
    margin = lambda tol: min(PRINTED, tol / 10) if tol else 1e-12  # noqa: E731  (relative for small numbers)
    inside = lambda tol: [n for n, v in found if abs(v - answer) <= tol + margin(tol)]  # noqa: E731
    for finer in range(FINER + 1):
        tol = 0.0 if masked else tolerance(answer, finer)
        if all(name in SLIPS for name in inside(tol)):
            break
    else:
        return None
    # one name a value: the first in NAMES, and a value within the tolerance of one already named
    # is the same answer at the precision asked (0.0000 and 2.5e-07 against ±0.005)
    named: list[tuple[str, float]] = []
    for name, value in sorted(found, key=lambda f: NAMES.index(f[0])):
        if abs(value - answer) <= tol + margin(tol) or shown(value) == shown(answer):
            continue
        if all(abs(value - v) > tol + margin(tol) and shown(value) != shown(v) for _, v in named):
            named.append((name, value))
    return tol, tuple(named)


def placed(q: Question, rng, slot: int | None = None) -> Question:
    """A choice question given with its right option first, the options reordered: the right one
    at `slot` (else a random one), the wrong ones in a random order; its answer follows."""
    slot = rng.randrange(len(q.choices)) if slot is None else slot
    wrong = list(range(1, len(q.choices)))
    rng.shuffle(wrong)
    order = wrong[:slot] + [0] + wrong[slot:]
    return replace(q, answer=slot, shown=f"{LETTERS[slot]}) {q.choices[0]}",
                   choices=tuple(q.choices[j] for j in order), why=tuple(q.why[j] for j in order))


def tolerance_text(tx: Text, tol: float) -> str:
    """"±0.005" as a question states its tolerance, or "exactly" for a masked weight."""
    return f"±{tol:g}" if tol else tx.t("quiz.exactly")


def number_text(x: float, precision: int = 4) -> str:
    """A number as the walk's tables print it (render.style.number): never "-0.0000", and in
    scientific notation where decimals cannot show it (1.4142e+300)."""
    return number(float(x), ViewOptions(precision=precision))


def answer_text(x: float, tol: float) -> str:
    """The right answer as shown after a wrong one, to as many decimals as its tolerance asks (at
    least the tables' 4): 0.000173 at ±5e-06, not 0.0002, which the tolerance would refuse."""
    if not tol or x == 0 or abs(x) < 1e-4:  # exact, or in scientific notation: 5 digits already
        return number_text(x)
    return number_text(x, max(4, math.ceil(-math.log10(tol))))


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
        if x is None:
            return None
        if not q.tolerance:  # asked exactly (a masked weight, a count): 1e-300 is not 0
            return x == float(q.answer)
        return abs(x - float(q.answer)) <= q.tolerance + 1e-12 * min(1.0, q.tolerance)
    if q.kind == SHAPE:
        shape = parse_shape(raw)
        return None if shape is None else shape == q.answer
    if q.kind == CHOICE:
        choice = parse_choice(raw, len(q.choices))
        return None if choice is None else choice == q.answer
    found = parse_token(raw, q.token_text, q.tokens)
    return None if found is None else found == q.answer


def diagnosis(q: Question, raw: str) -> list[tuple[str, float]]:
    """The known mistakes a wrong answer `raw` shows, as (name, value), nearest first: for a number
    the mistakes whose value it matches (mistakes.diagnose), and for a masked weight any number
    but 0 (masked_small, with the value typed); for a token the mistake that names it."""
    from attnwalk.tutor.mistakes import diagnose

    if check(q, raw) is not False:
        return []
    if q.kind == TOKEN:
        chosen = parse_token(raw, q.token_text, q.tokens)
        return [(name, value) for name, value in q.mistakes if int(value) == chosen][:1]
    if q.kind != NUMBER:
        return []
    x = parse_number(raw)
    near = q.tolerance or tolerance(x)  # a masked weight's mistakes are matched as any number is
    found = diagnose(list(q.mistakes), x, near, None if q.masked else float(q.answer))
    return [*found, ("masked_small", x)] if q.masked else found


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
