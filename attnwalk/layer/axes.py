"""The rows and columns of a stage: their labels, the cell a screen works out, and the one way a
learner's typed row or column (a number or a token) becomes an index, for `explain`, the walk's c
and the quiz alike."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer.safe import escaped
from attnwalk.layer.roles import VOCAB
from attnwalk.layer.stages import TOKENS, Stage
from attnwalk.numbering import shown as person

if TYPE_CHECKING:
    from attnwalk.layer.walk import Walk


def token_labels(tokens: Sequence[str]) -> tuple[str, ...]:
    """Row and column labels: the tokens, with the 1-based position added to repeated ones, and
    control and bidirectional-override characters escaped (safe.py): a label is shown, never obeyed."""
    return _labels(tuple(tokens))


@lru_cache(maxsize=16)
def _labels(tokens: tuple[str, ...]) -> tuple[str, ...]:
    # Every screen of a walk asks for the same n labels: made once, not n per screen.
    seen: dict[str, int] = {}
    for tok in tokens:
        seen[tok] = seen.get(tok, 0) + 1
    return tuple(escaped(f"{tok}#{person(i)}" if seen[tok] > 1 else tok) for i, tok in enumerate(tokens))


@lru_cache(maxsize=16)
def dim_labels(count: int) -> tuple[str, ...]:
    """Column labels of a matrix whose columns are dimensions: 1 … count, counted from 1 as rows
    are, so that what a learner reads is what `explain` and the walk's c take."""
    return tuple(str(person(j)) for j in range(count))


