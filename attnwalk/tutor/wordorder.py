"""Does word order matter? The question asked before X: if two tokens traded places, what would
happen to X and Z?

The truth is computed, not assumed: the layer is run again on the scenario with the two tokens
swapped (scenario/variant.py) and its rows of X and Z, put back in the first order, are set
against this walk's. Without positions, a mask or a position-dependent score, attention is
permutation-equivariant: the rows only trade places. Sinusoidal (or given) positions change the two
tokens' rows of X; a mask, RoPE's rotation or ALiBi's bias leave X's rows as they were and change Z.
"""

from __future__ import annotations

import random
import weakref

import numpy as np

from attnwalk.layer.axes import token_labels
from attnwalk.layer.walk import Walk, compute
from attnwalk.scenario.variant import swapped
from attnwalk.text import Text
from attnwalk.tutor.quiz import CHOICE, Question, placed

SAME = 1e-9  # rows this close are the same vector (the same sums, in another order)
# The options, by what is true: the right one first, then the two wrong ones offered beside it.
OFFERED = {"swap": ("swap", "x_changes", "frozen"), "z_changes": ("z_changes", "swap", "x_changes"),
           "x_changes": ("x_changes", "swap", "frozen")}


def swap_pair(walk: Walk) -> tuple[int, int] | None:
    """The two tokens to trade: the first and the last whose embeddings differ from the first's."""
    E = walk.mats["E"]
    others = [j for j in range(walk.scenario.n - 1, 0, -1) if not np.array_equal(E[j], E[0])]
    return (0, others[0]) if others else None


_OUTCOMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # walk -> its outcome


def outcome(walk: Walk, i: int, j: int) -> tuple[bool, bool]:
    """(X changes, Z changes) beyond a trade of rows, when tokens i and j trade places: the layer
    run once more per walk (a whole layer on the shapes lesson, and every quiz asks it)."""
    known = _OUTCOMES.setdefault(walk, {})
    if (i, j) not in known:
        known[(i, j)] = _outcome(walk, i, j)
    return known[(i, j)]


def _outcome(walk: Walk, i: int, j: int) -> tuple[bool, bool]:
    other = compute(swapped(walk.scenario, i, j), walk.mode, walk.amplify)
    order = list(range(walk.scenario.n))
    order[i], order[j] = j, i
    moved = lambda a, b: not np.allclose(a[order], b, rtol=0, atol=SAME)  # noqa: E731
    z = any(moved(other.matrix("Z", h), walk.matrix("Z", h)) for h in range(walk.scenario.heads))
    return moved(other.mats["X"], walk.mats["X"]), z


def mechanism(walk: Walk, tx: Text) -> str:
    """What makes Z depend on where a token stands, in a few words."""
    scn = walk.scenario
    if not scn.allowed.all():
        return tx.t("quiz.word_order.by_mask")
    for feature in scn.features:  # a feature that makes scores depend on position (RoPE, ALiBi)
        if hasattr(feature, "word_order"):
            return tx.t(feature.word_order(scn))
    return tx.t("quiz.word_order.by_position")


def word_order_question(walk: Walk, tx: Text, rng: random.Random | None = None) -> Question | None:
    """The word-order question for `walk`, or None where a feature's tokens cannot trade places
    (SWAPPABLE: a real model's layer, whose stream comes from the model) or none can."""
    scn = walk.scenario
    pair = swap_pair(walk)
    if pair is None or not all(getattr(feature, "SWAPPABLE", True) for feature in scn.features):
        return None
    i, j = pair
    x_changes, z_changes = outcome(walk, i, j)
    if x_changes and not z_changes:  # a coincidence no option describes
        return None
    truth = "x_changes" if x_changes else "z_changes" if z_changes else "swap"
    labels = token_labels(scn.tokens)
    order = list(labels)
    order[i], order[j] = order[j], order[i]
    values = {"a": labels[i], "b": labels[j], "order": tx.t("ui.list_sep").join(order),
              "how": mechanism(walk, tx)}
    field = lambda name: tx.t(f"quiz.word_order.{name}", **values)  # noqa: E731
    offered = OFFERED[truth]
    why = {name: field(f"why_{name}_{truth}" if tx.has(f"quiz.word_order.why_{name}_{truth}") else f"why_{name}")
           for name in offered[1:]}
    q = Question("word_order", CHOICE, field("question"), field("hint"), 0, field(truth), ("word_order",),
                 choices=tuple(field(name) for name in offered), why=("", *(why[n] for n in offered[1:])),
                 qid="word_order")
    return placed(q, rng) if rng is not None else q
