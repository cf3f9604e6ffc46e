"""How one cell of a gradient is worked out on the backward walk (placeholder)."""

from __future__ import annotations


def passed(c, index, total):
    return []


projection = dot_scores = scaled = softmax = output = concat = passed

unturned = scores = passed
