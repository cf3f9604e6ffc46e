"""The QKᵀ worked cell read as geometry, and worked arithmetic that a calculator confirms.

Issue 13, points 5 and 12. Every number is parsed from the rendered panel and checked two ways:
against the other numbers printed beside it (each printed equation holds for the digits printed),
and against an independent numpy computation from the scenario's own inputs (yaml.safe_load of
the scenario file, or arrays written in this file), never against attnwalk's matrices. Golden
numbers for yellow_dog are typed in from the issue: q = [3, 0] against the keys of 黄狗 [2, 0],
街道 [1.41, 1.41] and 下雨 [1, 1.73] scores 6, 4.24 and 3 (cos θ = 1, 0.7071, 0.5).
"""

from __future__ import annotations

import io
import math
import re
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
import yaml
from rich.console import Console

from attnwalk.layer.axes import default_cell
from attnwalk.layer.walk import compute
from attnwalk.render import style
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import explain_view
from attnwalk.render.worked import worked_cell
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario, scenario_from_text
from reference import sinusoidal_positions

SCENARIOS = Path(__file__).parent.parent / "scenarios"
NUM = r"-?\d+(?:\.\d+)?(?:e[-+]\d+)?"


def render(renderable, width: int = 100) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def panel(text: str) -> str:
    """The worked panel's content as one line: borders gone, wrapped lines joined by a space."""
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("│", "|")) and line.endswith(("│", "|")):
            lines.append(line[1:-1].strip())
    return re.sub(r"\s+", " ", " ".join(lines))


def cell_text(walk, key: str, row: int, col: int, head: int = 0, **kw) -> str:
    return panel(render(worked_cell(walk.view(head), key, row, col, ViewOptions(width=100, **kw))))


def half_unit(text: str) -> Decimal:
    """Half a unit in the last printed place of a number: 0.00005 for 0.8078, 0.5 for 1.2e+03 ..."""
    return Decimal(5).scaleb(Decimal(text).as_tuple().exponent - 1)


def holds(value: float, printed: str, slack: float = 1e-9) -> bool:
    """`printed` is `value` rounded to the digits printed (a tie may round either way)."""
    return abs(Decimal(value) - Decimal(printed)) <= half_unit(printed) + Decimal(slack)


# ---------------------------------------------------------------------------- the oracle

def xs_from_yaml(name: str) -> tuple[np.ndarray, dict]:
    """X = E + P of a built-in, from its YAML file (inline matrices only)."""
    doc = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text(encoding="utf-8"))
    E = np.array(doc["embeddings"], dtype=float)
    positional = doc.get("positional", "none")
    if positional == "sinusoidal":
        P = sinusoidal_positions(*E.shape)
    elif isinstance(positional, list):
        P = np.array(positional, dtype=float)
    else:
        P = np.zeros_like(E)
    return E + P, doc


