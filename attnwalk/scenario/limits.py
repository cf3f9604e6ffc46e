"""What a scenario may cost: checked from its shapes before any big matrix is allocated.

Bytes and value counts bound what a file *holds*; they do not bound what it *asks for*: 66,000
one-number tokens are a 1 MB file, but their n × n scores are 35 GB. So the loader works out the
shapes of the walk from the shapes it has read and refuses, naming the line and the size asked
for, anything past these limits. They sit far above any lesson (the benchmark layer, n 512,
d_model 768, 12 heads, is 3,145,728 scores) and far below what would take minutes or gigabytes.
"""

from __future__ import annotations

from typing import Any

from attnwalk.errors import ScenarioError

MAX_MATRIX = 4_194_304  # numbers in any one matrix, given or computed: 2048 × 2048, 32 MB
MAX_SCORES = 4_194_304  # n × m × heads: each score stage (QKᵀ, S, A) of every head together
MAX_EXPORT = 2_097_152  # numbers a JSON or CSV export writes out: about 45 MB of JSON
JSON_BYTES_PER_NUMBER = 22  # a float64's repr (~19 characters) and ", "
CSV_BYTES_PER_NUMBER = 40  # stage,head,row,row_label,col,col_label,value per line


def amount(n: int) -> str:
    """A count for a message, with thousands separators: 4,356,000,000."""
    return f"{n:,}"


def too_many_scores(n: int, m: int, heads: int) -> str | None:
    """Why n queries × m keys × heads is too many scores, or None when it is within the limit."""
    total = n * m * heads
    if total <= MAX_SCORES:
        return None
    keys = f"{amount(m)} keys" if m != n else "each other"
    return (f"{amount(n)} tokens attending to {keys} with {heads} head{'s' if heads > 1 else ''} "
            f"make {amount(total)} attention scores (n × m × heads), more than the "
            f"{amount(MAX_SCORES)} attnwalk computes (e.g. 2,048 tokens, one head; 512 tokens, "
            "16 heads); use fewer tokens")


def too_big(symbol: str, rows: int, cols: int, how: str) -> str | None:
    """Why a computed matrix `symbol` of rows × cols is too big, or None."""
    if rows * cols <= MAX_MATRIX:
        return None
    return (f"{symbol} would be {amount(rows)} × {amount(cols)} = {amount(rows * cols)} numbers "
            f"({how}), more than the {amount(MAX_MATRIX)} one matrix may hold; use fewer tokens "
            "or narrower weights")


def walk_size(n: int, m: int, d_model: int, hd_k: int, hd_v: int,
              heads: int) -> list[tuple[str, str]]:
    """(field, message) for every limit the walk's shapes break: the field whose line the
    message names, and what it says."""
    problems = []
    scores = too_many_scores(n, m, heads)
    if scores:
        problems.append(("tokens", scores))
    for field, symbol, rows, cols, how in (
            ("tokens", "X", n, d_model, "n × d_model"),
            ("W_Q", "Q", n, hd_k, "n × heads·d_k"),
            ("W_K", "K", m, hd_k, "m × heads·d_k"),
            ("W_V", "V", m, hd_v, "m × heads·d_v"),
            ("W_V", "Z", n, hd_v, "n × heads·d_v")):
        problem = too_big(symbol, rows, cols, how)
        if problem:
            problems.append((field, problem))
    return problems


def export_numbers(walk: Any) -> int:
    """How many numbers an export of `walk` writes: every matrix of every stage, the weights and
    the mask (a count from the shapes; nothing is built)."""
    scn = walk.scenario
    total = sum(M.size for M in walk.mats.values())
    total += sum(M.size for head in walk.heads for key, M in head.mats.items() if key != "tiled")
    total += sum(M.size for M in walk.source.values())
    total += sum(W.size for W in (scn.W_Q, scn.W_K, scn.W_V, scn.W_O) if W is not None)
    if getattr(scn, "tiles", None) and "tiled" in walk.heads[0].mats:  # m, α, l and Õ per block
        blocks = -(-scn.m // scn.tiles)
        total += scn.heads * scn.n * blocks * (scn.d_v + 3)
    return total + scn.allowed.size


def too_big_to_export(walk: Any, fmt: str) -> str | None:
    """Why `walk` is too big to export as `fmt` (json or csv), or None. Markdown and LaTeX show
    each matrix's corners, so their size does not grow with the layer."""
    if fmt not in ("json", "csv"):
        return None
    numbers = export_numbers(walk)
    if numbers <= MAX_EXPORT:
        return None
    per = JSON_BYTES_PER_NUMBER if fmt == "json" else CSV_BYTES_PER_NUMBER
    size = numbers * per // (1024 * 1024)
    return (f"a {fmt.upper()} export of this layer holds {amount(numbers)} numbers (about "
            f"{amount(size)} MB), more than the {amount(MAX_EXPORT)} an export writes; export fewer "
            "tokens or heads, or --format markdown or latex, which show each matrix's corners")


def check_export(walk: Any, fmt: str) -> None:
    """Refuse, before a string is built, an export too big to write (ScenarioError on the tokens'
    line: the number of tokens is what makes it big)."""
    problem = too_big_to_export(walk, fmt)
    if problem:
        scn = walk.scenario
        raise ScenarioError(problem, file=scn.label, field="tokens", line=scn.lines.get("tokens"))
