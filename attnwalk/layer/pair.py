"""Two scenarios of the same shape, stage by stage: the numbers of `attnwalk compare A B`.

Pure: it computes both walks under one mode and, for every stage either walk has (read from the
stage list, layer/stages.py), says whether the two matrices are identical, equal up to float64
rounding, or different, and where: the rows and cells that differ and the largest difference.
The learned matrices behind a stage (Stage.weight: W_Q, W_K, W_V, W_O) and the mask are compared
the same way, since "same weights, other inputs" is what such a comparison usually teaches.
When one scenario's tokens are the other's in another order (each token once), a stage that
differs in place may still hold the same rows once the tokens are matched (`reordered`): without
positions or a mask, attention is permutation-equivariant, and its rows only move with the tokens.
No printing, no Rich.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from attnwalk.errors import UsageError
from attnwalk.layer.modes import BASELINE, Mode, mode_named
from attnwalk.layer.stages import TOKENS, Stage
from attnwalk.layer.walk import Walk, compute

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario

IDENTICAL = "identical"  # every float64 equal
ROUNDING = "rounding"  # not bit for bit, but no difference beyond float64 rounding (ROUNDING_TOL)
DIFFERENT = "different"
LEFT_ONLY = "left_only"  # the stage applies to one scenario only (a mask, W_O, several heads)
RIGHT_ONLY = "right_only"

# Relative to the larger magnitude in the two matrices: the same numbers summed in another order
# differ by a few units in the 16th digit, far below this; a real difference is far above it.
ROUNDING_TOL = 1e-12

# The shape a pair must share, in the order a mismatch is reported.
_DIMENSIONS = (("n", "{} tokens"), ("m", "{} keys"), ("d_model", "d_model {}"), ("d_k", "d_k {}"),
               ("d_v", "d_v {}"), ("heads", "{} heads"), ("groups", "{} K/V heads"))


@dataclass(frozen=True, eq=False)  # no __eq__: == on numpy fields can only raise
class Difference:
    """How two matrices (or token lists) of the same shape differ."""

    key: str  # the stage key ("S"), weight ("W_Q") or "mask"
    status: str  # IDENTICAL, ROUNDING, DIFFERENT, LEFT_ONLY or RIGHT_ONLY
    left: Any  # np.ndarray, a tuple of tokens, or None when only the right has it
    right: Any
    rows: tuple[int, ...] = ()  # 0-based rows holding a real difference (beyond rounding)
    cells: tuple[tuple[int, int], ...] = ()  # 0-based (row, col) of each real difference
    max_diff: float = 0.0  # the largest |left − right| (inf when −∞ meets a number)
    max_at: tuple[int, int] | None = None  # where it is (the first such cell)
    reordered: bool = False  # different in place, the same once rows (and keys) follow the tokens

    @property
    def same(self) -> bool:
        return self.status in (IDENTICAL, ROUNDING)


@dataclass(frozen=True, eq=False)
class StagePair:
    """One stage of both walks, with the learned matrix that makes it (W_Q for Q), if any."""

    stage: Stage
    diff: Difference
    weight: Difference | None = None


@dataclass(frozen=True, eq=False)
class Pair:
    left: Walk
    right: Walk
    head: int  # 0-based: per-head stages are compared for this head
    stages: tuple[StagePair, ...]  # every stage of either walk, in the walk's order
    mask: Difference  # which keys each query may see

    @property
    def scenarios(self) -> tuple[Scenario, Scenario]:
        return self.left.scenario, self.right.scenario

    @property
    def mode(self) -> Mode:
        return self.left.mode


def check_shapes(left: Scenario, right: Scenario) -> None:
    """Two scenarios can be set side by side when every matrix has the same shape in both: the
    same number of tokens (and keys), d_model, d_k, d_v and heads. The tokens themselves may
    differ (river_bank and savings_bank differ in two of four)."""
    for attr, what in _DIMENSIONS:
        a, b = getattr(left, attr), getattr(right, attr)
        if a != b:
            raise UsageError(
                f"cannot set {left.name} and {right.name} side by side: {left.name} has {what.format(a)}, "
                f"{right.name} has {what.format(b)} (both need the same number of tokens, d_model, d_k, d_v, "
                "heads and K/V heads)")


def compare_pair(left: Scenario, right: Scenario, mode: Mode | str = BASELINE,
                 amplify: float = 1.0, head: int = 0) -> Pair:
    """Both scenarios under `mode` (scores × `amplify`), stage by stage; per-head stages of head
    `head` (0-based)."""
    check_shapes(left, right)
    mode = mode_named(mode)
    a, b = compute(left, mode, amplify), compute(right, mode, amplify)
    rows, keys = token_order(left.tokens, right.tokens), token_order(left.key_tokens, right.key_tokens)
    pairs = []
    for stage in merged_stages(a.stages, b.stages):
        diff = stage_difference(stage, a, b, head)
        if diff.status == DIFFERENT and rows is not None and keys is not None and stage.kind != TOKENS:
            diff = replace(diff, reordered=same_when_matched(stage, diff, rows, keys))
        pairs.append(StagePair(stage, diff, weight_difference(stage, a, b)))
    mask = difference("mask", left.allowed.astype(np.float64), right.allowed.astype(np.float64))
    return Pair(a, b, head, tuple(pairs), mask)


def token_order(left: tuple[str, ...], right: tuple[str, ...]) -> list[int] | None:
    """For each of the right's tokens, the left's position of the same token, when the right's
    tokens are the left's in some order, each once; else None."""
    if len(set(left)) != len(left) or sorted(left) != sorted(right):
        return None
    return [left.index(token) for token in right]


