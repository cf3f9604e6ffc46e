"""The next token's arithmetic: the probabilities at a temperature, the likeliest k, the loss.

    p = softmax(ℓ / T)           each row's max subtracted before exp: nothing overflows
    log p = ℓ/T − max − log Σ e^(ℓ/T − max)
    top_k: the k largest logits, ties broken by the smaller id (the order the vocabulary lists them)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attnwalk.layer.cells import EXP_DIGITS

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell

TEMPERATURES = (0.5, 1.0, 2.0)  # what the walk shows side by side: sharper, as trained, flatter


def softmax_t(logits: np.ndarray, T: float) -> np.ndarray:
    """Row-wise softmax(ℓ / T) in float64, the row's max subtracted first: (n, V) -> (n, V)."""
    z = np.asarray(logits, dtype=np.float64) / T
    e = np.exp(z - z.max(axis=-1, keepdims=True))  # every exponent ≤ 0
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax_t(logits: np.ndarray, T: float) -> np.ndarray:
    """log softmax(ℓ / T), exact where p itself would underflow to 0: (n, V) -> (n, V)."""
    z = np.asarray(logits, dtype=np.float64) / T
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def top_k(row: np.ndarray, k: int) -> list[int]:
    """The ids of the k largest entries of `row`, largest first; equal ones by id."""
    return [int(j) for j in np.argsort(-np.asarray(row), kind="stable")[:k]]


def worked(c: Cell, logits: np.ndarray, T: float, name: str) -> list:
    """p[i, w] = e^((ℓ[i, w] − max) / T) / Σ_v e^((ℓ[i, v] − max) / T): each exponent from the logits
    as printed, the exponentials to as many digits as let the quotient land on the table's p."""
    tok, word, minus = c.rows[c.row], c.cols[c.col], c.mk.minus
    l = np.array([c.printed(float(x)) for x in logits])  # (V,)
    top = float(l.max())
    top_text = c.num(top) if top >= 0 else f"({c.num(top)})"
    s = np.array([c.printed((x - top) / T) for x in l])  # (V,) every exponent ≤ 0
    e = np.exp(s)
    digits = EXP_DIGITS[0]
    for d in EXP_DIGITS:
        shown = np.array([float(c.exp(x, d)) for x in e])
        total = float(c.exp(float(shown.sum()), d))
        if c.agrees(c.printed(shown[c.col] / total)):
            digits = d
            break
    shown = np.array([float(c.exp(x, digits)) for x in e])
    total = float(c.exp(float(shown.sum()), digits))
    value = c.printed(shown[c.col] / total)
    c.lands(value)
    def power(a: str, b: str) -> str:  # e^((a − b) / T), or e^(a − b) at T = 1
        return f"e^({a} {minus} {b})" if T == 1 else f"e^(({a} {minus} {b}) / {c.short(T)})"

    rows: list[tuple[str, list[str | None]]] = []
    for j in c.elided(len(l), also=c.col):
        if isinstance(j, int):
            rows.append((c.cols[j], [f"{power(c.num(l[j]), top_text)} = e^{c.operand(s[j])} = {c.exp(e[j], digits)}"]))
        else:
            rows.append((c.mk.ellipsis, [c.say("ui.more_terms", count=j.count)]))
    head = power(name, "max")
    parts = c.terms({j: c.exp(e[j], digits) for j in range(len(l))}, len(l))
    return [f"{name}[{tok}] = {c.vec(l)}",
            f"max = {c.num(top)},  T = {c.short(T)}",
            c.exponentials(["", head], rows),
            f"{c.say('ui.row_sum')} = {parts} = {c.exp(total, digits)}",
            f"{word}{c.colon()}{c.exp(shown[c.col], digits)} / {c.exp(total, digits)} = {c.num(value)}",
            c.prose(c.say("unembed.cell_p", token=tok, word=word))]
