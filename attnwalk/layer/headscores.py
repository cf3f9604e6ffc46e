"""What a head does on a repeated random sequence, as interpretability work scores it (Olsson et
al. 2022, "In-context learning and induction heads"; TransformerLens): a start token, R random
tokens, the same R again. With A one head's weights (N × N, indices from 0), each score is a mean
of one diagonal's weights:

- previous_token: A[i, i − 1] over i = 1 … N − 1 (one token back);
- induction: A[i, i − R + 1] over the second copy's positions i (the token after the same token's
  earlier occurrence: what comes next, copied from the first time);
- first_token: A[i, 0] over i = 1 … N − 1 (weight parked on the first token);
- self: A[i, i] over every i.

A score describes what a head does on this input, not what it is for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Repeated:
    """Where the pieces of a repeated sequence sit: `first` random token's index, `repeat` = R."""

    first: int
    repeat: int

    @property
    def second(self) -> range:
        """The second copy's positions."""
        return range(self.first + self.repeat, self.first + 2 * self.repeat)


@dataclass(frozen=True)
class Score:
    """One score: its key (the JSON's), and the (query, key) cells of A it averages."""

    key: str
    cells: Callable[[int, Repeated], tuple[np.ndarray, np.ndarray]]  # N, layout -> (rows, cols)

    def of(self, A: np.ndarray, layout: Repeated) -> np.ndarray:
        """This score of every head: A is (H, N, N); returns (H,)."""
        rows, cols = self.cells(A.shape[-1], layout)
        return A[:, rows, cols].mean(axis=-1)


def _previous(n: int, layout: Repeated) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(1, n)
    return i, i - 1


def _induction(n: int, layout: Repeated) -> tuple[np.ndarray, np.ndarray]:
    i = np.asarray(layout.second)
    return i, i - layout.repeat + 1


def _first(n: int, layout: Repeated) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(1, n)
    return i, np.zeros_like(i)


def _self(n: int, layout: Repeated) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(n)
    return i, i


SCORES = (Score("previous_token", _previous), Score("induction", _induction),
          Score("first_token", _first), Score("self", _self))


def head_scores(A: np.ndarray, layout: Repeated) -> dict[str, np.ndarray]:
    """Every score of every head of one layer: A (H, N, N) -> {key: (H,)}."""
    if A.shape[-1] != layout.first + 2 * layout.repeat:
        raise ValueError(f"A is {A.shape[-1]} tokens wide, the sequence {layout.first + 2 * layout.repeat}")
    return {score.key: score.of(A, layout) for score in SCORES}


def repeated_layout(tokens: tuple[str, ...]) -> Repeated | None:
    """Where a sequence ends in R tokens said twice (`… a b c a b c`), the longest such R: the
    layout the induction score needs. None when it does not (no induction score is defined)."""
    n = len(tokens)
    for repeat in range(n // 2, 0, -1):
        first = n - 2 * repeat
        if tokens[first:first + repeat] == tokens[first + repeat:]:
            return Repeated(first, repeat)
    return None


def scores_without_layout(A: np.ndarray) -> dict[str, np.ndarray]:
    """The scores that need no repeated sequence (all but induction), of every head: (H, N, N) -> {key: (H,)}."""
    return {score.key: score.of(A, Repeated(0, 0)) for score in SCORES if score.key != "induction"}
