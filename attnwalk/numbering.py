"""One numbering: whatever a person reads counts from 1 (rows, columns, dimensions, heads, layers,
blocks, a file's lines and items), while the code counts from 0. Every 0-based index written for a
person passes through `shown`, a range of them through `span`, runs of them through `runs`;
tests/test_numbering.py finds any `+ 1` written into a shown string anywhere else.

The standard library only: every package may import it.
"""

from __future__ import annotations

from collections.abc import Iterable


def shown(i: int) -> int:
    """0-based index `i` as a person counts it."""
    return int(i) + 1


def span(first: int, last: int, dash: str = "–") -> str:
    """0-based `first` … `last` (inclusive) as a person reads the range: "3–5", or "3" alone."""
    return str(shown(first)) if last == first else f"{shown(first)}{dash}{shown(last)}"


def runs(indices: Iterable[int], dash: str = "–") -> str:
    """Sorted 0-based indices as runs a person reads: [0, 1, 2, 4] -> "1–3, 5"."""
    out: list[list[int]] = []
    for i in indices:
        if out and i == out[-1][-1] + 1:
            out[-1].append(i)
        else:
            out.append([i])
    return ", ".join(span(run[0], run[-1], dash) for run in out)
