"""What the direct form of a layer costs: the size of every matrix and the multiply-adds of every
stage, for this scenario's shapes or projected to others (--at n=4096,d_model=4096,heads=32).

Each figure says how it grows with the sequence: "n²" for the query × key terms (n × m: the scores,
the weights and the two products over them), "n" for those with one row per token, "" for the
weights, whose size does not depend on the sequence at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from attnwalk.errors import UsageError

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario

NAMES = ("n", "m", "d_model", "heads", "d_k", "d_v")  # what --at may set
MAX_AT = 10**9  # a size beyond any model: refused as a typo rather than printed as 19 digits


class Dims(NamedTuple):
    n: int  # queries
    m: int  # keys (= n in self-attention)
    d_model: int
    heads: int
    d_k: int  # per head
    d_v: int  # per head
    cross: bool = False  # keys from another sequence: m is not n
    w_o: bool = False  # the layer has W_O
    scaled: bool = True  # S divides QKᵀ by √d_k (additive scores never do: S = QKᵀ)


class Matrix(NamedTuple):
    name: str  # "Q", "S (per head)"
    rows: int
    cols: int
    copies: int  # heads for the per-head matrices, else 1
    grows: str  # "n²", "n" or ""

    @property
    def numbers(self) -> int:
        return self.copies * self.rows * self.cols


class Work(NamedTuple):
    stage: str  # the stage's key
    formula: str  # the count in named dimensions: "h·n·m·d_k"
    count: int
    grows: str


def dims_of(scn: Scenario) -> Dims:
    return Dims(scn.n, scn.m, scn.d_model, scn.heads, scn.d_k, scn.d_v, scn.source is not None,
                scn.W_O is not None, scn.scorer.divides)


def matrices(d: Dims) -> list[Matrix]:
    """Every matrix the direct form holds, and the weights, with how each grows."""
    hk, hv = d.heads * d.d_k, d.heads * d.d_v
    out = [Matrix("X", d.n, d.d_model, 1, "n")]
    if d.cross:
        out.append(Matrix("X_src", d.m, d.d_model, 1, "n"))
    out += [Matrix("W_Q", d.d_model, hk, 1, ""), Matrix("W_K", d.d_model, hk, 1, ""),
            Matrix("W_V", d.d_model, hv, 1, ""),
            Matrix("Q", d.n, hk, 1, "n"), Matrix("K", d.m, hk, 1, "n"), Matrix("V", d.m, hv, 1, "n"),
            Matrix("S", d.n, d.m, d.heads, "n²"), Matrix("A", d.n, d.m, d.heads, "n²"),
            Matrix("Z", d.n, d.d_v, d.heads, "n")]
    if d.w_o:
        out += [Matrix("W_O", hv, d.d_model, 1, ""), Matrix("O", d.n, d.d_model, 1, "n")]
    return out


def work(d: Dims) -> list[Work]:
    """The multiply-adds of each stage (S: one multiply by 1/√d_k per score, none where S = QKᵀ;
    A: one exponential, add and divide per score, counted once)."""
    h = d.heads
    out = [Work("Q", "n·d_model·h·d_k", d.n * d.d_model * h * d.d_k, "n"),
           Work("K", "m·d_model·h·d_k", d.m * d.d_model * h * d.d_k, "n"),
           Work("V", "m·d_model·h·d_v", d.m * d.d_model * h * d.d_v, "n"),
           Work("QK^T", "h·n·m·d_k", h * d.n * d.m * d.d_k, "n²"),
           Work("S", "h·n·m", h * d.n * d.m, "n²") if d.scaled else Work("S", "0 (S = QKᵀ)", 0, ""),
           Work("A", "h·n·m", h * d.n * d.m, "n²"),
           Work("Z", "h·n·m·d_v", h * d.n * d.m * d.d_v, "n²")]
    if d.w_o:
        out.append(Work("O", "n·h·d_v·d_model", d.n * h * d.d_v * d.d_model, "n"))
    return out


def quadratic_share(d: Dims) -> float:
    """The fraction of the layer's multiply-adds in the n² terms."""
    items = work(d)
    return sum(w.count for w in items if w.grows == "n²") / sum(w.count for w in items)


