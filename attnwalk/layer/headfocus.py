"""Where a head looks most: the kind of key most queries' top weight falls on (a special token,
itself, its neighbour, the first token), for the screen of every head at a glance (`attnwalk
model`'s heads stage; render/headmaps.py)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# What a query's top key is, relative to the query: the labels the all-heads screen names.
SPECIAL, ITSELF, PREVIOUS, NEXT, FIRST, TOKEN = "special", "itself", "previous", "next", "first", "token"
TIE = "tie"  # no one key: the row's top weight is shared (uniform mode gives every row one)


class Focus(NamedTuple):
    """Where one head looks most: the kind of key most queries' top weight falls on, the key
    itself when the kind is one token (SPECIAL, FIRST or TOKEN), and how many queries do so."""

    kind: str
    key: int | None  # the key's index for SPECIAL, FIRST and TOKEN
    count: int  # queries whose top key is of this kind (and this key)
    of: int  # queries in all


def top_kind(i: int, j: int, special: tuple[bool, ...]) -> tuple[str, int | None]:
    """What query i's top key j is: a special token, itself, its neighbour, the first token, or
    another token. A special token is named first ([CLS], [SEP] are where idle heads park)."""
    if special[j]:
        return SPECIAL, j
    if j == i:
        return ITSELF, None
    if j == i - 1:
        return PREVIOUS, None
    if j == i + 1:
        return NEXT, None
    if j == 0:
        return FIRST, 0
    return TOKEN, j


def looks_most_at(A: np.ndarray, special: tuple[bool, ...]) -> Focus:
    """The commonest kind of top key over the query rows of A (n, n), a row whose top weight
    several keys share counting as TIE; a tie between kinds goes to the kind named first in
    top_kind's order, then to the earlier key."""
    from attnwalk.layer.ops import row_maxima

    tops = row_maxima(A)  # (n, n) True at each row's largest weight, at each of tied ones
    counts: dict[tuple[str, int | None], int] = {}
    for i, row in enumerate(A):
        kind = top_kind(i, int(np.argmax(row)), special) if tops[i].sum() == 1 else (TIE, None)
        counts[kind] = counts.get(kind, 0) + 1
    order = (SPECIAL, ITSELF, PREVIOUS, NEXT, FIRST, TOKEN, TIE)
    (kind, key), count = max(counts.items(),
                             key=lambda item: (item[1], -order.index(item[0][0]), -(item[0][1] or 0)))
    return Focus(kind, key, count, len(A))
