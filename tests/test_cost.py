"""The cost panel's figures against the shapes of the matrices the walk really computed (and, for
--at, shapes worked out here from the sizes asked for), and --at's refusals."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import UsageError
from attnwalk.layer.cost import matrices, projected_dims, quadratic_share, work
from attnwalk.layer.walk import compute
from attnwalk.render.costview import cost_panel, size_text
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.load import load_scenario

runner = CliRunner()


def measured(name: str) -> tuple[dict[str, int], dict[str, int]]:
    """Numbers held and multiply-adds per stage, from the walk's own arrays' shapes."""
    scn = load_scenario(name)
    walk = compute(scn)
    heads = walk.heads
    sizes = {key: walk.mats[key].size for key in ("X", "Q", "K", "V")}
    sizes |= {key: sum(h.mats[key].size for h in heads) for key in ("S", "A", "Z")}
    sizes |= {w: getattr(scn, w).size for w in ("W_Q", "W_K", "W_V")}
    if walk.source:
        sizes["X_src"] = walk.source["X"].size
    X_kv = walk.source["X"] if walk.source else walk.mats["X"]
    madds = {"Q": walk.mats["X"].shape[0] * scn.W_Q.shape[0] * scn.W_Q.shape[1],
             "K": X_kv.shape[0] * scn.W_K.shape[0] * scn.W_K.shape[1],
             "V": X_kv.shape[0] * scn.W_V.shape[0] * scn.W_V.shape[1]}
    # Q_h Kᵀ_h: (n, d_k) @ (d_k, m) per head; A_h V_h: (n, m) @ (m, d_v)
    madds["QK^T"] = sum(h.mats["Q"].shape[0] * h.mats["Q"].shape[1] * h.mats["K"].shape[0] for h in heads)
    madds["S"] = madds["A"] = sum(h.mats["S"].size for h in heads)
    madds["Z"] = sum(h.mats["A"].shape[0] * h.mats["A"].shape[1] * h.mats["V"].shape[1] for h in heads)
    if scn.W_O is not None:
        sizes |= {"W_O": scn.W_O.size, "O": walk.mats["O"].size}
        madds["O"] = walk.mats["concat" if scn.heads > 1 else "X"].shape[0] * scn.W_O.shape[0] * scn.W_O.shape[1]
    return sizes, madds


@pytest.mark.parametrize("name", ["girl_bangs", "shapes", "cross_attention", "causal_mask"])
def test_sizes_and_multiply_adds_match_the_walks_own_matrices(name: str) -> None:
    from attnwalk.layer.cost import dims_of

    sizes, madds = measured(name)
    d = dims_of(load_scenario(name))
    assert {x.name: x.numbers for x in matrices(d)} == sizes
    assert {w.stage: w.count for w in work(d)} == madds
    grows = {x.name: x.grows for x in matrices(d)}
    assert grows["S"] == grows["A"] == "n²" and grows["Q"] == "n" and grows["W_Q"] == ""


def test_projection_to_a_real_model() -> None:
    d = projected_dims(load_scenario("girl_bangs"), "n=4096,d_model=4096,heads=32")
    assert (d.n, d.m, d.d_model, d.heads, d.d_k, d.d_v) == (4096, 4096, 4096, 32, 128, 128)
    by = {x.name: x for x in matrices(d)}
    assert by["S"].numbers == 32 * 4096 * 4096 == 536_870_912
    assert by["Q"].numbers == 4096 * 32 * 128
    ops = {w.stage: w.count for w in work(d)}
    assert ops["QK^T"] == 32 * 4096 * 4096 * 128 and ops["Q"] == 4096 * 4096 * 4096
    # QKᵀ and AV: 2·n²·d_model; the three projections: 3·n·d_model² (n = d_model here)
    assert quadratic_share(d) == pytest.approx((2 * 4096**3 + 2 * 32 * 4096**2) / (5 * 4096**3 + 2 * 32 * 4096**2))
    console = Console(width=100, file=io.StringIO(), color_system=None)
    console.print(cost_panel(load_scenario("girl_bangs"), ViewOptions(at=d)))
    out = console.file.getvalue()
    assert "536,870,912" in out and "2.0 GiB" in out and "4.0 GiB" in out  # S: float32, float64
    assert "n=4096, d_model=4096, heads=32, d_k=128, d_v=128" in out


def test_sizes_are_written_in_binary_units() -> None:
    assert [size_text(b) for b in (72, 1024, 1536, 64 * 1024**2, 4 * 1024**3)] == [
        "72 B", "1.0 KiB", "1.5 KiB", "64.0 MiB", "4.0 GiB"]


def test_cross_attention_keeps_m_and_takes_m_from_at() -> None:
    scn = load_scenario("cross_attention")
    d = projected_dims(scn, "n=100")
    assert (d.n, d.m) == (100, scn.m)
    assert projected_dims(scn, "m=50").m == 50


@pytest.mark.parametrize("at, message", [
    ("foo=3", "--at: unknown name 'foo'; use n, m, d_model, heads, d_k, d_v"),
    ("n=0", "--at n=0: expected a whole number from 1 to 1,000,000,000"),
    ("n=4096,n=2", "--at: n is given twice"),
    ("n", "--at n: expected NAME=N pairs separated by commas"),
    ("heads=x", "--at heads=x: expected a whole number"),
    ("m=9", "--at m: in self-attention the keys are the queries' own tokens"),
    ("d_model=10,heads=3", "--at: d_model 10 is not divisible by 3 heads; give d_k too"),
])
def test_bad_at_is_refused(at: str, message: str) -> None:
    with pytest.raises(UsageError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        projected_dims(load_scenario("girl_bangs"), at)


@pytest.mark.parametrize("command", [["run", "girl_bangs", "--no-pause"], ["compare", "girl_bangs"]])
def test_cli_at_errors_are_one_line_exit_2_and_good_at_shows(command: list[str]) -> None:
    bad = runner.invoke(app, [*command, "--at", "tokens=5"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        "attnwalk: --at: unknown name 'tokens'; use n, m, d_model, heads, d_k, d_v"]
    good = runner.invoke(app, [*command, "--at", "n=8192"], env={"COLUMNS": "100"})
    assert good.exit_code == 0, good.output
    assert "What the direct form costs" in good.output
    assert f"{8192 * 8192:,}" in good.output  # S at n = 8192, one head