def projected_dims(scn: Scenario, text: str) -> Dims:
    """The sizes --at asks for, e.g. "n=4096,d_model=4096,heads=32": the scenario's own where a
    name is not given; m follows n in self-attention; d_k and d_v follow d_model / heads when
    either of those is given and they are not. A UsageError names what is wrong."""
    given: dict[str, int] = {}
    for part in text.split(","):
        name, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not name:
            raise UsageError(f"--at {text}: expected NAME=N pairs separated by commas, e.g. "
                             "--at n=4096,d_model=4096,heads=32")
        if name not in NAMES:
            raise UsageError(f"--at: unknown name '{name}'; use {', '.join(NAMES)}")
        if not value.isdecimal() or not 1 <= int(value) <= MAX_AT:
            raise UsageError(f"--at {name}={value}: expected a whole number from 1 to {MAX_AT:,}")
        if name in given:
            raise UsageError(f"--at: {name} is given twice")
        given[name] = int(value)
    d = dims_of(scn)
    if "m" in given and not d.cross:
        raise UsageError("--at m: in self-attention the keys are the queries' own tokens, so m is "
                         "n; give n")
    n = given.get("n", d.n)
    m = given.get("m", d.m if d.cross else n)
    d_model, heads = given.get("d_model", d.d_model), given.get("heads", d.heads)
    follow = "d_model" in given or "heads" in given
    sizes = {}
    for name in ("d_k", "d_v"):
        if name in given:
            sizes[name] = given[name]
        elif follow:
            if d_model % heads:
                raise UsageError(f"--at: d_model {d_model} is not divisible by {heads} heads; "
                                 f"give {name} too")
            sizes[name] = d_model // heads
        else:
            sizes[name] = getattr(d, name)
    return Dims(n, m, d_model, heads, sizes["d_k"], sizes["d_v"], d.cross, d.w_o, d.scaled)


# -- what one walk of a scenario holds, from its shapes: the commands' bounds (scenario/limits.py) --


def stage_numbers(scn: Scenario) -> list[tuple[str, int, bool]]:
    """(stage key, numbers, exported) for every stage a walk of `scn` computes, from the shapes
    alone (nothing is computed): a per-head stage counted for every head, a split one (Q, K, V,
    concat) at its full width, as the walk holds it. A walk computes what applies to its
    scenario; only the tiled stage's running state (tiled_numbers) is left out."""
    fixed = {"d_model": scn.d_model, "m": scn.m, "stats": 2, "rms": 1, "h": scn.heads, "-": 0,
             "h·d_v": scn.heads * scn.d_v}
    for feature in scn.features:  # a feature's own named widths (the unembedding's vocab)
        if hasattr(feature, "dimension_sizes"):
            fixed.update(feature.dimension_sizes(scn))
    # a feature's own dimension (the FFN's d_ff): the width of the weight that makes a stage that wide
    fixed.update({s.cols: int(scn.param(s.weight).shape[1]) for s in scn.graph
                  if s.weight and s.cols not in fixed and s.cols not in ("d_k", "d_v")})
    for dim in scn.dimensions:  # a dimension the scenario names entry by entry (a model's top tokens)
        names = scn.dimension_names(dim, "en")
        if dim not in fixed and names:
            fixed[dim] = len(names)
    out = []
    for s in scn.graph:  # the hidden stages too (a source's X): a walk holds them
        if s.compute is None:
            continue
        rows = scn.m if s.rows == "m" else scn.n if s.rows == "n" else fixed.get(s.rows, scn.n)
        if s.cols in ("d_k", "d_v"):
            d = scn.d_k if s.cols == "d_k" else scn.d_v
            cols = d if s.per_head else d * (scn.groups if s.shared else scn.heads)
        else:
            cols = fixed[s.cols]
        out.append((s.key, (scn.heads if s.per_head else 1) * rows * cols, s.exported and s.shown))
    return out


def weight_numbers(scn: Scenario, written: bool = False) -> int:
    """The weight matrices a walk holds: every shown stage's (W_Q … W_O, the FFN's W_1, W_2);
    `written`: those an export writes (a real model's FFN weights are left out)."""
    names = {s.weight for s in scn.graph if s.weight and s.shown and (s.weight_exported or not written)}
    return sum(int(scn.param(name).size) for name in names)


def tiled_numbers(scn: Scenario) -> int:
    """--tiles B: per query row, per block of keys, for every head, the running m, α, l and Õ and
    the block's start, stop and whether it was skipped (as the JSON writes them), and B."""
    if not getattr(scn, "tiles", None):
        return 0
    return scn.heads * (scn.n * -(-scn.m // scn.tiles) * (scn.d_v + 6) + 1)


def walk_numbers(scn: Scenario) -> int:
    """The numbers one walk of `scn` holds: every stage, the weights, the tiled state."""
    return sum(count for _, count, _ in stage_numbers(scn)) + weight_numbers(scn) + tiled_numbers(scn)


def export_numbers(scn: Scenario) -> int:
    """The numbers `export --format json` (or csv) of `scn` writes, from the shapes: every
    exported stage (with several heads, each head's block of Q, K and V again under
    stages.heads), the source's E, P and X, the weights, the tiled state and the mask."""
    total = 0
    by_key = {s.key: s for s in scn.graph}
    for key, count, exported in stage_numbers(scn):
        if exported:
            total += count
        stage = by_key[key]  # Q, K, V (a later block's Q⁽²⁾ too): each head's block, again
        if exported and stage.split and not stage.across and scn.heads > 1:
            d = scn.d_v if stage.cols == "d_v" else scn.d_k
            total += scn.heads * (scn.m if stage.rows == "m" else scn.n) * d
    if scn.source is not None:
        total += 3 * scn.m * scn.d_model
    return total + weight_numbers(scn, written=True) + tiled_numbers(scn) + scn.n * scn.m