def axes(walk: Walk, stage: Stage, head: int = 0,
         lang: str = "en") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Row and column labels of a stage's matrix: tokens, or its dimensions by the names the
    scenario gives them in `lang`, else by number 1 … d."""
    scn = walk.scenario
    if stage.rows in ("n", "m"):
        rows = token_labels(scn.key_tokens if stage.rows == "m" else scn.tokens)
    else:  # a weight's rows are dimensions (∂L/∂W_Q: d_model × h·d_k)
        rows = _dims(walk, stage, head, lang, stage.rows, 0)
    if stage.kind == TOKENS:
        return rows, ()
    if stage.square:
        return rows, token_labels(scn.key_tokens)
    return rows, _dims(walk, stage, head, lang, stage.cols, 1)


def _dims(walk: Walk, stage: Stage, head: int, lang: str, dim: str, axis: int) -> tuple[str, ...]:
    """Labels of `axis` of the stage's matrix, whose entries are dimension `dim`: the names the
    scenario gives them (one head's d_k or d_v: not a split matrix's), else 1 … count."""
    count = walk.matrix(stage.key, head).shape[axis]
    names = walk.scenario.dimension_names(dim, lang)
    if names is not None and len(names) == count:
        return tuple(escaped(name) for name in names)
    return dim_labels(count)


def default_cell(walk: Walk, key: str, head: int = 0) -> tuple[int, int]:
    """The cell a screen works out: the focus row (else the last query), and for query × key
    stages the key that row attends to most; in a matrix of one block per head (Q, K, V, concat)
    the first column of head `head`'s block, in a matrix of one column per head, that column."""
    scn = walk.scenario
    stage = walk.stage(key)
    if stage.rows not in ("n", "m"):  # a weight's gradient: the weight that moves most
        M = np.abs(walk.matrix(key, head))
        row, col = np.unravel_index(int(np.argmax(M)), M.shape)
        return int(row), int(col)
    row = scn.focus if scn.focus is not None else scn.n - 1
    row = min(row, (scn.m if stage.rows == "m" else scn.n) - 1)
    if stage.square:
        return row, attended(walk, stage, head, row)
    if stage.cols == VOCAB:  # a score or probability per word: the row's likeliest next word
        return row, int(np.argmax(walk.matrix(key, head)[row]))
    if head and stage.split and not stage.per_head:
        return row, head * (walk.matrix(key).shape[1] // scn.heads)
    return row, head if stage.cols == "h" else 0


def attended(walk: Walk, stage: Stage, head: int, row: int) -> int:
    """The key query `row` attends to most in `stage`'s own block (A⁽²⁾ for block 2's S⁽²⁾; the
    graph's first A where none shares its block)."""
    from attnwalk.layer.roles import softmaxes

    weights = softmaxes(walk.graph)
    own = next((s for s in weights if s.block == stage.block), weights[0])
    return int(np.argmax(walk.matrix(own.key, head)[row]))


class PickError(UsageError):
    """What a learner typed names no row or column, or more than one (a repeated token)."""

    def __init__(self, message: str, *, value: str, repeated: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.value = value.strip()
        self.repeated = repeated  # 1-based rows of a token that appears more than once
        # 0 typed by someone who counts from 0: worth saying that the numbering starts at 1
        self.zero = self.value.isdecimal() and int(self.value) == 0


def _fold(s: str) -> str:
    """For matching what was typed: full-width and half-width alike, any case."""
    return unicodedata.normalize("NFKC", s).casefold()


def pick_index(value: str, tokens: Sequence[str], labels: Sequence[str], what: str = "row") -> int:
    """A 0-based index from what a learner typed: a token ("撩"; "River" for "river" when no other
    token folds to it), a repeated token's label ("the#4") or a row number counted from 1 (the
    tokens table's # column). A repeated token on its own is ambiguous: PickError asks for its
    number."""
    value = value.strip()
    if value in labels:  # unique tokens, or a repeated one written as its label "the#4"
        return labels.index(value)
    for same in (lambda t: t == value, lambda t: _fold(t) == _fold(value)):
        found = [i for i, tok in enumerate(tokens) if same(tok)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            where = ", ".join(str(person(i)) for i in found)
            raise PickError(f"{what} '{value}' appears more than once ({what}s {where}, counted "
                            f"from 1); give its {what} number instead, e.g. {person(found[-1])}", value=value,
                            repeated=tuple(person(i) for i in found))
        folded = [i for i, label in enumerate(labels) if same(label)]  # "The#4"
        if len(folded) == 1:
            return folded[0]
    if value.isdecimal() and 1 <= int(value) <= len(tokens):
        return int(value) - 1
    if value.isdecimal() and int(value) == 0:
        raise PickError(f"no {what} 0: {what}s are numbered from 1, so the first, {labels[0]}, is "
                        f"{what} 1; give 1–{len(tokens)} (the tokens' # column) or a token",
                        value=value)
    raise PickError(f"no {what} '{value}': give a {what} number 1–{len(tokens)} (the tokens' # "
                    f"column) or one of the tokens: {', '.join(labels)}", value=value)


def pick_head(scn, value: str | int | None, *, every: bool = False) -> int | None:
    """--head as typed, the one check of every command that takes it: a head counted from 1,
    returned 0-based (head 1 when not given); with `every`, "all" is None (every head)."""
    if value is None:
        return 0
    text = str(value).strip()
    if every and text.lower() == "all":
        return None
    if text.isdecimal() and 1 <= int(text) <= scn.heads:
        return int(text) - 1
    count = "1 head: give 1" if scn.heads == 1 else f"{scn.heads} heads, numbered from 1: give 1 to {scn.heads}"
    raise UsageError(f"--head {text}: {scn.name} has {count}" + (", or all" if every else ""))


def pick_dim(value: str, labels: Sequence[str]) -> int:
    """A dimension column by its label as the matrix table shows it (a name the scenario gives it,
    any case), or by its number 1 … d, counted from 1 as the table's unnamed columns are."""
    value = value.strip()
    folded = [i for i, label in enumerate(labels) if _fold(label) == _fold(value)]
    if value in labels or len(folded) == 1:
        return labels.index(value) if value in labels else folded[0]
    if value.isdecimal() and 1 <= int(value) <= len(labels):
        return int(value) - 1
    named = "" if labels == dim_labels(len(labels)) else f" ({', '.join(labels)})"
    if value.isdecimal() and int(value) == 0:
        raise PickError(f"no column 0: columns are numbered from 1, so the first is column 1; "
                        f"give 1–{len(labels)}{named}", value=value)
    raise PickError(f"no column '{value}': this stage's columns are dimensions 1–{len(labels)}"
                    f"{named}", value=value)