def same_when_matched(stage: Stage, diff: Difference, rows: list[int], keys: list[int]) -> bool:
    """Whether the left's matrix, its token rows (and key columns) put in the right's token
    order, equals the right's up to rounding."""
    M = np.asarray(diff.left)
    if stage.rows in ("n", "m"):
        M = M[rows if stage.rows == "n" else keys]
    if stage.square:
        M = M[:, keys]
    return M.shape == np.asarray(diff.right).shape and difference(diff.key, M, diff.right).same


def merged_stages(left: tuple[Stage, ...], right: tuple[Stage, ...]) -> list[Stage]:
    """Every stage of either walk once, in the walks' order: the right's own stages (S+M when
    only it has a mask) go in after the stage that precedes them there."""
    out = list(left)
    keys = [s.key for s in out]
    for i, stage in enumerate(right):
        if stage.key not in keys:
            at = keys.index(right[i - 1].key) + 1 if i else 0
            out.insert(at, stage)
            keys.insert(at, stage.key)
    return out


def stage_difference(stage: Stage, a: Walk, b: Walk, head: int) -> Difference:
    has_a, has_b = (any(s.key == stage.key for s in w.stages) for w in (a, b))
    if stage.kind == TOKENS:
        return token_difference(stage.key, a.scenario.tokens, b.scenario.tokens)
    left = a.matrix(stage.key, head) if has_a else None
    right = b.matrix(stage.key, head) if has_b else None
    if left is None or right is None:
        return Difference(stage.key, RIGHT_ONLY if left is None else LEFT_ONLY, left, right)
    return difference(stage.key, left, right)


def weight_difference(stage: Stage, a: Walk, b: Walk) -> Difference | None:
    """The learned matrix behind `stage` in both scenarios, when the stage has one."""
    if stage.weight is None:
        return None
    left, right = getattr(a.scenario, stage.weight), getattr(b.scenario, stage.weight)
    if left is None or right is None:  # W_O in one scenario only
        if left is None and right is None:
            return None
        return Difference(stage.weight, RIGHT_ONLY if left is None else LEFT_ONLY, left, right)
    return difference(stage.weight, left, right)


def token_difference(key: str, left: tuple[str, ...], right: tuple[str, ...]) -> Difference:
    rows = tuple(i for i, (x, y) in enumerate(zip(left, right)) if x != y)
    return Difference(key, DIFFERENT if rows else IDENTICAL, tuple(left), tuple(right), rows=rows)


def difference(key: str, left: np.ndarray, right: np.ndarray) -> Difference:
    """Where two matrices of one shape differ. −∞ (a masked score) equals −∞."""
    if left.shape != right.shape:  # check_shapes rules this out for the built-in stages
        raise UsageError(f"{key}: the two scenarios' matrices have shapes {left.shape} and {right.shape}")
    equal = left == right  # (rows, cols)
    with np.errstate(invalid="ignore"):
        gap = np.where(equal, 0.0, np.abs(left - right))  # −∞ against a number: inf
    if equal.all():
        return Difference(key, IDENTICAL, left, right)
    finite = np.concatenate([left[np.isfinite(left)], right[np.isfinite(right)]])
    tol = ROUNDING_TOL * max(1.0, float(np.abs(finite).max(initial=0.0)))
    real = gap > tol  # (rows, cols)
    at = np.unravel_index(int(np.argmax(gap)), gap.shape)
    return Difference(
        key, DIFFERENT if real.any() else ROUNDING, left, right,
        rows=tuple(int(r) for r in np.flatnonzero(real.any(axis=1))),
        cells=tuple((int(r), int(c)) for r, c in np.argwhere(real)),
        max_diff=float(gap.max()), max_at=(int(at[0]), int(at[1])))


def pair_data(pair: Pair) -> dict[str, Any]:
    """The JSON contract (README, "Exports for scripts"): both scenarios, and per stage (the
    exported ones, as `export --format json` names them), weight and the mask: the status, the
    0-based rows and [row, col] cells that differ, the largest difference and both matrices."""
    a, b = pair.scenarios
    data: dict[str, Any] = {
        "left": _side(a), "right": _side(b), "mode": pair.mode.name, "amplify": pair.left.amplify,
    }
    if a.heads > 1:
        data["head"] = pair.head + 1
    data["stages"] = {p.stage.key: _entry(p.diff) for p in pair.stages if p.stage.exported}
    data["weights"] = {p.weight.key: _entry(p.weight) for p in pair.stages if p.weight is not None}
    data["mask"] = _entry(pair.mask) | {"left": a.allowed.tolist(), "right": b.allowed.tolist()}
    return data


def _side(scn: Scenario) -> dict[str, Any]:
    return {"scenario": scn.name, "tokens": list(scn.tokens), "key_tokens": list(scn.key_tokens)}


def _entry(d: Difference) -> dict[str, Any]:
    entry: dict[str, Any] = {"status": d.status, "rows": list(d.rows)}
    if isinstance(d.left, tuple) or isinstance(d.right, tuple):  # the tokens: no cells, no sizes
        return entry | {"left": list(d.left), "right": list(d.right)}
    entry["cells"] = [list(c) for c in d.cells]
    entry["reordered"] = d.reordered
    entry["max_difference"] = d.max_diff if np.isfinite(d.max_diff) else None
    entry["max_at"] = list(d.max_at) if d.max_at is not None else None
    entry["left"] = None if d.left is None else np.asarray(d.left).tolist()
    entry["right"] = None if d.right is None else np.asarray(d.right).tolist()
    return entry