def q_and_k(X: np.ndarray, doc: dict, row: int, col: int, head: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The query of `row` and the key of `col` in `head`, as numpy computes them; QK-norm applied."""
    W_Q, W_K = np.array(doc["W_Q"], dtype=float), np.array(doc["W_K"], dtype=float)
    d_k = W_Q.shape[1] // doc.get("heads", 1)
    part = slice(head * d_k, (head + 1) * d_k)
    q, k = (X @ W_Q)[row, part], (X @ W_K)[col, part]  # (d_k,) each
    if doc.get("qk_norm"):
        q = q / np.sqrt(np.mean(q * q))
        k = k / np.sqrt(np.mean(k * k))
    return q, k


# ---------------------------------------------------------------------------- reading the panel

GEOMETRY = {
    "length": re.compile(rf"\|(?P<name>[qk]\S*?)\| = √\((?P<squares>[^)]*(?:\)[^)=]*)*?)\) "
                         rf"= √(?P<sum>{NUM}) = (?P<length>{NUM})"),
    "cos": re.compile(rf"cos θ = \((?P<q>q\S*) · (?P<k>k\S*)\) / \(\|q\S*\| × \|k\S*\|\) "
                      rf"= (?P<dot>{NUM}) / \((?P<lq>{NUM}) × (?P<lk>{NUM})\) = (?P<cos>{NUM})"),
    "theta": re.compile(rf"θ = arccos (?P<cos>{NUM}) = (?P<deg>{NUM})°"),
    "identity": re.compile(rf"\|q\S*\| × \|k\S*\| × cos θ "
                           rf"= (?P<lq>{NUM}) × (?P<lk>{NUM}) × (?P<cos>{NUM}) = (?P<back>{NUM}) = q\S* · k\S*"),
}


def dot_end(text: str, q: str = "q", k: str = "k") -> str:
    """Where the line q_a · k_b = … ends: the score as the worked products add up."""
    m = re.search(rf"{q}_\S+ · {k}_\S+ = [^=]+(?: = [^=]+)? = ({NUM}) ", text)
    assert m, text
    return m.group(1)


def result(text: str, symbol: str) -> str:
    """The cell's last line: "QKᵀ[撩, 刘海] = 7.2868"."""
    found = re.findall(rf"{re.escape(symbol)}\[[^\]]+\] = ({NUM})", text)
    assert found, text
    return found[-1]


def check_geometry(text: str, q: np.ndarray, k: np.ndarray, hat: str = "") -> dict:
    """Every geometry line holds for its own digits and agrees with numpy's q and k."""
    lengths = {m["name"].split("_")[0]: m for m in GEOMETRY["length"].finditer(text)}
    assert set(lengths) == {"q" + hat, "k" + hat}, text
    for vector, m in ((q, lengths["q" + hat]), (k, lengths["k" + hat])):
        components = [float(c.strip("()")) for c in re.findall(rf"\(?{NUM}\)?(?=²)", m["squares"])]
        assert len(components) == len(vector)
        assert np.allclose(components, vector, atol=1e-4)  # the vector as printed
        assert holds(sum(c * c for c in components), m["sum"])  # √(Σ c²) adds up
        assert holds(math.sqrt(float(m["sum"])), m["length"])  # and its root is printed right
        assert abs(float(m["length"]) - np.linalg.norm(vector)) < 1e-3  # numpy's |v|
    cos, theta, identity = (GEOMETRY[key].search(text) for key in ("cos", "theta", "identity"))
    assert cos and theta and identity, text
    dot = dot_end(text, "q" + hat, "k" + hat)
    assert cos["dot"] == dot and cos["lq"] == lengths["q" + hat]["length"]
    assert cos["lk"] == lengths["k" + hat]["length"]
    assert holds(float(cos["dot"]) / (float(cos["lq"]) * float(cos["lk"])), cos["cos"])
    true_cos = float(np.dot(q, k) / (np.linalg.norm(q) * np.linalg.norm(k)))
    assert abs(float(cos["cos"]) - true_cos) < 1e-3
    assert -1.0 <= float(cos["cos"]) <= 1.0
    assert theta["cos"] == cos["cos"]
    assert abs(float(theta["deg"]) - math.degrees(math.acos(float(cos["cos"])))) <= 0.05 + 1e-9
    # q · k = |q| × |k| × cos θ: the three printed factors give the printed q · k
    assert (identity["lq"], identity["lk"], identity["cos"]) == (cos["lq"], cos["lk"], cos["cos"])
    assert identity["back"] == dot
    assert holds(float(identity["lq"]) * float(identity["lk"]) * float(identity["cos"]), identity["back"])
    assert abs(float(dot) - float(np.dot(q, k))) < 1e-3  # numpy's q · k
    return {"dot": dot, "cos": cos["cos"], "lq": cos["lq"], "lk": cos["lk"], "deg": theta["deg"]}


# ---------------------------------------------------------------------------- geometry

def test_yellow_dog_it_and_yellow_dog_is_three_times_two_times_one() -> None:
    """The issue's example: q = [3, 0], k = [2, 0]: |q| = 3, |k| = 2, cos θ = 1, 3 × 2 × 1 = 6."""
    walk = compute(load_scenario("yellow_dog"))
    tokens = list(walk.scenario.tokens)
    row, col = tokens.index("它"), tokens.index("黄狗")
    text = cell_text(walk, "QK^T", row, col)
    assert "|q_它| = √(3.0000² + 0.0000²) = √9.0000 = 3.0000" in text
    assert "|k_黄狗| = √(2.0000² + 0.0000²) = √4.0000 = 2.0000" in text
    X, doc = xs_from_yaml("yellow_dog")
    got = check_geometry(text, *q_and_k(X, doc, row, col))
    assert (float(got["lq"]), float(got["lk"]), float(got["cos"]), float(got["dot"])) == (3, 2, 1, 6)
    assert float(got["deg"]) == 0.0
    assert result(text, "QKᵀ") == "6.0000"


@pytest.mark.parametrize("key, cos, degrees, score", [("黄狗", 1.0, 0, 6.0), ("街道", 0.7071, 45, 4.24),
                                                       ("下雨", 0.5, 60, 3.0)])
def test_yellow_dog_keys_of_one_length_differ_only_in_angle(key, cos, degrees, score) -> None:
    """Issue 13 §6: keys 黄狗 [2, 0], 街道 [1.41, 1.41], 下雨 [1, 1.73] score 6, 4.24, 3 against [3, 0]."""
    walk = compute(load_scenario("yellow_dog"))
    tokens = list(walk.scenario.tokens)
    row, col = tokens.index("它"), tokens.index(key)
    X, doc = xs_from_yaml("yellow_dog")
    got = check_geometry(cell_text(walk, "QK^T", row, col), *q_and_k(X, doc, row, col))
    assert (float(got["lq"]), round(float(got["lk"]), 2)) == (3.0, 2.0)
    assert abs(float(got["cos"]) - cos) < 1e-3 and abs(float(got["deg"]) - degrees) < 0.1
    assert abs(float(got["dot"]) - score) < 5e-3


def test_girl_bangs_lessons_example_as_geometry() -> None:
    """Lesson 002 §4.1: q撩 = [0.3274, 1.2872], k刘海 = [1.3872, 5.3083], q · k = 7.2868."""
    walk = compute(load_scenario("girl_bangs"))
    text = cell_text(walk, "QK^T", 1, 2)
    X, doc = xs_from_yaml("girl_bangs")
    got = check_geometry(text, *q_and_k(X, doc, 1, 2))
    assert result(text, "QKᵀ") == "7.2868"  # the lesson's value
    assert abs(float(got["cos"]) - 0.99998) < 1e-4  # nearly parallel: the lengths make the score
    for row in range(3):  # every cell of the lesson's table
        for col in range(3):
            check_geometry(cell_text(walk, "QK^T", row, col), *q_and_k(X, doc, row, col))


QK_NORM = """\
tokens: [a, b, c]
embeddings: [[1, 2, 0], [0, -1, 3], [2, 0.5, -1]]
W_Q: [[1, 0.5, 0], [0, 1, -1], [0.3, 0, 2]]
W_K: [[0.2, 1, 1], [1, 0, 0.4], [-1, 0.5, 0]]
W_V: [[1, 0], [0, 1], [1, 1]]
qk_norm: true
qk_scale: 2.5
"""


def test_qk_norm_geometry_is_of_the_normalised_vectors_that_are_multiplied() -> None:
    doc = yaml.safe_load(QK_NORM)
    X = np.array(doc["embeddings"], dtype=float)
    walk = compute(scenario_from_text(QK_NORM, "norm.yaml"))
    for row in range(3):
        for col in range(3):
            text = cell_text(walk, "QK^T", row, col)
            q, k = q_and_k(X, doc, row, col)  # q̂ and k̂
            got = check_geometry(text, q, k, hat="\u0302")
            # QK-norm: every q̂ and k̂ has length √d_k = √3, and the text says so
            assert got["lq"] == got["lk"] and holds(math.sqrt(3), got["lq"])
            assert "normalised" in text and f"√d_k = {got['lq']}" in text
            # the score is q̂ · k̂ times qk_scale, landing on numpy's
            scaled = re.search(rf"({NUM}) × qk_scale 2.5 = ({NUM})", text)
            assert scaled and scaled[1] == got["dot"]
            assert holds(float(scaled[1]) * 2.5, scaled[2])
            assert result(text, "QKᵀ") == f"{2.5 * float(np.dot(q, k)):.4f}"


MULTI_HEAD = """\
tokens: [x, y, z, w]
embeddings: [[1, 0, 2, 1], [0, 1, 1, -1], [2, 1, 0, 0], [-1, 0.5, 1, 2]]
heads: 2
W_Q: [[1, 0, 0.5, -1], [0, 1, 1, 0], [0.5, 0.5, 0, 1], [1, -1, 0, 0.3]]
W_K: [[0, 1, 1, 0], [1, 0, 0.2, 1], [0.7, 0, 1, 1], [0, 1, -1, 0.5]]
W_V: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]]
positional: sinusoidal
"""


@pytest.mark.parametrize("head", [0, 1])
def test_multi_head_geometry_is_per_head(head: int) -> None:
    doc = yaml.safe_load(MULTI_HEAD)
    E = np.array(doc["embeddings"], dtype=float)
    X = E + sinusoidal_positions(*E.shape)
    walk = compute(scenario_from_text(MULTI_HEAD, "heads.yaml"))
    for row in range(4):
        for col in range(4):
            text = cell_text(walk, "QK^T", row, col, head)
            q, k = q_and_k(X, doc, row, col, head)
            got = check_geometry(text, q, k)
            assert result(text, "QKᵀ") == f"{float(np.dot(q, k)):.4f}"
            table = result(text, "QKᵀ")
            assert abs(Decimal(got["dot"]) - Decimal(table)) <= half_unit(table)  # lands on the table


ADDITIVE = """\
tokens: [a, b]
embeddings: [[1, 0], [0.5, 2]]
W_Q: [[1, 0], [0, 1]]
W_K: [[0.5, 1], [1, 0]]
W_V: [[1, 0], [0, 1]]
score: additive
w_a: [0.5, -1]
"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_additive_scores_claim_no_dot_product_and_no_angle(lang: str) -> None:
    walk = compute(scenario_from_text(ADDITIVE, "additive.yaml"))
    X = np.array([[1, 0], [0.5, 2]], dtype=float)
    Q, K = X @ np.array([[1, 0], [0, 1]]), X @ np.array([[0.5, 1], [1, 0]])
    for row in range(2):
        for col in range(2):
            text = cell_text(walk, "QK^T", row, col, lang=lang)
            assert "cos θ =" not in text and "arccos" not in text
            assert not GEOMETRY["length"].search(text) and not GEOMETRY["identity"].search(text)
            assert not re.search(rf"q_\S+ · k_\S+ =", text)  # no q · k is computed
            assert "tanh" in text
            score = float(np.tanh(Q[row] + K[col]) @ np.array([0.5, -1]))
            assert result(text, "QKᵀ") == f"{score:.4f}"
    assert "never multiplies them" in cell_text(walk, "QK^T", 0, 1)


def test_a_zero_query_has_no_angle() -> None:
    """river_bank's "the" has the zero query: no cos θ is printed, and the score is 0."""
    walk = compute(load_scenario("river_bank"))
    row = list(walk.scenario.tokens).index("the")
    text = cell_text(walk, "QK^T", row, 3)
    assert "|q_the| = √(0.0000² + 0.0000² + 0.0000² + 0.0000²) = √0.0000 = 0.0000" in text
    assert "cos θ is undefined" in text
    assert not GEOMETRY["cos"].search(text) and not GEOMETRY["identity"].search(text)
    assert result(text, "QKᵀ") == "0.0000"


@pytest.mark.parametrize("name", builtin_names())
def test_every_built_ins_default_scores_cell_is_geometry_that_adds_up(name: str) -> None:
    walk = compute(load_scenario(name))
    scn = walk.scenario
    row, col = default_cell(walk, "QK^T")  # the cell the walk works, as `explain` names it
    text = panel(render(explain_view(walk, "QK^T", str(row + 1), str(col + 1), 1, ViewOptions(width=100))))
    if scn.score == "additive":
        assert "cos θ =" not in text
        return
    hat = "\u0302" if scn.qk_norm else ""
    if "cos θ is undefined" in text:
        return
    for key in ("cos", "theta", "identity"):
        assert GEOMETRY[key].search(text), (name, key, text)
    identity = GEOMETRY["identity"].search(text)
    assert identity["back"] == dot_end(text, "q" + hat, "k" + hat)
    assert holds(float(identity["lq"]) * float(identity["lk"]) * float(identity["cos"]), identity["back"])


@pytest.mark.parametrize("width", [40, 60, 100])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_geometry_lines_fit_the_panel(width: int, lang: str) -> None:
    walk = compute(load_scenario("girl_bangs"))
    out = render(worked_cell(walk.view(0), "QK^T", 1, 2, ViewOptions(width=width, lang=lang)), width)
    from rich.cells import cell_len
    assert max(cell_len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    ascii_out = render(worked_cell(walk.view(0), "QK^T", 1, 2, ViewOptions(width=width, lang=lang, ascii=True)),
                       width)
    assert "cos theta" in ascii_out and "sqrt" in ascii_out and " deg" in ascii_out
    assert all(ch.isascii() for ch in ascii_out if ch not in "撩刘海" and not ("\u4e00" <= ch <= "\u9fff")
               and ch not in "，。；：（）、")


# ---------------------------------------------------------------------------- softmax

EXP_NAIVE = re.compile(rf"e\^\(?(?P<x>{NUM})\)? = (?P<y>{NUM})")
EXP_STABLE = re.compile(rf"e\^\((?P<s>{NUM}) − \(?(?P<top>{NUM})\)?\) = (?P<y>{NUM})")
ROW_SUM = re.compile(rf"row sum = (?P<terms>{NUM}(?: \+ {NUM})*) = (?P<total>{NUM})")
QUOTIENT = re.compile(rf"(?P<a>{NUM}) / (?P<b>{NUM}) = (?P<w>{NUM})")
SINK_SHARE = re.compile(rf"sink: (?P<a>{NUM}) / (?P<b>{NUM}) = (?P<w>{NUM})")


def softmax_cells(name: str):
    walk = compute(load_scenario(name))
    n, m = walk.matrix("A").shape
    rows = range(n) if n <= 6 else (0, n // 2, n - 1)
    cols = range(m) if m <= 6 else (0, m - 1)
    for row in rows:
        for col in cols:
            yield walk, row, col, cell_text(walk, "A", row, col)


@pytest.mark.parametrize("name", builtin_names())
def test_every_printed_power_and_quotient_in_softmax_holds_for_its_digits(name: str) -> None:
    seen = 0
    for walk, row, col, text in softmax_cells(name):
        for m in EXP_STABLE.finditer(text):
            x = Decimal(m["s"]) - Decimal(m["top"])
            assert holds(math.exp(float(x)), m["y"]), (name, m.group())
            seen += 1
        for m in EXP_NAIVE.finditer(text):
            if "−" in text[m.start():m.end()]:
                continue
            assert holds(math.exp(float(m["x"])), m["y"]), (name, m.group())
            seen += 1
        for m in ROW_SUM.finditer(text):
            terms = [Decimal(t) for t in m["terms"].split(" + ")]
            assert holds(float(sum(terms)), m["total"]), (name, m.group())
        for m in QUOTIENT.finditer(text):
            assert holds(float(Decimal(m["a"]) / Decimal(m["b"])), m["w"]), (name, m.group())
        # the last line is the table's value, and the chain lands on it
        table = style.number(float(walk.matrix("A")[row, col]), ViewOptions())
        assert result(text, "A") == table, (name, row, col)
        sink = SINK_SHARE.search(text)  # an attention sink's share: the row sums to 1 minus it
        if sink is not None:
            rest = style.number(float(walk.matrix("A")[row].sum()), ViewOptions())
            assert abs(1 - Decimal(sink["w"]) - Decimal(rest)) <= half_unit(rest), (name, row, text)
            text = text.replace(sink.group(), "")
        for _a, _b, w in QUOTIENT.findall(text):  # each chain ends within rounding of the table
            assert abs(Decimal(w) - Decimal(table)) <= half_unit(table), (name, row, col, text)
    assert seen, name


def test_girl_bangs_softmax_exponentiates_the_scores_it_shows() -> None:
    """The issue: e^6.1849 was printed 485.3 (of the unrounded 6.18486); e^6.1849 is 485.36."""
    walk = compute(load_scenario("girl_bangs"))
    text = panel(render(explain_view(walk, "A", "女生", "刘海", 1, ViewOptions(width=100))))
    assert "e^6.1849 = 485.4" in text  # lesson 002 §5 prints 485.6, off in its own last digit
    assert "e^3.5002 = 33.12" in text  # lesson 002 §5
    assert "485.3" not in text
    assert result(text, "A") == "0.8078"  # lesson 002 §5


# ---------------------------------------------------------------------------- products

DOT_LINE = re.compile(rf" = (?P<factors>{NUM} × \(?{NUM}\)?(?: \+ \(?{NUM}\)? × \(?{NUM}\)?)+) "
                      rf"= (?P<products>\(?{NUM}\)?(?: \+ \(?{NUM}\)?)+) = (?P<total>{NUM})")


@pytest.mark.parametrize("name", [n for n in builtin_names() if n != "shapes"])
@pytest.mark.parametrize("key", ["Q", "K", "V", "QK^T", "Z"])
def test_every_printed_product_is_of_the_printed_factors(name: str, key: str) -> None:
    if name == "saturation" and key == "QK^T":
        pytest.skip("d_k = 64: each score's sum of 64 products is printed elided, as shapes' are")
    if name == "induction":
        pytest.skip("d_model 48, d_k 16, 17 tokens: every sum here is printed elided, as shapes' are")
    walk = compute(load_scenario(name))
    M = walk.matrix(key)
    seen = 0
    for row in range(M.shape[0]):
        for col in range(M.shape[1]):
            text = cell_text(walk, key, row, col)
            for m in DOT_LINE.finditer(text):
                pairs = [p.split(" × ") for p in m["factors"].split(" + ")]
                products = [Decimal(p.strip("()")) for p in m["products"].split(" + ")]
                assert len(pairs) == len(products)
                for (a, b), p in zip(pairs, products):
                    exact = Decimal(a.strip("()")) * Decimal(b.strip("()"))
                    assert abs(exact - p) <= half_unit(str(p)), (name, key, row, col, m.group())
                assert sum(products) == Decimal(m["total"]), (name, key, row, col, m.group())
                seen += 1
            table = style.number(float(M[row, col]), ViewOptions())
            ends = [m["total"] for m in DOT_LINE.finditer(text)]
            scaled = re.search(rf"({NUM}) × qk_scale ({NUM}) = ({NUM})", text)
            if scaled:  # QK-norm's scale multiplies the finished q̂ · k̂
                assert ends == [scaled[1]] and holds(float(scaled[1]) * float(scaled[2]), scaled[3])
                ends = [scaled[3]]
            for end in ends:  # and lands on the table's value
                assert abs(Decimal(end) - Decimal(table)) <= half_unit(table), (name, key, text)
            assert result(text, walk.stage(key).symbol if key != "QK^T" else "QKᵀ") == table
            assert "unrounded numbers, then rounded" not in text  # the old footnote is gone
    assert seen, (name, key)


def test_the_chinese_cell_says_it_in_chinese() -> None:
    walk = compute(load_scenario("girl_bangs"))
    zh = cell_text(walk, "QK^T", 1, 2, lang="zh")
    en = cell_text(walk, "QK^T", 1, 2)
    assert "几何" in zh and "夹角 θ 的余弦" in zh and "表格显示 4 位" in zh
    for english in ("The same score as geometry", "worked to", "the tables show"):
        assert english in en and english not in zh
    # the arithmetic is the same in both languages
    assert GEOMETRY["identity"].search(zh)[0] == GEOMETRY["identity"].search(en)[0]


@pytest.mark.parametrize("name", [n for n in builtin_names() if n != "shapes"])
def test_every_scaled_score_is_the_quotient_of_the_numbers_shown(name: str) -> None:
    """yellow_dog printed 6.0000 / 1.4142 = 4.2426; 6 / 1.4142 is 4.24268."""
    walk = compute(load_scenario(name))
    S = walk.matrix("S")
    seen = 0
    for row in range(S.shape[0]):
        for col in range(S.shape[1]):
            text = cell_text(walk, "S", row, col)
            for m in re.finditer(rf"= ({NUM}) / ({NUM}) = ({NUM}) ", text):
                assert holds(float(Decimal(m[1]) / Decimal(m[2])), m[3]), (name, row, col, m.group())
                assert abs(Decimal(m[3]) - Decimal(result(text, "S"))) <= half_unit(result(text, "S"))
                seen += 1
            assert result(text, "S") == style.number(float(S[row, col]), ViewOptions())
    assert seen or walk.scenario.score == "additive", name


def test_a_softmax_cell_rounds_its_row_once_per_precision_not_once_per_key(monkeypatch) -> None:
    """Finding how many digits the exponentials need rounds the row's m exponentials once per
    precision tried and checks every key's quotient against it; rounding the whole row again for
    each key made the worked cell quadratic in m (3.4 s for an unscaled A row of 512 keys)."""
    from attnwalk.layer import cells
    from attnwalk.render.worked import _LEVELS

    scn = load_scenario("shapes")  # 100 keys
    walk = compute(scn, "unscaled")  # peaked rows: the exponentials need more than the lessons' 4 digits
    calls = []
    real = cells._rounded

    def counted(c, e, digits, extra=None):
        calls.append(len(e))
        return real(c, e, digits, extra)

    monkeypatch.setattr(cells, "_rounded", counted)
    row, col = scn.n - 1, int(np.argmax(walk.matrix("A", 0)[scn.n - 1]))
    worked_cell(walk.view(0), "A", row, col, ViewOptions())
    per_try = 2 * len(cells.EXP_DIGITS) + 2  # both forms' searches, then each form's quotient
    assert set(calls) == {scn.m}
    # each level of decimals tried at most once; a rounding per key would be m × 7 for one level
    assert 0 < len(calls) <= per_try * len(_LEVELS) < scn.m * len(cells.EXP_DIGITS)
