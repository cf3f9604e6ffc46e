"""What a scenario may cost: checked from its shapes before any big matrix is allocated.

Bytes and value counts bound what a file *holds*; they do not bound what it *asks for*: 66,000
one-number tokens are a 1 MB file, but their n × n scores are 35 GB. So the loader works out the
shapes of the walk from the shapes it has read and refuses, naming the line and the size asked
for, anything past these limits. They sit far above any lesson (the benchmark layer, n 512,
d_model 768, 12 heads, is 3,145,728 scores) and far below what would take minutes or gigabytes.

A command that multiplies the walk is bounded the same way, from the shapes (layer/cost.py) before
it computes anything: what it writes as JSON or CSV (MAX_EXPORT: export, compare), what its walks
hold in all (MAX_WORK: compare computes one walk a mode or a scenario, the quiz its walk and the
layer in another mode), and how many cache panels decode prints (MAX_DECODE_PANELS).
"""

from __future__ import annotations

from typing import Any

from attnwalk.errors import ScenarioError

MAX_MATRIX = 4_194_304  # numbers in any one matrix, given or computed: 2048 × 2048, 32 MB
MAX_SCORES = 4_194_304  # n × m × heads: each score stage (QKᵀ, S, A) of every head together
MAX_EXPORT = 2_097_152  # numbers a JSON or CSV export writes out: about 45 MB of JSON
# numbers one command computes across all the walks it makes (compare: one a mode or a scenario;
# the quiz: its walk and the same layer in another mode): about one walk of the largest scenario
# the limits above allow (2,048 tokens, d_model 2,048, one head: ~55 M numbers), 512 MB of float64
MAX_WORK = 67_108_864
# head panels a decode printed whole shows (steps × heads shown): each is a cache table drawn by
# Rich, ~50 ms and ~6 KB, more as the cache grows (0.5 ms and 12 bytes a cached key); 512 tokens
# × 16 heads printed 49.5 MB over five and a half minutes, 512 × 1 head 4.6 MB over a minute and a
# half (a loaded machine); 256 panels of up to 256 keys print in well under half a minute
MAX_DECODE_PANELS = 256
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


def _on_tokens(scn: Any, problem: str) -> ScenarioError:
    """A command's bound broken: blamed on the tokens' line, since their number is what makes it big."""
    return ScenarioError(problem, file=scn.label, field="tokens", line=scn.lines.get("tokens"))


def _megabytes(numbers: int, per: int = JSON_BYTES_PER_NUMBER) -> str:
    return f"about {amount(numbers * per // (1024 * 1024))} MB"


def too_big_to_export(scn: Any, fmt: str) -> str | None:
    """Why `scn` is too big to export as `fmt` (json or csv), counted from its shapes, or None.
    Markdown and LaTeX show each matrix's corners, so their size does not grow with the layer."""
    if fmt not in ("json", "csv"):
        return None
    from attnwalk.layer.cost import export_numbers, weight_numbers

    numbers = export_numbers(scn)
    if numbers <= MAX_EXPORT:
        return None
    per = JSON_BYTES_PER_NUMBER if fmt == "json" else CSV_BYTES_PER_NUMBER
    fewer = "export fewer tokens or heads, or " if weight_numbers(scn, written=True) < MAX_EXPORT else (
        "its weights alone are too many, whatever the tokens; ")  # fewer tokens cannot help
    return (f"a {fmt.upper()} export of this layer holds {amount(numbers)} numbers ({_megabytes(numbers, per)}), "
            f"more than the {amount(MAX_EXPORT)} an export writes; {fewer}"
            "--format markdown or latex, which show each matrix's corners")


def check_export(scn: Any, fmt: str) -> None:
    """Refuse, from the shapes and before anything is computed, an export too big to write."""
    problem = too_big_to_export(scn, fmt)
    if problem:
        raise _on_tokens(scn, problem)


def check_work(scn: Any, walks: int, why: str) -> None:
    """Refuse, before anything is computed, a command that would compute `walks` walks of `scn`
    (`why` says what they are) holding more than MAX_WORK numbers in all."""
    from attnwalk.layer.cost import walk_numbers

    total = walks * walk_numbers(scn)
    if total > MAX_WORK:
        raise _on_tokens(scn, f"{why}: about {amount(total)} numbers ({_megabytes(total, 8)} of float64), "
                         f"more than the {amount(MAX_WORK)} one command computes (one walk of the largest "
                         "scenario); use fewer tokens or heads (attnwalk run walks it once)")


def check_written(scn: Any, numbers: int, what: str, instead: str) -> None:
    """Refuse, before anything is computed, JSON of `numbers` numbers past what an export may write."""
    if numbers > MAX_EXPORT:
        raise _on_tokens(scn, f"{what} holds {amount(numbers)} numbers ({_megabytes(numbers)}), more than "
                         f"the {amount(MAX_EXPORT)} an export writes; {instead}")


def check_decode_screens(scn: Any, heads_shown: int) -> None:
    """Refuse, before decoding, a printed decode (piped, --no-pause, --save) of more than
    MAX_DECODE_PANELS head panels: one screen a token, each with every shown head's cache."""
    panels = scn.n * heads_shown
    if panels > MAX_DECODE_PANELS:
        heads = f"{heads_shown} heads" if heads_shown > 1 else "1 head"
        raise _on_tokens(scn, f"decode printed whole draws one screen a token, each with every shown head's "
                         f"cache: {amount(scn.n)} tokens × {heads} = {amount(panels)} caches, more than the "
                         f"{amount(MAX_DECODE_PANELS)} it prints (minutes of output); give --head N for one "
                         "head's cache, fewer tokens, or step through it in a terminal, a screen at a time")
