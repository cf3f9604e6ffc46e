"""A dot-product score read as geometry: q · k = |q| × |k| × cos θ, with the cell's own numbers.

Lesson 000 teaches relevance first as the angle between a query and a key, then what their lengths
do. The QKᵀ worked cell (cells.scores) shows both for the vectors it multiplied: each length as the
root of its sum of squares, cos θ, the angle, and the three multiplied back into the score. Every
step is computed from the digits printed before it, so each line checks on a calculator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from attnwalk.layer.cells import Cell

COS_DIGITS = range(4, 16)  # significant digits tried for cos θ, fewest first


def geometry(c: Cell, q: np.ndarray, k: np.ndarray, qn: str, kn: str, dot: float,
             normalized: bool = False) -> list:
    """The dot score as geometry: |q|, |k|, cos θ and q · k = |q| × |k| × cos θ, for the vectors
    actually multiplied (q̂ and k̂ under QK-norm: `normalized`), every step from the digits shown."""
    qt, kt = c.rows[c.row], c.cols[c.col]
    t = c.mk.times
    lines: list = [c.prose(c.say("geometry.intro", q=qn, k=kn))]
    if normalized:
        lines.append(c.prose(c.say("geometry.qk_norm", q=qn, k=kn)))
    lq, length_q = _length(c, q, f"|{qn}_{qt}|")
    lk, length_k = _length(c, k, f"|{kn}_{kt}|")
    lines += [*length_q, *length_k]
    for name, length in ((f"{qn}_{qt}", lq), (f"{kn}_{kt}", lk)):
        if length == 0.0:  # no direction: cos θ would divide by zero
            return lines + [c.prose(c.say("geometry.zero", name=name))]
    if normalized:  # |q̂| = |k̂| = √d_k exactly; the lengths of the rounded components must say so
        root = c.num(np.sqrt(len(q)))
        if c.num(lq) == c.num(lk) == root:
            lines.append(c.prose(c.say("geometry.same_length", root=root)))
        else:
            c.more_decimals()
    # cos θ to as many significant digits as let |q| × |k| × cos θ give back the q · k shown
    digits = next((d for d in COS_DIGITS
                   if c.product(lq * lk * float(c.exp(dot / (lq * lk), d))) == c.product(dot)), 6)
    cos = float(c.exp(dot / (lq * lk), digits))
    if abs(cos) > 1.0 or c.product(lq * lk * cos) != c.product(dot):  # rounded lengths: more decimals
        c.more_decimals()
        cos = float(np.clip(cos, -1.0, 1.0))
    back = float(c.product(lq * lk * cos))
    cos_text = c.exp(cos, digits)
    theta = float(np.degrees(np.arccos(cos)))
    lengths = f"{c.num(lq)} {t} {c.num(lk)}"
    same = "=" if c.product(back) == c.product(dot) else "≈"
    return lines + [
        *c.chain(c.plain(f"cos θ = ({qn} {c.mk.dot} {kn}) / (|{qn}| {t} |{kn}|)"),
                 f"{c.product(dot)} / ({lengths})", cos_text),
        c.plain(f"θ = arccos {cos_text} = ") + c.degrees(theta),
        *c.chain(c.plain(f"|{qn}| {t} |{kn}| {t} cos θ"), f"{lengths} {t} {cos_text}",
                 c.plain(f"{c.product(back)} {same} {qn} {c.mk.dot} {kn}"))]


def _length(c: Cell, v: np.ndarray, name: str) -> tuple[float, list]:
    """|v| = √(v0² + v1² + …) = √(sum) = length, from the components shown; the length as printed."""
    shown_v = np.array([c.printed(x) for x in v])  # (d,)
    total = c.printed(float(np.sum(shown_v * shown_v)))
    length = c.printed(float(np.sqrt(total)))
    shown = [i for i in c.elided(len(v)) if isinstance(i, int)]  # the middle of a long sum is elided
    squares = c.terms({i: c.plain(f"{c.operand(v[i])}²") for i in shown}, len(v))
    rt = c.mk.sqrt
    return length, c.chain(name, f"{rt}({squares})", f"{rt}{c.num(total)}", c.num(length))
